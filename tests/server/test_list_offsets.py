"""ListOffsets (server/list_offsets.py). LATEST: a consumer sees the high watermark, Kafka's
DEBUGGING_REPLICA_ID (what `topics describe` sends for its LEO column) the leader's log end
offset; EARLIEST the log start. By time (KIP-79) and MAX_TIMESTAMP (KIP-734): the record found
in the time index, bounded by what the asker may read. In-process brokers
(minikafka/testing/memory_node.py) under the autojump MockClock."""

from __future__ import annotations

from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.fetch_serve import handle_list_offsets
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MemoryBroker, MemoryNetwork, partition_state, wait_until
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ProducePartition,
    ProduceRequest,
)


async def _offset(broker: MemoryBroker, timestamp: int, replica_id: int) -> int:
    req = ListOffsetsRequest(
        partitions=[ListOffsetsPartition(topic="t", partition=0, timestamp=timestamp)],
        replica_id=replica_id,
    )
    [answer] = (await handle_list_offsets(broker.replica_manager, req, broker.topics)).partitions
    assert answer.error_code == 0
    return answer.offset


async def test_latest_is_the_hw_for_consumers_and_the_leo_for_debugging(autojump_clock, tmp_path):
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        # ISR {1, 2}: follower 2 never fetches, so the HW stays at 0 while the LEO moves.
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        batch = make_batch([(1000 + i, None, b"v") for i in range(4)])
        req = ProduceRequest(
            acks=1, timeout_ms=1000,
            partitions=[ProducePartition(topic="t", partition=0, records=batch)],
        )  # fmt: skip
        await handle_produce(broker.replica_manager, req, broker.topics)
        p = broker.partition("t")
        assert (p.high_watermark, p.log_end_offset) == (0, 4)
        assert await _offset(broker, LATEST_TIMESTAMP, CONSUMER_REPLICA_ID) == 0
        assert await _offset(broker, LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == 4
        assert await _offset(broker, EARLIEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == 0


# -- by time (KIP-79) and MAX_TIMESTAMP (KIP-734) ----------------------------------------------


async def _answer(broker: MemoryBroker, timestamp: int, replica_id: int = CONSUMER_REPLICA_ID):
    req = ListOffsetsRequest(
        partitions=[ListOffsetsPartition(topic="t", partition=0, timestamp=timestamp)],
        replica_id=replica_id,
    )
    [answer] = (await handle_list_offsets(broker.replica_manager, req, broker.topics)).partitions
    assert answer.error_code == 0
    return answer.offset, answer.timestamp


async def _produce(broker: MemoryBroker, *stamps: list[int]) -> None:
    for ts in stamps:  # one batch per list, one record per timestamp
        batch = make_batch([(t, None, b"v") for t in ts])
        req = ProduceRequest(
            acks=1, timeout_ms=1000,
            partitions=[ProducePartition(topic="t", partition=0, records=batch)],
        )  # fmt: skip
        await handle_produce(broker.replica_manager, req, broker.topics)


async def test_offsets_by_time_with_timestamps_out_of_order(autojump_clock, tmp_path):
    """The bug found: a timestamp was refused with INVALID_REQUEST. Now the earliest
    offset whose timestamp is >= it, with that timestamp; -1/-1 past the last record."""
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        await _produce(broker, [500, 100], [200], [300, 900], [600])
        assert broker.partition("t").high_watermark == 6
        assert await _answer(broker, 0) == (0, 500)
        assert await _answer(broker, 150) == (0, 500)  # offset order, not time order
        assert await _answer(broker, 501) == (4, 900)  # not batch 3's 600: it comes later
        assert await _answer(broker, 900) == (4, 900)
        assert await _answer(broker, 901) == (-1, -1)
        assert await _answer(broker, MAX_TIMESTAMP) == (4, 900)
        assert await _answer(broker, EARLIEST_TIMESTAMP) == (0, -1)
        assert await _answer(broker, LATEST_TIMESTAMP) == (6, -1)
        assert await _answer(broker, EARLIEST_LOCAL_TIMESTAMP) == (0, -1)
        assert await _answer(broker, LATEST_TIERED_TIMESTAMP) == (-1, -1)


async def test_a_consumer_finds_nothing_past_the_high_watermark(autojump_clock, tmp_path):
    """Partition.fetchOffsetForTimestamp: an answer at or past the HW is none for a consumer;
    a replica or a debugging tool reads up to the LEO."""
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        # ISR {1, 2}: follower 2 never fetches, so the HW stays at 0 while the LEO moves.
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        await _produce(broker, [10, 20])
        assert broker.partition("t").high_watermark == 0
        assert await _answer(broker, 15) == (-1, -1)
        assert await _answer(broker, MAX_TIMESTAMP) == (-1, -1)
        assert await _answer(broker, 15, DEBUGGING_REPLICA_ID) == (1, 20)
        assert await _answer(broker, MAX_TIMESTAMP, DEBUGGING_REPLICA_ID) == (1, 20)


async def test_an_empty_log_and_a_follower_answer_as_kafka_does(autojump_clock, tmp_path):
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        assert await _answer(broker, 0) == (-1, -1)
        assert await _answer(broker, MAX_TIMESTAMP) == (-1, -1)
        await broker.apply([partition_state("t", 0, leader=2, isr=[2], replicas=[1, 2],
                                            leader_epoch=2)])  # fmt: skip
        req = ListOffsetsRequest(partitions=[ListOffsetsPartition(topic="t", partition=0,
                                                                  timestamp=0)])  # fmt: skip
        [answer] = (
            await handle_list_offsets(broker.replica_manager, req, broker.topics)
        ).partitions
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_follower_keeps_its_own_index_and_answers_once_it_leads(autojump_clock, tmp_path):
    """Followers append the leader's batches, so their stores index them too: after a leader
    change the new leader answers by time from its own log."""
    network = MemoryNetwork()
    a = MemoryBroker(NodeConfig(node_id=1, host="a", port=9001), tmp_path / "a", network=network)
    b = MemoryBroker(NodeConfig(node_id=2, host="b", port=9002), tmp_path / "b", network=network)
    network.add(a.address, a.dispatch)
    first = [partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2])]
    async with a.running(), b.running():
        await a.apply(first, [a.info, b.info])
        await _produce(a, [30, 10], [20], [40])
        await a.writer.barrier()
        await b.apply(first, [a.info, b.info])
        await wait_until(lambda: b.partition("t").log_end_offset == 4)
        second = [partition_state("t", 0, leader=2, isr=[2], replicas=[1, 2], leader_epoch=2)]
        await b.apply(second, [a.info, b.info])
        await wait_until(lambda: b.partition("t").is_leader)
        assert await _answer(b, 15) == (0, 30)
        assert await _answer(b, 35) == (3, 40)
        assert await _answer(b, MAX_TIMESTAMP) == (3, 40)


# -- a new leader whose high watermark lags its epoch's start (KIP-207) -------------------------


async def test_a_lagging_new_leader_answers_offset_not_available_to_consumers_only(
    autojump_clock, tmp_path
):
    """Broker 1 leads epoch 1 with ISR {1, 2}; follower 2 never fetches, so 4 records stay above
    the HW. Leading epoch 2 from LEO 4, its HW (0) is below the epoch's start: a consumer's
    LATEST would be 0 although the records exist, so Kafka answers OFFSET_NOT_AVAILABLE, and so
    must we, until the HW reaches 4 (here: the ISR shrinks to {1})."""
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        await _produce(broker, [1000, 1001], [1002, 1003])
        await broker.apply(
            [partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2], leader_epoch=2)]
        )
        p = broker.partition("t")
        assert (p.high_watermark, p.log_end_offset, p.leader_epoch) == (0, 4, 2)

        async def code(timestamp: int, replica_id: int = CONSUMER_REPLICA_ID) -> int:
            req = ListOffsetsRequest(
                partitions=[ListOffsetsPartition(topic="t", partition=0, timestamp=timestamp)],
                replica_id=replica_id,
            )
            resp = await handle_list_offsets(broker.replica_manager, req, broker.topics)
            return resp.partitions[0].error_code

        assert await code(LATEST_TIMESTAMP) == ErrorCode.OFFSET_NOT_AVAILABLE
        assert await code(1002) == ErrorCode.OFFSET_NOT_AVAILABLE  # found only above the HW
        assert await code(EARLIEST_TIMESTAMP) == ErrorCode.NONE  # the log start is known
        assert await code(LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == ErrorCode.NONE  # its LEO
        await broker.apply(
            [
                partition_state(
                    "t", 0, leader=1, isr=[1], replicas=[1, 2], leader_epoch=2, partition_epoch=2
                )
            ]
        )
        assert p.high_watermark == 4
        assert await _offset(broker, LATEST_TIMESTAMP, CONSUMER_REPLICA_ID) == 4
        assert await _answer(broker, 1002) == (2, 1002)
