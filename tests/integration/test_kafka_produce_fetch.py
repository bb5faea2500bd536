"""Real processes, real Kafka clients producing and fetching: librdkafka
(confluent-kafka) writes with acks=all and idempotence on, kafka-python reads, and minikafka's
own clients read and write the same partitions.

A controller and three brokers from `LocalCluster.up`; topic "kc-data", 3 partitions, r=2.
minikafka's producer writes 300 records first (native batches), then confluent-kafka 6,000
keyed records. Every delivery report must be a success; minikafka's consumer must read every
value back at the offset the report gave; kafka-python (assign, no group) must read all 6,300
from the start, the native batches converted to RecordBatch v2 on the way out
(replication byte for byte is tested in process: tests/server/test_kafka_batches.py).
"""

from __future__ import annotations

from collections import Counter

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.producer import Producer
from minikafka.common import TopicPartition
from minikafka.testing.clusters import QUICK_FENCING, cluster_up
from minikafka.testing.load import read_to_end

TOPIC = "kc-data"
PARTITIONS = 3
NATIVE = 100  # records per partition from minikafka's producer
KAFKA = 6000  # records from confluent-kafka


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(
        tmp_path_factory.mktemp("kpf") / "c", brokers=3, seed=1414, node_configs=QUICK_FENCING
    ) as lc:
        trio.run(_create_and_fill_natively, lc.bootstrap())
        yield lc


async def _create_and_fill_natively(bootstrap: str) -> None:
    async with open_client(bootstrap) as client:
        await Admin(client).create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2)
        producer = Producer(client)
        for p in range(PARTITIONS):
            records = [(1000 + i, None, f"native-{p}-{i}".encode()) for i in range(NATIVE)]
            result = await producer.send_records(TopicPartition(TOPIC, p), records)
            assert result.base_offset == 0  # errors raise


def _produce_with_librdkafka(bootstrap: str) -> dict[tuple[int, int], bytes]:
    from confluent_kafka import Producer as KafkaProducer

    delivered: dict[tuple[int, int], bytes] = {}
    failed: list[str] = []

    def report(err, msg) -> None:  # noqa: ANN001
        if err is not None:
            failed.append(str(err))
        else:
            delivered[(msg.partition(), msg.offset())] = msg.value()

    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "linger.ms": 5, "message.timeout.ms": 60000}
    )  # fmt: skip
    for i in range(KAFKA):
        producer.produce(TOPIC, key=f"k{i % 97}".encode(), value=f"kafka-{i}".encode(),
                         on_delivery=report)  # fmt: skip
        producer.poll(0)
    assert producer.flush(60) == 0, "librdkafka still holds messages after 60 s"
    assert failed == []
    return delivered


def test_librdkafka_produces_and_every_reader_sees_the_same_log(cluster) -> None:
    kafka_bootstrap = cluster.kafka_bootstrap()
    delivered = _produce_with_librdkafka(kafka_bootstrap)
    assert len(delivered) == KAFKA
    assert sorted(delivered.values()) == sorted(f"kafka-{i}".encode() for i in range(KAFKA))
    assert all(offset >= NATIVE for _p, offset in delivered)  # after the native records

    # minikafka's consumer reads each delivered value at its reported offset
    async def read_natively() -> dict[tuple[int, int], bytes]:
        out: dict[tuple[int, int], bytes] = {}
        async with open_client(cluster.bootstrap()) as client:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            for tp, offset, value in await read_to_end(client, tps, timeout_s=30):
                out[(tp.partition, offset)] = value
        return out

    native_view = trio.run(read_natively)
    assert {k: native_view[k] for k in delivered} == delivered
    assert sum(1 for v in native_view.values() if v.startswith(b"native-")) == NATIVE * PARTITIONS

    # kafka-python reads everything from the start: native batches down-converted
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=20000)  # fmt: skip
    try:
        tps = [KafkaTP(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        seen: dict[tuple[int, int], bytes] = {}
        for _ in range(200):  # bounded: each poll waits at most 500 ms
            for _tp, msgs in consumer.poll(timeout_ms=500, max_records=5000).items():
                for m in msgs:
                    seen[(m.partition, m.offset)] = m.value
            if len(seen) >= KAFKA + NATIVE * PARTITIONS:
                break
    finally:
        consumer.close()
    assert seen == native_view
    assert Counter(k[0] for k in seen) == Counter(k[0] for k in native_view)
