"""Storage failures are storage failures, not a broker's death, on the in-process broker
(minikafka/testing/memory_node.py) over real LogStores in tmp_path, under the autojump MockClock.

The store's `append` is wrapped so that chosen writes fail once, as an LMDB error would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import trio
import trio.testing

from minikafka.common import TopicPartition
from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import ErrorCode, is_retriable
from minikafka.server.fetch_serve import handle_fetch
from minikafka.server.produce import handle_produce
from minikafka.storage import AppendWrite, LogDirError, StorageError, StoreConfig
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    replicating_config,
    wait_until,
)
from minikafka.wire.messages import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)

TP = TopicPartition("t", 0)


def records(n: int, tag: str = "v") -> bytes:
    return make_batch([(1000 + i, None, f"{tag}{i}".encode()) for i in range(n)])


async def produce(broker: MemoryBroker, blob: bytes, *, acks: int = 1) -> ProduceResponse:
    req = ProduceRequest(
        acks=acks,
        timeout_ms=1000,
        partitions=[ProducePartition(topic="t", partition=0, records=blob)],
    )
    resp = (await handle_produce(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, ProduceResponse)
    return resp


def fail_once(broker: MemoryBroker, when: Callable[[Sequence[AppendWrite]], bool]) -> list[int]:
    """The first append for which `when` holds raises StorageError; returns the failure count."""
    real = broker.store.append
    failures: list[int] = []

    def append(writes: Sequence[AppendWrite]) -> object:
        if not failures and when(writes):
            failures.append(1)
            raise StorageError("MDB_MAP_FULL: Environment mapsize limit reached")
        return real(writes)

    broker.store.append = append  # type: ignore[method-assign]
    return failures


def disk_epochs(broker: MemoryBroker) -> list[tuple[int, int]]:
    return list(broker.store.load_partition(TP).epochs)


def carries_epochs(writes: Sequence[AppendWrite]) -> bool:
    return any(w.epochs is not None for w in writes)


@pytest.fixture
async def leader(tmp_path):
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2])])
        yield broker


async def test_a_failed_epoch_write_at_make_leader_is_persisted_by_the_next_append(
    autojump_clock, leader
):
    assert (await produce(leader, records(2))).partitions[0].base_offset == 0
    failures = fail_once(leader, carries_epochs)
    await leader.apply(
        [partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2], leader_epoch=2)]
    )
    assert failures == [1]
    # Memory follows the disk: the new epoch is in neither yet.
    assert leader.partition("t").epochs == disk_epochs(leader) == [(1, 0)]
    assert leader.events.counts.get("epoch_write_failed") == 1
    resp = await produce(leader, records(3))
    assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 2)
    # The first batch of epoch 2 brought its entry with it: a restart finds epoch 2 at 2.
    assert disk_epochs(leader) == leader.partition("t").epochs == [(1, 0), (2, 2)]
    resp = await produce(leader, records(1))
    assert resp.partitions[0].base_offset == 5
    assert disk_epochs(leader) == [(1, 0), (2, 2)]


async def test_a_follower_append_that_fails_at_an_epoch_change_persists_the_epoch_on_retry(
    autojump_clock, tmp_path
):
    network = MemoryNetwork()
    a = MemoryBroker(replicating_config(1), tmp_path / "a", network=network)
    b = MemoryBroker(replicating_config(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        brokers = [a.info, b.info]
        epoch1 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=1)
        await a.apply([epoch1], brokers)
        await b.apply([epoch1], brokers)
        await produce(a, records(2))
        await wait_until(lambda: b.partition("t").log_end_offset == 2)
        epoch2 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=2)
        await a.apply([epoch2], brokers)
        await b.apply([epoch2], brokers)
        failures = fail_once(b, carries_epochs)  # B's first append of an epoch 2 batch fails
        await produce(a, records(3))
        await wait_until(lambda: b.partition("t").log_end_offset == 5)
        assert failures == [1]
        assert b.log_bytes("t") == a.log_bytes("t")
        assert disk_epochs(b) == b.partition("t").epochs == [(1, 0), (2, 2)]


async def test_a_new_epoch_for_a_partition_already_led_here_stops_stamping_first(
    autojump_clock, leader
):
    """A produce arriving while makeLeader waits for the writer must not be stamped with the
    old epoch and given offsets that the new epoch hands out again (Kafka holds the partition's
    leaderIsrUpdateLock for writing through makeLeader)."""
    assert (await produce(leader, records(2))).partitions[0].base_offset == 0
    writer = leader.replica_manager.writer
    real_barrier, real_append = writer.barrier, writer.append
    barrier_gate, append_gate = trio.Event(), trio.Event()

    async def barrier() -> None:
        await barrier_gate.wait()
        await real_barrier()

    async def append(writes: Sequence[AppendWrite]) -> None:
        if any(w.batches for w in writes):  # a produce: queued only once the test says so
            await append_gate.wait()
        await real_append(writes)

    writer.barrier, writer.append = barrier, append  # type: ignore[method-assign]
    answers: list[ProduceResponse] = []

    async def producer() -> None:
        answers.append(await produce(leader, records(3, tag="race")))

    epoch2 = partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2], leader_epoch=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(leader.apply, [epoch2])
        await trio.testing.wait_all_tasks_blocked()  # makeLeader waits at the barrier
        nursery.start_soon(producer)
        await trio.testing.wait_all_tasks_blocked()  # the produce came in meanwhile
        barrier_gate.set()
        await trio.testing.wait_all_tasks_blocked()  # makeLeader done
        append_gate.set()
    [resp] = answers
    assert resp.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # retriable
    p = leader.partition("t")
    assert p.epochs == disk_epochs(leader) == [(1, 0), (2, 2)]
    resp = await produce(leader, records(1))
    assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 2)
    # Every batch at or after the start of epoch 2 carries epoch 2.
    assert [(x.base_offset, x.leader_epoch) for x in iter_batches(leader.log_bytes("t"))] == [
        (0, 1),
        (2, 2),
    ]


# ---------------------------------------------------------------- a log that cannot be written


async def test_a_partition_whose_log_cannot_be_written_fails_alone_with_kafka_storage_error(
    autojump_clock, tmp_path
):
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        await broker.apply(
            [
                partition_state("t", 0, leader=1, isr=[1], replicas=[1]),
                partition_state("t", 1, leader=1, isr=[1], replicas=[1]),
            ]
        )
        real = broker.store.append

        def append(writes: Sequence[AppendWrite]) -> object:
            if any(w.tp == TP for w in writes):  # t-0's log is on the full disk
                raise StorageError("LMDB: [Errno 28] No space left on device")
            return real(writes)

        broker.store.append = append  # type: ignore[method-assign]
        req = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            partitions=[
                ProducePartition(topic="t", partition=0, records=records(2)),
                ProducePartition(topic="t", partition=1, records=records(3)),
            ],
        )
        resp = (await handle_produce(broker.replica_manager, req, broker.topics)).response
        assert isinstance(resp, ProduceResponse)
        codes = [(p.partition, p.error_code, p.base_offset) for p in resp.partitions]
        assert codes == [(0, ErrorCode.KAFKA_STORAGE_ERROR, -1), (1, ErrorCode.NONE, 0)]
        assert is_retriable(ErrorCode.KAFKA_STORAGE_ERROR)
        assert broker.partition("t", 1).log_end_offset == 3
        assert broker.metrics.counters["append_failures"] == 1


async def test_a_full_lmdb_map_is_a_storage_error_and_the_broker_keeps_serving(
    autojump_clock, tmp_path
):
    """A real MDB_MAP_FULL: a 1 MiB map, filled by produce."""
    broker = MemoryBroker(
        replicating_config(1),
        tmp_path / "b1",
        store_config=StoreConfig(map_size_bytes=1 << 20, sync=False),
    )
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        codes = []
        for _ in range(40):
            blob = make_batch([(1000, None, bytes(60_000))])
            codes.append((await produce(broker, blob)).partitions[0].error_code)
            if codes[-1] != ErrorCode.NONE:
                break
        assert codes[-1] == ErrorCode.KAFKA_STORAGE_ERROR
        assert codes[:-1] and set(codes[:-1]) == {ErrorCode.NONE}
        leo = broker.partition("t").log_end_offset
        assert leo == len(codes) - 1
        # What was written can still be read back.
        assert len(list(iter_batches(broker.log_bytes("t")))) == leo


# ---------------------------------------------------------------- replicas taken offline


def disk_fails_for(broker: MemoryBroker, tp: TopicPartition) -> None:
    """From now on every write of `tp` fails as a full disk does (a LogDirError)."""
    real = broker.store.append

    def append(writes: Sequence[AppendWrite]) -> object:
        if any(w.tp == tp for w in writes):
            raise LogDirError("LMDB: [Errno 28] No space left on device")
        return real(writes)

    broker.store.append = append  # type: ignore[method-assign]


async def consume(broker: MemoryBroker, partition: int) -> int:
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            FetchPartition(
                topic="t", partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
            )
        ],
    )
    resp = (await handle_fetch(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, FetchResponse)
    return resp.partitions[0].error_code


async def test_a_log_dir_error_takes_the_replica_offline_and_only_that_one(
    autojump_clock, tmp_path
):
    """Kafka answers KAFKA_STORAGE_ERROR for an offline partition, to produce, fetch and
    LeaderAndIsr alike, and keeps serving the others (ReplicaManager, HostedPartition.Offline)."""
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        both = [
            partition_state("t", 0, leader=1, isr=[1], replicas=[1]),
            partition_state("t", 1, leader=1, isr=[1], replicas=[1]),
        ]
        await broker.apply(both)
        disk_fails_for(broker, TP)
        assert (await produce(broker, records(2))).partitions[0].error_code == (
            ErrorCode.KAFKA_STORAGE_ERROR
        )
        assert TP in broker.replica_manager.offline and broker.partition("t").offline
        assert broker.events.counts.get("replica_offline") == 1
        assert broker.metrics.snapshot()["offline_replicas"] == 1
        # Offline: refused before any write is tried, by produce and by fetch.
        broker.store.append = lambda writes: pytest.fail("an offline replica was written")
        assert (await produce(broker, records(1))).partitions[0].error_code == (
            ErrorCode.KAFKA_STORAGE_ERROR
        )
        assert await consume(broker, 0) == ErrorCode.KAFKA_STORAGE_ERROR
        newer = [partition_state("t", 0, leader=1, isr=[1], replicas=[1], leader_epoch=2)]
        [err] = await broker.apply(newer)
        assert err.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert broker.events.counts.get("replica_offline") == 1  # reported once
        # The other partition is untouched.
        assert await consume(broker, 1) == ErrorCode.NONE
        assert not broker.partition("t", 1).offline


async def test_a_plain_storage_refusal_does_not_take_the_replica_offline(autojump_clock, leader):
    failures = fail_once(leader, lambda writes: True)  # a StorageError, not a LogDirError
    assert (await produce(leader, records(2))).partitions[0].error_code == (
        ErrorCode.KAFKA_STORAGE_ERROR
    )
    assert failures == [1] and len(leader.replica_manager.offline) == 0
    assert (await produce(leader, records(2))).partitions[0].error_code == ErrorCode.NONE


async def test_a_leader_and_isr_the_store_cannot_hold_gets_per_partition_errors(
    autojump_clock, tmp_path
):
    """More partitions than the store allows is answered per partition (the
    controller used to resend the whole request every 0.2 s forever, as the broker closed the
    connection on the exception)."""
    broker = MemoryBroker(
        replicating_config(1),
        tmp_path / "b1",
        store_config=StoreConfig(sync=False, max_partitions=1),
    )
    async with broker.running():
        errors = await broker.apply(
            [
                partition_state("t", 0, leader=1, isr=[1], replicas=[1]),
                partition_state("t", 1, leader=1, isr=[1], replicas=[1]),
            ]
        )
        codes = [(e.partition, e.error_code) for e in errors]
        assert codes == [(0, ErrorCode.NONE), (1, ErrorCode.KAFKA_STORAGE_ERROR)]
        assert TopicPartition("t", 1) in broker.replica_manager.offline
        assert (await produce(broker, records(1))).partitions[0].error_code == ErrorCode.NONE


async def test_leader_and_isr_creates_its_new_partitions_in_one_store_call(
    autojump_clock, tmp_path
):
    """One create (one transaction, one sync) per new partition used to make a big topic's
    creation grow with its partition count; a LeaderAndIsr now creates them in one call."""
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    calls: list[list[TopicPartition]] = []
    create_partitions = broker.store.create_partitions

    def counted(tps):
        calls.append(list(tps))
        return create_partitions(tps)

    broker.store.create_partitions = counted  # type: ignore[method-assign]
    states = [partition_state("t", p, leader=1, isr=[1], replicas=[1]) for p in range(50)]
    async with broker.running():
        errors = await broker.apply(states)
        assert {e.error_code for e in errors} == {ErrorCode.NONE}
        assert calls == [[TopicPartition("t", p) for p in range(50)]]
        await broker.apply(states)  # a resend creates nothing
        assert len(calls) == 1
        assert broker.partition("t", 49).log_end_offset == 0


async def test_a_follower_whose_append_fails_goes_offline_and_its_fetcher_goes_on(
    autojump_clock, tmp_path
):
    network = MemoryNetwork()
    a = MemoryBroker(replicating_config(1), tmp_path / "a", network=network)
    b = MemoryBroker(replicating_config(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        brokers = [a.info, b.info]
        states = [partition_state("t", p, leader=1, isr=[1, 2], replicas=[1, 2]) for p in (0, 1)]
        await a.apply(states, brokers)
        await b.apply(states, brokers)
        disk_fails_for(b, TP)
        for p in (0, 1):
            req = ProduceRequest(
                acks=1,
                timeout_ms=1000,
                partitions=[ProducePartition(topic="t", partition=p, records=records(3))],
            )
            await handle_produce(a.replica_manager, req, a.topics)
        await wait_until(lambda: b.partition("t", 1).log_end_offset == 3)
        assert TP in b.replica_manager.offline and b.partition("t").log_end_offset == 0
        assert b.events.counts.get("fetch_append_failed") == 1
        # The same fetcher keeps replicating the healthy partition.
        req = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            partitions=[ProducePartition(topic="t", partition=1, records=records(2))],
        )
        await handle_produce(a.replica_manager, req, a.topics)
        await wait_until(lambda: b.partition("t", 1).log_end_offset == 5)
