"""Consumers under a consumer_byte_rate keep consuming through KIP-219's empty answers (real
processes, both listeners; docs/throttling.md#client-quotas-kip-13-and-throttle-time-kip-219).

A fetch over its client's quota is answered with no partition and a throttle time, its bytes
un-recorded (Kafka's KafkaApis.handleFetchRequest); the consumer's position does not move and
the same offsets are fetched after the throttle. A fetch is capped to quota x (N - 1) x W
(KAFKA-9677): without that cap, a client asking for more than the window admits (librdkafka
asks for 50 MiB) would be answered empty forever.

One broker, quota windows 3 x 1 s, 100 kB/s for the two quota'd client ids: a fetch carries at
most 200 kB. The topic holds 60 records of 10 kB in batches of 10 (600 kB): at the quota that
is about 4 s after the first 200 kB. (Measured: minikafka's consumer 7.03 s, 6,980 ms of
throttles reported in all; librdkafka 7.51 s, throttles up to 999 ms. Without the cap the
minikafka consumer got nothing in 30 s.)
"""

from __future__ import annotations

import json
import time

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.common import TopicPartition

TOPIC = "fq"
QUOTA = 100_000  # B/s
RECORDS, PER_BATCH, VALUE = 60, 10, 10_000
TP = TopicPartition(TOPIC, 0)


def value(i: int) -> bytes:
    return f"{i:06d}".encode() * (VALUE // 6) + b"...."


async def _setup(bootstrap: str) -> None:
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        await admin.create_topic(TOPIC, partitions=1, replication_factor=1)
        producer = Producer(client)
        for start in range(0, RECORDS, PER_BATCH):
            records = [(1000 + i, None, value(i)) for i in range(start, start + PER_BATCH)]
            await producer.send_records(TP, records)
        for client_id in ("slow-native", "slow-rdkafka"):
            await admin.alter_configs(
                "clients", client_id, set_configs={"consumer_byte_rate": str(QUOTA)}
            )


async def _consume_natively(bootstrap: str) -> tuple[list[bytes], int, float]:
    """-> (values in order, throttle time reported in all, seconds taken)."""
    async with open_client(bootstrap, client_id="slow-native") as client:
        consumer = Consumer(client, max_wait_ms=100)
        position, seen = 0, []
        started = trio.current_time()
        with trio.fail_after(30):
            while position < RECORDS:
                records = (await consumer.fetch_once({TP: position}))[TP]
                seen += [r.value for r in records]
                if records:
                    position = records[-1].offset + 1
        return seen, consumer.throttle_time_ms_total, trio.current_time() - started


def _consume_with_librdkafka(bootstrap: str) -> tuple[list[bytes], int, float]:
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import TopicPartition as KTP

    throttles: list[int] = []

    def stats(raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(broker.get("throttle", {}).get("max", 0)))

    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "fq", "client.id": "slow-rdkafka",
         "enable.auto.commit": False, "statistics.interval.ms": 500, "stats_cb": stats}
    )  # fmt: skip
    seen: list[bytes] = []
    started = time.monotonic()
    try:
        consumer.assign([KTP(TOPIC, 0, 0)])
        while len(seen) < RECORDS and time.monotonic() - started < 30:
            seen += [m.value() for m in consumer.consume(RECORDS, timeout=0.5) if not m.error()]
        elapsed = time.monotonic() - started
        consumer.consume(1, timeout=1.0)  # one more statistics interval
    finally:
        consumer.close()
    return seen, max(throttles, default=0), elapsed


def test_consumers_under_a_quota_get_every_record_once_after_their_throttles(tmp_path) -> None:
    spec = plan_cluster(
        base_dir=tmp_path / "c",
        brokers=1,
        seed=2190,
        node_configs={"quota.window.num": "3", "quota.window.size.seconds": "1"},
    )
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        trio.run(_setup, lc.bootstrap())
        native = trio.run(_consume_natively, lc.bootstrap())
        rdkafka = _consume_with_librdkafka(lc.kafka_bootstrap())
    expected = [value(i) for i in range(RECORDS)]
    for seen, throttle, elapsed in (native, rdkafka):
        assert seen == expected  # in order, none skipped, none twice
        assert throttle > 0  # the broker throttled it, and it came back for the data
        assert elapsed > 2.5, elapsed  # 400 kB past the first 200 kB, at 100 kB/s
