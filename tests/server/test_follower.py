"""The follower side through the real replica fetcher (server/fetcher.py): its fetch order, its
lag, and throttles of 0.

Two in-process brokers (minikafka/testing/memory_node.py) under the autojump MockClock, storage
calls inline: broker 1 (A) leads every partition with ISR {A}, so its HW is its LEO; broker 2
(B) starts empty and catches up through its replica fetcher. Batches are one record of ~16 kB,
`replica.fetch.max.bytes` takes one batch per partition and `replica.fetch.response.max.bytes`
two partitions per response, so the order of the request decides who gets data (KIP-74).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from minikafka.clock import now_ms
from minikafka.core.dynamic_config import (
    BROKERS,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPICS,
)
from minikafka.core.quota.classes import QuotaSide, ThrottleClass
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.listener import Reply
from minikafka.server.produce import handle_produce
from minikafka.storage import StoreConfig
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    wait_until,
)
from minikafka.wire.messages import (
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
)

TOPIC = "t"
PARTITIONS = 8
BATCHES = 4  # per partition, one record each
BATCH = make_batch([(1_000, None, b"x" * 15_960)])  # 15 993 bytes
FETCH_MAX = 16_384  # one batch per partition per response
RESPONSE_MAX = 32_768  # two partitions per response
STORE = StoreConfig(map_size_bytes=1 << 26, sync=False)


# LMDB calls run inline (tests/conftest.py).


def node_config(node_id: int, partition_order: str = "random") -> NodeConfig:
    return NodeConfig(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replica_fetch_max_bytes=FETCH_MAX,
        replica_fetch_response_max_bytes=RESPONSE_MAX,
        replica_fetch_backoff_ms=100,
        replica_fetch_wait_max_ms=100,
        replica_fetch_partition_order=partition_order,
    )


@asynccontextmanager
async def catching_up(
    tmp_path,  # noqa: ANN001
    partition_order: str = "random",
    b_configs: dict | None = None,
    a_configs: dict | None = None,
) -> AsyncIterator[tuple[MemoryBroker, MemoryBroker, list[list[int]]]]:
    """A loaded, B following it; yields (A, B, the partitions each response to B carried data
    for, in request order), which fills while B catches up."""
    network = MemoryNetwork()
    a = MemoryBroker(node_config(1), tmp_path / "a", network=network, store_config=STORE)
    b = MemoryBroker(
        node_config(2, partition_order), tmp_path / "b", network=network, store_config=STORE
    )
    served: list[list[int]] = []

    async def recording(header, body):  # noqa: ANN001, ANN202 - Dispatcher
        reply = await a.dispatch(header, body)
        response = reply.response if isinstance(reply, Reply) else reply
        if isinstance(body, FetchRequest) and body.replica_id == 2:
            assert isinstance(response, FetchResponse)
            got = [r.partition for r in response.partitions if r.records]
            if got:
                served.append(got)
        return reply

    network.add(a.address, recording)
    states = [
        partition_state(TOPIC, p, leader=1, isr=[1], replicas=[1, 2]) for p in range(PARTITIONS)
    ]
    async with a.running(), b.running():
        await a.apply(states, [a.info, b.info])
        for _ in range(BATCHES):
            resp = await handle_produce(
                a.replica_manager,
                ProduceRequest(
                    acks=1,
                    timeout_ms=1000,
                    partitions=[
                        ProducePartition(topic=TOPIC, partition=p, records=BATCH)
                        for p in range(PARTITIONS)
                    ],
                ),
                a.topics,
            )
            assert {p.error_code for p in resp.response.partitions} == {ErrorCode.NONE}
        await a.writer.barrier()
        if a_configs:
            a.set_configs(a_configs)
        if b_configs:
            b.set_configs(b_configs)
        await b.apply(states, [a.info, b.info])
        yield a, b, served


def caught_up(b: MemoryBroker) -> bool:
    return all(b.partition(TOPIC, p).log_end_offset == BATCHES for p in range(PARTITIONS))


async def test_rotate_serves_the_partitions_round_robin_under_the_response_cap(
    autojump_clock, tmp_path
):
    """Kafka's rotation: the two partitions a response carried go to the back of the next
    request, so every round of four responses serves each of the eight partitions once."""
    async with catching_up(tmp_path, "rotate") as (_a, b, served):
        await wait_until(lambda: caught_up(b))
    assert all(len(got) == 2 for got in served) and len(served) == PARTITIONS * BATCHES // 2
    sequence = [p for got in served for p in got]
    rounds = [sequence[i : i + PARTITIONS] for i in range(0, len(sequence), PARTITIONS)]
    assert rounds == [list(range(PARTITIONS))] * BATCHES


async def test_random_order_serves_some_partitions_twice_before_others_once(
    autojump_clock, tmp_path
):
    """KIP-73's shuffle (the default): fair on average, not round by round."""
    async with catching_up(tmp_path, "random") as (_a, b, served):
        await wait_until(lambda: caught_up(b))
    sequence = [p for got in served for p in got]
    rounds = [sorted(sequence[i : i + PARTITIONS]) for i in range(0, len(sequence), PARTITIONS)]
    assert rounds != [list(range(PARTITIONS))] * BATCHES


async def test_a_lagging_follower_reports_its_lag_in_sum_replica_lag(autojump_clock, tmp_path):
    """KIP-73: admins watch SumReplicaLag on the bootstrapping broker. B leads nothing, so the
    figure is the follower's own view: A's HW (= its LEO, ISR {A}) from the last response minus
    B's LEO, per partition; it falls to 0 as B catches up. A follower throttle of 20 kB/s
    stretches the catch-up of 512 kB over ~25 s."""
    throttle = {(BROKERS, "2"): {FOLLOWER_RATE: "20000"}, (TOPICS, TOPIC): {FOLLOWER_REPLICAS: "*"}}
    async with catching_up(tmp_path, b_configs=throttle) as (a, b, _served):
        gauge = b.metrics.gauges["SumReplicaLag"]
        await trio.sleep(3)
        behind = sum(
            a.partition(TOPIC, p).high_watermark - b.partition(TOPIC, p).log_end_offset
            for p in range(PARTITIONS)
        )
        assert 0 < behind < PARTITIONS * BATCHES  # some fetched, not all
        assert gauge() == behind
        assert a.metrics.gauges["SumReplicaLag"]() >= behind  # the leader's view of B, as before
        await wait_until(lambda: caught_up(b))
        await trio.sleep(1)  # one more (empty) response tells B it has caught up
        assert gauge() == 0


# ---------------------------------------------------------------------------- a rate of 0


async def test_a_follower_rate_of_0_lets_one_response_through_per_quota_span(
    autojump_clock, tmp_path
):
    """follower.replication.throttled.rate=0 (Kafka accepts >= 0). The first fetch finds
    nothing measured (Quota.acceptable(0) holds for a measured 0) and brings one response, two
    batches; its bytes then hold everything back until the sample expires, N*W = 11 s of
    silence later, when one more response gets through."""
    zero = {(BROKERS, "2"): {FOLLOWER_RATE: "0"}, (TOPICS, TOPIC): {FOLLOWER_REPLICAS: "*"}}
    async with catching_up(tmp_path, b_configs=zero) as (_a, b, served):
        await trio.sleep(10.5)
        assert [len(got) for got in served] == [2]
        await trio.sleep(2)
        assert [len(got) for got in served] == [2, 2]
        assert not caught_up(b)


async def test_a_leader_rate_of_0_lets_at_most_one_response_through_per_quota_span(
    autojump_clock, tmp_path
):
    """leader.replication.throttled.rate=0: as on the follower side the first response finds
    nothing measured and goes through; then the bytes it charged hold everything back for
    N*W = 11 s. (Kafka's leader also charges the headers of empty throttled partitions,
    KafkaApis.sizeOfThrottledPartitions, so its sensor never empties while the follower keeps
    asking and no second response ever comes; either way, at most one per 11 s.)"""
    zero = {(BROKERS, "1"): {LEADER_RATE: "0"}, (TOPICS, TOPIC): {LEADER_REPLICAS: "*"}}
    async with catching_up(tmp_path, a_configs=zero) as (a, b, served):
        await trio.sleep(0.5)
        assert [len(got) for got in served] == [2]
        await trio.sleep(10)
        assert [len(got) for got in served] == [2]
        await trio.sleep(20)
        assert 1 <= len(served) <= 3 and not caught_up(b)
        assert a.replica_manager.replication_quotas.config.leader_rate == 0


async def test_a_listed_partition_is_recorded_before_a_rate_is_set(autojump_clock, tmp_path):
    """ReplicaFetcherThread.processPartitionData records a partition's bytes when the follower
    list names it (quota.isThrottled is list membership), with or without a rate: the sensor
    has the catch-up's history when a rate comes (core/quota/classes.py
    follower_charge_class). Without a rate nothing is held back: B catches up at once."""
    listed = {(TOPICS, TOPIC): {FOLLOWER_REPLICAS: "*"}}
    async with catching_up(tmp_path, b_configs=listed) as (_a, b, _served):
        with trio.fail_after(2):
            await wait_until(lambda: caught_up(b), poll_s=0.01)
        total = PARTITIONS * BATCHES * len(BATCH)  # 511 776 B
        assert b.metrics.snapshot()["follower_replication_throttled_bytes"] == total
        # SimpleRate: the whole catch-up within the first window counts over W = 1 s.
        rate = b.replica_manager.replication_quotas.rate(
            QuotaSide.FOLLOWER, ThrottleClass.REPLICATION, now_ms()
        )
        assert rate == total
