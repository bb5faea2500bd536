"""Retention on the brokers (server/log_cleanup.py), two brokers in process on real LogStores
under the autojump MockClock: broker 1 leads t-0 with replicas {1, 2}, broker 2 follows. The
topic's configs are set live as the controller pushes them (UpdateMetadata)."""

from __future__ import annotations

import trio

from minikafka.clock import now_ms
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.fetch_serve import handle_fetch
from minikafka.server.log_cleanup import retention_round
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MEMORY_EPOCH_MS, MemoryBroker, partition_state, wait_until
from minikafka.wire.messages import (
    FetchPartition,
    FetchRequest,
    ProducePartition,
    ProduceRequest,
)

MiB = 1 << 20
BATCH = 64 * 1024  # about: 60 records of 1 KiB


async def fill(a: MemoryBroker, b: MemoryBroker, batches: int) -> None:
    for i in range(batches):
        ts = MEMORY_EPOCH_MS + now_ms()  # the brokers' wall clock: not past retention.ms
        blob = make_batch([(ts, None, bytes([i % 251]) * 1024) for _ in range(60)])
        req = ProduceRequest(acks=-1, timeout_ms=5000, partitions=[
            ProducePartition(topic="t", partition=0, records=blob)])  # fmt: skip
        resp = (await handle_produce(a.replica_manager, req, a.topics)).response
        assert resp.partitions[0].error_code == ErrorCode.NONE
    end = a.partition("t").log_end_offset
    await wait_until(lambda: b.partition("t").high_watermark == end)


async def started(a: MemoryBroker, b: MemoryBroker, configs: dict[str, str]) -> None:
    for broker in (a, b):
        broker.set_configs({("topics", "t"): configs})
    state = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
    await a.apply([state], [a.info, b.info])
    await b.apply([state], [a.info, b.info])


async def consumer_fetch_error(a: MemoryBroker, offset: int) -> int:
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=MiB, partitions=[
        FetchPartition(topic="t", partition=0, fetch_offset=offset, partition_max_bytes=MiB)])  # fmt: skip
    resp = (await handle_fetch(a.replica_manager, req, a.topics)).response
    return resp.partitions[0].error_code


async def test_retention_bytes_deletes_whole_segments_on_both_replicas(autojump_clock, pair):
    a, b = pair
    await started(a, b, {"segment.bytes": str(MiB), "retention.bytes": str(2 * MiB)})
    await fill(a, b, 80)  # about 5 MiB in about 5 segments
    before = [s.base_offset for s in a.store.segments(a.partition("t").tp)]
    assert len(before) >= 5
    assert await retention_round(a.replica_manager) > 0
    assert await retention_round(b.replica_manager) > 0
    lp, fp = a.partition("t"), b.partition("t")
    assert lp.log_start_offset == fp.log_start_offset > 0  # the same segments on both
    assert lp.log_start_offset in before  # a segment boundary
    kept = sum(s.size_bytes for s in a.store.segments(lp.tp))
    assert 2 * MiB <= kept < 3 * MiB + BATCH  # retention.bytes plus at most one segment
    assert a.log_bytes("t") == b.log_bytes("t")
    assert await consumer_fetch_error(a, 0) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert await consumer_fetch_error(a, lp.log_start_offset) == ErrorCode.NONE
    assert a.events.counts["log_segments_deleted"] >= 1
    assert a.metrics.counters["log_bytes_deleted"] > MiB  # two segments of about 0.95 MiB
    # a second round at the same time deletes nothing (Kafka's rule order since 3.0)
    assert await retention_round(a.replica_manager) == 0


async def test_nothing_at_or_above_the_high_watermark_goes(autojump_clock, pair):
    """The follower stops fetching: the leader's HW stays where it was, and retention.ms of 1
    ms may delete only what is below it, whatever the time."""
    a, b = pair
    await started(a, b, {"segment.bytes": str(MiB), "retention.ms": "1"})
    await fill(a, b, 40)
    hw = a.partition("t").high_watermark
    b.replica_manager.fetchers.remove([b.partition("t").tp])
    blob = make_batch([(1000, None, b"x" * 1024) for _ in range(60)])
    req = ProduceRequest(acks=1, timeout_ms=5000, partitions=[
        ProducePartition(topic="t", partition=0, records=blob)])  # fmt: skip
    await handle_produce(a.replica_manager, req, a.topics)
    await trio.sleep(10)
    await retention_round(a.replica_manager)
    lp = a.partition("t")
    assert lp.high_watermark == hw < lp.log_end_offset
    assert lp.log_start_offset <= hw
    assert a.store.segments(lp.tp)[-1].next_offset == lp.log_end_offset


async def test_the_task_runs_every_check_interval(autojump_clock, tmp_path):
    from minikafka.testing.memory_node import MemoryNetwork, replicating_config

    network = MemoryNetwork()
    config = replicating_config(1).with_settings({"log.retention.check.interval.ms": "1000"})
    a = MemoryBroker(config, tmp_path / "a", network=network)
    async with a.running(log_retention=True):
        a.set_configs({("topics", "t"): {"segment.bytes": str(MiB), "retention.ms": "5000"}})
        await a.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        for _ in range(40):
            blob = make_batch([(1000, None, b"y" * 1024) for _ in range(60)])
            req = ProduceRequest(acks=1, timeout_ms=5000, partitions=[
                ProducePartition(topic="t", partition=0, records=blob)])  # fmt: skip
            await handle_produce(a.replica_manager, req, a.topics)
        # record timestamps of 1970: every closed segment is past retention.ms at once
        await wait_until(lambda: a.partition("t").log_start_offset > 0)
        assert a.events.counts["log_segments_deleted"] >= 1
