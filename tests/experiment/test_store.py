"""Where experiment runs are kept (minikafka/experiment/store.py: Jepsen's store layout, the
`latest` links), the spec read back from experiment.json, and `experiment check`'s re-judging
of a stored run (minikafka/experiment/recheck.py): the same verdict from a stored valid run, and
the anomaly caught once the stored history or replica logs are tampered with."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from minikafka.checker.history import HistoryError
from minikafka.errors import ConfigError
from minikafka.experiment import store
from minikafka.experiment.catalog import CATALOG, variants
from minikafka.experiment.recheck import recheck, write
from minikafka.experiment.schedule import Fault, Target
from minikafka.experiment.spec import Expectation, ExperimentSpec
from minikafka.experiment.verdict import judge
from minikafka.experiment.workload import History
from minikafka.testing.run_folder import RunFolder

T0 = 1_795_567_637.8017  # 2026-11-25T00:47:17.802Z


# ---------------------------------------------------------------------------- layout


def test_timestamps_are_jepsens_utc_to_the_millisecond_and_sort_in_time_order() -> None:
    assert store.timestamp(T0) == "20261125T004717.802Z"
    stamps = [store.timestamp(T0 + d) for d in (0.0, 0.001, 0.999, 9.0, 86_400.0)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_runs_started_in_the_same_millisecond_get_folders_of_their_own(tmp_path: Path) -> None:
    a = store.create_run_dir(tmp_path, "leader-kill", now=T0)
    b = store.create_run_dir(tmp_path, "leader-kill", now=T0)
    assert a == tmp_path / "leader-kill" / "20261125T004717.802Z"
    assert b == tmp_path / "leader-kill" / "20261125T004717.803Z"  # the next free millisecond


def test_latest_links_are_relative_and_follow_the_newest_run(tmp_path: Path) -> None:
    first = store.create_run_dir(tmp_path, "leader-kill", now=T0)
    assert (tmp_path / "leader-kill" / "latest").resolve() == first
    other = store.create_run_dir(tmp_path, "mixed-faults", now=T0 + 60)
    second = store.create_run_dir(tmp_path, "leader-kill", now=T0 + 120)
    assert os.readlink(tmp_path / "leader-kill" / "latest") == second.name  # relative
    assert os.readlink(tmp_path / "latest") == f"leader-kill/{second.name}"
    assert (tmp_path / "mixed-faults" / "latest").resolve() == other
    # the tree moved elsewhere: the links still lead to its own runs
    moved = tmp_path.parent / (tmp_path.name + "-moved")
    tmp_path.rename(moved)
    assert (moved / "latest").resolve() == moved / "leader-kill" / second.name
    assert [p.name for p in moved.iterdir() if p.name.startswith(".")] == []  # no temp links


def test_a_link_is_replaced_in_one_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = tmp_path / "latest"
    store.link(at, "a")
    renames = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda s, d: (renames.append((s, d)), real(s, d)))
    store.link(at, "b")
    assert os.readlink(at) == "b" and len(renames) == 1 and Path(renames[0][1]) == at


def test_bad_names_are_refused(tmp_path: Path) -> None:
    for name in ("latest", "../up", ""):
        with pytest.raises(ConfigError, match="expected letters"):
            store.create_run_dir(tmp_path, name)


def test_what_is_not_a_run_folder_is_said_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(store.NotARunError, match="no such folder"):
        store.run_dir(tmp_path / "nothing")
    run = store.create_run_dir(tmp_path, "leader-kill", now=T0)
    (run / "experiment.json").write_text("{}")
    with pytest.raises(store.NotARunError, match=r"no history\.jsonl \(a folder of"):
        store.run_dir(run)
    with pytest.raises(store.NotARunError, match="its latest run is .*leader-kill/latest"):
        store.run_dir(tmp_path / "leader-kill")
    (run / "history.jsonl").write_text("")
    assert store.run_dir(tmp_path / "latest") == run.resolve()


# ---------------------------------------------------------------------------- the spec


def test_every_catalog_spec_reads_back_from_its_experiment_json() -> None:
    for name in CATALOG:
        for spec in variants(name, seed=3):
            why = {str(e): e.why for e in spec.expect}
            doc = json.loads(json.dumps(spec.to_json()))
            again = ExperimentSpec.from_json(doc, why)
            assert again.to_json() == spec.to_json() and again.expect == spec.expect, spec.name


def test_expectations_parse_back_and_bad_specs_are_one_line() -> None:
    assert Expectation.parse("move.copy_steps >= 2") == Expectation(
        figure="move.copy_steps", op=">=", value=2
    )
    assert Expectation.parse("isr_shrinks > 0").counter == "isr_shrinks"
    with pytest.raises(ConfigError, match="expected NAME OP VALUE"):
        Expectation.parse("isr_shrinks about 3")
    with pytest.raises(ConfigError, match="experiment spec: KeyError"):
        ExperimentSpec.from_json({"name": "x", "faults": [{"kind": "kill"}]})
    with pytest.raises(ConfigError, match="partitions 0: expected a number > 0"):
        ExperimentSpec.from_json({"name": "x", "partitions": 0})


# ---------------------------------------------------------------------------- experiment check

SPEC = ExperimentSpec(
    name="tiny", partitions=2, seed=5,
    faults=(Fault(kind="kill", target=Target("broker", 2), start_s=1.0, end_s=2.0),),
)  # fmt: skip


def stored_run(out: Path) -> Path:
    """A valid run as `experiment run` stores it, written by the runner's own writers: 10
    values sent to each of 2 partitions, acknowledged, polled, read back, and on every replica."""
    path = store.create_run_dir(out, SPEC.name)
    folder = RunFolder(path)
    (path / "experiment.json").write_text(json.dumps(SPEC.to_json(), indent=2))
    started = time.time()
    history = History(path / "history.jsonl", started)
    history.op("nemesis", "info", "schedule", seed=SPEC.seed, started_at=started,
               faults=[f.to_json() for f in SPEC.faults])  # fmt: skip
    dumps = []
    for p in range(SPEC.partitions):
        tp = {"topic": SPEC.topic, "partition": p}
        values = list(range(p * 100, p * 100 + 10))
        records = [[i, v] for i, v in enumerate(values)]
        history.op(f"producer-{p}", "invoke", "send", **tp, values=values)
        history.op(f"producer-{p}", "ok", "send", **tp, offset=0)
        history.op(f"consumer-{p}", "invoke", "poll", **tp, offset=0)
        history.op(f"consumer-{p}", "ok", "poll", **tp, records=records)
        history.op(f"final-{p}", "invoke", "final-read", **tp)
        history.op(f"final-{p}", "ok", "final-read", **tp, records=records, log_end_offset=10)
        dumps += [{"node": n, **tp, "high_watermark": 10, "log_end_offset": 10,
                   "records": records} for n in (1, 2, 3)]  # fmt: skip
    history.close()
    (path / "replica_dumps.jsonl").write_text("".join(json.dumps(d) + "\n" for d in dumps))
    folder.event("settled", after_s=0.1)
    folder.close()
    results = judge(SPEC, path, t0=started, dumps=dumps, driver_errors=[], settled=True,
                    analysis=None)  # fmt: skip
    results.update(started_at=started, harness_problems=[], move_s=None)
    folder.write_results(results)
    assert results["valid"] is True, results["summary"]
    return path


def edit_lines(path: Path, edit) -> None:  # noqa: ANN001 - a function of one decoded line
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(edit(d)) + "\n" for d in docs))


def test_a_stored_valid_run_is_judged_valid_again(tmp_path: Path) -> None:
    run = stored_run(tmp_path)
    check = recheck(tmp_path / "latest")
    assert check.path == run and check.exit_code == 0 and check.same_verdict is True
    assert check.notes == []  # everything the run judged is stored
    assert check.results["checker"]["counts"]["replica_dumps"] == 6
    assert check.results["checker"] == json.loads((run / "results.json").read_text())["checker"]


def test_check_catches_an_acknowledged_record_dropped_from_the_stored_history(
    tmp_path: Path,
) -> None:
    run = stored_run(tmp_path)
    before = (run / "results.json").read_bytes()

    def drop(op: dict) -> dict:  # value 3, acknowledged at offset 3, gone from what was read
        if op["f"] in ("poll", "final-read") and op["type"] == "ok" and op["partition"] == 0:
            op["records"] = [r for r in op["records"] if r[1] != 3]
        return op

    edit_lines(run / "history.jsonl", drop)
    check = recheck(run)
    lost = check.results["checker"]["anomalies"]["lost"]
    assert check.exit_code == 1 and check.results["valid"] is False
    assert lost["count"] == 1 and lost["examples"][0]["value"] == 3
    assert check.same_verdict is False
    assert (run / "results.json").read_bytes() == before  # nothing rewritten unless asked
    write(check)
    assert json.loads((run / "results.json").read_text())["valid"] is False


def test_check_compares_the_stored_replica_logs(tmp_path: Path) -> None:
    run = stored_run(tmp_path)

    def hole(d: dict) -> dict:  # node 3 lacks committed offset 4 of partition 1
        if d["node"] == 3 and d["partition"] == 1:
            d["records"] = [r for r in d["records"] if r[0] != 4]
        return d

    edit_lines(run / "replica_dumps.jsonl", hole)
    check = recheck(run)
    assert check.exit_code == 1
    assert check.results["checker"]["anomalies"]["missing_replica_data"]["count"] == 1


def test_a_run_without_a_verdict_is_at_best_unknown(tmp_path: Path) -> None:
    run = stored_run(tmp_path)
    (run / "results.json").unlink()
    (run / "crash.txt").write_text("Traceback (most recent call last):\nKeyError: 'x'\n")
    check = recheck(run)
    assert check.exit_code == 2 and check.stored is None
    assert check.results["problems"] == ["the harness crashed (crash.txt: KeyError: 'x')"]
    (run / "crash.txt").unlink()
    assert recheck(run).results["problems"][0].startswith("the run did not finish")


def test_an_older_run_without_its_start_or_replica_logs_is_judged_with_notes(
    tmp_path: Path,
) -> None:
    run = stored_run(tmp_path)
    (run / "replica_dumps.jsonl").unlink()
    for name in ("history.jsonl", "results.json"):
        text = (run / name).read_text()
        (run / name).write_text(text.replace('"started_at"', '"started"'))
    with (run / "timeline.jsonl").open("a") as fh:
        fh.write(json.dumps({"ts": T0, "event": "load_start"}) + "\n")
    check = recheck(run)
    assert check.exit_code == 0 and check.results["started_at"] == T0
    assert [n.split(":")[0] for n in check.notes] == [
        "the history does not store its start",
        "no replica_dumps.jsonl",
    ]
    assert check.results["checker"]["not_checked"] == ["missing_replica_data"]


def test_a_torn_history_is_refused_in_one_line(tmp_path: Path) -> None:
    run = stored_run(tmp_path)
    with (run / "history.jsonl").open("a") as fh:
        fh.write('{"index": 99, "ti\n')
    with pytest.raises(HistoryError, match="line 14"):
        recheck(run)
