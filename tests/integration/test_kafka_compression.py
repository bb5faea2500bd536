"""Real processes, real Kafka clients, Kafka's four codecs (core/compression.py): librdkafka
(confluent-kafka) and kafka-python each produce with gzip, snappy, lz4 and zstd (acks=all),
and read everything back, along with minikafka's own consumer (which decompresses too).
One broker and a controller from `LocalCluster.up`; one topic per producer and codec."""

from __future__ import annotations

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.common import TopicPartition
from minikafka.testing.clusters import cluster_up
from minikafka.testing.load import read_to_end

CODECS = ["gzip", "snappy", "lz4", "zstd"]
N = 500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(tmp_path_factory.mktemp("kc") / "c", brokers=1, seed=25) as lc:
        trio.run(_create_topics, lc.bootstrap())
        yield lc


async def _create_topics(bootstrap: str) -> None:
    async with open_client(bootstrap) as client:
        for client_name in ("rdkafka", "kpython"):
            for codec in CODECS:
                await Admin(client).create_topic(f"{client_name}-{codec}", partitions=1,
                                                 replication_factor=1)  # fmt: skip


def _values(codec: str) -> list[bytes]:
    return [f"{codec} record {i} ".encode() * (1 + i % 7) for i in range(N)]


def _read_with_kafka_python(bootstrap: str, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=20000)  # fmt: skip
    try:
        tp = KafkaTP(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        seen: list[bytes] = []
        for _ in range(60):  # bounded: each poll waits at most 500 ms
            for msgs in consumer.poll(timeout_ms=500, max_records=5000).values():
                seen += [m.value for m in msgs]
            if len(seen) >= N:
                break
        return seen
    finally:
        consumer.close()


async def _read_natively(bootstrap: str, topic: str) -> list[bytes]:
    async with open_client(bootstrap) as client:
        records = await read_to_end(client, [TopicPartition(topic, 0)], timeout_s=30)
    return [value for _tp, _offset, value in records]


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_produces_each_codec_and_every_reader_reads_it(cluster, codec) -> None:
    from confluent_kafka import Producer as KafkaProducer

    topic, values = f"rdkafka-{codec}", _values(codec)
    failed: list[str] = []
    producer = KafkaProducer({"bootstrap.servers": cluster.kafka_bootstrap(), "acks": "all",
                              "compression.type": codec, "linger.ms": 20})  # fmt: skip
    for v in values:
        producer.produce(topic, value=v, on_delivery=lambda e, _m: e and failed.append(str(e)))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert failed == []
    assert _read_with_kafka_python(cluster.kafka_bootstrap(), topic) == values
    assert trio.run(_read_natively, cluster.bootstrap(), topic) == values


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produces_each_codec_and_every_reader_reads_it(cluster, codec) -> None:
    from confluent_kafka import Consumer
    from kafka import KafkaProducer

    topic, values = f"kpython-{codec}", _values(codec)
    producer = KafkaProducer(bootstrap_servers=cluster.kafka_bootstrap(), acks="all",
                             compression_type=codec, linger_ms=20)  # fmt: skip
    futures = [producer.send(topic, v) for v in values]
    producer.flush(30)
    assert [f.get(timeout=30).offset for f in futures] == list(range(N))
    producer.close()
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap(), "group.id": "g",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        from confluent_kafka import TopicPartition as KTP

        consumer.assign([KTP(topic, 0, 0)])
        seen: list[bytes] = []
        for _ in range(60):
            seen += [m.value() for m in consumer.consume(N, timeout=0.5) if not m.error()]
            if len(seen) >= N:
                break
    finally:
        consumer.close()
    assert seen == values
    assert trio.run(_read_natively, cluster.bootstrap(), topic) == values
