"""Real processes on 127.0.0.1 behind the fault proxy: a partitioned follower leaves the ISR and
rejoins it after the heal.

A controller and three brokers started with `fault_proxy=True`: every node-to-node connection
goes through one proxy process; clients talk to the brokers directly. A topic with replication
factor 3 gets acks=all writes (replication bytes show in the proxy's counters); then one
follower is partitioned from the other brokers (its controller link stays up) while acks=1
writes go on, so it falls behind and, after `replica.lag.time.max.ms` (2 s), out of the ISR;
after the heal its held fetch is delivered, it catches up and is back in the ISR.
Timeouts are generous and only there to fail instead of hanging.
"""

from __future__ import annotations

import time

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.client.producer import Producer, ProducerConfig
from minikafka.cluster import LocalCluster
from minikafka.common import TopicPartition
from minikafka.testing.clusters import QUICK_FENCING, cluster_up

FAST = {
    **QUICK_FENCING,
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
}
TOPIC = "faults"
TP = TopicPartition(TOPIC, 0)


@pytest.fixture
def cluster(tmp_path):
    with cluster_up(
        tmp_path / "c", brokers=3, seed=4321, node_configs=FAST, fault_proxy=True
    ) as lc:
        yield lc
    assert lc.last_proxy_stop == "stopped"


async def _isr(client: ClusterClient) -> list[int]:
    md = await client.refresh_metadata([TOPIC])
    return list(md.topics[0].partitions[0].isr)


async def _wait_isr(client: ClusterClient, want, timeout_s: float, what: str) -> list[int]:
    with trio.move_on_after(timeout_s):
        while True:
            isr = await _isr(client)
            if want(isr):
                return isr
            await trio.sleep(0.1)
    raise AssertionError(f"{what} within {timeout_s} s; ISR {await _isr(client)}")


async def _produce(producer: Producer, n: int, tag: str) -> None:
    now = int(time.time() * 1000)
    for i in range(n):
        await producer.send_records(TP, [(now, None, f"{tag}-{i}".encode() * 20)])


async def test_partitioned_follower_leaves_and_rejoins_the_isr(cluster: LocalCluster):
    proxy = cluster.fault_proxy()
    brokers = [node.node_id for node in cluster.spec.brokers]
    async with open_client(cluster.bootstrap(), client_id="it") as client:
        await Admin(client).create_topic(TOPIC, partitions=1, replication_factor=3)
        await _wait_isr(client, lambda isr: len(isr) == 3, 20, "a full ISR")
        await _produce(Producer(client, ProducerConfig(acks=-1, delivery_timeout_s=20)), 20, "a")
        leader = client.leader_of(TP)
        follower = next(b for b in brokers if b != leader)
        links = {(r["src"], r["dst"]): r for r in await proxy.show()}
        fetches = links[(follower, leader)]
        assert fetches["bytes_to_dst"] > 0 and fetches["bytes_to_src"] > 0  # replication
        assert links[(0, leader)]["bytes_to_dst"] > 0  # the controller's LeaderAndIsr

        others = [b for b in brokers if b != follower]
        blocked = await proxy.partition([[follower], others])
        assert sorted(blocked) == sorted(
            [(follower, b) for b in others] + [(b, follower) for b in others]
        )
        acks1 = Producer(client, ProducerConfig(acks=1, delivery_timeout_s=20))
        with trio.fail_after(20):
            while follower in await _isr(client):
                await _produce(acks1, 5, "b")  # the follower falls behind, then out
                await trio.sleep(0.1)
        held = {(r["src"], r["dst"]): r for r in await proxy.show()}[(follower, leader)]
        assert held["blocked"] and held["connections_open"] >= 1

        assert sorted(await proxy.heal()) == sorted(blocked)
        await _produce(acks1, 5, "c")
        await _wait_isr(client, lambda isr: follower in isr, 20, "the follower back in the ISR")
        after = {(r["src"], r["dst"]): r for r in await proxy.show()}[(follower, leader)]
        assert after["bytes_to_src"] > held["bytes_to_src"]  # it caught up through the proxy
