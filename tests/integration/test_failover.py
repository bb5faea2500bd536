"""Real processes on 127.0.0.1: SIGKILL a leader under acks=all load and lose nothing.

A controller and three brokers; a topic with 100 partitions (replication factor 2, and 3);
producers send acks=all batches of distinct values to every partition; mid-load the leader of
partition 0 is killed with SIGKILL. Then: a new leader is elected, every acknowledged record is
read back at its offset (checker in minikafka/testing/checker.py), and the killed broker
restarts, truncates if it must, and rejoins the ISR of every partition it replicates.
Timeouts are generous and only there to fail instead of hanging.
"""

from __future__ import annotations

import json
import time

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.client.consumer import Consumer
from minikafka.cluster import LocalCluster
from minikafka.common import TopicPartition
from minikafka.testing.checker import check_acknowledged
from minikafka.testing.clusters import QUICK_FENCING, cluster_up
from minikafka.testing.load import Bounds, batch_of, load_producer, read_to_end, run_senders

FAST = {
    **QUICK_FENCING,
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "metrics.interval.ms": "500",
}


@pytest.fixture
def cluster(tmp_path):
    with cluster_up(tmp_path / "c", brokers=3, seed=1234, node_configs=FAST) as lc:
        yield lc


async def _produce(
    client: ClusterClient,
    tps: list[TopicPartition],
    acked: list,
    stop: trio.Event,
    workers: int = 4,
) -> None:
    producer = load_producer(client, acks=-1, delivery_timeout_s=60)
    seq = iter(range(10**9))
    now = int(time.time() * 1000)

    async def send(_k: int) -> bool:
        if stop.is_set():
            return False
        items, values = [], []
        for _ in range(10):
            n = next(seq)
            tp = tps[n % len(tps)]
            vals = [f"{tp}:{n}:{i}".encode() for i in range(5)]
            items.append((tp, *batch_of(vals, now_ms=now)))
            values.append(vals)
        for res, vals in zip(await producer.send_batches(items), values, strict=True):
            acked.append((res.tp, res.base_offset, vals))
        return True

    # The load stops at `stop`, or at the latest after 300 s or 200,000 requests.
    await run_senders(workers, send, Bounds(until=trio.current_time() + 300, max_sends=200_000))


async def _read_all(
    client: ClusterClient, tps: list[TopicPartition]
) -> list[tuple[TopicPartition, int, bytes]]:
    consumer = Consumer(client, max_wait_ms=50)
    with trio.fail_after(60):
        while True:
            try:
                positions = await consumer.list_offsets(tps, earliest=True)
                ends = await consumer.list_offsets(tps, earliest=False)
                break
            except Exception:  # noqa: BLE001 - leaders may still be moving; retry
                await client.refresh_metadata()
                await trio.sleep(0.2)
    return await read_to_end(client, tps, timeout_s=120, positions=positions, ends=ends)


async def _wait_in_all_isrs(
    client: ClusterClient, topic: str, broker: int, timeout_s: float
) -> None:
    with trio.fail_after(timeout_s):
        while True:
            md = await client.refresh_metadata([topic])
            parts = md.topics[0].partitions
            if all(broker in p.isr for p in parts if broker in p.replicas):
                return
            await trio.sleep(0.2)


@pytest.mark.parametrize("replication_factor", [2, 3])
async def test_sigkill_leader_under_acks_all_loses_nothing(
    cluster: LocalCluster, replication_factor: int
):
    topic = "failover"
    async with open_client(cluster.bootstrap(), client_id="it") as client:
        await Admin(client).create_topic(
            topic, partitions=100, replication_factor=replication_factor
        )
        tps = client.partitions_of(topic)
        victim = client.leader_of(TopicPartition(topic, 0))
        acked: list = []
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_produce, client, tps, acked, stop)
            with trio.fail_after(30):
                while len(acked) < 300:  # load is flowing
                    await trio.sleep(0.05)
            cluster.kill(victim)
            killed_at = len(acked)
            with trio.fail_after(30):  # a new leader, and load flowing through it
                while True:
                    await client.refresh_metadata([topic])
                    leader = client.leader_of(TopicPartition(topic, 0))
                    if leader not in (-1, victim) and len(acked) > killed_at + 300:
                        break
                    await trio.sleep(0.1)
            await trio.to_thread.run_sync(lambda: cluster.restart(victim, ready_timeout_s=30))
            with trio.fail_after(30):
                while len(acked) < killed_at + 600:  # load through the restart
                    await trio.sleep(0.05)
            stop.set()
        await _wait_in_all_isrs(client, topic, victim, timeout_s=60)
        consumed = await _read_all(client, tps)

    verdict = check_acknowledged(acked, consumed)
    assert verdict.ok, verdict.summary()
    assert verdict.acknowledged >= 3000
    events = [
        json.loads(line) for line in cluster.log_path(victim, "events").read_text().splitlines()
    ]
    names = {e["event"] for e in events}
    assert "registered" in names and "become_follower" in names
