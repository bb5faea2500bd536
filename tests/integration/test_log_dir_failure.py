"""Real processes on 127.0.0.1: a broker whose LMDB map is full (a real MDB_MAP_FULL) takes the
replicas it cannot write offline, tells the controller, and leadership moves to the healthy
replica at once, while the broker itself stays registered (Kafka's log-dir
failure handling, server/offline_replicas.py).

Every node gets a 2 MiB map. A topic of one replica on broker X fills X's map; a second topic
of two replicas led by X then cannot be written on X: its produce fails once with
KAFKA_STORAGE_ERROR (a batch as large as the one that did not fit), and the retry lands on the other broker well before a session timeout.
"""

from __future__ import annotations

import json

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.producer import Producer, ProducerConfig
from minikafka.cluster import LocalCluster
from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.testing.clusters import cluster_up
from minikafka.wire.messages import ProducePartition, ProduceRequest, ProduceResponse

CONFIGS = {
    "lmdb.map.size.bytes": str(2 << 20),
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "30000",  # a fence would take 30 s: the move must not need one
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
}


@pytest.fixture
def cluster(tmp_path):
    with cluster_up(tmp_path / "c", brokers=2, seed=7, node_configs=CONFIGS) as lc:
        yield lc


def _events(cluster: LocalCluster, node_id: int) -> list[dict]:
    text = cluster.log_path(node_id, "events").read_text()
    return [json.loads(line) for line in text.splitlines()]


async def test_a_full_log_moves_leadership_and_the_broker_keeps_running(cluster: LocalCluster):
    blob = make_batch([(1000, None, bytes(100_000))])
    async with open_client(cluster.bootstrap(), client_id="it") as client:
        admin = Admin(client)
        await admin.create_topic("fill", partitions=1, replication_factor=1)
        await admin.create_topic("moved", partitions=2, replication_factor=2)
        await client.refresh_metadata(["fill", "moved"])
        victim = client.leader_of(TopicPartition("fill", 0))
        moved = next(tp for tp in client.partitions_of("moved") if client.leader_of(tp) == victim)
        conn = await client.node_connection(victim)
        codes = []
        with trio.fail_after(60):
            for _ in range(100):  # 2 MiB: full after ~20 batches of 100 kB
                resp = await conn.request(
                    ProduceRequest(
                        acks=1,
                        timeout_ms=5000,
                        partitions=[ProducePartition(topic="fill", partition=0, records=blob)],
                    )
                )
                assert isinstance(resp, ProduceResponse)
                code = resp.partitions[0].error_code
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not codes:
                    # Metadata can name the leader before its LeaderAndIsr has reached it;
                    # a Kafka producer retries this, and so does this loop.
                    await trio.sleep(0.1)
                    continue
                codes.append(code)
                if code != ErrorCode.NONE:
                    break
        assert codes[-1] == ErrorCode.KAFKA_STORAGE_ERROR, codes
        assert len(codes) > 3  # some were written before the map filled

        # The partition it leads with a healthy follower: one failed write, then a new leader.
        producer = Producer(client, ProducerConfig(acks=-1, delivery_timeout_s=20))
        with trio.fail_after(20):  # far below the 30 s session timeout
            [result] = await producer.send_batches([(moved, blob, 1)])
        await client.refresh_metadata(["moved"])
        new_leader = client.leader_of(moved)
        assert new_leader not in (-1, victim)
        assert result.retries >= 1  # the first attempt met the full map on the victim
        md = await client.refresh_metadata(["moved"])
        assert victim in {b.node_id for b in md.brokers}  # still live: not fenced
        [part] = [p for p in md.topics[0].partitions if p.partition == moved.partition]
        assert victim not in part.isr

    names = [e["event"] for e in _events(cluster, victim)]
    assert "replica_offline" in names
    assert "broker_fenced" not in {
        e["event"] for e in _events(cluster, cluster.spec.controller.node_id)
    }
    offline = [
        e
        for e in _events(cluster, cluster.spec.controller.node_id)
        if e["event"] == "replicas_offline"
    ]
    assert offline and any(f"moved-{moved.partition}" in e["partitions"] for e in offline)
