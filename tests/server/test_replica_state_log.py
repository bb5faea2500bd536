"""replicas.jsonl (minikafka/server/replica_state_log.py): rows only for replicas the controller
has given a state; a snapshot, then only the rows that changed; every file part starts with a
snapshot; `replay` gives each row the span it held, and the HW checker still catches a
violation written as deltas."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from minikafka.checker.invariants import find_hw_past_isr_leo, parse_samples
from minikafka.common import TopicPartition
from minikafka.experiment import node_logs
from minikafka.server.jsonl import Rotation, jsonl_parts
from minikafka.server.local_partition import LocalPartition
from minikafka.server.partition_changes import PartitionChanges
from minikafka.server.replica_state_log import (
    HeldRow,
    ReplicaStateLines,
    replay,
    replica_rows,
    run_replica_state_log,
)
from minikafka.storage.log_store import LoadedPartition
from minikafka.testing.memory_node import partition_state


def _partition(p: int, changes: PartitionChanges | None = None, *, hw: int = 5) -> LocalPartition:
    return LocalPartition(
        LoadedPartition(
            tp=TopicPartition("exp", p), log_start_offset=0, log_end_offset=5, high_watermark=hw,
            epochs=[],
        ),
        local_id=1, lag_max_ms=30_000, changes=changes,
    )  # fmt: skip


def test_a_replica_still_waiting_for_its_leader_and_isr_has_no_row() -> None:
    follower, pending = _partition(0), _partition(1)
    follower.replica.begin_following(
        partition_state("exp", 0, leader=2, isr=[1, 2], leader_epoch=3)
    )
    assert replica_rows([follower, pending]) == [["exp", 0, 3, False, 5, 5, None]]


A = ["exp", 0, 3, False, 5, 5, None]
B = ["exp", 1, 3, True, 7, 7, [1, 2]]


def test_lines_are_a_snapshot_then_only_what_changed() -> None:
    lines = ReplicaStateLines()
    assert lines.need_snapshot
    # the process's first line says so: the reader ends whatever an earlier process held
    assert lines.snapshot(1.0, 1, [A, B]) == {
        "ts": 1.0, "node": 1, "replicas": [A, B], "start": True
    }  # fmt: skip
    lines.written(True)
    # looked at but unchanged: nothing; changed: the row; no row any more: gone
    a2 = [*A[:4], 6, 5, None]
    line = lines.delta(2.0, 1, {("exp", 0): a2, ("exp", 1): B})
    assert line == {"ts": 2.0, "node": 1, "delta": True, "replicas": [a2]}
    lines.written(True)
    assert lines.delta(3.0, 1, {("exp", 1): None}) == {
        "ts": 3.0, "node": 1, "delta": True, "gone": [["exp", 1]]
    }  # fmt: skip
    lines.written(True)
    assert lines.delta(4.0, 1, {}) == {"ts": 4.0, "node": 1, "delta": True}


def test_a_line_that_was_not_written_makes_the_next_a_snapshot() -> None:
    lines = ReplicaStateLines()
    lines.snapshot(1.0, 1, [A])
    lines.written(True)
    lines.delta(2.0, 1, {("exp", 0): [*A[:4], 6, 5, None]})
    lines.written(False)  # the reader never saw it
    assert lines.need_snapshot
    # and the state it would have written is not taken as written: the change is still news
    assert lines.delta(3.0, 1, {("exp", 0): [*A[:4], 6, 5, None]})["replicas"]


def test_replay_gives_each_row_the_span_it_held() -> None:
    a2 = [*A[:4], 6, 5, None]
    held = list(
        replay([
            {"ts": 1.0, "node": 1, "replicas": [A, B]},
            {"ts": 2.0, "node": 1, "delta": True},  # nothing moved
            {"ts": 3.0, "node": 1, "delta": True, "replicas": [a2]},
            {"ts": 4.0, "node": 1, "delta": True, "gone": [["exp", 1]]},
            {"ts": 5.0, "node": 1, "replicas": [a2]},  # a snapshot (a new part): a2 goes on
            {"ts": 6.0, "node": 1, "replicas": []},  # a restart with nothing yet: a2 ended
        ])
    )  # fmt: skip
    assert sorted(held, key=lambda h: (h.since, h.row[1])) == [
        HeldRow(row=A, since=1.0, until=2.0),
        HeldRow(row=B, since=1.0, until=3.0),
        HeldRow(row=a2, since=3.0, until=5.0),
    ]


def test_a_restarted_process_ends_every_row_even_the_one_it_comes_back_with() -> None:
    """A row held while its node was down is a claim nobody made: a wiped follower killed at
    LEO 320 that has fetched back to 320 by its first line must not seem to have held 320 all
    along. Only a process's first line ends its rows so; a later snapshot (a new part, a line
    after a failed write) goes on with them."""
    lines = ReplicaStateLines()
    first = lines.snapshot(1.0, 1, [A])
    lines.written(False)  # never reached the file: the next snapshot is still the first
    assert lines.snapshot(2.0, 1, [A])["start"] is True
    lines.written(True)
    assert "start" not in lines.snapshot(3.0, 1, [A])
    held = list(replay([first, {"ts": 2.0, "node": 1, "replicas": [A]},
                        {"ts": 9.0, "node": 1, "replicas": [A], "start": True},
                        {"ts": 10.0, "node": 1, "replicas": [A]}]))  # fmt: skip
    assert held == [HeldRow(row=A, since=1.0, until=2.0), HeldRow(row=A, since=9.0, until=10.0)]


def test_an_old_file_of_snapshots_replays_row_by_row() -> None:
    a2 = [*A[:4], 6, 5, None]
    held = list(replay([{"ts": 1.0, "replicas": [A]}, {"ts": 2.0, "replicas": [A]},
                        {"ts": 3.0, "replicas": [a2]}]))  # fmt: skip
    assert held == [HeldRow(row=A, since=1.0, until=2.0), HeldRow(row=a2, since=3.0, until=3.0)]


def _write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_the_checker_catches_a_violation_written_as_deltas(tmp_path: Path) -> None:
    """Leader 1 reports HW 10 with 2 in its ISR at t=10; follower 2 wrote LEO 8 once at t=9 and
    nothing about it since (its lines at 10..12 are empty deltas): its LEO 8 stands, below the
    HW. Read as a point sample at t=9 it would precede the leader's line and pass."""
    leader = ["exp", 0, 5, True, 12, 10, [1, 2]]
    _write(tmp_path / "nodes/node-1/replicas.jsonl", [
        {"ts": 109.0, "node": 1, "replicas": [[*leader[:4], 12, 8, [1, 2]]]},
        {"ts": 110.0, "node": 1, "delta": True, "replicas": [leader]},
    ])  # fmt: skip
    follower = [{"ts": 109.0, "node": 2, "replicas": [["exp", 0, 5, False, 8, 8, None]]}]
    follower += [{"ts": 100.0 + t, "node": 2, "delta": True} for t in (10, 11, 12)]
    _write(tmp_path / "nodes/node-2/replicas.jsonl", follower)
    samples = parse_samples(node_logs.replica_samples(tmp_path, "exp", 100.0))
    (ex,) = find_hw_past_isr_leo(samples).examples
    assert (ex["node"], ex["log_end_offset"], ex["high_watermark"], ex["time"]) == (2, 8, 10, 10.0)
    # the near miss: the follower's row moved to LEO 12 at t=10, so its 8 held only until t=9
    _write(tmp_path / "nodes/node-2/replicas.jsonl", [
        follower[0], {"ts": 110.0, "node": 2, "delta": True,
                      "replicas": [["exp", 0, 5, False, 12, 10, None]]},
    ])  # fmt: skip
    samples = parse_samples(node_logs.replica_samples(tmp_path, "exp", 100.0))
    assert find_hw_past_isr_leo(samples).count == 0


def test_the_checker_does_not_hold_a_dead_follower_to_a_hw_set_while_it_was_down(
    tmp_path: Path,
) -> None:
    """The false anomaly of a partition-order run, 2026-11-28: follower 3 wrote LEO 320 at
    t=9.8 and was killed and wiped; leader 1, its ISR not yet shrunk, reported HW 330 at t=10.2
    (from 3's last fetch, which its lines never showed) and dropped 3 from it at t=12.2; 3 came
    back at t=17.8 having fetched its log back to exactly 320. Without the restart's `start` mark the row seems held from
    9.8 to 17.8, past the leader's 330."""
    _write(tmp_path / "nodes/node-1/replicas.jsonl", [
        {"ts": 109.7, "node": 1, "replicas": [["exp", 9, 0, True, 320, 310, [1, 3, 2]]]},
        {"ts": 110.2, "node": 1, "delta": True,
         "replicas": [["exp", 9, 0, True, 330, 330, [1, 3, 2]]]},
        {"ts": 112.2, "node": 1, "delta": True,  # 3 fenced, out of the ISR
         "replicas": [["exp", 9, 0, True, 340, 340, [1, 2]]]},
    ])  # fmt: skip
    row = ["exp", 9, 0, False, 320, 320, None]
    restart = {"ts": 117.8, "node": 3, "replicas": [row], "start": True}
    follower = [{"ts": 109.8, "node": 3, "replicas": [row], "start": True}, restart]
    _write(tmp_path / "nodes/node-3/replicas.jsonl", follower)
    samples = parse_samples(node_logs.replica_samples(tmp_path, "exp", 100.0))
    assert find_hw_past_isr_leo(samples).count == 0
    del restart["start"]  # read as a file of old, unmarked lines: the anomaly
    _write(tmp_path / "nodes/node-3/replicas.jsonl", follower)
    samples = parse_samples(node_logs.replica_samples(tmp_path, "exp", 100.0))
    assert find_hw_past_isr_leo(samples).count == 1


async def test_the_log_writes_changes_and_starts_every_part_with_a_snapshot(
    autojump_clock, tmp_path: Path
) -> None:
    changes = PartitionChanges()
    parts = {TopicPartition("exp", p): _partition(p, changes, hw=0) for p in range(20)}
    for p in parts.values():
        p.replica.begin_following(partition_state("exp", p.tp.partition, leader=2, isr=[1, 2]))
    path = tmp_path / "replicas.jsonl"
    moved, deleted = TopicPartition("exp", 3), TopicPartition("exp", 7)

    async def move_one_partition() -> None:
        await trio.sleep(0.5)  # between the log's lines
        for hw in range(1, 30):
            parts[moved].replica.on_leader_high_watermark(hw)  # capped by the LEO, 5
            if hw == 20:
                del parts[deleted]  # as StopReplica(delete), which touches it first
                changes.touched(deleted)
            await trio.sleep(1.0)

    with trio.move_on_after(30.2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(move_one_partition)
            await run_replica_state_log(
                parts, path, node_id=1, interval_ms=1000, changes=changes,
                rotation=Rotation(max_bytes=1000, max_files=20),
                wall_clock=lambda: 1.7e9 + trio.current_time(),  # lines a second apart
            )  # fmt: skip
    files = jsonl_parts(path)
    assert len(files) > 2
    lines = [[json.loads(x) for x in f.read_text().splitlines()] for f in files]
    assert all("delta" not in part[0] for part in lines)  # every part reads on its own
    deltas = [x for part in lines for x in part[1:]]
    assert deltas and all(x["delta"] for x in deltas)
    # only partition 3 ever changed: no delta names another
    assert {r[1] for x in deltas for r in x.get("replicas", ())} <= {3}
    everything = [x for part in lines for x in part]
    assert len(everything) == 30
    held = sorted(replay(everything), key=lambda h: (h.row[1], h.since))
    assert [h.row[5] for h in held if h.row[1] == 3] == [1, 2, 3, 4, 5]
    last = everything[-1]["ts"]
    assert all(h.until == last for h in held if h.row[1] not in (3, 7))
    (gone,) = [h for h in held if h.row[1] == 7]
    assert gone.until < last and "exp" not in json.dumps(everything[-1])
