"""Real processes, real Kafka admin clients: confluent-kafka (librdkafka) and kafka-python create
topics, alter and describe configs, and move a partition through the brokers' Kafka listeners
(minikafka/kafka/admin.py, server/kafka_apis.py), which forward to the controller.

What they do must be what minikafka's own clients see: the topic in the native metadata, the
configs through a native DescribeConfigs, the moved partition's replicas in the native metadata.
"""

from __future__ import annotations

import json
import time

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster
from minikafka.testing.clusters import cluster_up

pytestmark = [
    # kafka-python 3.0 loads its schemas with importlib.resources' legacy calls.
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
CF_TOPIC = "admin-confluent"
KP_TOPIC = "admin-kafka-python"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(tmp_path_factory.mktemp("ka") / "c", brokers=3, seed=44) as lc:
        yield lc


def kafka_address(lc: LocalCluster, broker: int) -> str:
    (address,) = [s.kafka_address for s in lc.status() if s.node_id == broker]
    assert address is not None
    return address


def native_partitions(lc: LocalCluster, topic: str) -> dict[int, list[int]]:
    """The topic's replicas by partition as a native client sees them; {} while the broker asked
    does not know the topic yet (a created topic reaches the brokers after the answer)."""

    async def go() -> dict[int, list[int]]:
        async with open_client(lc.bootstrap()) as client:
            meta = await client.refresh_metadata([topic])
            (t,) = meta.topics
            if t.error_code == 3:  # UNKNOWN_TOPIC_OR_PARTITION: not there yet
                return {}
            assert t.error_code == 0, t
            return {p.partition: list(p.replicas) for p in t.partitions}

    return trio.run(go)


def eventually(get, ok, timeout_s: float = 30.0):
    """get() until ok(its value), for at most timeout_s; the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = get()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def native_configs(lc: LocalCluster, entity_type: str, name: str) -> dict[str, str]:
    async def go() -> dict[str, str]:
        async with open_client(lc.bootstrap()) as client:
            (result,) = await Admin(client).describe_configs(entity_type, name)
            return {e.name: e.value for e in result.entries}

    return trio.run(go)


def test_confluent_kafka_creates_a_topic(cluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_address(cluster, 1)})
    futures = admin.create_topics([NewTopic(CF_TOPIC, num_partitions=4, replication_factor=2)])
    assert futures[CF_TOPIC].result(timeout=30) is None
    # CreateTopics answers once the controller committed the topic; brokers learn it from the
    # UpdateMetadata that follows (as in Kafka), so the native metadata may lag a moment.
    partitions = eventually(lambda: native_partitions(cluster, CF_TOPIC), lambda p: len(p) == 4)
    assert sorted(partitions) == [0, 1, 2, 3]
    assert all(len(set(r)) == 2 for r in partitions.values())
    # Again: the controller's TOPIC_ALREADY_EXISTS comes back as librdkafka's error.
    futures = admin.create_topics([NewTopic(CF_TOPIC, num_partitions=4, replication_factor=2)])
    with pytest.raises(Exception, match="already exists"):
        futures[CF_TOPIC].result(timeout=30)


def test_confluent_kafka_alters_and_describes_configs(cluster) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    def op(name: str, value: str):
        return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)

    admin = AdminClient({"bootstrap.servers": kafka_address(cluster, 2)})
    broker = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[op(LEADER_RATE, "10000000"), op(FOLLOWER_RATE, "20000000")],
    )
    topic = ConfigResource(
        ResourceType.TOPIC, CF_TOPIC, incremental_configs=[op(LEADER_REPLICAS, "*")]
    )
    for resource, future in admin.incremental_alter_configs([broker, topic]).items():
        assert future.result(timeout=30) is None, resource

    described = admin.describe_configs(
        [ConfigResource(ResourceType.BROKER, "1"), ConfigResource(ResourceType.TOPIC, CF_TOPIC)]
    )
    results = {r.name: f.result(timeout=30) for r, f in described.items()}
    got = {name: {k: e.value for k, e in entries.items()} for name, entries in results.items()}
    assert got["1"][LEADER_RATE] == "10000000"
    assert got["1"][FOLLOWER_RATE] == "20000000"
    assert got[CF_TOPIC][LEADER_REPLICAS] == "*"
    # As Kafka, the topic also lists what it does not set, with the broker's value.
    topic = results[CF_TOPIC]
    assert topic[LEADER_REPLICAS].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert (topic["min.insync.replicas"].value, topic["min.insync.replicas"].source) == (
        "1",
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert topic["min.insync.replicas"].is_default

    assert {LEADER_RATE: "10000000", FOLLOWER_RATE: "20000000"}.items() <= native_configs(
        cluster, "brokers", "1"
    ).items()
    assert native_configs(cluster, "topics", CF_TOPIC)[LEADER_REPLICAS] == "*"


def test_confluent_kafka_append_is_refused_per_resource(cluster) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": kafka_address(cluster, 3)})
    append = ConfigEntry(LEADER_REPLICAS, "0:1", incremental_operation=AlterConfigOpType.APPEND)
    resource = ConfigResource(ResourceType.TOPIC, CF_TOPIC, incremental_configs=[append])
    (future,) = admin.incremental_alter_configs([resource]).values()
    with pytest.raises(Exception, match="only SET"):
        future.result(timeout=30)
    assert native_configs(cluster, "topics", CF_TOPIC)[LEADER_REPLICAS] == "*"  # unchanged


def test_kafka_python_creates_describes_and_moves_a_partition(cluster) -> None:
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_address(cluster, 3), request_timeout_ms=30000)
    try:
        result = admin.create_topics(
            {KP_TOPIC: {"num_partitions": 2, "replication_factor": 2}}, timeout_ms=20000
        )
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [(KP_TOPIC, 0)]

        both = admin.create_topics(
            # kafka-python guesses Kafka 1.0 from our ApiVersions and so sends no -1 itself.
            {
                "admin-both": {
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "assignments": {0: [1], 1: [2]},
                }
            },
            raise_errors=False,
        )
        (refused,) = both["topics"]
        assert refused["error_code"] == 42  # INVALID_REQUEST, from the controller
        assert "was not set to -1" in refused["error_message"]

        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
        )
        assert described["broker"]["1"][LEADER_RATE]["value"] == "10000000"
        topic = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, KP_TOPIC)], config_filter="all"
        )
        (entries,) = topic.values()
        assert entries[KP_TOPIC]["max.message.bytes"]["value"] == "1048588"
        assert entries[KP_TOPIC]["unclean.leader.election.enable"]["value"] == "false"

        current = native_partitions(cluster, KP_TOPIC)[0]
        target = [b for b in (1, 2, 3) if b not in current] + [current[0]]
        errors = admin.alter_partition_reassignments({TopicPartition(KP_TOPIC, 0): target})
        assert errors == {TopicPartition(KP_TOPIC, 0): None}

        deadline = time.monotonic() + 30
        while True:
            ongoing = admin.list_partition_reassignments([TopicPartition(KP_TOPIC, 0)])
            replicas = native_partitions(cluster, KP_TOPIC)[0]
            if not ongoing and replicas == target:
                break
            assert time.monotonic() < deadline, (ongoing, replicas, target)
            time.sleep(0.5)
    finally:
        admin.close()


def test_both_clients_add_partitions_that_take_records(cluster) -> None:
    """CreatePartitions through each client's admin call: the topic grows in the native
    metadata, and a Kafka producer writes to a new partition."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaPythonNewPartitions

    topic = "admin-grow"
    cf = AdminClient({"bootstrap.servers": kafka_address(cluster, 2)})
    cf.create_topics([NewTopic(topic, num_partitions=2, replication_factor=2)])[topic].result(30)
    eventually(lambda: native_partitions(cluster, topic), lambda p: len(p) == 2)
    cf.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    grown = eventually(lambda: native_partitions(cluster, topic), lambda p: len(p) == 4)
    assert sorted(grown) == [0, 1, 2, 3] and all(len(set(r)) == 2 for r in grown.values())
    with pytest.raises(Exception, match="would not be an increase"):
        cf.create_partitions([NewPartitions(topic, 3)])[topic].result(30)

    kp = KafkaAdminClient(bootstrap_servers=kafka_address(cluster, 1), request_timeout_ms=30000)
    try:
        kp.create_partitions(
            {topic: KafkaPythonNewPartitions(total_count=5, new_assignments=[[3, 1]])}
        )
    finally:
        kp.close()
    grown = eventually(lambda: native_partitions(cluster, topic), lambda p: len(p) == 5)
    assert grown[4] == [3, 1]

    producer = Producer({"bootstrap.servers": kafka_address(cluster, 1), "acks": "all"})
    delivered: list = []
    producer.produce(topic, value=b"into the new one", partition=4,
                     on_delivery=lambda err, msg: delivered.append((err, msg.partition())))  # fmt: skip
    assert producer.flush(30) == 0
    assert delivered == [(None, 4)]


def _deleted_copies(lc: LocalCluster, topic: str) -> set[tuple[int, int]]:
    """(node, partition) of every replica a broker dropped with its log (stop_replica events)."""
    out = set()
    for node in (1, 2, 3):
        for line in lc.log_path(node, "events").read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "stop_replica" and event["topic"] == topic and event["delete"]:
                out.add((node, event["partition"]))
    return out


def test_both_clients_delete_topics_and_a_recreated_topic_starts_empty(cluster) -> None:
    """DeleteTopics through each client: the topic leaves the metadata, every replica drops its
    log, and a topic made again under the name holds only what is written after."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaTP
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient

    bootstrap = kafka_address(cluster, 1)
    cf = AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("doomed-cf", "doomed-kp"):
        cf.create_topics([NewTopic(topic, num_partitions=2, replication_factor=2)])[topic].result(
            30
        )
    replicas = eventually(lambda: native_partitions(cluster, "doomed-cf"), lambda p: len(p) == 2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("doomed-cf", value=b"old-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0

    cf.delete_topics(["doomed-cf"])["doomed-cf"].result(30)
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        cf.delete_topics(["doomed-cf"])["doomed-cf"].result(30)
    kp = KafkaAdminClient(bootstrap_servers=kafka_address(cluster, 2), request_timeout_ms=30000)
    try:
        kp.delete_topics(["doomed-kp"])
    finally:
        kp.close()
    for topic in ("doomed-cf", "doomed-kp"):
        eventually(lambda t=topic: topic_names(cluster), lambda names, t=topic: t not in names)
        assert topic not in topic_names(cluster)
    expected = {(b, p) for p, rs in replicas.items() for b in rs}
    assert eventually(lambda: _deleted_copies(cluster, "doomed-cf"), lambda d: d == expected) == (
        expected
    )

    cf.create_topics([NewTopic("doomed-cf", num_partitions=2, replication_factor=2)])[
        "doomed-cf"
    ].result(30)
    eventually(lambda: native_partitions(cluster, "doomed-cf"), lambda p: len(p) == 2)
    producer.produce("doomed-cf", value=b"new", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "doomed-reader"})
    try:
        consumer.assign([KafkaTP("doomed-cf", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = [m.value() for m in consumer.consume(10, timeout=1.0) if m.error() is None]
    finally:
        consumer.close()
    assert got == [b"new"]  # none of the deleted topic's records


def topic_names(lc: LocalCluster) -> set[str]:
    async def go() -> set[str]:
        async with open_client(lc.bootstrap()) as client:
            return {t.name for t in (await client.refresh_metadata(None)).topics}

    return trio.run(go)
