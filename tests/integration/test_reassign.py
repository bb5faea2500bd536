"""Real processes on 127.0.0.1: move every partition of a topic to other brokers under load.

A controller and three brokers; topic "moves" with 6 partitions, replication factor 2, some data.
The reassign tool's throttles are set (broker rates, topic throttle lists) and recorded with the
reassignment; every partition then moves to a different pair of brokers through the admin
client, while an acks=all producer keeps writing. Then: no reassignment is left, the metadata
shows the new replicas all in sync, every acknowledged record is read back at its offset, each
removed broker logged stop_replica with delete and no longer has the partition's log on disk,
and the recorded throttles are gone without anybody running --verify.
"""

from __future__ import annotations

import json
import time

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.cluster import LocalCluster
from minikafka.common import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.storage import LogStore, StoreConfig
from minikafka.testing.checker import check_acknowledged
from minikafka.testing.clusters import QUICK_FENCING, cluster_up
from minikafka.testing.load import Bounds, batch_of, load_producer, read_to_end, run_senders
from minikafka.wire.messages import ConfigEntity

FAST = {
    **QUICK_FENCING,
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "metrics.interval.ms": "500",
}
TOPIC = "moves"
BROKERS = (1, 2, 3)
RATE = str(50 << 20)  # a throttle that is set, recorded and removed, without slowing the test
LR = "leader.replication.throttled.rate"
FR = "follower.replication.throttled.rate"
LREP = "leader.replication.throttled.replicas"
FREP = "follower.replication.throttled.replicas"


@pytest.fixture
def cluster(tmp_path):
    with cluster_up(tmp_path / "c", brokers=3, seed=455, node_configs=FAST) as lc:
        yield lc


async def _produce(
    client: ClusterClient, tps: list[TopicPartition], acked: list, stop: trio.Event
) -> None:
    producer = load_producer(client, acks=-1, delivery_timeout_s=60)
    now = int(time.time() * 1000)
    n = 0

    async def send(_k: int) -> bool:
        nonlocal n
        if stop.is_set():
            return False
        items, values = [], []
        for tp in tps:
            vals = [f"{tp}:{n}:{i}".encode() for i in range(5)]
            items.append((tp, *batch_of(vals, now_ms=now)))
            values.append(vals)
            n += 1
        for res, vals in zip(await producer.send_batches(items), values, strict=True):
            acked.append((res.tp, res.base_offset, vals))
        await trio.sleep(0.02)
        return True

    # The load stops at `stop`, or at the latest after 300 s or 100,000 requests.
    await run_senders(1, send, Bounds(until=trio.current_time() + 300, max_sends=100_000))


async def _read_all(client: ClusterClient, tps: list[TopicPartition]) -> list:
    await client.refresh_metadata([TOPIC])
    return await read_to_end(client, tps, timeout_s=30, max_wait_ms=50)


def _tool_throttles(
    current: dict[TopicPartition, list[int]], target: dict[TopicPartition, list[int]]
) -> list[ConfigEntity]:
    """What `reassign --execute --throttle` sets (docs/throttling.md#the-reassignment-tool)."""
    leader = sorted(f"{tp.partition}:{b}" for tp, rs in current.items() for b in rs)
    follower = sorted(
        f"{tp.partition}:{b}" for tp, rs in target.items() for b in rs if b not in current[tp]
    )
    brokers = [
        ConfigEntity(entity_type="brokers", entity_name=str(b), configs={LR: RATE, FR: RATE})
        for b in BROKERS
    ]
    lists = {LREP: ",".join(leader), FREP: ",".join(follower)}
    return [*brokers, ConfigEntity(entity_type="topics", entity_name=TOPIC, configs=lists)]


def _events(cluster: LocalCluster, node: int, name: str) -> list[dict]:
    lines = cluster.log_path(node, "events").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


async def test_move_every_partition_under_load_and_clean_up(cluster: LocalCluster):
    async with open_client(cluster.bootstrap(), client_id="it") as client:
        admin = Admin(client)
        await admin.create_topic(TOPIC, partitions=6, replication_factor=2)
        tps = client.partitions_of(TOPIC)
        current = {tp: list(client.partitions[tp].replicas) for tp in tps}
        # b -> b % 3 + 1 has no fixed point, so no pair of brokers maps onto itself.
        target = {tp: [b % 3 + 1 for b in rs] for tp, rs in current.items()}
        assert all(set(target[tp]) != set(current[tp]) for tp in tps)
        throttles = _tool_throttles(current, target)
        for entity in throttles:
            await admin.alter_configs(
                entity.entity_type, entity.entity_name, set_configs=entity.configs
            )

        acked: list = []
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_produce, client, tps, acked, stop)
            with trio.fail_after(15):
                while len(acked) < 60:  # data in every partition before the move
                    await trio.sleep(0.05)
            results = await admin.alter_partition_reassignments(target, throttle_configs=throttles)
            assert {tp: r.error_code for tp, r in results.items()} == {
                tp: ErrorCode.NONE for tp in tps
            }
            moving = await admin.list_partition_reassignments([TOPIC])
            assert set(moving) <= set(tps)  # some may be done already
            with trio.fail_after(20):
                while moving:
                    await trio.sleep(0.1)
                    moving = await admin.list_partition_reassignments()
            moved_at = len(acked)
            with trio.fail_after(15):
                while len(acked) < moved_at + 60:  # load flows through the new leaders
                    await trio.sleep(0.05)
            stop.set()

        md = await client.refresh_metadata([TOPIC])
        for p in md.topics[0].partitions:
            tp = TopicPartition(TOPIC, p.partition)
            assert p.replicas == target[tp]
            assert sorted(p.isr) == sorted(target[tp])
            assert p.leader in target[tp]
        consumed = await _read_all(client, tps)
        verdict = check_acknowledged(acked, consumed)
        assert verdict.ok, verdict.summary()

        for entity in throttles:  # removed by the controller: nobody ran --verify
            [result] = await admin.describe_configs(entity.entity_type, entity.entity_name)
            assert not {e.name for e in result.entries} & set(entity.configs), result

    removed = {b: {tp for tp in tps if b in current[tp] and b not in target[tp]} for b in BROKERS}
    assert all(removed.values())
    with trio.fail_after(10):  # StopReplica follows the completion; it may still be on its way
        while True:
            logged = {
                b: {
                    TopicPartition(e["topic"], e["partition"])
                    for e in _events(cluster, b, "stop_replica")
                    if e["delete"]
                }
                for b in BROKERS
            }
            if logged == removed:
                break
            await trio.sleep(0.1)
    completed = _events(cluster, 0, "reassignment_completed")
    assert {(e["topic"], e["partition"]) for e in completed} == set(tps)
    assert _events(cluster, 0, "throttle_left_in_place") == []

    await trio.to_thread.run_sync(cluster.down)
    for b in BROKERS:  # the removed replicas' logs are gone from disk, the others are there
        store = LogStore(cluster.spec.node(b).data_dir / "lmdb", StoreConfig())
        try:
            on_disk = set(store.load_all())
        finally:
            store.close()
        hosted = {tp for tp in tps if b in target[tp]}
        assert on_disk & set(tps) == hosted, (b, on_disk, hosted)
