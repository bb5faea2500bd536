"""Real processes, real Kafka clients: librdkafka (confluent-kafka) and kafka-python against the
brokers' Kafka-protocol listeners (server/kafka_apis.py).

A controller and three brokers from `LocalCluster.up` (every broker gets `kafka.listen` on a free
port); a topic of 6 partitions, r=2, made with minikafka's own admin client. Each client then
bootstraps from ONE broker's Kafka address and must learn, through ApiVersions and Metadata as
it negotiates them: every broker at its Kafka address (not its native one), the topic with its
partitions, leaders and replicas as minikafka's own metadata has them, and a controller it can
reach. A request the listener does not serve closes that connection only: the broker goes on
answering the next client.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster
from minikafka.testing.clusters import cluster_up

TOPIC = "kafka-clients"
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(tmp_path_factory.mktemp("kc") / "c", brokers=3, seed=14) as lc:

        async def create() -> dict:
            async with open_client(lc.bootstrap()) as client:
                await Admin(client).create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2)
                meta = await client.refresh_metadata([TOPIC])
                return {
                    p.partition: (p.leader, sorted(p.replicas)) for p in meta.topics[0].partitions
                }

        lc.native_partitions = trio.run(create)  # type: ignore[attr-defined]
        yield lc


def kafka_addresses(lc: LocalCluster) -> dict[int, str]:
    return {s.node_id: s.kafka_address for s in lc.status() if s.kafka_address is not None}


def test_every_broker_has_a_kafka_listener_and_the_controller_none(cluster) -> None:
    addresses = kafka_addresses(cluster)
    assert sorted(addresses) == [1, 2, 3]
    native = {s.node_id: s.address for s in cluster.status()}
    assert all(addresses[b] != native[b] for b in addresses)
    assert cluster.kafka_bootstrap().count(",") == 2


def test_confluent_kafka_sees_the_cluster_through_one_broker(cluster) -> None:
    from confluent_kafka.admin import AdminClient

    first = kafka_addresses(cluster)[1]
    admin = AdminClient({"bootstrap.servers": first, "socket.timeout.ms": 10000})
    meta = admin.list_topics(timeout=15)
    assert {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()} == kafka_addresses(cluster)
    assert meta.controller_id in kafka_addresses(cluster)
    topic = meta.topics[TOPIC]
    assert topic.error is None
    got = {p.id: (p.leader, sorted(p.replicas)) for p in topic.partitions.values()}
    assert got == cluster.native_partitions


def test_kafka_python_sees_the_cluster_through_one_broker(cluster) -> None:
    from kafka import KafkaConsumer

    first = kafka_addresses(cluster)[2]
    consumer = KafkaConsumer(bootstrap_servers=first, request_timeout_ms=10000)
    try:
        assert TOPIC in consumer.topics()
        assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
        brokers = consumer._client.cluster.brokers()
        assert {b.node_id: f"{b.host}:{b.port}" for b in brokers} == kafka_addresses(cluster)
    finally:
        consumer.close()


def test_an_unserved_request_closes_only_its_connection(cluster) -> None:
    host, port = kafka_addresses(cluster)[3].rsplit(":", 1)
    # SaslHandshake v1 (api key 17), not served (no SASL): Kafka closes a connection whose
    # request it cannot parse.
    body = struct.pack(">hhih", 17, 1, 77, -1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert s.recv(4) == b""  # closed, nothing answered
    # The broker goes on: a confluent-kafka client still gets the metadata from it.
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"{host}:{port}"})
    assert TOPIC in admin.list_topics(timeout=15).topics


def test_cluster_status_prints_the_kafka_bootstrap(cluster, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "minikafka", "cluster", "status", "--dir", str(cluster.base_dir),
         "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert doc["kafka_bootstrap"] == cluster.kafka_bootstrap()
    assert [n["kafka"] for n in doc["nodes"] if n["role"] == "broker"] == list(
        kafka_addresses(cluster).values()
    )


def test_a_restarted_broker_keeps_its_kafka_address(cluster) -> None:
    """Last in this module: it restarts broker 3. Kafka clients bootstrap from fixed addresses,
    so the restarted broker must come back on the same one."""
    from confluent_kafka.admin import AdminClient

    before = kafka_addresses(cluster)[3]
    cluster.restart(3, ready_timeout_s=30)
    assert kafka_addresses(cluster)[3] == before
    admin = AdminClient({"bootstrap.servers": before})
    assert TOPIC in admin.list_topics(timeout=15).topics
