"""Real processes, real Kafka clients: a consumer whose position a log truncation (an unclean
leader election) left past the new leader's log end notices it (KIP-320) instead of silently
reading on from its old offset. Both librdkafka (confluent-kafka) and kafka-python.

Three brokers and a controller, unclean.leader.election.enable on, a topic of one partition at
r=2 (the third broker stays up throughout, so the clients always have a broker to ask for
metadata: kafka-python asks only the brokers its last metadata listed). Five records reach both
replicas; the follower stops, the controller fences it out of the ISR, and five more records
reach the leader alone (offsets 5-9). A consumer reads all ten: its position is offset 10 in
the leader's epoch E. The leader is killed and the stopped follower starts again: no in-sync
replica is alive, so the controller elects it uncleanly, in an epoch above E, with its log
ending at 5. Ten new records land there (offsets 5-14).

The consumer learns the new epoch from Metadata (v9: clients ignore the epoch in older versions,
KAFKA-9212) and asks the new leader with OffsetForLeaderEpoch where epoch E ends: at 5, below its
position, so it goes back to 5 and reads every new record, offsets 5-14. With the listener's
old -1 epochs (or Metadata v8) both clients skipped validation and read on from offset 10: the
new records 5-9 never reached them.

Then DeleteRecords (KIP-107) through kafka-python's KafkaAdminClient on the same cluster: the
log start moves, and a consumer from the beginning starts there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.testing.clusters import QUICK_FENCING

CONFIGS = {**QUICK_FENCING, "unclean.leader.election.enable": "true"}


async def _partition(
    lc: LocalCluster, topic: str, *, create: bool = False
) -> tuple[int, int, list[int]]:
    """(leader, leader epoch, isr) of partition 0 as minikafka's own metadata has it."""
    async with open_client(lc.bootstrap()) as client:
        if create:
            await Admin(client).create_topic(topic, partitions=1, replication_factor=2)
        meta = await client.refresh_metadata([topic])
        for p in meta.topics[0].partitions:
            return p.leader, p.leader_epoch, sorted(p.isr)
        return -1, -1, []  # not in this broker's metadata yet


def _wait(lc: LocalCluster, topic: str, ok: Callable[[tuple[int, int, list[int]]], bool],
          what: str) -> tuple[int, int, list[int]]:  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        got = trio.run(_partition, lc, topic)
        if ok(got):
            return got
        assert time.monotonic() < deadline, f"{what}: partition still {got}"
        time.sleep(0.2)


def _kafka_address(lc: LocalCluster, node_id: int) -> str:
    [address] = [s.kafka_address for s in lc.status() if s.node_id == node_id]
    assert address is not None
    return address


def _produce(address: str, topic: str, values: list[bytes], acks: int | str) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=address, acks=acks, request_timeout_ms=10000)
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in values]
        producer.flush(30)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(5)


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.tp = TopicPartition(topic, 0)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
            request_timeout_ms=10000, metadata_max_age_ms=1000, retry_backoff_ms=100,
            reconnect_backoff_max_ms=1000,
        )  # fmt: skip
        self.consumer.assign([self.tp])
        self.consumer.seek_to_beginning(self.tp)

    def poll(self) -> list[tuple[int, bytes]]:
        batches = self.consumer.poll(timeout_ms=500).values()
        return [(r.offset, r.value) for records in batches for r in records]

    def close(self) -> None:
        self.consumer.close()


class LibrdkafkaConsumer:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
             "enable.auto.commit": False, "auto.offset.reset": "earliest",
             "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000}
        )  # fmt: skip
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def poll(self) -> list[tuple[int, bytes]]:
        msg = self.consumer.poll(0.5)
        if msg is None or msg.error() is not None:  # e.g. the killed broker's connection
            return []
        return [(msg.offset(), msg.value())]

    def close(self) -> None:
        self.consumer.close()


def _poll_until(consumer: KafkaPythonConsumer | LibrdkafkaConsumer, want: int,
                timeout_s: float = 60) -> list[tuple[int, bytes]]:  # fmt: skip
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.poll())
    return got


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    spec = plan_cluster(
        base_dir=tmp_path_factory.mktemp("trunc") / "c", brokers=3, seed=320, node_configs=CONFIGS
    )
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        yield lc


@pytest.mark.parametrize("client", [KafkaPythonConsumer, LibrdkafkaConsumer])
def test_a_consumer_detects_a_truncation_after_an_unclean_election(cluster, client) -> None:
    lc, topic = cluster, f"truncated-{client.__name__}"
    trio.run(partial(_partition, lc, topic, create=True))
    leader, epoch, isr = _wait(lc, topic, lambda p: p[0] > 0 and len(p[2]) == 2, "both in sync")
    follower = next(r for r in isr if r != leader)
    bootstrap = ",".join(_kafka_address(lc, n) for n in (1, 2, 3))

    old = [f"old-{i}".encode() for i in range(10)]
    assert _produce(bootstrap, topic, old[:5], "all") == list(range(5))
    lc.stop(follower)
    _wait(lc, topic, lambda p: p[2] == [leader], "follower out of the ISR")
    assert _produce(bootstrap, topic, old[5:], 1) == list(range(5, 10))

    consumer = client(bootstrap, topic)
    try:
        assert _poll_until(consumer, 10) == list(enumerate(old))
        lc.kill(leader)
        lc.start(follower)
        _l, new_epoch, _isr = _wait(
            lc, topic, lambda p: p[0] == follower, "the follower elected uncleanly"
        )
        assert new_epoch > epoch
        new = [f"new-{i}".encode() for i in range(10)]
        # The new leader's log ended at 5: the old records 5-9 are gone.
        assert _produce(_kafka_address(lc, follower), topic, new, 1) == list(range(5, 15))

        read = _poll_until(consumer, 10)
        assert read == [(5 + i, v) for i, v in enumerate(new)], (
            "the consumer did not move back to the truncation point (KIP-320): "
            f"it read offsets {[o for o, _v in read]}"
        )
    finally:
        consumer.close()
        lc.start(leader)  # three brokers again for the next case


def test_kafka_python_deletes_records_and_consumers_start_at_the_new_log_start(cluster) -> None:
    """DeleteRecords (KIP-107) from kafka-python's KafkaAdminClient, each partition sent to its
    leader: the answer is the low watermark; an offset past the high watermark is refused; the
    earliest offset (ListOffsets) and a consumer from the beginning start at the new log start."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    lc, topic = cluster, "deleted"
    bootstrap = lc.kafka_bootstrap()

    async def create() -> None:
        async with open_client(lc.bootstrap()) as client:
            await Admin(client).create_topic(topic, partitions=2, replication_factor=2)

    trio.run(create)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10000)
    for i in range(10):
        producer.send(topic, value=f"a-{i}".encode(), partition=0)
    for i in range(4):
        producer.send(topic, value=f"b-{i}".encode(), partition=1)
    producer.flush(30)
    producer.close(5)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        result = admin.delete_records({tp0: 6, tp1: -1}, timeout_ms=15000)  # -1: the HW
        assert {tp: r["low_watermark"] for tp, r in result.items()} == {tp0: 6, tp1: 4}
        assert {r["error_code"] for r in result.values()} == {0}
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp0: 11}, timeout_ms=15000)
    finally:
        admin.close()

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
        request_timeout_ms=10000,
    )  # fmt: skip
    try:
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 6, tp1: 4}
        consumer.assign([tp0])
        consumer.seek_to_beginning(tp0)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in records)
        assert got == [(i, f"a-{i}".encode()) for i in range(6, 10)]
    finally:
        consumer.close()
