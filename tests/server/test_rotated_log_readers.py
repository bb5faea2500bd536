"""Every reader of a node's JSON-lines logs reads across their rotated parts, oldest first
(server/jsonl.py `jsonl_parts`): the experiment's node_logs, the run-folder copy, the analysis'
file list (Spark lists the files, tools/analysis/sources.py `classify` orders them), `cluster
logs`, `minikafka metrics` and `reassign --watch`'s files. The Spark side of the same list is
in tests/tools/test_analysis.py (marked spark)."""

from __future__ import annotations

import json
from pathlib import Path

from minikafka.cli.metrics import latest_snapshot
from minikafka.cluster.files import tail_log
from minikafka.common import TopicPartition
from minikafka.experiment import node_logs
from minikafka.server.jsonl import JsonlFile, Rotation, jsonl_parts
from minikafka.testing.run_folder import RunFolder
from minikafka.tools.analysis import load_run
from minikafka.tools.analysis.sources import Listed, classify
from minikafka.tools.reassign import progress


def write_parts(path: Path, parts: list[list[dict]]) -> None:
    """`parts` oldest first: the last is `path` itself, the others `path.N` ... `path.1`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for back, docs in enumerate(reversed(parts)):
        part = path if back == 0 else path.with_name(f"{path.name}.{back}")
        part.write_text("".join(json.dumps(d) + "\n" for d in docs))


def rolled(path: Path, docs: list[dict], *, max_bytes: int = 300, max_files: int = 10) -> Path:
    """`docs` written by a node's own writer with a small cap, so they span several parts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = JsonlFile(path, rotation=Rotation(max_bytes=max_bytes, max_files=max_files))
    for d in docs:
        assert out.write_line(json.dumps(d))
    out.close()
    assert len(jsonl_parts(path)) > 2
    return path


# ---------------------------------------------------------------------------- experiment


def test_node_logs_read_every_part_in_order(tmp_path: Path) -> None:
    node = tmp_path / "nodes" / "node-1"
    rolled(node / "events.jsonl", [
        {"ts": 100.0 + i, "event": "become_leader", "topic": "exp", "partition": i,
         "leader_epoch": i}
        for i in range(12)
    ])  # fmt: skip
    rolled(node / "metrics.jsonl", [{"ts": 100.0 + i, "isr_shrinks": i} for i in range(30)])
    rolled(node / "replicas.jsonl", [
        {"ts": 100.0 + i, "node": 1, "replicas": [["exp", 0, 1, True, i, i, [1]]]}
        for i in range(10)
    ])  # fmt: skip
    claims = node_logs.leadership_claims(tmp_path, "exp", 100.0)
    assert [c["partition"] for c in claims] == list(range(12))
    assert node_logs.counter_totals(tmp_path, ("isr_shrinks",)) == {"isr_shrinks": 29}
    (samples,) = node_logs.counter_samples(tmp_path, ("isr_shrinks",)).values()
    assert [v["isr_shrinks"] for _ts, v in samples] == list(range(30))
    rows = node_logs.replica_samples(tmp_path, "exp", 100.0)
    assert [r["log_end_offset"] for r in rows] == list(range(10))


# ---------------------------------------------------------------------------- the run folder


def test_the_run_folder_copies_every_part_and_no_stale_one(tmp_path: Path) -> None:
    data = tmp_path / "data-1"
    rolled(data / "events.jsonl", [{"ts": float(i), "event": "e"} for i in range(40)],
           max_files=3)  # fmt: skip
    (data / "node.out").write_text("# started\n")
    with RunFolder(tmp_path / "run") as folder:
        dest = folder.path / "nodes" / "node-1"
        dest.mkdir(parents=True)
        (dest / "events.jsonl.7").write_text("left by an earlier collection\n")
        folder.collect_node_logs({1: data})
    assert sorted(p.name for p in dest.iterdir()) == [
        "events.jsonl", "events.jsonl.1", "events.jsonl.2", "node.out",
    ]  # fmt: skip
    for src in jsonl_parts(data / "events.jsonl"):  # bounded like the node's: 3 files <= cap
        assert (dest / src.name).read_bytes() == src.read_bytes()
        assert len(src.read_bytes()) <= 300


def _listing(run_dir: Path) -> list[Listed]:
    """A run folder's files as Spark lists them for the analysis (inputs.list_logs: the path as
    a key, the Hadoop path, the size), unordered."""
    return [
        Listed(key=str(p), path=f"file:{p}", size=p.stat().st_size)
        for p in run_dir.rglob("*.jsonl*")
        if p.is_file()
    ]


def test_the_analysis_reads_every_part_of_every_node_oldest_first(tmp_path: Path) -> None:
    (tmp_path / "case.json").write_text('{"case": "x"}')
    nodes = tmp_path / "nodes"
    write_parts(nodes / "node-1" / "metrics.jsonl", [[{"ts": 1}], [{"ts": 2}], [{"ts": 3}]])
    write_parts(nodes / "node-2" / "metrics.jsonl", [[{"ts": 1}]])
    write_parts(nodes / "node-2" / "events.jsonl", [[{"ts": 1}], [{"ts": 2}]])
    (nodes / "node-3").mkdir()  # a node whose logs were not collected
    run = load_run(tmp_path)
    logs = classify(reversed(_listing(tmp_path)), [run.key])[run.key]
    assert [str(Path(f.removeprefix("file:")).relative_to(nodes)) for f in logs.metrics] == [
        "node-1/metrics.jsonl.2", "node-1/metrics.jsonl.1", "node-1/metrics.jsonl",
        "node-2/metrics.jsonl",
    ]  # fmt: skip
    assert [Path(f).name for f in logs.events] == ["events.jsonl.1", "events.jsonl"]


def test_a_run_folder_whose_metrics_only_rolled_parts_hold_is_still_a_run(tmp_path: Path) -> None:
    (tmp_path / "case.json").write_text('{"case": "x"}')
    part = tmp_path / "nodes" / "node-1" / "metrics.jsonl.1"
    part.parent.mkdir(parents=True)
    part.write_text('{"ts": 1}\n')
    run = load_run(tmp_path)  # the driver's check before Spark starts finds a metrics log
    assert classify(_listing(tmp_path), [run.key])[run.key].metrics == (f"file:{part}",)


# ---------------------------------------------------------------------------- live readers


def test_cluster_logs_tail_continues_into_the_older_parts(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_parts(path, [[{"i": 0}, {"i": 1}], [{"i": 2}, {"i": 3}], [{"i": 4}]])
    assert [json.loads(line)["i"] for line in tail_log(path, 4)] == [1, 2, 3, 4]
    assert [json.loads(line)["i"] for line in tail_log(path, 9)] == [0, 1, 2, 3, 4]
    assert [json.loads(line)["i"] for line in tail_log(path, 1)] == [4]
    assert tail_log(tmp_path / "none.jsonl", 3) == []


def test_the_latest_metrics_are_in_the_last_part_right_after_a_roll(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    write_parts(path, [[{"ts": 1.0}], [{"ts": 2.0}], []])  # the live file has just been started
    assert latest_snapshot(path) == {"ts": 2.0}
    path.write_text('{"ts": 3.0}\n')
    assert latest_snapshot(path) == {"ts": 3.0}


def test_reassign_watch_reads_snapshots_and_moves_across_parts(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    write_parts(metrics, [
        [{"ts": 100.0, "bytes_in_per_s": 1}, {"ts": 101.0, "bytes_in_per_s": 2}],
        [{"ts": 102.0, "bytes_in_per_s": 3}],
        [{"ts": 103.0, "bytes_in_per_s": 4}],
    ])  # fmt: skip
    assert progress.snapshot_at(metrics, 101.5)["ts"] == 101.0  # two parts back
    assert [d["ts"] for d in progress.recent_snapshots(metrics, 2.5)] == [101.0, 102.0, 103.0]
    events = tmp_path / "events.jsonl"
    started = {"event": "reassignment_started", "topic": "t", "target": [2], "adding": [2]}
    write_parts(events, [
        [{**started, "ts": 5.0, "partition": 0}],
        [{**started, "ts": 6.0, "partition": 1}],
        [{"event": "reassignment_completed", "topic": "t", "partition": 0, "ts": 7.0}],
    ])  # fmt: skip
    moves = progress.file_moves(events, {TopicPartition("t", 0): [2], TopicPartition("t", 1): [2]})
    assert {tp.partition: s.ts for tp, s in moves.starts.items()} == {0: 5.0, 1: 6.0}
    assert {tp.partition: ts for tp, ts in moves.completed.items()} == {0: 7.0}
