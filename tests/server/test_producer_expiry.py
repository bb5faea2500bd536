"""A broker's periodic producer-state work (server/producer_state_tasks.py), under MockClock:
producer ids expire on producer.id.expiration.check.interval.ms (KIP-854), and the snapshot
written with the HW checkpoint is not rewritten for a partition whose producers did not change,
and is encoded through `run_sync` (a worker thread in a node), not on the event loop.
"""

from __future__ import annotations

import trio

from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.produce import handle_produce
from minikafka.storage import producer_snapshots
from minikafka.testing.memory_node import MemoryBroker, partition_state, run_sync_inline
from minikafka.wire.messages import ProducePartition, ProduceRequest, ProduceResponse

A, B = 1000, 2000


def config(**kw: int) -> NodeConfig:
    return NodeConfig(node_id=1, host="broker-1", port=9001, **kw)


def entry(seq: int, *, pid: int = A, n: int = 1) -> ProducePartition:
    return ProducePartition(
        topic="t",
        partition=0,
        records=make_batch([(0, None, b"v")] * n),
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
    )


async def produce(broker: MemoryBroker, item: ProducePartition) -> int:
    req = ProduceRequest(acks=1, timeout_ms=1000, partitions=[item])
    resp = (await handle_produce(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, ProduceResponse)
    return resp.partitions[0].error_code


async def test_the_node_expires_idle_producers_on_its_interval(autojump_clock, tmp_path):
    broker = MemoryBroker(
        config(producer_id_expiration_ms=60_000, producer_id_expiration_check_interval_ms=10_000),
        tmp_path / "b1",
    )
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        start = trio.current_time()
        assert await produce(broker, entry(0)) == ErrorCode.NONE
        assert await produce(broker, entry(1)) == ErrorCode.NONE
        producers = broker.partition("t").producers
        for seq in range(3):  # B writes at 15, 35 and 55 s; A is idle from the start
            await trio.sleep_until(start + 20 * (seq + 1) - 5)
            assert await produce(broker, entry(seq, pid=B)) == ErrorCode.NONE
        # A was seen at the first check (10 s): still there at 65 s, gone at the 70 s check.
        await trio.sleep_until(start + 65)
        assert set(producers.entries) == {A, B}
        await trio.sleep_until(start + 75)
        assert set(producers.entries) == {B}
        assert broker.metrics.counters["producer_ids_expired"] == 1
        # A writes again: an unknown producer, as Kafka answers before KIP-360.
        assert await produce(broker, entry(2)) == ErrorCode.UNKNOWN_PRODUCER_ID
        assert await produce(broker, entry(0)) == ErrorCode.NONE
        assert set(producers.entries) == {A, B}


async def test_nothing_expires_within_the_default_day(autojump_clock, tmp_path):
    broker = MemoryBroker(config(), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        assert await produce(broker, entry(0)) == ErrorCode.NONE
        await trio.sleep(23 * 3600)
        assert set(broker.partition("t").producers.entries) == {A}
        await trio.sleep(2 * 3600)  # 1 day after the first 10-minute check, and one more
        assert broker.partition("t").producers.entries == {}


async def test_an_unchanged_partitions_snapshot_is_not_rewritten(
    autojump_clock, tmp_path, monkeypatch
):
    """The HW checkpoint goes on every second; the producer snapshot is written when the
    producers changed (and the log grew by as many records as there are producers), not for
    records without a producer id."""
    puts: list[int] = []
    real_put = producer_snapshots.put

    def put(txn, db, key, offset, doc):  # noqa: ANN001, ANN202
        puts.append(offset)
        real_put(txn, db, key, offset, doc)

    monkeypatch.setattr(producer_snapshots, "put", put)
    broker = MemoryBroker(config(), tmp_path / "b1")

    def tp_hw() -> int:
        return broker.store.load_partition(broker.partition("t").tp).high_watermark

    async with broker.running(), trio.open_nursery() as nursery:
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        nursery.start_soon(lambda: broker.replica_manager.run_hw_checkpoints(interval_s=1.0))
        assert await produce(broker, entry(0)) == ErrorCode.NONE
        await trio.sleep(1.5)
        assert puts == [1]  # the first snapshot, at HW 1
        for _ in range(5):  # records without a producer id: the HW moves, the state does not
            assert await produce(broker, entry(-1, pid=-1, n=3)) == ErrorCode.NONE
            await trio.sleep(1.0)
        assert tp_hw() == 16  # checkpointed every round
        assert puts == [1]  # not rewritten
        assert await produce(broker, entry(1)) == ErrorCode.NONE
        await trio.sleep(1.0)
        assert puts == [1, 17]  # changed: written again
        nursery.cancel_scope.cancel()


async def test_the_snapshot_is_encoded_through_run_sync(autojump_clock, tmp_path):
    """In a node `run_sync` is a worker thread: the encoding of every due snapshot goes there,
    in one call, and not in the log writer's thread either."""
    calls: list[str] = []

    async def recording(fn, *args, **kw):  # noqa: ANN001, ANN202
        calls.append(getattr(fn, "__name__", ""))
        return await run_sync_inline(fn, *args, **kw)

    broker = MemoryBroker(config(), tmp_path / "b1", run_sync=recording)
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        assert await produce(broker, entry(0)) == ErrorCode.NONE
        rm = broker.replica_manager
        tp = broker.partition("t").tp
        calls.clear()
        snapshots = await rm.producer_snapshots.take({tp: 1})
        assert calls == ["_encode_all"]
        assert isinstance(snapshots[tp][1], bytes)


async def test_the_expiry_task_works_in_bounded_steps(autojump_clock, tmp_path, monkeypatch):
    """A million producers expiring at once must not hold the event loop for a second: the task
    stamps and expires at most EXPIRY_STEP ids per step, yielding between steps."""
    from minikafka.core.producer_state import ProducerBatch, ProducerStateManager
    from minikafka.server import producer_state_tasks

    monkeypatch.setattr(producer_state_tasks, "EXPIRY_STEP", 100)
    steps: list[tuple[int, int | None]] = []
    real = ProducerStateManager.expire_some

    def spy(self, now_ms, expiration_ms, *, budget):  # noqa: ANN001, ANN202
        gone, more = real(self, now_ms, expiration_ms, budget=budget)
        steps.append((len(gone), budget))
        return gone, more

    monkeypatch.setattr(ProducerStateManager, "expire_some", spy)
    broker = MemoryBroker(
        config(producer_id_expiration_ms=1_000, producer_id_expiration_check_interval_ms=1_000),
        tmp_path / "b1",
    )
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        producers = broker.partition("t").producers
        for pid in range(250):
            producers.apply(
                ProducerBatch(
                    producer_id=pid, producer_epoch=0, base_sequence=0, base_offset=0, count=1
                )
            )
        producers.trim(1)
        await trio.sleep(2.5)  # the check at 1 s stamps them, the one at 2 s expires them
        assert producers.entries == {}
        assert {budget for _, budget in steps} == {100}
        assert [n for n, _ in steps if n] == [100, 100, 50]
