"""Compaction on the brokers (server/log_cleaner.py), two brokers in process on real LogStores
under the autojump MockClock: broker 1 leads t-0, broker 2 follows. Each cleans its own replica
and both end with the same bytes; a follower that starts late copies the leader's cleaned log,
gaps and all."""

from __future__ import annotations

from minikafka.clock import now_ms
from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import decode_records, iter_batches
from minikafka.errors import ErrorCode
from minikafka.server.log_cleaner import cleaning_round
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MEMORY_EPOCH_MS, MemoryBroker, partition_state, wait_until
from minikafka.wire.messages import ProducePartition, ProduceRequest

MiB = 1 << 20
KEYS = 10
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": str(MiB),
    "min.cleanable.dirty.ratio": "0.01",
}


async def produce(a: MemoryBroker, records: list[tuple[bytes | None, bytes | None]]) -> int:
    ts = MEMORY_EPOCH_MS + now_ms()
    blob = v2.build([(ts, k, v) for k, v in records])
    req = ProduceRequest(acks=-1, timeout_ms=5000, partitions=[
        ProducePartition(topic="t", partition=0, records=blob)])  # fmt: skip
    return (
        (await handle_produce(a.replica_manager, req, a.topics)).response.partitions[0].error_code
    )


async def fill(a: MemoryBroker, batches: int, start: int = 0) -> None:
    """Batches of 60 records of 1 KiB, each key k0..k9 six times; value = its sequence number."""
    for i in range(start, start + batches):
        records = [
            (f"k{j % KEYS}".encode(), str(i * 60 + j).encode().ljust(1024)) for j in range(60)
        ]
        assert await produce(a, records) == ErrorCode.NONE


def latest(broker: MemoryBroker) -> dict[bytes, bytes]:
    out = {}
    for b in iter_batches(broker.log_bytes("t")):
        for r in decode_records(b):
            out[r.key] = r.value.strip()
    return out


def count(broker: MemoryBroker) -> int:
    return sum(len(decode_records(b)) for b in iter_batches(broker.log_bytes("t")))


async def started(
    a: MemoryBroker, b: MemoryBroker, replicas: list[int], partition_epoch: int = 1
) -> None:
    for broker in (a, b):
        broker.set_configs({("topics", "t"): COMPACTED})
    state = partition_state(
        "t", 0, leader=1, isr=replicas, replicas=replicas, partition_epoch=partition_epoch
    )
    await a.apply([state], [a.info, b.info])
    if 2 in replicas:
        await b.apply([state], [a.info, b.info])


async def test_each_replica_cleans_its_own_log_to_the_same_bytes(autojump_clock, pair):
    a, b = pair
    await started(a, b, [1, 2])
    await fill(a, 60)  # about 3.5 MiB: 3 closed segments and the active one
    end = a.partition("t").log_end_offset
    await wait_until(lambda: b.partition("t").high_watermark == end)
    before = count(a)
    [done_a] = await cleaning_round(a.replica_manager, now_ms())
    [done_b] = await cleaning_round(b.replica_manager, now_ms())
    assert done_a == done_b
    assert a.log_bytes("t") == b.log_bytes("t")
    # Below the clean end one record per key is left; the active segment is not touched.
    active = a.store.segments(a.partition("t").tp)[-1]
    assert done_a.first_dirty_offset == active.base_offset
    assert done_a.records_removed == before - count(a) > 2500
    assert latest(a) == {f"k{j}".encode(): str(60 * 60 - KEYS + j).encode() for j in range(KEYS)}
    assert a.events.counts["log_cleaned"] == 1
    assert a.metrics.counters["log_cleaner_records_removed"] == done_a.records_removed
    # Nothing new is dirty: the next round makes no pass.
    assert await cleaning_round(a.replica_manager, now_ms()) == []


async def test_a_late_follower_copies_the_cleaned_log_with_its_gaps(autojump_clock, pair):
    a, b = pair
    await started(a, b, [1])
    await fill(a, 60)
    await cleaning_round(a.replica_manager, now_ms())
    await started(a, b, [1, 2], partition_epoch=2)  # broker 2 joins: it fetches from offset 0
    end = a.partition("t").log_end_offset
    await wait_until(lambda: b.partition("t").log_end_offset == end)
    assert a.log_bytes("t") == b.log_bytes("t")
    # ... and cleaning it again changes nothing: the same rule found nothing more to do.
    await cleaning_round(b.replica_manager, now_ms())
    assert a.log_bytes("t") == b.log_bytes("t")


async def test_new_writes_overwrite_cleaned_keys_in_the_next_pass(autojump_clock, pair):
    a, b = pair
    await started(a, b, [1, 2])
    await fill(a, 30)
    await cleaning_round(a.replica_manager, now_ms())
    await fill(a, 40, start=30)
    [second] = await cleaning_round(a.replica_manager, now_ms())
    assert second.records_removed > 0
    assert latest(a) == {f"k{j}".encode(): str(70 * 60 - KEYS + j).encode() for j in range(KEYS)}
    keys_below = [
        r.key
        for batch in iter_batches(a.log_bytes("t"))
        for r in decode_records(batch)
        if r.offset < second.first_dirty_offset
    ]
    assert len(keys_below) == len(set(keys_below))  # the clean section: one record per key


async def test_a_record_without_a_key_is_refused_by_a_compacted_topic(autojump_clock, pair):
    a, b = pair
    await started(a, b, [1, 2])
    assert await produce(a, [(b"k", b"1"), (None, b"2")]) == ErrorCode.INVALID_RECORD
    assert a.partition("t").log_end_offset == 0
    assert await produce(a, [(b"k", None)]) == ErrorCode.NONE  # a tombstone has a key
