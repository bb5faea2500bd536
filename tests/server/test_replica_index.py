"""The replica index (minikafka/server/replica_index.py): what it keeps from the changes equals
the scan of every partition it replaces, after any sequence of what a broker does to its
replicas; PartitionBytesInRate names only partitions with bytes in their window."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import trio

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.server.local_partition import LocalPartition
from minikafka.server.partition_changes import PartitionChanges, drain
from minikafka.server.replica_gauges import partition_bytes_in_rates
from minikafka.server.replica_index import ReplicaIndex
from minikafka.server.replica_state_log import replica_row
from minikafka.storage.log_store import LoadedPartition
from minikafka.testing.memory_node import partition_state

LOCAL = 1


def _hosted(tp: TopicPartition, changes: PartitionChanges) -> LocalPartition:
    loaded = LoadedPartition(
        tp=tp, log_start_offset=0, log_end_offset=0, high_watermark=0, epochs=[]
    )
    return LocalPartition(loaded, local_id=LOCAL, lag_max_ms=100, changes=changes)


def _scan(partitions: dict[TopicPartition, LocalPartition]) -> tuple[int, int, int]:
    """The gauges as they were computed before the index: every partition, every time."""
    led = [p.leader for p in partitions.values() if p.leader is not None]
    return (
        len(led),
        sum(1 for x in led if len(x.isr) < len(x.replicas)),
        sum(x.replica_lag(r) for x in led for r in x.replicas if r != LOCAL),
    )


def _step(rng: random.Random, parts: dict, changes: PartitionChanges, t: int, epochs: dict) -> None:
    tp = TopicPartition("t", rng.randrange(6))
    p = parts.get(tp)
    if p is None:
        parts[tp] = _hosted(tp, changes)
        return
    r = p.replica
    op = rng.choice(["lead", "follow", "append", "fetch", "shrink", "answer", "stop", "delete",
                     "leader_hw", "fetched", "truncate"])  # fmt: skip
    if op in ("lead", "follow"):
        epochs[tp] = epochs.get(tp, 0) + rng.choice([0, 1])
        isr = sorted(rng.sample([1, 2, 3], rng.randint(1, 3)) + [1]) if op == "lead" else [2, 3]
        st = partition_state("t", tp.partition, leader=LOCAL if op == "lead" else 2,
                             isr=sorted(set(isr)), replicas=[1, 2, 3],
                             leader_epoch=max(epochs[tp], 1))  # fmt: skip
        if op == "lead":
            r.begin_leading(st)
            r.become_leader(st, t)
        else:
            r.begin_following(st)
    elif op == "append" and p.is_leader:
        r.reserve(3)
        r.on_append_committed(end_offset=p.next_offset)
    elif op == "fetch" and p.is_leader:
        r.on_follower_fetch(rng.choice([2, 3]), rng.randint(0, p.log_end_offset), t)
    elif op == "shrink":
        r.on_deadline(t)
    elif op == "answer" and p.leader is not None and p.leader.pending_isr is not None:
        accepted = rng.random() < 0.7
        r.on_alter_partition_result(
            leader_epoch=p.leader_epoch, accepted=accepted, isr=p.leader.pending_isr,
            partition_epoch=p.leader.partition_epoch + 1,
        )  # fmt: skip
    elif op == "stop":
        r.stop()
    elif op == "delete":  # StopReplica(delete): stopped, then forgotten
        r.stop()
        del parts[tp]
    elif op == "leader_hw":  # a follower's fetch answer
        r.on_leader_high_watermark(rng.randint(0, p.log_end_offset + 3))
    elif op == "fetched" and not p.is_leader:  # a follower's append committed
        r.on_append_committed(end_offset=p.log_end_offset + rng.randint(0, 3))
    elif op == "truncate" and not p.is_leader:
        r.on_truncated(rng.randint(0, p.log_end_offset), p.epochs)


@pytest.mark.parametrize("seed", range(20))
def test_the_index_equals_the_scan_after_any_history(seed: int) -> None:
    rng = random.Random(seed)
    changes = PartitionChanges()
    parts: dict[TopicPartition, LocalPartition] = {}
    index = ReplicaIndex(parts, changes, local_id=LOCAL)
    epochs: dict[TopicPartition, int] = {}
    for t in range(0, 3000, 10):
        _step(rng, parts, changes, t, epochs)
        if rng.random() < 0.3:  # the gauges are read now and then, not after every step
            got = (index.leader_partitions(), index.under_replicated(), index.leader_lag())
            assert got == _scan(parts), f"seed {seed} at t={t}"
            assert set(index.led) == {tp for tp, p in parts.items() if p.is_leader}


@pytest.mark.parametrize("seed", range(20))
def test_every_change_of_a_replicas_row_is_noticed(seed: int) -> None:
    """What replicas.jsonl and the HW checkpoints rely on: a partition whose row (role, epoch,
    LEO, HW, ISR) changed was touched (core/replica.py `on_change`)."""
    rng = random.Random(seed)
    changes = PartitionChanges()
    touched = changes.subscribe()
    parts: dict[TopicPartition, LocalPartition] = {}
    epochs: dict[TopicPartition, int] = {}
    rows = {}
    noticed = 0
    for t in range(0, 3000, 10):
        _step(rng, parts, changes, t, epochs)
        now = {tp: replica_row(p) for tp, p in parts.items()}
        moved = {tp for tp, row in now.items() if row != rows.get(tp)}
        got = set(drain(touched))
        assert moved <= got, f"seed {seed} at t={t}: {moved - got} moved unnoticed"
        noticed += len(moved)
        rows = now
    assert noticed > 50  # the history moved rows, so the check had something to miss


def test_reads_through_the_handle_touch_nothing() -> None:
    changes = PartitionChanges()
    touched = changes.subscribe()
    p = _hosted(TopicPartition("t", 0), changes)
    _ = (p.log_end_offset, p.high_watermark, p.leader, p.state, p.next_deadline_ms())
    _ = p.bytes_in_rate(0)
    p.replica.on_leader_high_watermark(0)  # the same HW again: nothing moved
    assert drain(touched) == [] and changes.rate_active == set()
    p.replica.begin_following(partition_state("t", 0, leader=2, isr=[1, 2]))
    p.bytes_in.record(10, 0)
    assert drain(touched) == [p.tp] and changes.rate_active == {p.tp}
    assert drain(touched) == []


def test_an_idle_fetch_touches_nothing_and_a_moving_one_does() -> None:
    """An idle cluster's fetches reach every partition twice a second: only real moves count."""
    changes = PartitionChanges()
    touched = changes.subscribe()
    p = _hosted(TopicPartition("t", 0), changes)
    st = partition_state("t", 0, leader=LOCAL, isr=[1, 2], replicas=[1, 2])
    p.replica.begin_leading(st)
    p.replica.become_leader(st, 0)
    p.replica.reserve(5)
    p.replica.on_append_committed(end_offset=5)
    p.replica.on_follower_fetch(2, 5, 10)  # caught up: the HW moves to 5
    assert drain(touched) == [p.tp] and p.high_watermark == 5
    for t in range(20, 500, 20):  # caught up and polling: nothing moves
        p.replica.on_follower_fetch(2, 5, t)
    assert drain(touched) == []
    p.replica.reserve(3)
    p.replica.on_append_committed(end_offset=8)
    assert drain(touched) == [p.tp]
    follower = _hosted(TopicPartition("t", 1), changes)
    follower.replica.begin_following(partition_state("t", 1, leader=2, isr=[1, 2]))
    drain(touched)
    follower.replica.on_leader_high_watermark(0)  # its LEO is 0: the HW stays 0
    assert drain(touched) == []


async def test_partition_bytes_in_rate_names_only_partitions_with_bytes_in_their_window(
    autojump_clock,
) -> None:
    changes = PartitionChanges()
    parts = {TopicPartition("t", i): _hosted(TopicPartition("t", i), changes) for i in range(3)}
    rm = SimpleNamespace(partitions=parts, changes=changes)
    assert partition_bytes_in_rates(rm) == {}
    parts[TopicPartition("t", 1)].bytes_in.record(11_000, now_ms())
    rate = partition_bytes_in_rates(rm)
    assert list(rate) == ["t-1"] and rate["t-1"] > 0
    await trio.sleep(13)  # past the rate's window (11 samples of 1 s): nothing left in it
    assert partition_bytes_in_rates(rm) == {} and changes.rate_active == set()
    parts[TopicPartition("t", 2)].bytes_in.record(500, now_ms())  # marked again by the record
    assert list(partition_bytes_in_rates(rm)) == ["t-2"]
