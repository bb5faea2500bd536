"""A large legal Kafka request does not hold the event loop (docs/front-door.md).

A Fetch naming 5,000 partitions (a 15 MiB one named a million) went through kio translation,
the broker's checks and kio encoding in one go on the event loop: no other task, heartbeats
included, ran until it was answered (a 100,000-partition fetch held a real broker's loop for
8 s; benchmarks aside, this is counted here, not timed). Now the translations run in a worker
thread and the broker's checks yield every CHECKS_PER_TURN partitions: a task beside it runs
all along, and the answer is the same bytes as the small path's.
"""

from __future__ import annotations

import datetime

import pytest
import trio
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.static.primitive import i32, i32Timedelta, i64

from minikafka.kafka.codec import KafkaRequest, encode_response
from minikafka.server import kafka_apis
from minikafka.server.config import NodeConfig
from minikafka.server.fetch_serve import CHECKS_PER_TURN
from minikafka.server.kafka_apis import Encoded, KafkaApis
from minikafka.testing.memory_node import MemoryBroker, partition_state

PARTITIONS = 5_000


def big_fetch(n: int) -> FetchRequest:
    def part(p: int) -> FetchPartition:
        return FetchPartition(
            partition=i32(p),
            current_leader_epoch=i32(-1),
            fetch_offset=i64(0),
            log_start_offset=i64(-1),
            partition_max_bytes=i32(1 << 20),
        )

    topics = (FetchTopic(topic="t", partitions=tuple(part(p) for p in range(n))),)
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        topics=topics,
        forgotten_topics_data=(),
    )


def header(correlation_id: int = 5) -> KafkaRequest:
    return KafkaRequest(
        api_key=1, api_version=11, correlation_id=correlation_id, client_id="c", body=None
    )


@pytest.fixture
async def apis(tmp_path):
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        yield KafkaApis(
            cache=broker.broker.cache,
            cluster_id="c",
            broker=broker.broker.dispatch,
            run_sync=trio.to_thread.run_sync,
        )


async def test_a_task_beside_a_5000_partition_fetch_keeps_running(autojump_clock, apis):
    ticks = 0
    answered = trio.Event()

    async def beside() -> None:
        nonlocal ticks
        while not answered.is_set():
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(beside)
        reply = await apis.dispatch(header(), big_fetch(PARTITIONS))
        answered.set()
    # At least once per slice of the broker's checks; the threads' work gives many more.
    assert ticks >= PARTITIONS // CHECKS_PER_TURN
    assert isinstance(reply.response, Encoded)


async def test_a_large_fetch_is_answered_with_the_small_paths_bytes(
    autojump_clock, apis, monkeypatch
):
    request = big_fetch(1500)
    large = await apis.dispatch(header(), request)
    monkeypatch.setattr(kafka_apis, "LARGE_REQUEST_PARTITIONS", 10**9)
    small = await apis.dispatch(header(), request)
    assert not isinstance(small.response, Encoded)
    assert large.response.payload == encode_response(5, small.response)
