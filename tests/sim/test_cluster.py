"""minikafka/sim: a controller and three brokers, their real Node code, in one Trio run under a
virtual clock: a topic created, records produced with acks=all and read back, a broker killed
and restarted; and the whole run, replayed from its seed, writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import trio
import trio.testing

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.common import TopicPartition
from minikafka.sim.cluster import SimCluster, plan_sim_cluster
from minikafka.sim.determinism import pinned_scheduler
from minikafka.sim.target import run_simulated, simulated_cluster

TOPIC = "sim"
PARTITIONS = 4
RECORDS = 40  # per partition


async def _read_all(consumer: Consumer, tps: list[TopicPartition]) -> dict[TopicPartition, list]:
    ends = await consumer.list_offsets(tps, earliest=False)
    positions = dict.fromkeys(tps, 0)
    got: dict[TopicPartition, list] = {tp: [] for tp in tps}
    with trio.fail_after(60):
        while any(positions[tp] < ends[tp] for tp in tps):
            batch = await consumer.fetch_once(positions)
            for tp, records in batch.items():
                got[tp].extend(r.value for r in records)
                if records:
                    positions[tp] = records[-1].offset + 1
    return got


async def isr(c, tp: TopicPartition) -> list[int]:  # noqa: ANN001
    """The partition's ISR in the controller's metadata now, sorted."""
    md = await c.refresh_metadata([TOPIC])
    (p,) = [p for p in md.topics[0].partitions if p.partition == tp.partition]
    return sorted(p.isr)


def _story(base: Path, seed: int) -> dict[str, object]:
    """Run the story; what it read back and the simulated time it took."""
    out: dict[str, object] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            cluster = SimCluster(plan_sim_cluster(base, brokers=3, seed=seed))
            await cluster.start(nursery)
            connect = cluster.network.connect
            async with open_client(cluster.bootstrap(), client_id="sim", connect=connect) as c:
                await Admin(c).create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2)
                tps = c.partitions_of(TOPIC)
                producer = Producer(c)
                for i in range(RECORDS):
                    if i == RECORDS // 2:  # a leader dies half-way, and comes back after
                        victim = c.leader_of(tps[0])  # the controller has fenced it (9 s)
                        await cluster.kill(victim)
                        await trio.sleep(12)
                        out["victim"] = victim
                        await cluster.restart(victim)
                    for tp in tps:
                        now = int(trio.current_time() * 1000)
                        await producer.send_records(tp, [(now, None, b"%d-%d" % (tp.partition, i))])
                out["read"] = await _read_all(Consumer(c), tps)
            await cluster.stop()
            out["simulated_s"] = trio.current_time()
            nursery.cancel_scope.cancel()

    with pinned_scheduler(seed):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return out


def _digest(base: Path) -> str:
    """Every node's event, metrics and replica-state logs, in one hash."""
    h = hashlib.sha256()
    for path in sorted(base.glob("node-*/*.jsonl")):
        h.update(path.relative_to(base).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_a_simulated_cluster_serves_and_survives_a_leader_restart(tmp_path: Path) -> None:
    out = _story(tmp_path / "run", seed=5)
    read = out["read"]
    assert isinstance(read, dict)
    for tp, values in read.items():
        assert values == [b"%d-%d" % (tp.partition, i) for i in range(RECORDS)]
    victim = out["victim"]
    events = [
        json.loads(line)
        for line in (tmp_path / "run" / f"node-{victim}" / "events.jsonl").read_text().splitlines()
    ]
    names = [e["event"] for e in events]
    assert names.count("node_starting") == 2 and "node_stopped" in names
    controller = (tmp_path / "run" / "node-0" / "events.jsonl").read_text()
    assert '"event":"broker_fenced"' in controller  # the session timed out in simulated time
    assert 12 < out["simulated_s"] < 60


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    base = tmp_path / "run"
    first = _story(base, seed=11)
    digest = _digest(base)
    shutil.rmtree(base)
    again = _story(base, seed=11)
    assert again["simulated_s"] == first["simulated_s"]
    assert _digest(base) == digest


def test_a_blocked_link_takes_the_follower_out_of_the_isr_after_the_lag_time(
    tmp_path: Path,
) -> None:
    """Through the real fault proxy on the simulated network: the follower's link to its leader
    blocked and a record written, the follower leaves the ISR once replica.lag.time.max.ms
    (30 s) has passed without it catching up, at the next run of the expiration task (the
    acks=all write is acknowledged then), and comes back after the heal."""
    seen: dict[str, object] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            spec = plan_sim_cluster(tmp_path / "run", brokers=2, seed=3, fault_proxy=True)
            cluster = SimCluster(spec)
            await cluster.start(nursery)
            connect = cluster.network.connect
            async with open_client(cluster.bootstrap(), client_id="sim", connect=connect) as c:
                await Admin(c).create_topic(TOPIC, partitions=1, replication_factor=2)
                (tp,) = c.partitions_of(TOPIC)
                leader = c.leader_of(tp)
                follower = 3 - leader
                producer = Producer(c)
                await producer.send_records(tp, [(0, None, b"before")])
                assert await isr(c, tp) == [1, 2]
                blocked_at = trio.current_time()
                proxy = cluster.fault_proxy()  # the control protocol, on the simulated network
                await proxy.set_links([(follower, leader)], blocked=True)

                async def write_while_blocked() -> None:
                    # acks=all waits until the follower is out of the ISR (Kafka's rule: a
                    # follower at the leader's end is in sync however long ago it fetched, so
                    # only a write makes it lag)
                    await producer.send_records(tp, [(1, None, b"during")])
                    seen["acked_after_s"] = trio.current_time() - blocked_at

                nursery.start_soon(write_while_blocked)
                with trio.fail_after(60):  # simulated seconds
                    while await isr(c, tp) != [leader]:
                        await trio.sleep(0.5)
                seen["shrunk_after_s"] = trio.current_time() - blocked_at
                await proxy.heal()
                healed_at = trio.current_time()
                with trio.fail_after(60):
                    while await isr(c, tp) != [1, 2]:
                        await trio.sleep(0.5)
                seen["back_after_s"] = trio.current_time() - healed_at
            await cluster.stop()
            nursery.cancel_scope.cancel()

    with pinned_scheduler(3):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    # Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2: a follower leaves
    # between 30 s and 45 s after it last caught up (plus the AlterPartition round trip)
    assert 30 <= seen["shrunk_after_s"] <= 46, seen
    assert 30 <= seen["acked_after_s"] <= 46, seen
    assert seen["back_after_s"] < 5, seen


def test_a_paused_follower_is_fenced_and_rejoins_when_resumed(tmp_path: Path) -> None:
    """SIGSTOP's stand-in (SimCluster.pause: the node's connections freeze): the follower's
    heartbeats stop, the controller fences it after broker.session.timeout.ms (9 s) and takes
    it out of the ISR, so an acks=all write is acknowledged then; resumed, it is back in the
    ISR within seconds."""
    seen: dict[str, float] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            cluster = SimCluster(plan_sim_cluster(tmp_path / "run", brokers=2, seed=4))
            await cluster.start(nursery)
            connect = cluster.network.connect
            async with open_client(cluster.bootstrap(), client_id="sim", connect=connect) as c:
                await Admin(c).create_topic(TOPIC, partitions=1, replication_factor=2)
                (tp,) = c.partitions_of(TOPIC)
                follower = 3 - c.leader_of(tp)
                producer = Producer(c)
                await producer.send_records(tp, [(0, None, b"before")])
                paused_at = trio.current_time()
                cluster.pause(follower)
                with trio.fail_after(60):  # simulated seconds
                    await producer.send_records(tp, [(1, None, b"during")])
                seen["acked_after_s"] = trio.current_time() - paused_at
                assert await isr(c, tp) == [3 - follower]
                cluster.resume(follower)
                resumed_at = trio.current_time()
                with trio.fail_after(60):
                    while await isr(c, tp) != [1, 2]:
                        await trio.sleep(0.5)
                seen["back_after_s"] = trio.current_time() - resumed_at
            await cluster.stop()
            nursery.cancel_scope.cancel()

    with pinned_scheduler(4):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert 9 <= seen["acked_after_s"] <= 15, seen
    assert seen["back_after_s"] < 5, seen
    controller = (tmp_path / "run" / "node-0" / "events.jsonl").read_text()
    assert '"event":"broker_fenced"' in controller


def _power_story(base: Path, *, sync: str, fault: str) -> list[bytes]:
    """One broker (log.sync=`sync`), writeback every 5 s: 10 records at t~0, the writeback at
    t=5, 10 more at t~6; then `fault` (kill | power_loss) and a restart. -> what is read back."""
    out: list[bytes] = []

    async def main() -> None:
        plan = plan_sim_cluster(base, brokers=1, seed=3, node_configs={"log.sync": sync})
        async with simulated_cluster(plan, writeback_s=5.0) as target:
            cluster = target.sim
            tp = TopicPartition(TOPIC, 0)
            async with target.client("sim") as c:
                await Admin(c).create_topic(TOPIC, partitions=1, replication_factor=1)
                producer = Producer(c)
                start = trio.current_time()
                for i in range(20):
                    if i == 10:
                        await trio.sleep_until(start + 6)
                    await producer.send_records(tp, [(i, None, b"%d" % i)])
                await getattr(cluster, fault)(1)
                await cluster.restart(1)
                await c.refresh_metadata([TOPIC])
                out.extend((await _read_all(Consumer(c), [tp]))[tp])

    run_simulated(main, 3)
    return out


def test_a_power_loss_keeps_what_the_disk_made_durable_and_no_more(tmp_path: Path) -> None:
    """Without fsync, a power loss leaves the last writeback's copy (the first 10 records); a
    kill (a process crash) leaves every commit; with fsync on commit nothing committed is lost."""
    first = [b"%d" % i for i in range(10)]
    every = [b"%d" % i for i in range(20)]
    assert _power_story(tmp_path / "a", sync="false", fault="power_loss") == first
    assert _power_story(tmp_path / "b", sync="false", fault="kill") == every
    assert _power_story(tmp_path / "c", sync="true", fault="power_loss") == every


def test_a_full_disk_takes_the_leaders_replicas_offline_until_a_restart(tmp_path: Path) -> None:
    """The leader's disk fills: its next write fails (ENOSPC), its replica goes offline, the
    controller moves leadership without a session timeout, and the producer's retry lands on
    the new leader; freed and restarted, the broker is back in the ISR."""
    seen: dict[str, object] = {}

    async def main() -> None:
        async with simulated_cluster(plan_sim_cluster(tmp_path, brokers=3, seed=9)) as target:
            cluster = target.sim
            tp = TopicPartition(TOPIC, 0)
            async with target.client("sim") as c:
                await Admin(c).create_topic(TOPIC, partitions=1, replication_factor=3)
                producer = Producer(c)
                await producer.send_records(tp, [(0, None, b"before")])
                victim = c.leader_of(tp)
                cluster.disk_full(victim)
                start = trio.current_time()
                await producer.send_records(tp, [(1, None, b"during")])
                seen["moved_after_s"] = trio.current_time() - start
                await c.refresh_metadata([TOPIC])
                seen["leader"], seen["victim"] = c.leader_of(tp), victim
                cluster.disk_full(victim, False)
                await cluster.restart(victim)
                with trio.fail_after(30):
                    while victim not in await isr(c, tp):
                        await trio.sleep(0.5)
                seen["read"] = (await _read_all(Consumer(c), [tp]))[tp]

    run_simulated(main, 9)
    assert seen["leader"] != seen["victim"]
    assert seen["moved_after_s"] < 3  # the offline report, not the 9 s session timeout
    assert seen["read"] == [b"before", b"during"]
    events = (tmp_path / f"node-{seen['victim']}" / "events.jsonl").read_text()
    assert '"event":"replica_offline"' in events and "No space left on device" in events


def test_a_failed_write_takes_that_replica_offline_and_no_other(tmp_path: Path) -> None:
    """One write of a follower fails with EIO: the replica it was for goes offline and leaves
    the ISR; the follower's other replica, whose writes succeed, stays in sync."""
    got: dict[str, object] = {}

    async def main() -> None:
        async with simulated_cluster(plan_sim_cluster(tmp_path, brokers=3, seed=4)) as target:
            cluster = target.sim
            async with target.client("sim") as c:
                await Admin(c).create_topic(TOPIC, partitions=2, replication_factor=3)
                t0, t1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
                producer = Producer(c)
                follower = next(b for b in (1, 2, 3) if b not in (c.leader_of(t0), c.leader_of(t1)))
                cluster.fail_write(follower)
                await producer.send_records(t0, [(0, None, b"a")])
                await trio.sleep(2)
                await producer.send_records(t1, [(0, None, b"b")])
                await trio.sleep(2)
                got["isr"] = {tp.partition: await isr(c, tp) for tp in (t0, t1)}
                got["follower"] = follower

    run_simulated(main, 4)
    follower = got["follower"]
    assert got["isr"] == {0: sorted({1, 2, 3} - {follower}), 1: [1, 2, 3]}
    events = (tmp_path / f"node-{follower}" / "events.jsonl").read_text().splitlines()
    offline = [json.loads(e) for e in events if '"replica_offline"' in e]
    assert [(e["partition"], "Input/output error" in e["error"]) for e in offline] == [(0, True)]
