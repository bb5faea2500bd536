"""Cluster benchmark: produce throughput and follower catch-up on local clusters, with references.

One run on 127.0.0.1, everything under a fresh temporary dir, removed at the end unless `--keep`:

1. References, measured first, on this machine, in this run (best of 3 each): raw Trio loopback
   frame throughput (`trio_reference.py`: 1 MiB frames, one way) and raw LMDB batched appends of
   100 KB values, 100 per transaction, with sync on (what brokers run: `log.sync=true`) and off
   (`lmdb_reference.py`).
2. Produce, on a fresh cluster (a controller process and 3 brokers): a `--produce-partitions`
   topic, replication factor 2, one warm-up batch per partition (not timed), then `--records`
   records through `tools/perf.py` `run_produce_perf` with acks=all, batches of `--batch-bytes`
   record bytes (default 1000 records x 100 B), `--in-flight` requests outstanding of
   `--batches-per-request` batches each.
3. Follower catch-up, on a second fresh cluster: a 100-partition r=2 topic is filled with
   `--data-mb` MB of record values (acks=all, whole batches only); one broker (chosen by the seed)
   is killed and fenced by the controller (the survivor then leads each partition alone), its
   `lmdb/` and `node.json` are wiped, and it is restarted: a new incarnation with empty logs that
   re-replicates every partition it hosts from offset 0. The clock runs from the restart until
   Metadata from a surviving broker (polled every 20 ms) shows it back in the ISR of all of them.
   Bytes are the whole batches it had to copy: per partition, end offset / records per batch x
   the exact batch size. Its metrics.jsonl `replication_bytes_in` counter is read back as a
   cross-check, with the peak of `replication_bytes_in_per_s` (1 s intervals).

Each figure is printed with its ratio to min(trio reference, lmdb sync=on reference); the targets
are produce >= 0.7 and catch-up >= 0.9 of that. Produce is also given against the
work it does on one host: at r=2 every byte is appended twice (leader, follower) and crosses
loopback twice, 1 / (2 / lmdb + 2 / trio) MB/s with those steps one after another. MB are 10**6
bytes; produce MB/s counts record values (as tools/perf.py does), catch-up MB/s whole batches
(38-byte header and msgpack framing included, about 13 bytes per 100 B record). Progress goes to stderr; the table, or with
`--json` one JSON object, to stdout. Every wait is bounded and fails with a one-line message.

    .venv/bin/python benchmarks/cluster_bench.py [--data-mb 500] [--records 5000000] [--json]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio
from bench_harness import (
    BenchError,
    Say,
    add_run_options,
    log_end_offsets,
    machine_info,
    metrics_after,
    resolve_args_seed,
    run_main,
    wait_for_isr,
)
from lmdb_reference import measure_lmdb_append_mb_per_s
from profile_node import node_command as profile_node_command
from trio_reference import measure_trio_loopback_mb_per_s

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import ClusterSpec, LocalCluster, parse_node_configs, plan_cluster
from minikafka.core.records import make_batch
from minikafka.errors import ConfigError
from minikafka.testing.seeds import derive_rng
from minikafka.tools.perf import PerfSpec, run_produce_perf

BROKERS = 3
REPLICATION_FACTOR = 2
CATCHUP_PARTITIONS = 100
PRODUCE_TARGET_RATIO = 0.7
CATCHUP_TARGET_RATIO = 0.9
REFERENCE_RUNS = 3
# Fast failure detection, as in `make demo`: a killed broker is fenced within ~3 s.
NODE_CONFIGS = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "3000"}


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
    node_configs: dict[str, str] = field(default_factory=dict)  # on top of NODE_CONFIGS
    profile_dir: str | None = None  # --profile: every node under cProfile (profile_node.py)
    idempotence: bool = True  # the producer's default (KIP-98): at most 5 batches per partition

    @property
    def records_per_batch(self) -> int:
        return max(1, self.batch_bytes // self.record_size)


# ---------------------------------------------------------------------------------- references


def measure_references(tmpdir: Path, ref_mb: int, *, say: Say) -> dict[str, Any]:
    """Median of REFERENCE_RUNS runs of each reference, and the runs themselves.

    The median, not the best: on a VM the disk's speed swings between runs (LMDB sync=on from
    ~250 to ~650 MB/s on the 2-vCPU dev VM), and the single catch-up run it is compared with
    gets a typical disk, not the luckiest one.
    """
    say(f"references: trio loopback, lmdb append sync=on and off ({REFERENCE_RUNS} runs each)")
    total = ref_mb << 20
    runs = range(REFERENCE_RUNS)
    rates = {"trio_loopback": [measure_trio_loopback_mb_per_s(total_bytes=total) for _ in runs]}
    with tempfile.TemporaryDirectory(prefix="lmdb-ref-", dir=tmpdir) as where:
        for name, sync in (("lmdb_append_sync", True), ("lmdb_append_nosync", False)):
            rates[name] = [
                measure_lmdb_append_mb_per_s(where, total_bytes=total, sync=sync) for _ in runs
            ]
    out: dict[str, Any] = {}
    for name, values in rates.items():
        out[f"{name}_mb_per_s"] = round(statistics.median(values), 1)
        out[f"{name}_runs"] = [round(v, 1) for v in values]
    return out


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
        idempotence=cfg.idempotence,
    )


async def create_and_produce(
    bootstrap: str, cfg: BenchConfig, *, topic: str, partitions: int, num_records: int, say: Say
) -> dict[str, Any]:
    """Create the topic, warm it up, then time `num_records` with tools/perf.py (its report)."""
    async with open_client(bootstrap, client_id="cluster-bench") as client:
        await Admin(client).create_topic(
            topic, partitions=partitions, replication_factor=REPLICATION_FACTOR
        )
    # Warm-up, not timed: one full batch per partition with acks=all. A follower that sent its
    # first fetch before the leader knew it led gets NOT_LEADER_OR_FOLLOWER and backs off
    # replica.fetch.backoff.ms (1 s); that start-up stall is not the steady state measured here.
    warm = partitions * cfg.records_per_batch
    with trio.move_on_after(cfg.timeout_s) as scope:
        await run_produce_perf(bootstrap, perf_spec(cfg, topic, warm))
    if scope.cancelled_caught:
        raise BenchError(f"warm-up of {topic} took over {cfg.timeout_s}s")
    say(f"topic {topic}: {partitions} partitions, r={REPLICATION_FACTOR}, warmed up; producing")
    with trio.move_on_after(cfg.timeout_s) as scope:
        report = await run_produce_perf(bootstrap, perf_spec(cfg, topic, num_records), say)
    if scope.cancelled_caught:
        raise BenchError(f"producing {num_records} records to {topic} took over {cfg.timeout_s}s")
    report.pop("summary", None)
    report["warmup_records"] = warm
    return report


# ---------------------------------------------------------------------------------- catch-up


def batch_size(cfg: BenchConfig) -> int:
    """Bytes of one full batch as tools/perf.py builds it (the leader only restamps its header)."""
    value = b"\0" * cfg.record_size
    return len(make_batch([(int(time.time() * 1000), None, value)] * cfg.records_per_batch))


def catch_up(lc: LocalCluster, cfg: BenchConfig, topic: str, *, say: Say) -> dict[str, Any]:
    """Kill a broker, wait until it is fenced, wipe it, restart it, time its catch-up."""
    broker = derive_rng(cfg.seed, "catch-up-broker").choice([n.node_id for n in lc.spec.brokers])
    others = ",".join(n.address for n in lc.spec.brokers if n.node_id != broker)
    node_dir = lc.spec.node(broker).data_dir
    say(f"killing broker {broker}; waiting until the controller fences it")
    lc.kill(broker)
    _seen, mine = trio.run(
        lambda: wait_for_isr(
            others, topic, broker, member=False, timeout_s=30, what="was not fenced"
        )
    )
    ends = trio.run(log_end_offsets, others, topic)
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
    t_end, _mine = trio.run(
        lambda: wait_for_isr(
            others, topic, broker, member=True, timeout_s=cfg.timeout_s, what="did not catch up"
        )
    )
    time.sleep(1.5)  # past one more metrics interval (1 s): the counter's final total is written
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
        "replication_bytes_in_matches": got == expected,
        "replication_bytes_in_per_s_peak": peak,
    }


# ---------------------------------------------------------------------------------- report


def up(base_dir: Path, cfg: BenchConfig, say: Say) -> LocalCluster:
    """A fresh cluster; with --profile every node runs under cProfile, one file per process
    in `<profile dir>/<produce|catchup>/` (the catch-up broker's second incarnation too)."""
    command = None
    if cfg.profile_dir is not None:
        command = profile_node_command(Path(cfg.profile_dir).absolute() / base_dir.name)
    return LocalCluster.up(cluster_spec(base_dir, cfg), node_command=command, progress=say)


def cluster_spec(base_dir: Path, cfg: BenchConfig) -> ClusterSpec:
    return plan_cluster(
        base_dir=base_dir,
        brokers=BROKERS,
        seed=cfg.seed,
        node_configs=NODE_CONFIGS | cfg.node_configs,
    )


def run_bench(cfg: BenchConfig, base: Path, *, say: Say) -> dict[str, Any]:
    refs = measure_references(base, cfg.ref_mb, say=say)
    # Whole rounds of full batches, the warm-up round included, so every log is whole batches.
    round_records = cfg.records_per_batch * CATCHUP_PARTITIONS
    fill_records = max(cfg.data_mb * 10**6 // cfg.record_size // round_records - 1, 1)
    fill_records *= round_records
    # Two fresh clusters, one after the other: the catch-up broker then hosts only the
    # catch-up topic, and the produce figure is not taken on a cluster with skewed leadership.
    with up(base / "produce", cfg, say) as lc:
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
    with up(base / "catchup", cfg, say) as lc:
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
    return {
        "machine": machine_info(),
        "config": asdict(cfg)
        | {
            "brokers": BROKERS,
            "replication_factor": REPLICATION_FACTOR,
            "node_configs": NODE_CONFIGS | cfg.node_configs,
        },
        "references": refs,
        "produce": produce,
        "fill": fill,
        "catchup": catchup,
        **judged(
            refs,
            produce_mb_per_s=produce["mb_per_s"],
            catchup_mb_per_s=catchup["mb_per_s"],
            catchup_from_ready_mb_per_s=catchup["mb_per_s_from_ready"],
        ),
    }


def judged(
    refs: dict[str, Any],
    *,
    produce_mb_per_s: float,
    catchup_mb_per_s: float,
    catchup_from_ready_mb_per_s: float,
) -> dict[str, Any]:
    """The ratios to the references and the targets' verdicts (module docstring)."""
    floor = min(refs["trio_loopback_mb_per_s"], refs["lmdb_append_sync_mb_per_s"])
    r2_work = replicated_work_mb_per_s(refs)
    return {
        "ratios": {
            "catchup_to_min_reference": round(catchup_mb_per_s / floor, 3),
            "catchup_from_ready_to_min_reference": round(catchup_from_ready_mb_per_s / floor, 3),
            "produce_to_min_reference": round(produce_mb_per_s / floor, 3),
            "produce_to_replicated_work": round(produce_mb_per_s / r2_work, 3),
        },
        "replicated_work_mb_per_s": round(r2_work, 1),
        "targets": {
            "produce_ratio": PRODUCE_TARGET_RATIO,
            "produce_met": produce_mb_per_s / floor >= PRODUCE_TARGET_RATIO,
            "catchup_ratio": CATCHUP_TARGET_RATIO,
            "catchup_met": catchup_mb_per_s / floor >= CATCHUP_TARGET_RATIO,
        },
    }


def replicated_work_mb_per_s(refs: dict[str, Any]) -> float:
    """MB/s of produce at r=2 if its physical steps ran one after another at the references'
    speeds: each byte appended twice (leader and follower, synced) and sent over loopback twice
    (producer to leader, leader to follower). Not a ceiling (steps overlap on two cores), the
    scale of the work a produced byte costs on one host beside the single-step floor."""
    return 1 / (
        REPLICATION_FACTOR / refs["lmdb_append_sync_mb_per_s"]
        + REPLICATION_FACTOR / refs["trio_loopback_mb_per_s"]
    )


def ref_line(label: str, refs: dict[str, Any], name: str) -> str:
    runs = ", ".join(f"{v:.0f}" for v in refs[f"{name}_runs"])
    return f"  {label:<40} {refs[name + '_mb_per_s']:8.1f} MB/s  (runs: {runs})"


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
            f"minikafka cluster benchmark  {m['date']}  commit {m['commit']}  seed {c['seed']}",
            f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, {m['platform']}",
            "node configs: " + ", ".join(f"{n}={v}" for n, v in c["node_configs"].items()),
            "",
            f"references (this machine, this run, median of {REFERENCE_RUNS}; MB = 10**6 bytes)",
            ref_line("trio loopback, 1 MiB frames, one way", refs, "trio_loopback"),
            ref_line("lmdb append, 100 KB values, sync=on", refs, "lmdb_append_sync"),
            ref_line("lmdb append, 100 KB values, sync=off", refs, "lmdb_append_nosync"),
            f"  {'min(trio, lmdb sync=on)':<40} {floor:8.1f} MB/s",
            "",
            f"produce: acks=all, r=2, {c['brokers']} brokers, {c['produce_partitions']} partitions, "
            f"batches of {batch}, in_flight {c['in_flight']}, "
            f"{c['batches_per_request']} batches/request",
            f"  {p['records']} records in {p['elapsed_s']} s: {p['mb_per_s']:.1f} MB/s "
            f"at batch p99 {lat['p99']} ms, {p['records_per_s']:.0f} records/s, "
            f"retries {p['retries']}",
            f"  batch latency ms p50 {lat['p50']}  p95 {lat['p95']}  p99 {lat['p99']}  "
            f"max {lat['max']}",
            f"  ratio to min reference {ratios['produce_to_min_reference']:.2f}, "
            f"target >= {t['produce_ratio']}: {verdict(t['produce_met'])}; to the r=2 work "
            f"(2 appends + 2 transfers per byte, {r['replicated_work_mb_per_s']:.1f} MB/s) "
            f"{ratios['produce_to_replicated_work']:.2f}",
            "",
            f"fill: {f['warmup_records']} warm-up + {f['records']} records into "
            f"{CATCHUP_PARTITIONS} partitions, r=2, in {f['elapsed_s']} s "
            f"({f['mb_per_s']:.1f} MB/s at batch p99 {f['batch_latency_ms']['p99']} ms, acks=all)",
            f"follower catch-up: broker {k['broker']} wiped and restarted, "
            f"{k['partitions']} partitions, {k['bytes'] / 1e6:.1f} MB of batches",
            f"  caught up (in every ISR) {k['elapsed_s']} s after restart "
            f"(node ready after {k['ready_s']} s): {k['mb_per_s']:.1f} MB/s "
            f"({k['mb_per_s_from_ready']:.1f} MB/s from ready)",
            f"  its replication_bytes_in: {k['replication_bytes_in'] / 1e6:.1f} MB "
            f"({'equal to' if k['replication_bytes_in_matches'] else 'DIFFERS from'} the logs), "
            f"peak {k['replication_bytes_in_per_s_peak'] / 1e6:.1f} MB/s over 1 s",
            f"  ratio to min reference {ratios['catchup_to_min_reference']:.3f} "
            f"({ratios['catchup_from_ready_to_min_reference']:.3f} from ready), "
            f"target >= {t['catchup_ratio']}: {verdict(t['catchup_met'])}",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-mb", type=int, default=500, help="MB of record values for catch-up")
    p.add_argument("--records", type=int, default=5_000_000, help="records for the produce test")
    p.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    p.add_argument("--batch-bytes", type=int, default=100_000, help="record bytes per batch")
    p.add_argument("--produce-partitions", type=int, default=12)
    p.add_argument("--in-flight", type=int, default=16, help="concurrent produce requests")
    p.add_argument("--batches-per-request", type=int, default=10)
    p.add_argument(
        "--idempotence",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the idempotent producer (KIP-98, the default)",
    )
    p.add_argument("--ref-mb", type=int, default=256, help="MiB per reference measurement")
    p.add_argument("--timeout-s", type=float, default=180.0, help="bound of each phase")
    p.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="run every node under cProfile, profiles to DIR (slows the nodes: not a figure)",
    )
    add_run_options(
        p, set_help="node config for every node (repeatable), e.g. num.replica.fetchers=2"
    )
    args = p.parse_args(argv)
    try:
        args.node_configs = parse_node_configs(args.set)
    except ConfigError as exc:
        p.error(str(exc))
    resolve_args_seed(p, args)
    positive = ("data_mb", "records", "record_size", "batch_bytes", "produce_partitions")
    positive += ("in_flight", "batches_per_request", "ref_mb", "timeout_s")
    for name in positive:
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.batch_bytes < args.record_size:
        p.error("--batch-bytes must be at least --record-size")
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
        node_configs=args.node_configs,
        profile_dir=args.profile,
        idempotence=args.idempotence,
    )
    return run_main(args, cfg, run_bench, render, prefix="minikafka-bench-")


if __name__ == "__main__":
    sys.exit(main())
