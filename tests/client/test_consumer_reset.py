"""The consumer's auto.offset.reset (client/consumer.py): a position below the partition's log
start (retention or DeleteRecords took what it pointed at) or past its end is
OFFSET_OUT_OF_RANGE, and the consumer moves it as Kafka's does, or raises with `none`.

One in-process broker (testing/memory_node.py) leads t-0, whose log start is moved to offset 3,
as retention does when it deletes the first batch."""

from __future__ import annotations

import pytest

from minikafka.client.consumer import Consumer, OffsetOutOfRange
from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_client import open_memory_client
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    broker_config,
    partition_state,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest

TP = TopicPartition("t", 0)


@pytest.fixture
async def broker(tmp_path):
    network = MemoryNetwork()
    b = MemoryBroker(broker_config(1), tmp_path / "b1", network=network)
    async with b.running():
        await b.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        for i in range(3):  # batches at 0, 3 and 6; the HW follows (ISR of one)
            blob = make_batch([(1000, None, f"v{i}-{k}".encode()) for k in range(3)])
            req = ProduceRequest(acks=1, timeout_ms=1000, partitions=[
                ProducePartition(topic="t", partition=0, records=blob)])  # fmt: skip
            resp = (await handle_produce(b.replica_manager, req, b.topics)).response
            assert resp.partitions[0].error_code == ErrorCode.NONE
        p = b.partition("t")
        b.replica_manager.execute(p, p.replica.on_log_start_offset_moved(3))
        yield b


@pytest.mark.parametrize(("reset", "expected"), [("earliest", 3), ("latest", 9)])
async def test_a_position_below_the_log_start_is_reset(autojump_clock, broker, reset, expected):
    heard = []
    async with open_memory_client(broker.network, [broker]) as client:
        consumer = Consumer(
            client, max_wait_ms=10, auto_offset_reset=reset, on_reset=lambda *a: heard.append(a)
        )
        positions = {TP: 1}
        assert await consumer.fetch_once(positions) == {TP: []}
        assert positions == {TP: expected} and heard == [(TP, 1, expected)]
        got = await consumer.fetch_once(positions)
        assert [r.offset for r in got[TP]] == list(range(expected, 9))


async def test_a_position_past_the_end_is_reset_too(autojump_clock, broker):
    async with open_memory_client(broker.network, [broker]) as client:
        consumer = Consumer(client, max_wait_ms=10, auto_offset_reset="earliest")
        positions = {TP: 50}
        await consumer.fetch_once(positions)
        assert positions == {TP: 3}


async def test_with_none_the_fetch_raises_and_the_position_stays(autojump_clock, broker):
    async with open_memory_client(broker.network, [broker]) as client:
        consumer = Consumer(client, max_wait_ms=10, auto_offset_reset="none")
        positions = {TP: 0}
        with pytest.raises(OffsetOutOfRange, match="t-0 at 0") as raised:
            await consumer.fetch_once(positions)
        assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert positions == {TP: 0}


def test_an_unknown_reset_is_refused():
    with pytest.raises(ValueError, match="expected one of"):
        Consumer(None, auto_offset_reset="smallest")  # type: ignore[arg-type]
