"""Real processes: `minikafka reassign` end to end, throttled, with the planner's prediction.

A controller and three brokers; topic "moving" with 4 partitions, replication factor 2, filled
with `minikafka produce --num-records 8000 --record-size 1000` (8 MB of values). Then, through
the CLI only: `reassign --generate` over brokers 1,2,3; `reassign plan --throttle 2000000` on the
proposal; `reassign --execute --throttle 2000000` with it; `reassign --verify --watch --timeout
60`, which must see every partition complete. Then:

- the move took at least 0.7 x bytes / throttle, where bytes = the most any one destination
  broker copies: the sum of the EXACT sizes (every batch read back raw from the leader, before
  the move) of the partitions it gains. Each destination's follower throttle caps its fetching
  at 2 MB/s, and its quota lets that rate through from the start (SimpleRate counts the first
  window as a full second), so bytes / throttle is its copy time; 0.7 leaves room for timer
  granularity. The move's time is the controller's: first `reassignment_started` to last
  `reassignment_completed` in its events.jsonl;
- `plan`'s prediction and that time are printed side by side and within a factor of 2;
- no throttle config is left on any broker or on the topic (the controller removed them);
- every record is still readable, at its offset, from the new replicas (all in sync).

The proposal's seed is chosen here (the first whose busiest destination gains 2 partitions,
4 MB, so the move lasts ~2 s: a destination with at most throttle x 1 s = 2 MB to copy would get
it in the quota's first-window burst and say nothing about the throttle), and `--generate` must
print exactly that proposal. Fetch sizes are small (64 KiB per partition, 256 KiB per response)
so that no single response is a large share of the 2 MB/s budget (docs/throttling.md#overshoot).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.client.consumer import Consumer
from minikafka.cluster import LocalCluster
from minikafka.common import TopicPartition
from minikafka.core.records import iter_batches
from minikafka.testing.clusters import QUICK_FENCING, cluster_up
from minikafka.testing.seeds import derive_rng
from minikafka.tools.reassign.assignment_files import (
    format_reassignment_json,
    propose_assignment,
)
from minikafka.tools.reassign.moves import (
    move_map,
)
from minikafka.wire.messages import CONSUMER_REPLICA_ID, FetchPartition, FetchRequest

FAST = {
    **QUICK_FENCING,
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.max.bytes": str(64 * 1024),
    "replica.fetch.response.max.bytes": str(256 * 1024),
    "metrics.interval.ms": "500",
}
TOPIC = "moving"
PARTITIONS = 4
RECORDS = 8000
RECORD_SIZE = 1000
THROTTLE = 2_000_000
BROKERS = [1, 2, 3]
THROTTLE_NAMES = {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "leader.reassignment.throttled.rate",
    "follower.reassignment.throttled.rate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


@pytest.fixture
def cluster(tmp_path):
    with cluster_up(tmp_path / "c", brokers=3, seed=542, node_configs=FAST) as lc:
        yield lc


def cli(lc: LocalCluster, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "minikafka", *args, "--dir", str(lc.base_dir)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    print(f"$ minikafka {' '.join(args)}\n{proc.stdout}{proc.stderr}(exit {proc.returncode})")
    return proc


def ok(lc: LocalCluster, *args: str, timeout: float = 90) -> str:
    proc = cli(lc, *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


async def _exact_log_bytes(client: ClusterClient, tp: TopicPartition, end: int) -> int:
    """Every batch of the partition read back raw from its leader: the bytes a new replica
    copies."""
    total, offset = 0, 0
    while offset < end:
        conn = await client.node_connection(client.leader_of(tp))
        resp = await conn.request(
            FetchRequest(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                partitions=[
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                    )
                ],
            ),
            timeout_s=30,
        )
        (pr,) = resp.partitions
        assert pr.error_code == 0, pr
        for batch in iter_batches(pr.records):
            total += len(batch.raw)
            offset = batch.base_offset + batch.count
    return total


def cluster_facts(lc: LocalCluster) -> tuple[dict, dict]:
    """(current replicas, exact log bytes) per partition."""

    async def read() -> tuple[dict, dict]:
        async with open_client(lc.bootstrap(), client_id="it") as client:
            await client.refresh_metadata([TOPIC])
            tps = client.partitions_of(TOPIC)
            current = {tp: list(client.partitions[tp].replicas) for tp in tps}
            ends = await Consumer(client).list_offsets(tps, earliest=False)
            sizes = {tp: await _exact_log_bytes(client, tp, ends[tp]) for tp in tps}
            return current, sizes

    return trio.run(read)


def choose_seed(current: dict) -> tuple[int, dict]:
    """The first --generate seed whose busiest destination gains two partitions."""
    for seed in range(200):
        proposed = propose_assignment(
            current, [TOPIC], BROKERS, derive_rng(seed, "reassign-generate")
        )
        gains: dict[int, int] = {}
        for move in move_map(current, proposed).values():
            for b in move.destinations:
                gains[b] = gains.get(b, 0) + 1
        if max(gains.values(), default=0) >= 2:
            return seed, proposed
    raise AssertionError("no seed moves two partitions to one broker")


def quiet_plan(lc: LocalCluster, moves_file: Path) -> dict:
    """`plan --json` once the load that filled the topic has left the planner's BytesInPerSec
    (the median of the last 10 s): the move runs on a quiet cluster, so must its prediction."""
    deadline = time.monotonic() + 20
    while True:
        planned = json.loads(
            ok(
                lc,
                "reassign",
                "plan",
                "--reassignment-json-file",
                str(moves_file),
                "--throttle",
                str(THROTTLE),
                "--json",
            )
        )
        if planned["prediction"]["max_bytes_in"] == 0 or time.monotonic() > deadline:
            return planned
        time.sleep(1)


def controller_move_time(lc: LocalCluster) -> float:
    events = [json.loads(line) for line in lc.log_path(0, "events").read_text().splitlines()]
    starts = [e["ts"] for e in events if e["event"] == "reassignment_started"]
    ends = [e["ts"] for e in events if e["event"] == "reassignment_completed"]
    assert starts and ends
    return max(ends) - min(starts)


def leftover_throttles(lc: LocalCluster) -> list:
    async def read() -> list:
        async with open_client(lc.bootstrap(), client_id="it") as client:
            admin = Admin(client)
            results = await admin.describe_configs("brokers")
            results += await admin.describe_configs("topics")
            for b in BROKERS:  # each broker's effective configs, defaults included
                results += await admin.describe_configs("brokers", str(b))
            results += await admin.describe_configs("topics", TOPIC)
            return [
                (r.resource_type, r.resource_name, e.name, e.value)
                for r in results
                for e in r.entries
                if e.name in THROTTLE_NAMES
            ]

    return trio.run(read)


def read_everything(lc: LocalCluster, proposed: dict) -> dict:
    async def read() -> dict:
        async with open_client(lc.bootstrap(), client_id="it") as client:
            md = await client.refresh_metadata([TOPIC])
            (topic,) = md.topics
            for p in topic.partitions:
                tp = TopicPartition(TOPIC, p.partition)
                assert list(p.replicas) == list(proposed[tp])
                assert sorted(p.isr) == sorted(proposed[tp])
            tps = client.partitions_of(TOPIC)
            consumer = Consumer(client, max_wait_ms=50)
            positions = await consumer.list_offsets(tps, earliest=True)
            ends = await consumer.list_offsets(tps, earliest=False)
            got: dict[TopicPartition, list] = {tp: [] for tp in tps}
            with trio.fail_after(30):
                while any(positions[tp] < ends[tp] for tp in tps):
                    wanted = {tp: o for tp, o in positions.items() if o < ends[tp]}
                    for tp, recs in (await consumer.fetch_once(wanted)).items():
                        got[tp] += recs
                        if recs:
                            positions[tp] = recs[-1].offset + 1
            return got

    return trio.run(read)


def test_generate_plan_execute_watch_throttled_and_clean(cluster: LocalCluster, tmp_path: Path):
    lc = cluster
    ok(lc, "topics", "create", TOPIC, "-p", str(PARTITIONS), "-r", "2")
    ok(lc, "produce", TOPIC, "--num-records", str(RECORDS), "--record-size", str(RECORD_SIZE))
    current, exact = cluster_facts(lc)
    seed, expected = choose_seed(current)

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    out = ok(
        lc,
        "reassign",
        "--generate",
        "--topics-to-move-json-file",
        str(topics_file),
        "--broker-list",
        "1,2,3",
        "--seed",
        str(seed),
    )
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[1] == format_reassignment_json(current)
    proposed_json = lines[lines.index("Proposed partition reassignment configuration") + 1]
    assert proposed_json == format_reassignment_json(expected)
    assert "MoveRatio:" in out and "estimate" in out
    moves = move_map(current, expected)
    moved_bytes = sum(exact[tp] * len(m.destinations) for tp, m in moves.items())
    estimated = int(out.split("Bytes to move: ")[1].split("(")[1].split(" B)")[0])
    print(f"bytes to move: exact {moved_bytes}, --generate's estimate {estimated}")
    assert abs(estimated - moved_bytes) <= 0.05 * moved_bytes

    moves_file = tmp_path / "moves.json"
    moves_file.write_text(proposed_json)
    planned = quiet_plan(lc, moves_file)
    predicted = planned["prediction"]["max_seconds"]
    assert planned["ok"] and predicted is not None
    ok(lc, "reassign", "plan", "--reassignment-json-file", str(moves_file), "--throttle", "2000000")

    out = ok(
        lc,
        "reassign",
        "--execute",
        "--reassignment-json-file",
        str(moves_file),
        "--throttle",
        str(THROTTLE),
    )
    assert out.startswith("Current partition replica assignment\n\n" + lines[1])
    assert "leader.replication.throttled.rate=2000000" in out
    assert "the controller removes them itself" in out
    assert "Successfully started partition reassignments for" in out

    started = time.monotonic()
    proc = cli(
        lc,
        "reassign",
        "--verify",
        "--reassignment-json-file",
        str(moves_file),
        "--watch",
        "--timeout",
        "60",
    )
    watched = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    for tp in expected:
        assert f"Reassignment of partition {tp} is complete." in proc.stdout
    assert "Watching 4 partitions" in proc.stderr

    actual = controller_move_time(lc)
    per_destination: dict[int, int] = {}
    for tp, m in moves.items():
        for b in m.destinations:
            per_destination[b] = per_destination.get(b, 0) + exact[tp]
    busiest = max(per_destination.values())
    floor = 0.7 * busiest / THROTTLE
    print(
        f"move time: actual {actual:.2f} s (controller events; watch ran {watched:.2f} s), "
        f"plan predicted {predicted:.2f} s; busiest destination copies {busiest} B, "
        f"floor 0.7 x {busiest} / {THROTTLE} = {floor:.2f} s"
    )
    assert actual >= floor
    assert predicted / 2 <= actual <= predicted * 2

    assert leftover_throttles(lc) == []
    got = read_everything(lc, expected)
    assert sum(len(r) for r in got.values()) == RECORDS
    for recs in got.values():
        assert [r.offset for r in recs] == list(range(len(recs)))
        assert all(len(r.value) == RECORD_SIZE for r in recs)
    assert ok(lc, "reassign", "--list").strip() == "No partition reassignments in progress."
