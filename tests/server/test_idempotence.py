"""The idempotent producer on the broker (KIP-98): retries are not stored twice, across a lost
response, a leader change, a follower's truncation and a restart.

Broker pieces in process (minikafka/testing/memory_node.py) on real LogStores in tmp_path, under
the autojump MockClock; produce requests are handled directly (a "lost response" is a request
whose answer the test throws away, exactly what a client sees when the connection drops after
the write).
"""

from __future__ import annotations

import pytest
import trio

from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import (
    MemoryBroker,
    partition_state,
    replicating_config,
    wait_until,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest, ProduceResponse

PID = 1000


def entry(n: int, seq: int, *, tag: str = "v", pid: int = PID, epoch: int = 0) -> ProducePartition:
    return ProducePartition(
        topic="t",
        partition=0,
        records=make_batch([(1000 + i, None, f"{tag}{seq + i}".encode()) for i in range(n)]),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


async def produce(
    broker: MemoryBroker, *entries: ProducePartition, acks: int = 1
) -> list[tuple[int, int]]:
    req = ProduceRequest(acks=acks, timeout_ms=1000, partitions=list(entries))
    resp = (await handle_produce(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, ProduceResponse)
    return [(p.error_code, p.base_offset) for p in resp.partitions]


def values(broker: MemoryBroker) -> int:
    return sum(b.count for b in iter_batches(broker.log_bytes("t")))


@pytest.fixture
async def leader(tmp_path):
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        yield broker


async def test_a_retry_whose_first_answer_was_lost_is_answered_with_the_original_offset(
    autojump_clock, leader
):
    assert await produce(leader, entry(3, 0)) == [(0, 0)]  # its answer "lost"
    assert await produce(leader, entry(2, 3)) == [(0, 3)]
    # The client retries the first batch: same producer, epoch and sequence.
    assert await produce(leader, entry(3, 0)) == [(0, 0)]
    assert values(leader) == 5  # stored once
    assert leader.metrics.counters["produce_duplicates"] == 1
    # Its producer fields are in the stored header, as Kafka's RecordBatch carries them.
    stored = list(iter_batches(leader.log_bytes("t")))
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in stored] == [
        (PID, 0, 0),
        (PID, 0, 3),
    ]


async def test_without_a_producer_id_a_retry_is_stored_twice(autojump_clock, leader):
    plain = ProducePartition(topic="t", partition=0, records=make_batch([(1, None, b"x")]))
    assert await produce(leader, plain) == [(0, 0)]
    assert await produce(leader, plain) == [(0, 1)]
    assert values(leader) == 2
    assert [b.producer_id for b in iter_batches(leader.log_bytes("t"))] == [-1, -1]


async def test_a_duplicate_within_one_request_and_the_sequence_errors(autojump_clock, leader):
    assert await produce(leader, entry(1, 0), entry(1, 1), entry(1, 0)) == [
        (0, 0),
        (0, 1),
        (0, 0),
    ]
    assert await produce(leader, entry(1, 5)) == [(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)]
    assert await produce(leader, entry(1, 3, pid=7)) == [(ErrorCode.UNKNOWN_PRODUCER_ID, -1)]
    assert await produce(leader, entry(1, 0, epoch=1)) == [(0, 2)]  # a bumped epoch at 0
    assert await produce(leader, entry(1, 2, epoch=0)) == [(ErrorCode.INVALID_PRODUCER_EPOCH, -1)]
    two = ProducePartition(
        topic="t",
        partition=0,
        records=make_batch([(1, None, b"a")]) + make_batch([(1, None, b"b")]),
        producer_id=PID,
        producer_epoch=1,
        base_sequence=1,
    )
    assert await produce(leader, two) == [(ErrorCode.INVALID_RECORD, -1)]
    # Fields the stored header cannot hold are refused, not a crash of the handler.
    assert await produce(leader, entry(1, 2, epoch=2**15)) == [(ErrorCode.INVALID_RECORD, -1)]
    assert await produce(leader, entry(1, 0, pid=2**63)) == [(ErrorCode.INVALID_RECORD, -1)]
    assert values(leader) == 3


async def test_acks_all_duplicate_waits_for_the_original_to_be_replicated(autojump_clock, tmp_path):
    """A retry of a batch that is written but not yet replicated is answered only once the HW
    covers the original (Kafka's DelayedProduce on the duplicate's offsets): here never, since
    the follower does not fetch, so it times out as the first attempt would."""
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        assert await produce(broker, entry(2, 0), acks=-1) == [(ErrorCode.REQUEST_TIMED_OUT, -1)]
        assert await produce(broker, entry(2, 0), acks=-1) == [(ErrorCode.REQUEST_TIMED_OUT, -1)]
        assert values(broker) == 2


async def test_a_new_leader_dedupes_a_retry_of_a_batch_written_under_the_old_one(
    autojump_clock, pair
):
    a, b = pair
    brokers = [a.info, b.info]
    epoch1 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=1)
    await a.apply([epoch1], brokers)
    await b.apply([epoch1], brokers)
    assert await produce(a, entry(2, 0), acks=-1) == [(0, 0)]
    assert await produce(a, entry(3, 2), acks=-1) == [(0, 2)]  # this answer is "lost"
    await wait_until(lambda: b.partition("t").log_end_offset == 5)
    # A fails; B leads epoch 2 with the state it rebuilt from the batches it replicated.
    epoch2 = partition_state("t", 0, leader=2, isr=[2], replicas=[1, 2], leader_epoch=2)
    await b.apply([epoch2], brokers)
    assert await produce(b, entry(3, 2)) == [(0, 2)]  # the client's retry: a duplicate
    assert await produce(b, entry(1, 5)) == [(0, 5)]  # and the sequence goes on
    assert values(b) == 6


@pytest.mark.parametrize("in_memory", [True, False], ids=["undone", "reloaded"])
async def test_a_follower_truncating_its_tail_forgets_the_truncated_batches(
    autojump_clock, pair, in_memory
):
    """B appends a producer's batch as leader of epoch 2 that nobody replicates; when it follows
    A again it truncates it, and its producer state must forget it too: the client's retry of
    that batch goes to A (which never had it) and later to B as leader again. The truncation is
    undone in memory when it is above what B trimmed (its HW), else reloaded from the log."""
    a, b = pair
    brokers = [a.info, b.info]
    epoch1 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=1)
    await a.apply([epoch1], brokers)
    await b.apply([epoch1], brokers)
    assert await produce(a, entry(2, 0), acks=-1) == [(0, 0)]
    await wait_until(lambda: b.partition("t").high_watermark == 2)

    epoch2 = partition_state("t", 0, leader=2, isr=[2, 1], replicas=[1, 2], leader_epoch=2)
    await b.apply([epoch2], brokers)
    assert await produce(b, entry(3, 2, tag="lost")) == [(0, 2)]  # never replicated
    reloads = []
    if not in_memory:
        b.partition("t").producers.trim(5)  # as if the HW had passed it: no undo left
        real_load = b.writer.load_producers

        async def load(tp):  # noqa: ANN001, ANN202
            reloads.append(tp)
            return await real_load(tp)

        b.writer.load_producers = load  # type: ignore[method-assign]

    epoch3 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=3)
    await a.apply([epoch3], brokers)
    assert await produce(a, entry(3, 2, tag="kept")) == [(0, 2)]  # the retry, new at A
    assert await produce(a, entry(1, 5)) == [(0, 5)]
    await b.apply([epoch3], brokers)
    await wait_until(lambda: b.partition("t").log_end_offset == 6)
    assert b.events.counts["truncated"] == 1
    assert b.log_bytes("t") == a.log_bytes("t")
    assert b.partition("t").producers.entries == a.partition("t").producers.entries
    assert len(reloads) == (0 if in_memory else 1)
    # B leads again: the producer's next batch follows seq 5, a retry of 5 is a duplicate.
    epoch4 = partition_state("t", 0, leader=2, isr=[2], replicas=[1, 2], leader_epoch=4)
    await b.apply([epoch4], brokers)
    assert await produce(b, entry(1, 5)) == [(0, 5)]
    assert await produce(b, entry(1, 6)) == [(0, 6)]


async def test_a_restarted_broker_keeps_the_producer_state(autojump_clock, tmp_path):
    """The state survives a restart: rebuilt from the snapshot written with the HW checkpoint
    plus the batches after it (here some before and some after the snapshot)."""
    data = tmp_path / "b1"
    state = partition_state("t", 0, leader=1, isr=[1], replicas=[1])
    broker = MemoryBroker(replicating_config(1), data)
    async with broker.running():
        await broker.apply([state])
        assert await produce(broker, entry(2, 0)) == [(0, 0)]
        assert await produce(broker, entry(2, 0, pid=2)) == [(0, 2)]
        hw = broker.partition("t").high_watermark
        snaps = await broker.replica_manager.producer_snapshots.take({broker.partition("t").tp: hw})
        await broker.writer.checkpoint({broker.partition("t").tp: hw}, snaps)
        assert await produce(broker, entry(3, 2)) == [(0, 4)]  # after the snapshot
        before = dict(broker.partition("t").producers.entries)

    broker = MemoryBroker(replicating_config(1), data)
    async with broker.running():
        await broker.apply(
            [partition_state("t", 0, leader=1, isr=[1], replicas=[1], leader_epoch=2)]
        )
        assert broker.partition("t").producers.entries == before
        assert await produce(broker, entry(3, 2)) == [(0, 4)]  # a duplicate of the last one
        assert await produce(broker, entry(2, 0, pid=2)) == [(0, 2)]  # of the snapshot's
        assert await produce(broker, entry(1, 5)) == [(0, 7)]
        assert values(broker) == 8


async def test_a_failed_write_forgets_its_sequence(autojump_clock, leader, monkeypatch):
    from minikafka.storage import StorageError

    real = leader.store.append
    calls = []

    def failing(writes):  # noqa: ANN001
        calls.append(writes)
        if len(calls) == 1:
            raise StorageError("LMDB: [Errno 28] No space left on device")
        return real(writes)

    monkeypatch.setattr(leader.store, "append", failing)
    assert await produce(leader, entry(2, 0)) == [(ErrorCode.KAFKA_STORAGE_ERROR, -1)]
    # Not a duplicate of a batch that was never written: the retry is appended.
    assert await produce(leader, entry(2, 0)) == [(0, 0)]
    assert values(leader) == 2


def test_storage_snapshot_plus_tail_and_truncation_below_the_snapshot(tmp_path) -> None:
    """LogStore alone: the state loads from the snapshot and the batches after it; a truncation
    below the snapshot deletes it, and the state is then rebuilt from the log start."""
    from minikafka.common import TopicPartition
    from minikafka.core.producer_state import entries_to_doc
    from minikafka.storage import AppendWrite, LogStore
    from minikafka.testing.memory_node import TEST_STORE

    tp = TopicPartition("t", 0)

    def stored(seq: int, n: int, offset: int, pid: int = PID) -> bytes:
        return make_batch(
            [(1, None, b"x")] * n,
            base_offset=offset,
            leader_epoch=1,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
        )

    with LogStore(tmp_path / "s", TEST_STORE) as store:
        store.create_partition(tp)
        store.append([AppendWrite(tp=tp, batches=[stored(0, 2, 0), stored(2, 2, 2)])])
        at_4 = store.load_producers(tp).entries
        store.save_producer_snapshots({tp: (4, entries_to_doc(at_4))})
        store.append([AppendWrite(tp=tp, batches=[stored(4, 1, 4), stored(0, 1, 5, pid=9)])])
        full = store.load_producers(tp)
        assert full.entries[PID].last_seq == 4 and full.entries[9].last_seq == 0
    with LogStore(tmp_path / "s", TEST_STORE) as store:  # a restart
        assert store.load_all()[tp].producers.entries == full.entries
        store.truncate(tp, 2, [(1, 0)])  # below the snapshot at 4
        assert store.load_producers(tp).entries[PID].last_seq == 1
        assert 9 not in store.load_producers(tp).entries
    with LogStore(tmp_path / "s", TEST_STORE) as store:
        assert store.load_all()[tp].producers.entries[PID].last_seq == 1


async def test_a_retry_racing_its_original_whose_write_fails_is_not_acknowledged(
    autojump_clock, leader, monkeypatch
):
    """The retry arrives while the original is still queued for the disk: it is a duplicate
    and waits for the original; the original's write fails (and is undone), so the retry is
    answered with a retriable error, never with the offset of a batch that is not there."""
    from minikafka.storage import StorageError

    real = leader.store.append
    calls = []

    def failing(writes):  # noqa: ANN001
        calls.append(writes)
        if len(calls) == 1:
            raise StorageError("LMDB: [Errno 28] No space left on device")
        return real(writes)

    monkeypatch.setattr(leader.store, "append", failing)
    answers = []

    async def send() -> None:
        answers.extend(await produce(leader, entry(2, 0)))

    async with trio.open_nursery() as nursery:  # both stamped before the writer runs
        nursery.start_soon(send)
        nursery.start_soon(send)
    assert sorted(answers) == [
        (ErrorCode.REQUEST_TIMED_OUT, -1),
        (ErrorCode.KAFKA_STORAGE_ERROR, -1),
    ]
    assert len(calls) == 1 and values(leader) == 0
    assert await produce(leader, entry(2, 0)) == [(0, 0)]  # the next retry is appended


async def test_a_producer_whose_records_are_deleted_keeps_its_sequence_numbers(leader):
    """KIP-360: moving the log start offset (retention, DeleteRecords, compaction removing the
    records) does not forget the producers before it (Kafka's ProducerStateManager
    .onLogStartOffsetIncremented), so neither a retry of its last batch nor its next batch is
    refused as coming from an unknown producer."""
    assert await produce(leader, entry(3, 0)) == [(ErrorCode.NONE, 0)]
    p = leader.partition("t")
    await leader.replica_manager.writer.advance_log_start(p.tp, 3)
    leader.replica_manager.log_start_moved(p, 3, reason="client record deletion")
    assert p.log_start_offset == 3
    assert await produce(leader, entry(3, 0)) == [(ErrorCode.NONE, 0)]  # a retry: a duplicate
    assert await produce(leader, entry(2, 3)) == [(ErrorCode.NONE, 3)]
    assert values(leader) == 2
