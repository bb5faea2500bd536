"""offsets_for_times (KIP-79) from the three Kafka clients against real brokers: before the
time index, the broker refused any timestamp but -1/-2 with INVALID_REQUEST, so each of these
calls failed.

A controller and two brokers from `LocalCluster.up`; topic "times", 1 partition, r=2. Six
records with timestamps out of order (T+500, T+100, T+200, T+300, T+900, T+600), each sent
and flushed alone (its own batch), so the answer for T+501 is offset 4 (T+900), the first
record at or after it in offset order, not offset 5 (T+600), the closest in time.
"""

from __future__ import annotations

import asyncio

import pytest

from minikafka.testing.clusters import cluster_up

TOPIC = "times"
T = 1_700_000_000_000
STAMPS = [T + 500, T + 100, T + 200, T + 300, T + 900, T + 600]
# target -> (offset, timestamp) Kafka answers, None for "no such record"
EXPECTED = {T: (0, T + 500), T + 150: (0, T + 500), T + 501: (4, T + 900), T + 901: None}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(tmp_path_factory.mktemp("oft") / "c", brokers=2, seed=79) as lc:
        from kafka import KafkaProducer
        from kafka.admin import KafkaAdminClient, NewTopic

        servers = lc.kafka_bootstrap()
        admin = KafkaAdminClient(bootstrap_servers=servers)
        try:
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=2)])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=servers, acks="all")
        try:
            for i, ts in enumerate(STAMPS):
                meta = producer.send(TOPIC, b"r%d" % i, partition=0, timestamp_ms=ts).get(30)
                assert meta.offset == i
                producer.flush()
        finally:
            producer.close()
        yield servers


def test_kafka_python_offsets_for_times(bootstrap) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(TOPIC, 0)
        for target, want in EXPECTED.items():
            got = consumer.offsets_for_times({tp: target})[tp]
            assert (None if got is None else (got.offset, got.timestamp)) == want, target
    finally:
        consumer.close()


def test_confluent_kafka_offsets_for_times(bootstrap) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "oft-probe"})
    try:
        for target, want in EXPECTED.items():
            [got] = consumer.offsets_for_times([TopicPartition(TOPIC, 0, target)], timeout=30)
            assert got.error is None
            # librdkafka gives the offset only (OFFSET_END, -1, when there is none).
            assert got.offset == (-1 if want is None else want[0]), target
    finally:
        consumer.close()


def test_aiokafka_offsets_for_times(bootstrap) -> None:
    async def ask() -> dict:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.structs import TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            tp = TopicPartition(TOPIC, 0)
            out = {}
            for target in EXPECTED:
                got = (await consumer.offsets_for_times({tp: target}))[tp]
                out[target] = None if got is None else (got.offset, got.timestamp)
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(ask()) == EXPECTED


def test_confluent_kafka_admin_lists_the_max_timestamp_offset(bootstrap) -> None:
    """AdminClient.list_offsets with OffsetSpec.max_timestamp(): librdkafka asks with -3
    (KIP-734); the answer is the first record holding the largest timestamp, T+900 at offset 4.
    Earliest and latest through the same call, and a time."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(TOPIC, 0)
    specs = {
        "max": OffsetSpec.max_timestamp(),
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "T+501": OffsetSpec.for_timestamp(T + 501),
    }
    got = {}
    for name, spec in specs.items():
        result = admin.list_offsets({tp: spec}, request_timeout=30)[tp].result(30)
        got[name] = (result.offset, result.timestamp)
    assert got["max"] == (4, T + 900)
    assert got["earliest"][0] == 0 and got["latest"][0] == len(STAMPS)
    assert got["T+501"] == (4, T + 900)
