"""A KIP-13 client quota bites a real Kafka client through the Kafka listener (KIP-219): the
broker answers with `throttle_time_ms` and mutes the connection, librdkafka backs off, and the
client's acknowledged rate settles at its `producer_byte_rate` while an unquota'd client id on
the same cluster is not held back.

One broker (the quota is per broker, as Kafka's), topic "kq" with one partition. The quota'd
producer (client.id "slow", 500 kB/s) sends 100 kB values as fast as librdkafka lets it for 8 s
(measured: 0.67 MB/s acknowledged, throttles up to 2.8 s); librdkafka's statistics report the
broker's throttle times it honoured. The free one stops after 20 MB.
"""

from __future__ import annotations

import json
import os
import time

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster, plan_cluster

TOPIC = "kq"
QUOTA = 500_000  # B/s
VALUE = 100_000
RUN_S = 8.0
BATCH_SIZE = 1_000_000  # librdkafka's batch.size default: the most one produce request carries


async def _setup(bootstrap: str) -> None:
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        await admin.create_topic(TOPIC, partitions=1, replication_factor=1)
        await admin.alter_configs("clients", "slow", set_configs={"producer_byte_rate": str(QUOTA)})


def _produce_for(bootstrap: str, client_id: str, max_bytes: int) -> tuple[float, int]:
    """Send for RUN_S or until `max_bytes` are acknowledged; -> (acknowledged bytes per second,
    the largest throttle time librdkafka saw)."""
    from confluent_kafka import Producer

    throttles: list[int] = []

    def stats(raw: str) -> None:
        for broker in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(broker.get("throttle", {}).get("max", 0)))

    acked = 0

    def report(err, msg) -> None:  # noqa: ANN001
        nonlocal acked
        if err is None:
            acked += len(msg.value())

    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "all",
         "statistics.interval.ms": 500, "stats_cb": stats, "linger.ms": 5}
    )  # fmt: skip
    value = os.urandom(VALUE)
    started = time.monotonic()
    while time.monotonic() - started < RUN_S and acked < max_bytes:
        try:
            producer.produce(TOPIC, value=value, on_delivery=report)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
        if len(producer) > 200:  # keep the backlog bounded: what is queued is not yet sent
            producer.poll(0.01)
    elapsed = time.monotonic() - started
    rate = acked / elapsed  # acknowledged within the run; the backlog is not counted
    producer.purge()
    producer.flush(10)
    return rate, max(throttles, default=0)


def test_a_quota_throttles_a_kafka_client_and_it_backs_off(tmp_path) -> None:
    # Kafka's quota window is 11 x 1 s, and a fresh sensor's rate divides by at least 10 s
    # (Rate.windowSize), so the first 10 s x the bound go through unthrottled; 3 x 1 s keeps
    # that first allowance to 2 s of the bound, which an 8 s run can see past.
    spec = plan_cluster(
        base_dir=tmp_path / "c",
        brokers=1,
        seed=1717,
        node_configs={"quota.window.num": "3", "quota.window.size.seconds": "1"},
    )
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        trio.run(_setup, lc.bootstrap())
        slow_rate, slow_throttle = _produce_for(lc.kafka_bootstrap(), "slow", 100 * QUOTA)
        free_rate, free_throttle = _produce_for(lc.kafka_bootstrap(), "free", 40 * QUOTA)
    # At most the bound over 8 s + the 2 s first allowance, plus what after-the-fact throttling
    # lets through: the request that crosses the bound and the one in flight behind it, each
    # up to librdkafka's batch.size (1 MB): (0.5 MB/s x 10 s + 2 MB) / 8 s = 1.75 x. Typically
    # 1.35 x; 1.57 x on a loaded machine, where one more batch's ack landed inside the 8 s.
    assert slow_rate < (QUOTA * (RUN_S + 2) + 2 * BATCH_SIZE) / RUN_S, slow_rate
    assert slow_rate > 0.5 * QUOTA, slow_rate
    assert slow_throttle > 0  # librdkafka saw the broker's throttle_time_ms
    assert free_throttle == 0 and free_rate > 4 * QUOTA, free_rate
