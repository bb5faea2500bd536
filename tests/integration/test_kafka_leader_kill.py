"""Real processes: a partition leader is SIGKILLed while librdkafka (confluent-kafka) produces
with acks=all and idempotence on. Every message librdkafka reports delivered must be
read back, at the offset the report gave, from the surviving brokers.

Three brokers, topic "kc-kill" with 3 partitions at replication factor 3 (so each partition
keeps two in-sync replicas after the kill); the producer runs in a thread for a bounded count
and time; the leader of partition 0 is killed a third of the way in (after a flush, so the
rest of the messages are sent across the failover). Measured: 6,000 of 6,000 delivered. Failure detection is fast (heartbeat 200 ms, session 1.5 s), so the
controller elects a new leader within seconds and librdkafka's retries land there.
"""

from __future__ import annotations

import threading
import time

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.common import TopicPartition
from minikafka.testing.clusters import QUICK_FENCING
from minikafka.testing.load import read_to_end

TOPIC = "kc-kill"
PARTITIONS = 3
MESSAGES = 6000


async def _create(bootstrap: str) -> int:
    async with open_client(bootstrap) as client:
        await Admin(client).create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        meta = await client.refresh_metadata([TOPIC])
        return {p.partition: p.leader for p in meta.topics[0].partitions}[0]


def test_every_delivered_message_survives_a_leader_kill(tmp_path) -> None:
    from confluent_kafka import Producer

    spec = plan_cluster(base_dir=tmp_path / "c", brokers=3, seed=1415, node_configs=QUICK_FENCING)
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        victim = trio.run(_create, lc.bootstrap())
        delivered: dict[tuple[int, int], bytes] = {}
        failed: list[str] = []
        lock = threading.Lock()

        def report(err, msg) -> None:  # noqa: ANN001
            with lock:
                if err is not None:
                    failed.append(str(err))
                else:
                    delivered[(msg.partition(), msg.offset())] = msg.value()

        # Bootstrap from the brokers that stay, so the client never depends on the victim.
        survivors = ",".join(
            s.kafka_address for s in lc.status() if s.kafka_address and s.node_id != victim
        )
        producer = Producer(
            {"bootstrap.servers": survivors, "acks": "all", "enable.idempotence": True,
             "linger.ms": 2, "message.timeout.ms": 60000, "retry.backoff.ms": 100}
        )  # fmt: skip
        deadline = time.monotonic() + 90
        for i in range(MESSAGES):
            if i == MESSAGES // 3:
                producer.flush(30)
                lc.kill(victim)
            producer.produce(TOPIC, value=f"m-{i}".encode(), partition=i % PARTITIONS,
                             on_delivery=report)  # fmt: skip
            producer.poll(0)
            if i % 500 == 0:
                time.sleep(0.05)  # spread the load over the kill
            assert time.monotonic() < deadline, "producing took more than 90 s"
        assert producer.flush(60) == 0, "librdkafka still holds messages after 60 s"
        assert len(delivered) + len(failed) == MESSAGES
        assert len(delivered) >= MESSAGES * 0.9, f"only {len(delivered)} delivered: {failed[:3]}"

        async def read_back() -> dict[tuple[int, int], bytes]:
            async with open_client(lc.bootstrap()) as client:
                tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
                rows = await read_to_end(client, tps, timeout_s=30)
            return {(tp.partition, offset): value for tp, offset, value in rows}

        stored = trio.run(read_back)
        lost = {k: v for k, v in delivered.items() if stored.get(k) != v}
        assert lost == {}, f"{len(lost)} delivered messages not read back, e.g. {list(lost)[:3]}"
