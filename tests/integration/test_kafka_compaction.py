"""A compacted topic (cleanup.policy=compact) read by real Kafka clients: librdkafka
(confluent-kafka), kafka-python and, where it is installed, kcat (librdkafka's command line).

A controller and two brokers, each cleaning every 200 ms (log.cleaner.backoff.ms). Topic
"compacted", one partition at r=2, segment.ms 100 (segments roll by record time, so each round
of writes lands in its own segment and the earlier ones become cleanable) and a dirty ratio of
0.01. Five rounds write keys k0..k4 once each (round r writes value `k<i>=r<r>`), then a
tombstone for k4 with a last k0, then one record for k9 whose segment stays active (the active
segment is never cleaned). The clients read the topic from the beginning and see, below it, one
record per key, the last written; k4's tombstone is kept (delete.retention.ms is a day). They
read each record at the offset it was written at, past the gaps the cleaner left. The two
replicas hold the same bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from minikafka.common import TopicPartition
from minikafka.storage import LogStore, ReadSpec, StoreConfig
from minikafka.testing.clusters import QUICK_FENCING, cluster_up

TOPIC = "compacted"
CLEANER = {**QUICK_FENCING, "log.cleaner.backoff.ms": "200"}
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
}
KEYS = [f"k{i}" for i in range(5)]


def _rounds() -> list[list[tuple[str, str | None]]]:
    """The writes, a segment each: five rounds of every key, a tombstone for k4 and a last k0,
    then one record whose segment stays active (it is never cleaned, as in Kafka)."""
    rounds = [[(k, f"{k}=r{r}") for k in KEYS] for r in range(5)]
    return [*rounds, [("k4", None), ("k0", "k0=last")], [("k9", "end")]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with cluster_up(
        tmp_path_factory.mktemp("compaction") / "c", brokers=2, seed=534, node_configs=CLEANER
    ) as lc:
        from kafka import KafkaProducer
        from kafka.admin import KafkaAdminClient, NewTopic

        servers = lc.kafka_bootstrap()
        admin = KafkaAdminClient(bootstrap_servers=servers)
        try:
            admin.create_topics(
                [
                    NewTopic(
                        TOPIC, num_partitions=1, replication_factor=2, topic_configs=TOPIC_CONFIGS
                    )
                ]
            )
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=servers, acks="all")
        written: list[tuple[int, str, str | None]] = []
        try:
            for writes in _rounds():
                for key, value in writes:
                    sent = producer.send(
                        TOPIC,
                        key=key.encode(),
                        value=None if value is None else value.encode(),
                        partition=0,
                    )
                    written.append((sent.get(30).offset, key, value))
                time.sleep(0.15)  # past segment.ms: the next write rolls a segment
        finally:
            producer.close()
        _wait_cleaned(lc, written[-1][0])
        yield lc, written


def _brokers(lc) -> list[int]:
    return [s.node_id for s in lc.status() if "broker" in s.roles]


def _wait_cleaned(lc, offset: int) -> None:
    """Until both brokers' logs have been cleaned up to `offset` (their `log_cleaned` events)."""
    deadline = time.monotonic() + 30
    while True:
        ends = {}
        for node in _brokers(lc):
            for line in lc.log_path(node, "events").read_text().splitlines():
                doc = json.loads(line)
                if doc.get("event") == "log_cleaned" and doc.get("topic") == TOPIC:
                    ends[node] = max(ends.get(node, 0), doc["first_dirty_offset"])
        if len(ends) == 2 and min(ends.values()) >= offset:
            return
        assert time.monotonic() < deadline, f"not cleaned to {offset}: {ends}"
        time.sleep(0.2)


def _expected(written: list[tuple[int, str, str | None]]) -> list[tuple[int, str, str | None]]:
    """Below the active segment (the last record's), each key's last record; then that one."""
    *cleaned, active = written
    last = {key: (offset, key, value) for offset, key, value in cleaned}
    return [*sorted(last.values()), active]


def test_kafka_python_reads_the_last_value_of_each_key(cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition

    lc, written = cluster
    consumer = KafkaConsumer(
        bootstrap_servers=lc.kafka_bootstrap(), enable_auto_commit=False, consumer_timeout_ms=5000
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = [
            (m.offset, m.key.decode(), None if m.value is None else m.value.decode())
            for m in consumer
        ]
    finally:
        consumer.close()
    assert got == _expected(written)


def test_librdkafka_reads_the_last_value_of_each_key(cluster) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    lc, written = cluster
    consumer = Consumer(
        {"bootstrap.servers": lc.kafka_bootstrap(), "group.id": "c1", "enable.auto.commit": False}
    )
    got = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while len(got) < len(_expected(written)) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            value = m.value()
            got.append((m.offset(), m.key().decode(), None if value is None else value.decode()))
    finally:
        consumer.close()
    assert got == _expected(written)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_reads_the_last_value_of_each_key(cluster) -> None:
    lc, written = cluster
    out = subprocess.run(
        ["kcat", "-b", lc.kafka_bootstrap(), "-C", "-t", TOPIC, "-p", "0", "-o", "beginning",
         "-e", "-q", "-Z", "-f", "%o %k %s\n"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    got = [line.split(" ") for line in out.stdout.splitlines()]
    want = [[str(o), k, "NULL" if v is None else v] for o, k, v in _expected(written)]
    assert got == want


def test_both_replicas_hold_the_same_bytes(cluster) -> None:
    """Last in the module: it stops the brokers to open their stores."""
    lc, _offsets = cluster
    logs = []
    for node in _brokers(lc):
        lc.stop(node)
        [data_dir] = [s.data_dir for s in lc.status() if s.node_id == node]
        with LogStore(data_dir / "lmdb", StoreConfig(sync=False)) as store:
            tp = TopicPartition(TOPIC, 0)
            start = store.load_partition(tp).log_start_offset
            spec = ReadSpec(
                tp=tp, fetch_offset=start, max_offset=1 << 62, partition_max_bytes=1 << 24
            )
            logs.append(store.read([spec], 1 << 24)[0])
    assert len(logs) == 2 and logs[0] == logs[1] and logs[0]
