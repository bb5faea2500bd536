"""Broker pieces in process (minikafka/testing/memory_node.py) on real LogStores in tmp_path,
driven by LeaderAndIsr states and by Produce/Fetch requests, under the autojump MockClock.

Broker 1 leads topic "t" unless a test says otherwise; broker 2 is the follower, either
simulated by calling handle_fetch with replica_id=2, or (last tests) a second in-process broker
whose replica fetcher reaches broker 1 over memory streams.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import trio
import trio.testing

from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.fetch_serve import handle_fetch
from minikafka.server.produce import handle_produce
from minikafka.storage import StorageError
from minikafka.testing.memory_node import (
    QUICK_REPLICATION,
    FakeControllerLink,
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

LAG_MAX_MS = QUICK_REPLICATION["replica_lag_time_max_ms"]  # 1 s


# LMDB calls run inline (tests/conftest.py).


def records(n: int, tag: str = "v") -> bytes:
    return make_batch([(1000 + i, None, f"{tag}{i}".encode()) for i in range(n)])


def produce_req(
    blobs: dict[tuple[str, int], bytes], *, acks: int = 1, timeout_ms: int = 1000
) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        partitions=[
            ProducePartition(topic=t, partition=p, records=blob) for (t, p), blob in blobs.items()
        ],
    )


def fetch_req(
    offset: int,
    *,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    topic: str = "t",
) -> FetchRequest:
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        partitions=[
            FetchPartition(
                topic=topic, partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
            )
        ],
    )


async def produce(broker: MemoryBroker, req: ProduceRequest) -> ProduceResponse:
    resp = (await handle_produce(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, ProduceResponse)
    return resp


async def fetch(broker: MemoryBroker, req: FetchRequest) -> FetchResponse:
    resp = (await handle_fetch(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, FetchResponse)
    return resp


def offsets(blob: bytes) -> list[int]:
    return [b.base_offset for b in iter_batches(blob)]


@pytest.fixture
async def leader(tmp_path):
    """Broker 1, leader of t-0 with replicas {1, 2} and ISR {1}; t-1 led too."""
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        await broker.apply(
            [
                partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2]),
                partition_state("t", 1, leader=1, isr=[1], replicas=[1, 2]),
            ]
        )
        yield broker


# ---------------------------------------------------------------------------- produce


async def test_produce_acks1_returns_consecutive_base_offsets(autojump_clock, leader):
    first = await produce(leader, produce_req({("t", 0): records(3)}))
    second = await produce(leader, produce_req({("t", 0): records(2)}))
    assert [p.error_code for p in first.partitions + second.partitions] == [0, 0]
    assert first.partitions[0].base_offset == 0
    assert second.partitions[0].base_offset == 3
    p = leader.partition("t")
    assert p.log_end_offset == 5 and p.high_watermark == 5  # ISR {1}: HW follows the LEO
    stored = list(iter_batches(leader.log_bytes("t")))
    assert [(b.base_offset, b.count, b.leader_epoch) for b in stored] == [(0, 3, 1), (3, 2, 1)]


async def test_one_request_naming_a_partition_twice_answers_each_entry_its_own_offset(
    autojump_clock, leader
):
    """A request may carry two batches for one partition (our producer sends what is due,
    which after a stall can be two rounds of every partition): both are appended in order and
    each entry is answered with ITS base offset. Keyed by partition, the second answer had
    replaced the first, so a client was told two batches were at one offset (found by the
    Kafka-mode system test: 66 batches acknowledged at the wrong offset, "corrupted")."""
    req = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        partitions=[
            ProducePartition(topic="t", partition=0, records=records(3, "a")),
            ProducePartition(topic="t", partition=1, records=records(1, "b")),
            ProducePartition(topic="t", partition=0, records=records(2, "c")),
        ],
    )
    resp = await produce(leader, req)
    assert [(p.partition, p.error_code, p.base_offset) for p in resp.partitions] == [
        (0, 0, 0),
        (1, 0, 0),
        (0, 0, 3),
    ]
    stored = list(iter_batches(leader.log_bytes("t")))
    assert [(b.base_offset, b.count) for b in stored] == [(0, 3), (3, 2)]


async def test_produce_to_follower_partition_is_refused_and_writes_nothing(
    autojump_clock, tmp_path
):
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        # Broker 2 leads; no live leader given, so no fetcher is started.
        await broker.apply([partition_state("t", 0, leader=2, isr=[2, 1], replicas=[2, 1])])
        leo_before = broker.partition("t").log_end_offset
        resp = await produce(broker, produce_req({("t", 0): records(3)}))
        assert resp.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert resp.partitions[0].base_offset == -1
        await broker.writer.barrier()
        assert broker.partition("t").log_end_offset == leo_before == 0
        assert broker.partition("t").next_offset == 0
        assert broker.log_bytes("t") == b""


async def test_produce_unknown_topic(autojump_clock, leader):
    resp = await produce(leader, produce_req({("nope", 0): records(1), ("t", 0): records(1)}))
    assert [p.error_code for p in resp.partitions] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]
    # A known topic whose partition is not hosted here is a leadership error instead.
    resp = await produce(leader, produce_req({("t", 7): records(1)}))
    assert resp.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_corrupt_batch_is_refused_and_other_partitions_go_on(autojump_clock, leader):
    good = records(2)
    bad = bytearray(records(2))
    bad[-1] ^= 0xFF  # flip a payload bit: the CRC no longer matches
    resp = await produce(leader, produce_req({("t", 0): bytes(bad), ("t", 1): good}))
    assert resp.partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert resp.partitions[1].error_code == ErrorCode.NONE
    assert leader.partition("t", 0).log_end_offset == 0
    assert leader.partition("t", 0).next_offset == 0
    assert leader.log_bytes("t", 0) == b""
    assert offsets(leader.log_bytes("t", 1)) == [0]
    # The refused partition takes the next good batch at offset 0.
    resp = await produce(leader, produce_req({("t", 0): good}))
    assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 0)


async def test_storage_failure_does_not_wedge_the_partition(autojump_clock, leader, monkeypatch):
    """An append the store refuses fails that produce; the offsets it reserved are released,
    so the next produce lands at the log end offset again."""
    real_append = leader.store.append
    calls = []

    def failing_once(writes):
        calls.append(writes)
        if len(calls) == 1:
            raise StorageError("disk on fire")
        return real_append(writes)

    monkeypatch.setattr(leader.store, "append", failing_once)
    resp = await produce(leader, produce_req({("t", 0): records(3)}))
    assert resp.partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert leader.partition("t").log_end_offset == 0
    resp = await produce(leader, produce_req({("t", 0): records(2)}))
    assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 0)
    assert offsets(leader.log_bytes("t")) == [0]


# ---------------------------------------------------------------------------- acks=all, HW


@pytest.fixture
async def leader_isr2(tmp_path):
    """Broker 1 leading t-0 with ISR {1, 2}: the HW waits for broker 2's fetches."""
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        yield broker


async def test_acks_all_waits_for_the_follower_to_advance_the_hw(autojump_clock, leader_isr2):
    broker = leader_isr2
    answers: list[ProduceResponse] = []

    async def producer() -> None:
        answers.append(await produce(broker, produce_req({("t", 0): records(3)}, acks=-1)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(producer)
        await wait_until(lambda: broker.partition("t").log_end_offset == 3)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [] and broker.partition("t").high_watermark == 0

        # A follower fetch at offset 0 reports LEO 0: the HW cannot move yet.
        resp = await fetch(broker, fetch_req(0, replica_id=2))
        assert offsets(resp.partitions[0].records) == [0]  # the follower gets the batch
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []

        # Its next fetch, at 3, says it has the batch: HW 3, and the produce is answered.
        resp = await fetch(broker, fetch_req(3, replica_id=2))
        assert resp.partitions[0].high_watermark == 3
    [answer] = answers
    assert (answer.partitions[0].error_code, answer.partitions[0].base_offset) == (0, 0)
    assert broker.partition("t").high_watermark == 3


async def test_acks_all_times_out_without_follower_fetches(autojump_clock, leader_isr2):
    start = trio.current_time()
    resp = await produce(leader_isr2, produce_req({("t", 0): records(1)}, acks=-1, timeout_ms=1500))
    assert resp.partitions[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert trio.current_time() - start == pytest.approx(1.5)
    # Like Kafka, the data stays in the leader's log; it is just not committed.
    assert leader_isr2.partition("t").log_end_offset == 1
    assert leader_isr2.partition("t").high_watermark == 0


async def test_consumers_read_up_to_the_hw_followers_up_to_the_leo(autojump_clock, leader_isr2):
    broker = leader_isr2
    await produce(broker, produce_req({("t", 0): records(3)}))  # acks=1: LEO 3, HW 0
    await produce(broker, produce_req({("t", 0): records(2)}))  # LEO 5
    consumer = await fetch(broker, fetch_req(0))
    assert consumer.partitions[0].records == b"" and consumer.partitions[0].high_watermark == 0
    follower = await fetch(broker, fetch_req(0, replica_id=2))
    assert offsets(follower.partitions[0].records) == [0, 3]
    await fetch(broker, fetch_req(3, replica_id=2))  # follower LEO 3: HW 3
    consumer = await fetch(broker, fetch_req(0))
    assert offsets(consumer.partitions[0].records) == [0]  # not the batch beyond the HW
    assert consumer.partitions[0].high_watermark == 3


async def test_fetch_from_a_non_replica_is_refused(autojump_clock, leader_isr2):
    await produce(leader_isr2, produce_req({("t", 0): records(1)}))
    resp = await fetch(leader_isr2, fetch_req(0, replica_id=9))
    assert resp.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert resp.partitions[0].records == b""


async def test_fetch_claiming_the_leaders_own_id_is_refused(autojump_clock, leader_isr2):
    """A peer that sends replica_id = the leader's id gets an error, not a handler crash."""
    await produce(leader_isr2, produce_req({("t", 0): records(1)}))
    resp = await fetch(leader_isr2, fetch_req(0, replica_id=1))
    assert resp.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader_isr2.partition("t").high_watermark == 0


# ---------------------------------------------------------------------------- long poll


async def test_long_poll_returns_as_soon_as_a_produce_lands(autojump_clock, leader):
    got: list[tuple[float, FetchResponse]] = []
    start = trio.current_time()

    async def consumer() -> None:
        resp = await fetch(leader, fetch_req(0, max_wait_ms=10_000, min_bytes=1))
        got.append((trio.current_time() - start, resp))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        await trio.sleep(2)
        assert got == []  # still waiting after 2 s
        await produce(leader, produce_req({("t", 0): records(2)}))
    [(elapsed, resp)] = got
    assert elapsed == pytest.approx(2.0)  # woke on the produce, not at max_wait
    assert offsets(resp.partitions[0].records) == [0]


async def test_long_poll_returns_empty_after_max_wait(autojump_clock, leader):
    start = trio.current_time()
    resp = await fetch(leader, fetch_req(0, max_wait_ms=3000, min_bytes=1))
    assert trio.current_time() - start == pytest.approx(3.0)
    assert resp.partitions[0].error_code == ErrorCode.NONE
    assert resp.partitions[0].records == b""


# ---------------------------------------------------------------------------- ISR changes


async def test_lagging_follower_is_proposed_out_of_the_isr(autojump_clock, tmp_path):
    link = FakeControllerLink()
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1", controller=link)
    async with broker.running(isr_expiration=True):
        await broker.apply(
            [partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], partition_epoch=4)]
        )
        start = trio.current_time()
        await produce(broker, produce_req({("t", 0): records(1)}))
        await wait_until(lambda: bool(link.alter_partitions), timeout_s=10)
        elapsed_ms = (trio.current_time() - start) * 1000
        # Caught up at t=0 (made leader), never fetches: out of sync once now - 0 > 1000 ms,
        # first seen by the expiration task running every 500 ms, i.e. at 1500 ms.
        assert LAG_MAX_MS < elapsed_ms <= LAG_MAX_MS * 1.5 + 10
        [req] = link.alter_partitions
        assert req.broker_id == 1 and req.broker_epoch == link.broker_epoch
        [item] = req.partitions
        assert (item.topic, item.partition, item.new_isr) == ("t", 0, [1])
        assert (item.leader_epoch, item.partition_epoch) == (1, 4)
        await wait_until(lambda: broker.partition("t").leader.isr == (1,))
        assert broker.partition("t").leader.partition_epoch == 5
        assert broker.events.counts.get("isr_shrink") == 1
        # With ISR {1} the HW catches up with the LEO, and acks=all succeeds alone.
        assert broker.partition("t").high_watermark == 1
        resp = await produce(broker, produce_req({("t", 0): records(1)}, acks=-1))
        assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 1)


async def test_fetching_follower_stays_in_the_isr(autojump_clock, tmp_path):
    link = FakeControllerLink()
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1", controller=link)
    async with broker.running(isr_expiration=True):
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        for _ in range(10):  # 5 s of produce + follower fetches every 500 ms
            await produce(broker, produce_req({("t", 0): records(1)}))
            await trio.sleep(0.5)
            await fetch(broker, fetch_req(broker.partition("t").log_end_offset, replica_id=2))
        assert link.alter_partitions == []
        assert broker.partition("t").leader.isr == (1, 2)
        assert broker.partition("t").high_watermark == 10


async def test_caught_up_follower_is_proposed_into_the_isr(autojump_clock, leader):
    link = leader.controller
    await produce(leader, produce_req({("t", 0): records(2)}))
    await fetch(leader, fetch_req(0, replica_id=2))  # LEO 0 < HW 2: not yet
    await trio.testing.wait_all_tasks_blocked()
    assert link.alter_partitions == []
    await fetch(leader, fetch_req(2, replica_id=2))  # at the HW: expand
    await wait_until(lambda: leader.partition("t").leader.isr == (1, 2))
    [req] = link.alter_partitions
    assert req.partitions[0].new_isr == [1, 2]
    assert leader.events.counts.get("isr_expand") == 1


# ---------------------------------------------------------------------------- two brokers


async def test_follower_replicates_byte_for_byte_over_memory_streams(autojump_clock, pair):
    a, b = pair
    state = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
    await a.apply([state], [a.info, b.info])
    await b.apply([state], [a.info, b.info])
    assert b.events.counts.get("become_follower") == 1
    bases = []
    for i in range(5):  # acks=all: each answer needs B's fetch to move the HW
        resp = await produce(a, produce_req({("t", 0): records(i + 1, tag=f"r{i}")}, acks=-1))
        assert resp.partitions[0].error_code == ErrorCode.NONE
        bases.append(resp.partitions[0].base_offset)
    assert bases == [0, 1, 3, 6, 10]
    await wait_until(lambda: b.partition("t").high_watermark == 15)
    assert b.partition("t").log_end_offset == a.partition("t").log_end_offset == 15
    assert b.log_bytes("t") == a.log_bytes("t") != b""
    assert b.partition("t").epochs == a.partition("t").epochs == [(1, 0)]
    assert a.network.connections == 1  # one long-lived fetcher connection
    assert a.network.events.counts == {}  # no bad request on the wire


async def test_follower_truncates_divergent_uncommitted_data(autojump_clock, pair):
    a, b = pair
    brokers = [a.info, b.info]
    epoch1 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=1)
    await a.apply([epoch1], brokers)
    await b.apply([epoch1], brokers)
    for n in (2, 3):
        resp = await produce(a, produce_req({("t", 0): records(n)}, acks=-1))
        assert resp.partitions[0].error_code == ErrorCode.NONE
    await wait_until(lambda: b.partition("t").log_end_offset == 5)

    # B leads epoch 2 (A never hears of it) and appends what A never gets: uncommitted.
    epoch2 = partition_state("t", 0, leader=2, isr=[2, 1], replicas=[1, 2], leader_epoch=2)
    await b.apply([epoch2], brokers)
    resp = await produce(b, produce_req({("t", 0): records(4, tag="lost")}))
    assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 5)
    assert b.partition("t").log_end_offset == 9
    assert b.partition("t").high_watermark <= 5  # A never fetched from B: 5..8 uncommitted

    # A leads again in epoch 3 and takes new writes; B follows and must drop offsets 5..8.
    epoch3 = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=3)
    await a.apply([epoch3], brokers)
    resp = await produce(a, produce_req({("t", 0): records(2, tag="new")}))
    assert resp.partitions[0].base_offset == 5
    await b.apply([epoch3], brokers)
    await wait_until(lambda: b.events.counts.get("truncated", 0) >= 1)
    await wait_until(lambda: b.partition("t").log_end_offset == a.partition("t").log_end_offset)
    assert b.events.counts["truncated"] == 1
    assert b.log_bytes("t") == a.log_bytes("t")
    assert [(x.base_offset, x.leader_epoch) for x in iter_batches(b.log_bytes("t"))] == [
        (0, 1),
        (2, 1),
        (5, 3),
    ]
    assert b.partition("t").epochs == a.partition("t").epochs == [(1, 0), (3, 5)]
    # B is back in sync: A's acks=all produce completes through B's fetches.
    resp = await produce(a, produce_req({("t", 0): records(1)}, acks=-1))
    assert (resp.partitions[0].error_code, resp.partitions[0].base_offset) == (0, 7)


async def test_a_follower_behind_the_leaders_log_start_starts_again_from_it(
    autojump_clock, pair
):
    """Retention (or DeleteRecords) moved the leader's log start past the follower's end: the
    follower's fetch is OFFSET_OUT_OF_RANGE, it asks the leader's ListOffsets, drops its log and
    starts empty at the leader's log start (AbstractFetcherThread.fetchOffsetAndTruncate)."""
    a, b = pair
    brokers = [a.info, b.info]
    only_a = partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2])
    await a.apply([only_a], brokers)
    for i in range(3):
        resp = await produce(a, produce_req({("t", 0): records(3, tag=f"r{i}")}))
        assert resp.partitions[0].error_code == ErrorCode.NONE
    lp = a.partition("t")
    assert lp.log_end_offset == 9
    # The leader's log start moves to the second batch (what its retention will do on disk).
    a.replica_manager.execute(lp, lp.replica.on_log_start_offset_moved(3))
    follows = partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2], partition_epoch=2)
    await b.apply([follows], brokers)
    await wait_until(lambda: b.partition("t").log_end_offset == 9)
    fp = b.partition("t")
    assert (fp.log_start_offset, fp.log_end_offset, fp.high_watermark) == (3, 9, 9)
    assert offsets(b.log_bytes("t")) == [3, 6]  # from the leader's log start on
    assert b.events.counts["fetch_offset_out_of_range"] == 1
    assert b.metrics.counters["fetch_offset_out_of_range"] == 1
    # B's log starts at 3 on disk too: a restart loads it there.
    assert b.replica_manager.store.load_partition(fp.tp).log_start_offset == 3


async def test_fetcher_retries_after_the_leader_is_unreachable(autojump_clock, pair):
    a, b = pair
    state = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
    a.network.cut(a.address)
    await a.apply([state], [a.info, b.info])
    await b.apply([state], [a.info, b.info])
    await produce(a, produce_req({("t", 0): records(3)}))
    await trio.sleep(1)
    assert b.partition("t").log_end_offset == 0
    assert b.events.counts.get("fetch_error", 0) >= 2  # retried with backoff, not given up
    a.network.heal(a.address)
    await wait_until(lambda: b.partition("t").log_end_offset == 3, timeout_s=5)
    assert b.log_bytes("t") == a.log_bytes("t")


# ---------------------------------------------------------------------------- size caps


def big_batch(value_bytes: int) -> bytes:
    return make_batch([(1000, None, b"x" * value_bytes)])


CAP = len(big_batch(4000))  # message.max.bytes in these tests: this batch exactly


def capped(node_id: int) -> NodeConfig:
    """Every fetch cap well below one batch: KIP-74 must still move it whole."""
    return replace(
        replicating_config(node_id),
        message_max_bytes=CAP,
        replica_fetch_max_bytes=512,
        replica_fetch_response_max_bytes=1024,
        fetch_max_bytes=1024,
    )


async def test_a_batch_of_exactly_message_max_bytes_is_stored_replicated_and_consumed(
    autojump_clock, tmp_path
):
    network = MemoryNetwork()
    a = MemoryBroker(capped(1), tmp_path / "a", network=network)
    b = MemoryBroker(capped(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        state = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
        await a.apply([state], [a.info, b.info])
        await b.apply([state], [a.info, b.info])
        resp = await produce(a, produce_req({("t", 0): big_batch(4000)}, acks=-1))
        assert resp.partitions[0].error_code == ErrorCode.NONE  # the follower fetched it
        await wait_until(lambda: b.partition("t").log_end_offset == 1)
        assert b.log_bytes("t") == a.log_bytes("t")
        consumer = await fetch(a, fetch_req(0))  # partition and response caps of 1 MiB...
        assert len(consumer.partitions[0].records) == CAP  # ...and fetch.max.bytes 1024
        # One byte more is refused, nothing stored, and the next offset is not taken.
        resp = await produce(a, produce_req({("t", 0): big_batch(4001)}, acks=1))
        assert resp.partitions[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert str(CAP) in (resp.partitions[0].error_message or "")
        assert a.partition("t").log_end_offset == a.partition("t").next_offset == 1


async def test_fetch_max_bytes_caps_a_consumer_but_not_a_follower(autojump_clock, tmp_path):
    broker = MemoryBroker(replace(replicating_config(1), fetch_max_bytes=1024), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        for _ in range(3):
            await produce(broker, produce_req({("t", 0): big_batch(800)}))
        follower = await fetch(broker, fetch_req(0, replica_id=2))  # max_bytes 1 MiB: all
        assert offsets(follower.partitions[0].records) == [0, 1, 2]
        await fetch(broker, fetch_req(3, replica_id=2))  # HW 3
        consumer = await fetch(broker, fetch_req(0))  # asks for 1 MiB, the broker allows 1024
        assert offsets(consumer.partitions[0].records) == [0]


async def test_a_topic_max_message_bytes_overrides_the_broker_setting(autojump_clock, leader):
    leader.set_configs({("topics", "t"): {"max.message.bytes": "100"}})
    resp = await produce(leader, produce_req({("t", 0): records(1), ("t", 1): big_batch(200)}))
    assert [p.error_code for p in resp.partitions] == [ErrorCode.NONE, ErrorCode.MESSAGE_TOO_LARGE]
    assert leader.log_bytes("t", 1) == b""


async def test_a_topic_max_message_bytes_is_honoured_only_up_to_what_a_fetch_can_carry(
    autojump_clock, tmp_path
):
    """A topic may raise max.message.bytes above the broker's message.max.bytes, but never
    above socket.max.frame.bytes less the 1 MiB of header room: a batch larger than a fetch
    response can carry would be stored and never read."""
    frame = 2 * 1024 * 1024
    cfg = replace(replicating_config(1), socket_max_frame_bytes=frame, message_max_bytes=1000)
    broker = MemoryBroker(cfg, tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        broker.set_configs({("topics", "t"): {"max.message.bytes": str(10 * frame)}})
        room = frame - 1024 * 1024
        fits = make_batch([(1000, None, bytes(room - 200))])
        too_big = make_batch([(1000, None, bytes(room + 200))])
        assert len(fits) <= room < len(too_big)
        resp = await produce(broker, produce_req({("t", 0): fits}))
        assert (
            resp.partitions[0].error_code == ErrorCode.NONE
        )  # above message.max.bytes: the topic's
        resp = await produce(broker, produce_req({("t", 0): too_big}))
        assert resp.partitions[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert "socket.max.frame.bytes" in (resp.partitions[0].error_message or "")


async def test_a_record_count_that_disagrees_with_the_payload_is_refused(autojump_clock, leader):
    good = records(2)
    lying = bytearray(good)
    lying[12:16] = (5).to_bytes(4, "big")  # the header's count; payload and CRC unchanged
    resp = await produce(leader, produce_req({("t", 0): bytes(lying)}))
    assert resp.partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert leader.log_bytes("t", 0) == b"" and leader.partition("t", 0).next_offset == 0


async def test_a_topic_min_insync_replicas_is_honoured_by_acks_all(autojump_clock, leader):
    """ISR {1}: the broker's min.insync.replicas (1) would accept; the topic's 2 refuses."""
    resp = await produce(leader, produce_req({("t", 0): records(1)}, acks=-1))
    assert resp.partitions[0].error_code == ErrorCode.NONE
    leader.set_configs({("topics", "t"): {"min.insync.replicas": "2"}})
    resp = await produce(leader, produce_req({("t", 0): records(1)}, acks=-1))
    assert resp.partitions[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.partition("t", 0).log_end_offset == 1
