"""Kafka's leader-side accounting, end to end in the shell: a response is charged its Kafka wire
size, headers of every throttled partition included (core/quota/charge.py), so a tiny leader
throttle is used up by headers alone. The seed article's two stories, in simulated time:

- "a fetch without data usually returns 18k of traffic, about 36k per second": 500 throttled
  partitions, Kafka's replica.fetch.wait.max.ms (500 ms): an empty fetch costs 18 521 bytes, two
  a second, so a leader throttle of 30 kB/s admits the first response and then nothing at all;
- "set the throttle to 1: will the reassignment never complete? Not exactly": on the follower
  side (record bytes only) the sensor forgets after N * W = 11 s of silence and lets one more
  response through, so the move creeps on and completes; on the leader side the headers of every
  fetch keep the rate above 1 B/s and the move stalls for good.

Two in-process brokers (minikafka/testing/memory_node.py) under the autojump MockClock; broker 1
(A) leads every partition, broker 2 (B) is an out-of-sync follower fetching through its real
replica fetcher.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
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
from minikafka.core.quota.charge import ChargedPartition, kafka_fetch_response_size
from minikafka.core.quota.classes import ThrottleClass
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.produce import handle_produce
from minikafka.storage import StoreConfig
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest

TOPIC = "t"
BATCH = make_batch([(1_000, None, b"a" * 1_967)])  # 2 000 bytes
STORE = StoreConfig(map_size_bytes=1 << 27, sync=False)


# LMDB calls run inline (tests/conftest.py).


@asynccontextmanager
async def out_of_sync_pair(
    tmp_path,
    partitions: int,
    *,
    wait_max_ms: int,
    backoff_ms: int = 1000,  # noqa: ANN001
    sessions: bool = True,
) -> AsyncIterator[tuple[MemoryBroker, MemoryBroker]]:
    """A leads `partitions` partitions holding one BATCH each, B follows out of sync (ISR {A});
    B's responses are capped at 64 KiB: 32 partitions' worth, so one response moves part."""
    network = MemoryNetwork()

    def config(node_id: int) -> NodeConfig:
        return NodeConfig(
            node_id=node_id,
            host=f"broker-{node_id}",
            port=9000 + node_id,
            replica_fetch_response_max_bytes=65_536,
            replica_fetch_wait_max_ms=wait_max_ms,
            replica_fetch_backoff_ms=backoff_ms,
            # The article's stories are sessionless fetches, each listing every partition. With
            # KIP-227 sessions (the default) an incremental response carries only partitions
            # with news, so empty throttled partitions cost no headers (as in Kafka's own
            # KafkaApis, which charges the response after updateAndGenerateResponseData):
            # `test_with_sessions_headers_no_longer_stall_the_move` below.
            replica_fetch_session_enable=sessions,
        )

    a = MemoryBroker(config(1), tmp_path / "a", network=network, store_config=STORE)
    b = MemoryBroker(config(2), tmp_path / "b", network=network, store_config=STORE)
    states = [
        partition_state(TOPIC, p, leader=1, isr=[1], replicas=[1, 2]) for p in range(partitions)
    ]
    async with a.running(), b.running():
        await a.apply(states, [a.info, b.info])
        resp = await handle_produce(
            a.replica_manager,
            ProduceRequest(
                acks=1,
                timeout_ms=1000,
                partitions=[
                    ProducePartition(topic=TOPIC, partition=p, records=BATCH)
                    for p in range(partitions)
                ],
            ),
            a.topics,
        )
        assert {p.error_code for p in resp.response.partitions} == {ErrorCode.NONE}
        await a.writer.barrier()
        yield a, b
        # B joins only now, so the caller sets the throttle first: call `start(b, a)`.


async def start(a: MemoryBroker, b: MemoryBroker, partitions: int) -> None:
    states = [
        partition_state(TOPIC, p, leader=1, isr=[1], replicas=[1, 2]) for p in range(partitions)
    ]
    await b.apply(states, [a.info, b.info])


def moved(b: MemoryBroker) -> int:
    return b.metrics.counters.get("replication_bytes_in", 0)


async def test_headers_alone_use_up_a_small_leader_throttle(autojump_clock, tmp_path):
    """500 throttled partitions (1 MB of data), leader throttle 30 kB/s, follower long polls of
    500 ms. The fresh sensor admits the first response (64 KiB of records); from then on every
    fetch is throttled, returns nothing after its 500 ms wait, and still costs 18 521 bytes:
    37 kB/s of headers against a 30 kB/s bound, so no record byte moves again."""
    partitions, rate = 500, 30_000
    async with out_of_sync_pair(tmp_path, partitions, wait_max_ms=500, sessions=False) as (a, b):
        a.set_configs(
            {(BROKERS, "1"): {LEADER_RATE: str(rate)}, (TOPICS, TOPIC): {LEADER_REPLICAS: "*"}}
        )
        await start(a, b, partitions)
        await trio.sleep(2)
        first = moved(b)
        overhead_at_2s = a.metrics.counters["leader_replication_overhead_bytes"]
        await trio.sleep(60)
        quotas = a.replica_manager.replication_quotas
        measured = quotas.rate("leader", ThrottleClass.REPLICATION, now_ms())
        overhead = a.metrics.counters["leader_replication_overhead_bytes"] - overhead_at_2s
    empty_fetch = kafka_fetch_response_size([ChargedPartition(topic=TOPIC)] * partitions)
    assert empty_fetch == 18_521
    assert 0 < first <= 65_536  # one response, KIP-74's cap
    assert moved(b) == first  # nothing after it, for a minute: the move has stalled
    # Everything charged since is empty fetches: a whole number of them, two a second.
    fetches = overhead / empty_fetch
    assert fetches == int(fetches) and 118 <= fetches <= 121
    assert measured > rate  # the headers alone keep the quota exceeded (about 37 kB/s)
    assert measured == pytest.approx(2 * empty_fetch, rel=0.05)


async def test_with_sessions_headers_no_longer_stall_the_move(autojump_clock, tmp_path):
    """The same 500 throttled partitions and 30 kB/s, with KIP-227 sessions: after the first
    (full) fetch, an incremental response leaves out the throttled partitions that have no news,
    so an empty fetch is charged 16 bytes, not 18 521, and the move goes on at the rate."""
    partitions, rate = 500, 30_000
    async with out_of_sync_pair(tmp_path, partitions, wait_max_ms=500) as (a, b):
        a.set_configs(
            {(BROKERS, "1"): {LEADER_RATE: str(rate)}, (TOPICS, TOPIC): {LEADER_REPLICAS: "*"}}
        )
        await start(a, b, partitions)
        started = trio.current_time()
        await trio.sleep(2)
        first = moved(b)
        done_at = None
        for _ in range(600):  # a minute
            await trio.sleep(0.1)
            if moved(b) == partitions * len(BATCH):
                done_at = trio.current_time() - started
                break
    assert 0 < first <= 65_536
    # 1 MB at 30 kB/s: complete after about 33 s (the window's slack lets it start faster).
    assert done_at is not None and 20 <= done_at <= 40, (done_at, moved(b))


@pytest.mark.parametrize("side", ["leader", "follower"])
async def test_a_throttle_of_one_byte_per_second(autojump_clock, tmp_path, side):
    """100 partitions of 2 kB (200 kB: four 64 KiB responses), throttle 1 B/s on one side.

    - follower: B records only record bytes; after a response its sensor is far over 1 B/s, so it
      leaves every partition out and backs off (replica.fetch.backoff.ms); once the response's
      sample is N * W = 11 s old it is purged, the rate reads 0, and one more response goes
      through. The move completes, one response every ~11-12 s: "not exactly never".
    - leader: A charges each fetch its headers (100 x 37 B), throttled or not, every 500 ms, so
      the rate never falls to 1 B/s again after the first response: stalled for good.
    """
    partitions = 100
    total = partitions * len(BATCH)
    async with out_of_sync_pair(tmp_path, partitions, wait_max_ms=500) as (a, b):
        if side == "leader":
            a.set_configs(
                {(BROKERS, "1"): {LEADER_RATE: "1"}, (TOPICS, TOPIC): {LEADER_REPLICAS: "*"}}
            )
        else:
            b.set_configs(
                {(BROKERS, "2"): {FOLLOWER_RATE: "1"}, (TOPICS, TOPIC): {FOLLOWER_REPLICAS: "*"}}
            )
        await start(a, b, partitions)
        steps: list[tuple[float, int]] = []
        t0 = trio.current_time()
        for _ in range(1200):  # 60 s, every 50 ms
            await trio.sleep(0.05)
            if not steps or moved(b) != steps[-1][1]:
                steps.append((trio.current_time() - t0, moved(b)))
    if side == "follower":
        assert steps[-1][1] == total  # completed
        gaps = [later[0] - earlier[0] for earlier, later in zip(steps, steps[1:], strict=False)]
        assert len(steps) == 4 and all(10.5 <= gap <= 12.5 for gap in gaps), steps
    else:
        assert len(steps) == 1 and 0 < steps[0][1] <= 65_536, steps  # the first response only
