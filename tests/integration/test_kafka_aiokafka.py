"""aiokafka, a third Kafka client (after librdkafka and kafka-python), against the Kafka listener:
it negotiates its versions through ApiVersions, creates a topic with its admin client, produces with
acks=all and idempotence on, and reads everything back in a group of two consumers that commit after
each batch (a record is read twice only where a rebalance beat its commit); the committed offsets
are the end offsets.

A controller and three brokers from `LocalCluster.up`; topic "aio", 3 partitions, r=2.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from minikafka.cluster import LocalCluster, plan_cluster

TOPIC = "aio"
GROUP = "aio-readers"
RECORDS = 3000
LIMIT_S = 60.0


async def _produce(bootstrap: str) -> dict[tuple[int, int], bytes]:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, 3, 2)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        # A topic's leaders reach every broker's metadata a moment after CreateTopics answers
        # (in Kafka too); aiokafka's partitioner spreads keyless records over the partitions
        # that had a leader in its metadata, so wait for all three before sending.
        deadline = time.monotonic() + 10.0
        while len(producer.client.cluster.available_partitions_for_topic(TOPIC) or ()) < 3:
            assert time.monotonic() < deadline, "topic's leaders not in metadata after 10 s"
            await producer.client.force_metadata_update()
            await asyncio.sleep(0.1)
        futures = [
            (await producer.send(TOPIC, b"aio-%d" % i), b"aio-%d" % i) for i in range(RECORDS)
        ]
        delivered = {}
        for future, value in futures:
            meta = await future  # raises if the send failed
            delivered[(meta.partition, meta.offset)] = value
    finally:
        await producer.stop()
    return delivered


async def _read(
    bootstrap: str, name: str, reads: list, seen: set, uncommitted: set, stop: asyncio.Event
) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import CommitFailedError

    consumer = AIOKafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap, group_id=GROUP, client_id=name,
        enable_auto_commit=False, auto_offset_reset="earliest",
    )  # fmt: skip
    await consumer.start()
    try:
        while not stop.is_set():
            got = await consumer.getmany(timeout_ms=300)
            batch = [(m.partition, m.offset, m.value) for ms in got.values() for m in ms]
            if batch:
                reads.extend(batch)
                seen.update((p, o) for p, o, _ in batch)
                try:
                    await consumer.commit()
                except CommitFailedError:  # a rebalance took the partitions meanwhile
                    uncommitted.update((p, o) for p, o, _ in batch)
    finally:
        await consumer.stop()


async def _scenario(bootstrap: str) -> tuple[dict, list, set, dict]:
    produced = await _produce(bootstrap)
    reads_a: list = []
    reads_b: list = []
    seen: set = set()
    uncommitted: set = set()
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_read(bootstrap, "aio-a", reads_a, seen, uncommitted, stop)),
        asyncio.create_task(_read(bootstrap, "aio-b", reads_b, seen, uncommitted, stop)),
    ]
    deadline = time.monotonic() + LIMIT_S
    while len(seen) < len(produced) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*tasks)

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP)
    await probe.start()
    try:
        committed = {p: await probe.committed(TopicPartition(TOPIC, p)) for p in range(3)}
    finally:
        await probe.stop()
    return produced, reads_a + reads_b, uncommitted, committed


def test_aiokafka_produces_and_reads_in_a_group(tmp_path) -> None:
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=3, seed=1616)
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        produced, reads, uncommitted, committed = asyncio.run(_scenario(lc.kafka_bootstrap()))
    assert len(produced) == RECORDS
    assert {(p, o): v for p, o, v in reads} == produced  # nothing lost, values as written
    counts = Counter((p, o) for p, o, _ in reads)
    twice = {po for po, n in counts.items() if n > 1}
    assert twice <= uncommitted  # read again only where a rebalance beat the commit
    ends = dict.fromkeys(range(3), 0)
    for p, o in produced:
        ends[p] = max(ends[p], o + 1)
    # a partition that got no records may never have been committed (None)
    assert {p: c or 0 for p, c in committed.items()} == ends
