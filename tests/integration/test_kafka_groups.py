"""Real processes, real Kafka clients in one consumer group.

A controller and three brokers from `LocalCluster.up`; topic "kg", 6 partitions, r=2. 100,000
records come from each client: confluent-kafka (librdkafka, acks=all, idempotence on) and
kafka-python (acks=all, idempotence on). Then one group reads them with `subscribe()`: a
kafka-python consumer and a confluent-kafka consumer, each committing synchronously after every
batch it processed. Midway the confluent consumer closes (its partitions go to the other member)
and a new one takes its place, resuming from the committed offsets. In the end:
- every acknowledged record was read (nothing lost), with the value it was written with;
- no record was read twice unless the commit after the batch that first read it failed (the one
  case Kafka's at-least-once delivery repeats);
- the group's committed offsets are the partitions' end offsets, and the group is Empty.

Then the group coordinator dies: a kafka-python consumer of a second group reads half the
records and commits; the broker leading that group's `__consumer_offsets` partition is killed
(SIGKILL); a confluent-kafka consumer of the same group then resumes exactly at the committed
offsets, served by the partition's new leader, and reads the rest.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from minikafka.core.group.offsets_log import OFFSETS_TOPIC, partition_for
from minikafka.testing.clusters import QUICK_FENCING, cluster_up

TOPIC = "kg"
GROUP = "kg-readers"
PARTITIONS = 6
PER_CLIENT = 100_000
TOTAL = 2 * PER_CLIENT
LIMIT_S = 180  # every wait below is bounded by this


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(
        tmp_path_factory.mktemp("kg") / "c", brokers=3, seed=1515, node_configs=QUICK_FENCING
    ) as lc:
        yield lc


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 2)], operation_timeout=30)
    futures[TOPIC].result(timeout=60)


def _produce_confluent(bootstrap: str) -> dict[tuple[int, int], bytes]:
    from confluent_kafka import Producer

    delivered: dict[tuple[int, int], bytes] = {}
    failed: list[str] = []

    def report(err, msg) -> None:  # noqa: ANN001
        if err is not None:
            failed.append(str(err))
        else:
            delivered[(msg.partition(), msg.offset())] = msg.value()

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
         "message.timeout.ms": 60000}
    )  # fmt: skip
    for i in range(PER_CLIENT):
        while True:
            try:
                producer.produce(TOPIC, key=b"c%d" % (i % 997), value=b"c-%d" % i,
                                 on_delivery=report)  # fmt: skip
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0, "librdkafka still holds messages after 90 s"
    assert failed == []
    return delivered


def _produce_kafka_python(bootstrap: str) -> dict[tuple[int, int], bytes]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
        retries=10,
    )  # fmt: skip
    futures = [
        (producer.send(TOPIC, key=b"p%d" % (i % 997), value=b"p-%d" % i), b"p-%d" % i)
        for i in range(PER_CLIENT)
    ]
    producer.flush(timeout=90)
    delivered = {}
    for future, value in futures:
        meta = future.get(timeout=30)  # raises if the send failed
        delivered[(meta.partition, meta.offset)] = value
    producer.close()
    return delivered


@dataclass
class Reader:
    """One group member's reads, and the ones whose commit failed."""

    name: str
    stop: threading.Event = field(default_factory=threading.Event)
    reads: list[tuple[int, int, bytes]] = field(default_factory=list)
    uncommitted: set[tuple[int, int]] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self, target) -> None:  # noqa: ANN001
        self.thread = threading.Thread(target=target, args=(self,), name=self.name, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(60)
        assert not self.thread.is_alive(), f"{self.name} did not stop"


def _read_kafka_python(bootstrap: str):
    def run(r: Reader) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=GROUP, client_id=r.name,
            enable_auto_commit=False, auto_offset_reset="earliest",
        )  # fmt: skip
        consumer.subscribe([TOPIC])
        try:
            while not r.stop.is_set():
                polled = consumer.poll(timeout_ms=300, max_records=2000)
                batch = [(m.partition, m.offset, m.value) for ms in polled.values() for m in ms]
                if not batch:
                    continue
                r.reads.extend(batch)
                try:
                    consumer.commit()  # the positions after this batch, synchronously
                except Exception as exc:  # noqa: BLE001 - CommitFailedError in a rebalance
                    r.errors.append(repr(exc))
                    r.uncommitted.update((p, o) for p, o, _ in batch)
        finally:
            consumer.close(autocommit=False)

    return run


def _read_confluent(bootstrap: str, group: str = GROUP):
    def run(r: Reader) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "client.id": r.name,
             "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )  # fmt: skip
        consumer.subscribe([TOPIC])
        try:
            while not r.stop.is_set():
                msgs = consumer.consume(num_messages=2000, timeout=0.3)
                batch = [(m.partition(), m.offset(), m.value()) for m in msgs if not m.error()]
                if not batch:
                    continue
                r.reads.extend(batch)
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:
                    r.errors.append(repr(exc))
                    r.uncommitted.update((p, o) for p, o, _ in batch)
        finally:
            consumer.close()  # leaves the group

    return run


def _wait_for(what: str, condition) -> None:  # noqa: ANN001
    deadline = time.monotonic() + LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def produced(cluster) -> dict[tuple[int, int], bytes]:
    """Every acknowledged record, by (partition, offset): 100,000 from each client."""
    bootstrap = cluster.kafka_bootstrap()
    _create_topic(bootstrap)
    out = _produce_confluent(bootstrap)
    out.update(_produce_kafka_python(bootstrap))
    assert len(out) == TOTAL  # distinct (partition, offset) for every acknowledged record
    return out


def test_a_group_of_two_real_clients_reads_everything_once_across_a_restart(cluster, produced):
    bootstrap = cluster.kafka_bootstrap()

    a = Reader("kafka-python-a")
    b = Reader("confluent-b")
    a.start(_read_kafka_python(bootstrap))
    b.start(_read_confluent(bootstrap))
    _wait_for("both members to read", lambda: len(a.reads) > 5000 and len(b.reads) > 5000)
    b.finish()  # commits its last batch, then leaves: its partitions move to a
    mark = len(a.reads)
    _wait_for("a to read on alone", lambda: len(a.reads) > mark + 10_000)
    b2 = Reader("confluent-b2")
    b2.start(_read_confluent(bootstrap))
    readers = (a, b, b2)

    def distinct() -> int:
        return len({(p, o) for r in readers for p, o, _ in r.reads})

    _wait_for("every record to be read", lambda: distinct() >= TOTAL)
    b2.finish()
    a.finish()

    reads = [x for r in readers for x in r.reads]
    assert {(p, o): v for p, o, v in reads} == produced  # nothing lost, every value as written
    counts = Counter((p, o) for p, o, _ in reads)
    uncommitted = set().union(*(r.uncommitted for r in readers))
    twice = {po for po, n in counts.items() if n > 1}
    assert twice <= uncommitted, f"{len(twice - uncommitted)} records read twice after a commit"
    assert b2.reads, "the restarted member was given no partition"

    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        committed = admin.list_group_offsets(GROUP)[GROUP]
        ends = Counter(p for p, _ in produced)
        assert {tp.partition: om.offset for tp, om in committed.items()} == dict(ends)
        assert admin.describe_groups([GROUP])[GROUP]["group_state"] == "Empty"
    finally:
        admin.close()


def _coordinator_of(bootstrap: str, group: str) -> int:
    """The broker leading the group's __consumer_offsets partition (Kafka's partitionFor)."""
    from confluent_kafka.admin import AdminClient

    p = partition_for(group, 50)  # offsets.topic.num.partitions, Kafka's default
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(OFFSETS_TOPIC, timeout=30)
    return topics.topics[OFFSETS_TOPIC].partitions[p].leader


def test_committed_offsets_survive_the_coordinators_death(cluster, produced):
    from kafka import KafkaConsumer

    bootstrap = cluster.kafka_bootstrap()
    group = "kg-failover"
    first: list[tuple[int, int]] = []
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + LIMIT_S
    while len(first) < TOTAL // 2:
        assert time.monotonic() < deadline, "timed out reading the first half"
        polled = consumer.poll(timeout_ms=300, max_records=2000)
        first.extend((m.partition, m.offset) for ms in polled.values() for m in ms)
        consumer.commit()  # alone in its group: a failure here is a failure of the test
    committed = {tp.partition: consumer.committed(tp) for tp in consumer.assignment()}
    consumer.close(autocommit=False)

    victim = _coordinator_of(bootstrap, group)
    cluster.kill(victim)
    try:
        second = Reader("confluent-after-kill")
        second.start(_read_confluent(bootstrap, group))
        _wait_for("the rest to be read", lambda: len(second.reads) >= TOTAL - len(first))
        second.finish()
        assert second.errors == []
        resumed: dict[int, int] = {}
        for p, o, _ in second.reads:
            resumed[p] = min(o, resumed.get(p, o))
        # Each partition resumed at the offset committed before the coordinator died...
        assert {p: o for p, o in resumed.items() if o != committed.get(p, 0)} == {}
        # ...so nothing was read twice, and nothing was missed.
        again = [(p, o) for p, o, _ in second.reads]
        assert set(first).isdisjoint(again) and len(set(again)) == len(again)
        assert set(first) | set(again) == set(produced)
    finally:
        cluster.restart(victim)
