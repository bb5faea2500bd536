"""The main job of `make demo`: a local cluster, a replicated topic, produce, consume, check.

Starts a controller and three brokers on 127.0.0.1, creates a topic (12 partitions, replication
factor 2), produces records with acks=all (the load kit, minikafka/testing/load.py), reads every
partition back from the start, checks that each acknowledged record is there at its offset (the
checker, minikafka/testing/checker.py), prints what it did, and stops the cluster (keeping its
data dir for `minikafka cluster logs`). It starts over in its directory, deleting what is there,
only if that holds nothing but a minikafka cluster (`check_demo_dir`).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import click
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.cluster.clusterfile import CLUSTER_FILE, LOCK_FILE, read_record
from minikafka.cluster.fault_proxy import PROXY_DIR
from minikafka.common import TopicPartition
from minikafka.errors import ClusterError, MiniKafkaError
from minikafka.testing.checker import check_acknowledged
from minikafka.testing.load import Bounds, batch_of, load_producer, read_to_end, run_senders
from minikafka.testing.seeds import resolve_seed, seed_line

PRODUCE_MAX_S = 120.0  # the demo's produce bound (20,000 records take about a second)
PER_BATCH = 100

Acked = list[tuple[TopicPartition, int, list[bytes]]]


async def exercise(
    bootstrap: str, *, topic: str, partitions: int, records: int, say
) -> dict[str, object]:  # noqa: ANN001
    async with open_client(bootstrap, client_id="minikafka-demo") as client:
        admin = Admin(client)
        await admin.create_topic(topic, partitions=partitions, replication_factor=2)
        md = await admin.describe([topic])
        leaders = sorted({p.leader for p in md.topics[0].partitions})
        say(
            f"created topic {topic}: {partitions} partitions, replication factor 2, leaders on brokers {leaders}"
        )
        tps = client.partitions_of(topic)
        t0 = trio.current_time()
        acked = await produce(client, tps, records)
        produce_s = trio.current_time() - t0
        say(
            f"produced {records} records with acks=all in {produce_s:.2f} s ({records / produce_s:.0f} records/s)"
        )
        consumed = await read_all(client, tps)
    verdict = check_acknowledged(acked, consumed)  # the project's checker (testing/checker.py)
    missing = len(verdict.lost) + len(verdict.corrupted)
    say(
        f"consumed {len(consumed)} records back from offset 0 of every partition; acknowledged but missing: {missing}"
    )
    return {"acked": verdict.acknowledged, "consumed": len(consumed), "missing": missing}


async def produce(client: ClusterClient, tps: list[TopicPartition], records: int) -> Acked:
    """`records` values `record-<i>`, PER_BATCH a batch, one request per round over every
    partition (the load kit: bounded by the rounds and PRODUCE_MAX_S)."""
    producer = load_producer(client, acks=-1)
    now = int(time.time() * 1000)
    starts = range(0, records, PER_BATCH * len(tps))
    rounds = iter(starts)
    acked: Acked = []

    async def send_round(_k: int) -> bool:
        start = next(rounds, None)
        if start is None:
            return False
        items, values = [], []
        for k, tp in enumerate(tps):
            first = start + k * PER_BATCH
            vals = [f"record-{i}".encode() for i in range(first, min(first + PER_BATCH, records))]
            if vals:
                items.append((tp, *batch_of(vals, now_ms=now)))
                values.append(vals)
        for res, vals in zip(await producer.send_batches(items), values, strict=True):
            acked.append((res.tp, res.base_offset, vals))
        return True

    bounds = Bounds(until=trio.current_time() + PRODUCE_MAX_S, max_sends=len(starts) + 1, cut=True)
    await run_senders(1, send_round, bounds)
    if sum(len(vals) for _tp, _base, vals in acked) < records:
        raise MiniKafkaError(f"producing {records} records took over {PRODUCE_MAX_S:.0f} s")
    return acked


async def read_all(
    client: ClusterClient, tps: list[TopicPartition]
) -> list[tuple[TopicPartition, int, bytes]]:
    """Every partition from its log start to its high watermark (within 60 s)."""
    return await read_to_end(client, tps, timeout_s=60)  # type: ignore[return-value]


def check_demo_dir(base_dir: Path) -> None:
    """Refuse (ClusterError, one line) a `base_dir` the demo may not delete and start over in.

    Accepted: a missing or empty directory, or one holding only a minikafka cluster: its
    `cluster.json` (readable, naming this directory as its base dir), the cluster lock and
    temporary files, the fault-proxy dir, and the data dirs it names, each directly inside.
    """
    if not base_dir.exists():
        return
    refuse = f"refusing to use {base_dir} for the demo (it would be deleted)"
    accepted = (
        "pass --dir a missing or empty directory, or one an earlier demo or `cluster up` made"
    )
    if not base_dir.is_dir():
        raise ClusterError(f"{refuse}: it is not a directory; {accepted}")
    entries = sorted(p.name for p in base_dir.iterdir())
    if not entries:
        return
    try:
        record = read_record(base_dir)
    except ClusterError as exc:
        raise ClusterError(f"{refuse}: {exc}; {accepted}") from exc
    if record is None:
        raise ClusterError(f"{refuse}: it is not empty and holds no {CLUSTER_FILE}; {accepted}")
    home = base_dir.resolve()
    if record.spec.base_dir.resolve() != home:
        raise ClusterError(
            f"{refuse}: its {CLUSTER_FILE} names base_dir {record.spec.base_dir}; {accepted}"
        )
    owned = {CLUSTER_FILE, LOCK_FILE, PROXY_DIR}
    for node in record.spec.nodes:
        if node.data_dir.resolve().parent != home:
            raise ClusterError(
                f"{refuse}: its {CLUSTER_FILE} names data dir {node.data_dir} for node "
                f"{node.node_id}, not one directly inside it; {accepted}"
            )
        owned.add(node.data_dir.name)
    for name in entries:
        temporary = name.startswith(f".{CLUSTER_FILE}.") and name.endswith(".tmp")
        if name not in owned and not temporary:
            raise ClusterError(f"{refuse}: it holds {name!r}, not part of its cluster; {accepted}")


def run_demo(
    base_dir: Path, *, records: int = 20_000, seed: int | None = None
) -> dict[str, object]:
    say = lambda msg: click.echo(f"demo: {msg}")  # noqa: E731
    seed = resolve_seed(seed)
    check_demo_dir(base_dir)  # before anything is stopped or deleted
    if (base_dir / "cluster.json").exists():
        try:
            LocalCluster.load(base_dir).down()
        except MiniKafkaError:
            pass
    shutil.rmtree(base_dir, ignore_errors=True)
    spec = plan_cluster(
        base_dir=base_dir,
        brokers=3,
        seed=seed,
        node_configs={"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"},
    )
    say(f"starting a controller and 3 brokers in {base_dir} ({seed_line(seed)})")
    with LocalCluster.up(spec, progress=lambda m: say(m)) as lc:
        for s in lc.status():
            say(f"  node {s.node_id} {','.join(s.roles):<10} {s.address}  pid {s.pid}")
        result = trio.run(
            lambda: exercise(lc.bootstrap(), topic="demo", partitions=12, records=records, say=say)
        )
        say("stopping the cluster (data and logs stay in the cluster dir)")
    verdict = "OK" if result["missing"] == 0 and result["consumed"] == result["acked"] else "FAILED"
    say(
        f"{verdict}: {result['acked']} acknowledged, {result['consumed']} read back, {result['missing']} missing"
    )
    return result
