"""Cluster benchmark: produce throughput and follower catch-up on a local cluster, with references.

One run, on 127.0.0.1, in a fresh temporary cluster dir (a controller process and 3 brokers):

1. references, measured first on this machine: raw Trio loopback frame throughput
   (`trio_reference.py`) and raw LMDB batched appends, sync on and off (`lmdb_reference.py`);
2. produce: `tools/perf.py` `run_produce_perf` with acks=all into a replication-factor-2 topic,
   batches of `--batch-bytes` (default 1000 records x 100 B = 100 KB);
3. follower catch-up: a 100-partition r=2 topic is filled with `--data-mb` MB (acks=all), one
   broker is killed and the controller fences it (the survivor leads every partition alone), its
   data dir is wiped (`lmdb/` and `node.json`), and it is started again: a new incarnation with
   empty logs, which re-replicates every partition it hosts from offset 0. The clock runs from the
   restart until the broker is back in the ISR of every one of those partitions (Metadata, polled
   every 20 ms from a surviving broker). Bytes are the whole batches it had to copy: each
   partition's end offset / records per batch x the exact batch size; its metrics.jsonl
   `replication_bytes_in` counter is read back as a cross-check, with the peak per-second rate.

Figures are printed beside their references: catch-up / min(trio, lmdb sync=on) (target 0.25),
produce MB/s (target 50). MB are 10**6 bytes; MB/s counts record values for produce and whole
batches (headers and msgpack framing included) for catch-up. Progress goes to stderr; the table,
or with `--json` one JSON object, to stdout. Every wait is bounded and fails with a message.

    .venv/bin/python benchmarks/cluster_bench.py [--data-mb 300] [--records 2000000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import trio
from lmdb_reference import measure_lmdb_append_mb_per_s
from trio_reference import measure_trio_loopback_mb_per_s

from cluster import ClusterSpec, LocalCluster, plan_cluster
from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.consumer import Consumer
from minikafka.core.records import make_batch
from tools.perf import PerfSpec, run_produce_perf

BROKERS = 3
REPLICATION_FACTOR = 2
CATCHUP_PARTITIONS = 100
PRODUCE_TARGET_MB_S = 50.0
CATCHUP_TARGET_RATIO = 0.25
POLL_S = 0.02
# Fast failure detection, as in `make demo`: a killed broker is fenced within ~3 s.
NODE_CONFIGS = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}


class BenchError(Exception):
    """A phase failed or timed out; the message says which and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchConfig:
    seed: int
    records: int
    data_mb: int
    record_size: int
    batch_bytes: int
    produce_partitions: int
    in_flight: int
    batches_per_request: int
    timeout_s: float
    ref_mb: int

    @property
    def records_per_batch(self) -> int:
        return max(1, self.batch_bytes // self.record_size)


# ---------------------------------------------------------------------------------- machine


def machine_info() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def measure_references(tmpdir: Path, ref_mb: int, *, say) -> dict[str, float]:  # noqa: ANN001
    say("references: trio loopback (best of 3), lmdb append sync=on, sync=off")
    trio_mb_s = max(
        measure_trio_loopback_mb_per_s(total_bytes=ref_mb << 20, frame_bytes=1 << 20)
        for _ in range(3)
    )
    lmdb = {
        sync: measure_lmdb_append_mb_per_s(tmpdir, total_bytes=ref_mb << 20, sync=sync)
        for sync in (True, False)
    }
    return {
        "trio_loopback_mb_per_s": round(trio_mb_s, 1),
        "lmdb_append_sync_mb_per_s": round(lmdb[True], 1),
        "lmdb_append_nosync_mb_per_s": round(lmdb[False], 1),
    }


# ---------------------------------------------------------------------------------- produce


def perf_spec(cfg: BenchConfig, topic: str, num_records: int) -> PerfSpec:
    return PerfSpec(
        topic=topic,
        num_records=num_records,
        record_size=cfg.record_size,
        batch_bytes=cfg.records_per_batch * cfg.record_size,
        acks=-1,
        in_flight=cfg.in_flight,
        batches_per_request=cfg.batches_per_request,
    )


async def create_and_produce(
    bootstrap: str, cfg: BenchConfig, *, topic: str, partitions: int, num_records: int, say
) -> dict[str, Any]:  # noqa: ANN001
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        await Admin(client).create_topic(
            topic, partitions=partitions, replication_factor=REPLICATION_FACTOR
        )
    say(f"topic {topic}: {partitions} partitions, r={REPLICATION_FACTOR}; producing")
    with trio.move_on_after(cfg.timeout_s) as scope:
        report = await run_produce_perf(bootstrap, perf_spec(cfg, topic, num_records), say)
    if scope.cancelled_caught:
        raise BenchError(f"producing {num_records} records to {topic} took over {cfg.timeout_s}s")
    report.pop("summary", None)
    return report


# ---------------------------------------------------------------------------------- catch-up


async def replicas_of(bootstrap: str, topic: str) -> dict[int, tuple[int, int, tuple, tuple]]:
    """partition -> (leader, leader epoch, replicas, isr), from one Metadata request."""
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        md = await client.refresh_metadata([topic])
    (t,) = [t for t in md.topics if t.name == topic]
    return {
        p.partition: (p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr))
        for p in t.partitions
    }


async def wait_for_isr(
    bootstrap: str, topic: str, broker: int, *, member: bool, timeout_s: float, what: str
) -> tuple[float, dict[int, tuple]]:
    """Poll Metadata until `broker` is (member=True) or is not (member=False) in the ISR of every
    partition it replicates, and leads none when not a member; the monotonic time it was seen."""
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        with trio.move_on_after(timeout_s):
            while True:
                md = await client.refresh_metadata([topic])
                seen = time.monotonic()
                (t,) = [t for t in md.topics if t.name == topic]
                mine = [p for p in t.partitions if broker in p.replicas]
                if member:
                    done = all(broker in p.isr for p in mine)
                else:
                    done = all(broker not in p.isr and p.leader != broker for p in mine)
                if mine and done:
                    return seen, {p.partition: tuple(p.isr) for p in t.partitions}
                await trio.sleep(POLL_S)
    raise BenchError(
        f"broker {broker} {what} within {timeout_s}s (Metadata polled from {bootstrap})"
    )


async def log_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        await client.refresh_metadata([topic])
        ends = await Consumer(client).list_offsets(client.partitions_of(topic), earliest=False)
    return {tp.partition: offset for tp, offset in ends.items()}


def batch_size(cfg: BenchConfig) -> int:
    """Bytes of one full batch as tools/perf.py builds it (the leader only restamps its header)."""
    value = b"\0" * cfg.record_size
    return len(make_batch([(int(time.time() * 1000), None, value)] * cfg.records_per_batch))


def metrics_after(path: Path, offset: int) -> list[dict[str, Any]]:
    """The metrics.jsonl lines written after byte `offset` (by the restarted incarnation)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def catch_up(lc: LocalCluster, cfg: BenchConfig, topic: str, *, say) -> dict[str, Any]:  # noqa: ANN001
    broker = random.Random(cfg.seed).choice([n.node_id for n in lc.spec.brokers])
    others = ",".join(n.address for n in lc.spec.brokers if n.node_id != broker)
    node_dir = lc.spec.node(broker).data_dir
    say(f"killing broker {broker}; waiting until the controller fences it")
    lc.kill(broker)
    trio.run(
        lambda: wait_for_isr(
            others, topic, broker, member=False, timeout_s=30, what="was not fenced"
        )
    )
    ends = trio.run(log_end_offsets, others, topic)
    layout = trio.run(replicas_of, others, topic)
    mine = sorted(p for p, (_l, _e, replicas, _i) in layout.items() if broker in replicas)
    per_batch = cfg.records_per_batch
    if any(ends[p] % per_batch for p in mine):
        raise BenchError("a partition holds a partial batch; byte count would be inexact")
    expected = sum(ends[p] // per_batch for p in mine) * batch_size(cfg)
    shutil.rmtree(node_dir / "lmdb")
    (node_dir / "node.json").unlink(missing_ok=True)
    metrics_path = lc.log_path(broker, "metrics")
    metrics_offset = metrics_path.stat().st_size if metrics_path.exists() else 0
    say(f"wiped {node_dir.name}; restarting broker {broker} ({len(mine)} partitions to refill)")
    t0 = time.monotonic()
    lc.restart(broker, ready_timeout_s=30)
    t_ready = time.monotonic()
    t_end, _isr = trio.run(
        lambda: wait_for_isr(
            others, topic, broker, member=True, timeout_s=cfg.timeout_s, what="did not catch up"
        )
    )
    time.sleep(1.5)  # one more metrics interval (1 s), so the counter's final total is written
    lines = metrics_after(metrics_path, metrics_offset)
    got = max((ln.get("replication_bytes_in", 0) for ln in lines), default=0)
    peak = max((ln.get("replication_bytes_in_per_s", 0.0) for ln in lines), default=0.0)
    elapsed = t_end - t0
    return {
        "broker": broker,
        "partitions": len(mine),
        "bytes": expected,
        "records": sum(ends[p] for p in mine),
        "ready_s": round(t_ready - t0, 3),
        "elapsed_s": round(elapsed, 3),
        "mb_per_s": round(expected / 1e6 / elapsed, 2),
        "mb_per_s_from_ready": round(expected / 1e6 / (t_end - t_ready), 2),
        "replication_bytes_in": got,
        "replication_bytes_in_per_s_peak": peak,
    }


# ---------------------------------------------------------------------------------- report


def cluster_spec(base_dir: Path, cfg: BenchConfig) -> ClusterSpec:
    return plan_cluster(
        base_dir=base_dir, brokers=BROKERS, seed=cfg.seed, node_configs=NODE_CONFIGS
    )


def run_bench(cfg: BenchConfig, base: Path, *, say) -> dict[str, Any]:  # noqa: ANN001
    refs = measure_references(base, cfg.ref_mb, say=say)
    fill_records = cfg.data_mb * 10**6 // cfg.record_size
    fill_records -= fill_records % (cfg.records_per_batch * CATCHUP_PARTITIONS)
    # Two fresh clusters, one after the other: the catch-up broker then hosts only the
    # catch-up topic, and the produce figure is not taken on a cluster with skewed leadership.
    with LocalCluster.up(cluster_spec(base / "produce", cfg), progress=say) as lc:
        produce = trio.run(
            lambda: create_and_produce(
                lc.bootstrap(),
                cfg,
                topic="bench-produce",
                partitions=cfg.produce_partitions,
                num_records=cfg.records,
                say=say,
            )
        )
        say("stopping the produce cluster")
    with LocalCluster.up(cluster_spec(base / "catchup", cfg), progress=say) as lc:
        fill = trio.run(
            lambda: create_and_produce(
                lc.bootstrap(),
                cfg,
                topic="bench-catchup",
                partitions=CATCHUP_PARTITIONS,
                num_records=fill_records,
                say=say,
            )
        )
        catchup = catch_up(lc, cfg, "bench-catchup", say=say)
        say("stopping the catch-up cluster")
    floor = min(refs["trio_loopback_mb_per_s"], refs["lmdb_append_sync_mb_per_s"])
    return {
        "machine": machine_info(),
        "config": asdict(cfg) | {"brokers": BROKERS, "replication_factor": REPLICATION_FACTOR},
        "references": refs,
        "produce": produce,
        "fill": fill,
        "catchup": catchup,
        "ratios": {
            "catchup_to_min_reference": round(catchup["mb_per_s"] / floor, 3),
            "produce_to_min_reference": round(produce["mb_per_s"] / floor, 3),
        },
        "targets": {
            "produce_mb_per_s": PRODUCE_TARGET_MB_S,
            "produce_met": produce["mb_per_s"] >= PRODUCE_TARGET_MB_S,
            "catchup_ratio": CATCHUP_TARGET_RATIO,
            "catchup_met": catchup["mb_per_s"] / floor >= CATCHUP_TARGET_RATIO,
        },
    }


def render(r: dict[str, Any]) -> str:
    m, c, refs, p, f, k = (
        r[k] for k in ("machine", "config", "references", "produce", "fill", "catchup")
    )
    t, ratios = r["targets"], r["ratios"]
    floor = min(refs["trio_loopback_mb_per_s"], refs["lmdb_append_sync_mb_per_s"])
    verdict = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    lat = p["batch_latency_ms"]
    batch = f"{c['batch_bytes'] // c['record_size']} records x {c['record_size']} B"
    return "\n".join(
        [
            f"minikafka cluster benchmark  {m['date']}  seed {c['seed']}",
            f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, {m['platform']}",
            "",
            "references (this machine, this run; MB = 10**6 bytes)",
            f"  trio loopback, 1 MiB frames, one way       {refs['trio_loopback_mb_per_s']:8.1f} MB/s",
            f"  lmdb append, 100 KB values, sync=on        {refs['lmdb_append_sync_mb_per_s']:8.1f} MB/s",
            f"  lmdb append, 100 KB values, sync=off       {refs['lmdb_append_nosync_mb_per_s']:8.1f} MB/s",
            f"  min(trio, lmdb sync=on)                    {floor:8.1f} MB/s",
            "",
            f"produce: acks=all, r=2, {c['brokers']} brokers, {c['produce_partitions']} partitions, "
            f"batches of {batch}, in_flight {c['in_flight']}, "
            f"{c['batches_per_request']} batches/request",
            f"  {p['records']} records in {p['elapsed_s']} s: {p['mb_per_s']:.1f} MB/s, "
            f"{p['records_per_s']:.0f} records/s, retries {p['retries']}",
            f"  batch latency ms p50 {lat['p50']}  p95 {lat['p95']}  p99 {lat['p99']}  "
            f"max {lat['max']}",
            f"  target >= {t['produce_mb_per_s']:.0f} MB/s: {verdict(t['produce_met'])}  "
            f"(ratio to min reference {ratios['produce_to_min_reference']:.2f})",
            "",
            f"fill: {f['records']} records into {CATCHUP_PARTITIONS} partitions in "
            f"{f['elapsed_s']} s ({f['mb_per_s']:.1f} MB/s, acks=all)",
            f"follower catch-up: broker {k['broker']} wiped and restarted, "
            f"{k['partitions']} partitions, {k['bytes'] / 1e6:.1f} MB of batches",
            f"  caught up (in every ISR) {k['elapsed_s']} s after restart "
            f"(node ready after {k['ready_s']} s): {k['mb_per_s']:.1f} MB/s "
            f"({k['mb_per_s_from_ready']:.1f} MB/s from ready)",
            f"  its replication_bytes_in: {k['replication_bytes_in'] / 1e6:.1f} MB, "
            f"peak {k['replication_bytes_in_per_s_peak'] / 1e6:.1f} MB/s over 1 s",
            f"  ratio to min reference {ratios['catchup_to_min_reference']:.3f}, "
            f"target >= {t['catchup_ratio']}: {verdict(t['catchup_met'])}",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-mb", type=int, default=300, help="MB of record values for catch-up")
    p.add_argument("--records", type=int, default=2_000_000, help="records for the produce test")
    p.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    p.add_argument("--batch-bytes", type=int, default=100_000, help="record bytes per batch")
    p.add_argument("--produce-partitions", type=int, default=12)
    p.add_argument("--in-flight", type=int, default=8, help="concurrent produce requests")
    p.add_argument("--batches-per-request", type=int, default=10)
    p.add_argument("--ref-mb", type=int, default=256, help="MiB per reference measurement")
    p.add_argument("--timeout-s", type=float, default=180.0, help="bound of each phase")
    p.add_argument("--seed", type=int, default=int(os.environ.get("MINIKAFKA_SEED", "42")))
    p.add_argument("--keep", action="store_true", help="keep the cluster dir and print it")
    p.add_argument("--dir", default=None, help="parent of the temporary cluster dir")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    for name in ("data_mb", "records", "record_size", "batch_bytes", "produce_partitions"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = BenchConfig(
        seed=args.seed,
        records=args.records,
        data_mb=args.data_mb,
        record_size=args.record_size,
        batch_bytes=args.batch_bytes,
        produce_partitions=args.produce_partitions,
        in_flight=args.in_flight,
        batches_per_request=args.batches_per_request,
        timeout_s=args.timeout_s,
        ref_mb=args.ref_mb,
    )
    say = lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True)  # noqa: E731
    base = Path(tempfile.mkdtemp(prefix="minikafka-bench-", dir=args.dir))
    say(f"seed {cfg.seed}; working dir {base}")
    try:
        result = run_bench(cfg, base, say=say)
    except BenchError as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        if args.keep:
            say(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
