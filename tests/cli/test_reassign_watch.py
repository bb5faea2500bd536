"""`minikafka reassign --watch` on files: reading metrics and event files backwards, the moves
a file made, copied bytes, the progress arithmetic per destination, and the display without a
terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

from minikafka.tools.reassign import progress, runner
from minikafka.tools.reassign.moves import OngoingReassignment
from tests.cli.reassign_support import T0, T1, T2, T3

# ---------------------------------------------------------------------------- --watch's files


def write_lines(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def test_reverse_lines_across_chunk_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "CHUNK", 7)
    path = tmp_path / "f"
    path.write_bytes(b"one\ntwo two\n\nthree\nx")
    assert list(progress.reverse_lines(path)) == [b"x", b"three", b"two two", b"one"]


def test_snapshots_by_time_and_the_median_bytes_in(tmp_path):
    docs = [{"ts": 100.0 + i, "bytes_in_per_s": rate} for i, rate in enumerate([9e6, 0, 0, 5, 0])]
    path = write_lines(tmp_path / "m.jsonl", docs)
    with open(path, "a") as f:
        f.write('{"ts": 200, "half a li')  # being written
    assert progress.snapshot_at(path)["ts"] == 104.0
    assert progress.snapshot_at(path, 102.5)["ts"] == 102.0
    assert progress.snapshot_at(path, 50.0) is None
    assert [d["ts"] for d in progress.recent_snapshots(path, 2.0)] == [102.0, 103.0, 104.0]
    files = progress.LocalFiles(
        metrics={1: path, 2: tmp_path / "none"}, controller_events=None, node_configs={}
    )
    assert progress.median_bytes_in(files, 10.0) == {1: 0.0}  # the 9 MB/s burst is not steady


def event(name: str, ts: float, partition: int, **fields) -> dict:
    return {"ts": ts, "node": 0, "event": name, "topic": "t", "partition": partition, **fields}


def test_file_moves_are_the_moves_the_file_made_last(tmp_path):
    path = write_lines(
        tmp_path / "events.jsonl",
        [
            event("reassignment_started", 1.0, 2, target=[1, 2], adding=[2]),  # older run
            event("reassignment_completed", 1.5, 2),
            event("reassignment_started", 5.0, 0, target=[2, 3], adding=[3]),
            event("reassignment_started", 5.0, 1, target=[3, 1], adding=[3]),
            event("reassignment_started", 5.0, 3, target=[1, 2], adding=[2]),
            event("reassignment_cancelled", 5.5, 3),
            event("reassignment_completed", 7.0, 0),
        ],
    )
    proposed = {T0: [2, 3], T1: [3, 1], T2: [1, 2], T3: [1, 2]}
    moves = progress.file_moves(path, proposed)
    assert set(moves.starts) == {T0, T1}  # t-2 moved by an older run, t-3 cancelled
    assert moves.starts[T0] == progress.MoveEvent(ts=5.0, adding=(3,))
    assert moves.duration_s is None  # t-1 still moving
    with open(path, "a") as f:
        f.write(json.dumps(event("reassignment_completed", 8.0, 1)) + "\n")
    assert progress.file_moves(path, proposed).duration_s == 3.0
    assert progress.file_moves(None, proposed).starts == {}


def test_copied_bytes_prefer_the_throttled_counters():
    base = {"follower_replication_throttled_bytes": 100, "replication_bytes_in": 1000}
    now = {"follower_replication_throttled_bytes": 600, "replication_bytes_in": 9000}
    assert progress.copied_since(base, now) == 500
    unthrottled = {"follower_replication_throttled_bytes": 100, "replication_bytes_in": 3000}
    assert progress.copied_since(base, unthrottled) == 2000
    restarted = {"follower_replication_throttled_bytes": 40, "replication_bytes_in": 50}
    assert progress.copied_since(base, restarted) == 40
    assert progress.current_rate({"FollowerReplicationThrottledRate": 2e6}) == 2e6
    assert progress.current_rate({"replication_bytes_in_per_s": 7.0}) == 7.0


def test_progress_rows_per_destination(tmp_path):
    events = write_lines(
        tmp_path / "events.jsonl",
        [
            event("reassignment_started", 10.0, 0, target=[2, 3], adding=[3]),
            event("reassignment_started", 10.0, 1, target=[3, 1], adding=[3, 1]),
        ],
    )
    m3 = write_lines(
        tmp_path / "m3.jsonl",
        [
            {"ts": 9.5, "follower_replication_throttled_bytes": 1000},
            {"ts": 10.5, "follower_replication_throttled_bytes": 3000},
        ],
    )
    files = progress.LocalFiles(metrics={3: m3}, controller_events=events, node_configs={})
    ongoing = {
        T0: OngoingReassignment(replicas=(2, 3, 1), adding=(3,), removing=(1,)),
        T1: OngoingReassignment(replicas=(3, 1, 2), adding=(3, 1), removing=(2,)),
    }
    model = progress.MoveProgress.start(
        proposed={T0: [2, 3], T1: [3, 1]},
        ongoing=ongoing,
        sizes={T0: 5000, T1: 4000},
        files=files,
        now_ts=11.0,
    )
    assert model.destinations == {1: (T1,), 3: (T0, T1)}
    snap3 = {
        "follower_replication_throttled_bytes": 7000,
        "FollowerReplicationThrottledRate": 2000.0,
    }
    rows = {r.broker: r for r in model.rows(ongoing, {1: None, 3: snap3})}
    # Broker 3 adds 9000 B and has fetched 7000 - 1000 since the line before its start.
    assert (rows[3].planned_bytes, rows[3].copied_bytes, rows[3].left_bytes) == (9000, 6000, 3000)
    assert rows[3].eta_s == 1.5
    # Broker 1's metrics are not at hand: its partitions' sizes, no rate.
    assert (rows[1].left_bytes, rows[1].rate, rows[1].eta_s) == (4000, None, None)
    done = {r.broker: r for r in model.rows({}, {1: None, 3: snap3})}
    assert (done[3].moving, done[3].left_bytes, done[3].eta_s) == (0, 0, 0.0)


def test_watch_display_without_a_terminal(capsys):
    show = cli_verify_display()
    frame = progress.WatchFrame(
        elapsed_s=2.0,
        statuses=[
            runner.PartitionStatus(tp=T0, status="in_progress", replicas=(1, 2, 3), target=(3, 2)),
            runner.PartitionStatus(tp=T1, status="complete", replicas=(1, 2), target=(1, 2)),
        ],
        rows=[
            progress.BrokerProgress(broker=3, moving=1, planned_bytes=4_000_000, copied_bytes=1_000_000, left_bytes=3_000_000, rate=2e6),
            progress.BrokerProgress(broker=1, moving=0, planned_bytes=2_000_000, copied_bytes=2_000_000, left_bytes=0, rate=0.0),
        ],
    )  # fmt: skip
    show(frame)
    assert capsys.readouterr().err == (
        "[   2.0 s] 1 of 2 partitions moving; broker 3: 3.0 MB left at 2.0 MB/s, ETA 1.5 s; "
        "broker 1: done\n"
    )


def cli_verify_display():  # noqa: ANN201
    from minikafka.cli.reassign_verify import WatchDisplay

    show = WatchDisplay(2, local=True)
    show.tty = False
    return show
