"""Scale benchmark: what a cluster costs as its partition count grows.

For each partition count (`--partitions`, default 100,1000,5000,20000), a fresh cluster on
127.0.0.1 (a controller process and 3 brokers, `plan_cluster` + `LocalCluster.up`, node defaults
except `--set` and `max.broker.partitions`: raised to the count when a broker would host more
than the default 8192 replicas, i.e. at 20,000) and one topic of that many partitions, r=2. In
order, every phase bounded, each one's failure marking its cell ("failed: why") and the sweep
going on (scale_phases.py has the phases, scale_probes.py the /proc readings):

1. creation: CreateTopics until Metadata shows every partition with a leader and a full ISR
   (polled every max(20 ms, count/200,000 s)); seconds from the request.
2. settle: the brokers' CPU sampled each second until all used under `--settle-pct` of a core
   over the last second, at most `--settle-s` (then "not settled" is printed with the figures).
3. idle, over a fixed `--idle-s` window (default 10 s) during which nothing talks to the cluster:
   CPU % of one core of each node process (/proc/<pid>/stat utime+stime, all threads), its RSS
   (VmRSS) at the end, and its JSON-lines logs' growth in bytes/s (every *.jsonl and its rotated
   parts, counted by inode so a roll in between loses nothing).
4. latency: `--latency-records` (1000) single-record acks=all Produce requests at
   `--latency-rate` (100) records/s through the library's Producer (idempotent, as by default),
   partitions drawn from the seed; p50/p99/max ms from send to acknowledgement.
5. produce: tools/perf.py acks=all with 100 kB batches (1000 x 100 B), 16 requests x 10 batches
   in flight, `--produce-mb` (300) MB of values or `--produce-s` (30) s, whichever is first:
   MB/s of values, its ratio to min(trio loopback, LMDB synced append) measured in this run
   (as cluster_bench.py), and the batches' p50/p99 latency.
6. catch-up: one broker (from the seed) is killed, fenced, its logs wiped, restarted; seconds
   from the restart until it is back in the ISR of every partition it hosts, and the MB its
   `replication_bytes_in` counter says it copied (the logs hold the phases' records by then).

References first, measured in this run: Trio loopback and LMDB synced append MB/s (median of
`--ref-runs`, as cluster_bench.py), and the latency of one synced LMDB commit of one 100 B value
(p50/p99 of 200: an acks=all record waits for one on the leader, then one on the follower).

The load average is read before each count's cluster starts and printed in its row: on a small
machine anything else running shows up in every figure. Progress goes to stderr; the table (one
row per count, the growth of each figure from the smallest to the largest count, and the scale
goals at 5,000 and 20,000) or with `--json` one JSON object, to stdout. `--quick`: counts 10,100,
short windows, small volumes (a smoke run of the whole path in about a minute).

    .venv/bin/python benchmarks/scale_bench.py [--partitions 100,1000] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio
from bench_harness import Say, add_run_options, machine_info, resolve_args_seed, run_main
from lmdb_reference import measure_lmdb_append_mb_per_s, measure_lmdb_commit_latency_ms
from scale_phases import (
    REPLICATION_FACTOR,
    catch_up_after_wipe,
    create_topic_timed,
    idle_window,
    produce_throughput,
    settle,
    single_record_latency,
)
from scale_report import render
from trio_reference import measure_trio_loopback_mb_per_s

from minikafka.cluster import LocalCluster, parse_node_configs, plan_cluster
from minikafka.errors import ConfigError
from minikafka.testing.seeds import derive_rng
from minikafka.tools.perf import percentile

BROKERS = 3
DEFAULT_COUNTS = (100, 1000, 5000, 20000)
QUICK_COUNTS = (10, 100)
DEFAULT_MAX_BROKER_PARTITIONS = 8192  # server/config.py's max.broker.partitions
TOPIC = "scale"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleConfig:
    seed: int
    partitions: tuple[int, ...]
    idle_s: float = 10.0
    settle_s: float = 60.0
    settle_pct: float = 20.0
    latency_records: int = 1000
    latency_rate: float = 100.0
    produce_mb: float = 300.0
    produce_s: float = 30.0
    create_timeout_s: float = 420.0  # 20,000 took 98 s at load 4, over 180 s at load 8
    catchup_timeout_s: float = 300.0
    start_timeout_s: float = 60.0
    ref_mb: int = 128
    ref_runs: int = 3
    keep: bool = False
    node_configs: dict[str, str] = field(default_factory=dict)


def node_configs_for(partitions: int, cfg: ScaleConfig) -> dict[str, str]:
    """`--set`, plus max.broker.partitions = the count when a broker would otherwise refuse its
    share (r=2 over 3 brokers: 2/3 of the count each; at 20,000 that is 13,334 > 8192)."""
    configs = dict(cfg.node_configs)
    share = math.ceil(partitions * REPLICATION_FACTOR / BROKERS)
    if share > DEFAULT_MAX_BROKER_PARTITIONS and "max.broker.partitions" not in configs:
        configs["max.broker.partitions"] = str(partitions)
    return configs


# ---------------------------------------------------------------------------------- references


def measure_references(base: Path, cfg: ScaleConfig, *, say: Say) -> dict[str, Any]:
    say(f"references: trio loopback, lmdb synced append ({cfg.ref_runs} runs), lmdb commit")
    total = cfg.ref_mb << 20
    runs = range(cfg.ref_runs)
    trio_runs = [measure_trio_loopback_mb_per_s(total_bytes=total) for _ in runs]
    with tempfile.TemporaryDirectory(prefix="lmdb-ref-", dir=base) as where:
        lmdb_runs = [measure_lmdb_append_mb_per_s(where, total_bytes=total) for _ in runs]
        commits = measure_lmdb_commit_latency_ms(where)
    out = {
        "trio_loopback_mb_per_s": round(statistics.median(trio_runs), 1),
        "lmdb_append_sync_mb_per_s": round(statistics.median(lmdb_runs), 1),
        "lmdb_commit_p50_ms": round(percentile(commits, 0.5), 2),
        "lmdb_commit_p99_ms": round(percentile(commits, 0.99), 2),
    }
    out["min_mb_per_s"] = min(out["trio_loopback_mb_per_s"], out["lmdb_append_sync_mb_per_s"])
    return out


# ---------------------------------------------------------------------------------- one count


def run_phase(row: dict[str, Any], name: str, fn: Any, say: Say) -> bool:
    """Run one phase into `row[name]`; on any error mark the cell and go on.

    Any Exception, not only the benchmark's own: a sweep of hours must not lose its other rows
    to one phase's surprise, and the cell says which exception it was."""
    started = time.monotonic()
    try:
        row[name] = fn()
    except Exception as exc:  # noqa: BLE001 - see the docstring
        why = " ".join(str(exc).split()) or "no message"
        row[name] = {"failed": f"{type(exc).__name__}: {why}"[:300]}
        say(f"{name}: failed after {time.monotonic() - started:.1f}s: {row[name]['failed']}")
        return False
    say(f"{name}: {row[name]}")
    return True


def run_count(cfg: ScaleConfig, base: Path, partitions: int, *, say: Say) -> dict[str, Any]:
    configs = node_configs_for(partitions, cfg)
    row: dict[str, Any] = {
        "partitions": partitions,
        "node_configs": configs,
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
    }
    say(f"== {partitions} partitions (load average {row['load_avg_before']}) ==")
    where = base / f"p{partitions}"
    spec = plan_cluster(base_dir=where, brokers=BROKERS, seed=cfg.seed, node_configs=configs)
    if not run_phase(
        row,
        "start",
        lambda: LocalCluster.up(spec, ready_timeout_s=cfg.start_timeout_s, progress=say),
        say,
    ):
        return row
    lc: LocalCluster = row.pop("start")
    try:
        run_phases(lc, cfg, row, partitions, say=say)
    finally:
        say(f"stopping the {partitions}-partition cluster")
        lc.down()
        if not cfg.keep:
            shutil.rmtree(where, ignore_errors=True)
    return row


def run_phases(
    lc: LocalCluster, cfg: ScaleConfig, row: dict[str, Any], partitions: int, *, say: Say
) -> None:
    bootstrap = lc.bootstrap()
    created = run_phase(
        row,
        "create",
        lambda: trio.run(
            lambda: create_topic_timed(bootstrap, TOPIC, partitions, timeout_s=cfg.create_timeout_s)
        ),
        say,
    )
    if not created:
        return
    brokers = [n.node_id for n in lc.spec.brokers]
    pids = [lc.pid(b) for b in brokers]
    run_phase(
        row,
        "settle",
        lambda: settle(pids, threshold_pct=cfg.settle_pct, max_s=cfg.settle_s, say=say),
        say,
    )
    nodes = {n.node_id: (lc.pid(n.node_id), n.data_dir) for n in lc.spec.nodes}
    row["load_avg_idle"] = [round(x, 2) for x in os.getloadavg()]
    run_phase(row, "idle", lambda: idle_window(nodes, cfg.idle_s), say)
    rng = derive_rng(cfg.seed, f"scale-latency-{partitions}")
    latency_bound = cfg.latency_records / cfg.latency_rate + 60
    run_phase(
        row,
        "latency",
        lambda: trio.run(
            lambda: single_record_latency(
                bootstrap,
                TOPIC,
                count=cfg.latency_records,
                rate=cfg.latency_rate,
                rng=rng,
                timeout_s=latency_bound,
            )
        ),
        say,
    )
    run_phase(
        row,
        "produce",
        lambda: trio.run(
            lambda: produce_throughput(
                bootstrap, TOPIC, total_mb=cfg.produce_mb, max_s=cfg.produce_s, say=say
            )
        ),
        say,
    )
    broker = derive_rng(cfg.seed, "scale-catch-up-broker").choice(brokers)
    run_phase(
        row,
        "catchup",
        lambda: catch_up_after_wipe(
            lc, TOPIC, broker, partitions=partitions, timeout_s=cfg.catchup_timeout_s, say=say
        ),
        say,
    )


def run_sweep(cfg: ScaleConfig, base: Path, *, say: Say) -> dict[str, Any]:
    machine = machine_info() | {"load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    refs = measure_references(base, cfg, say=say)
    rows = [run_count(cfg, base, n, say=say) for n in cfg.partitions]
    for row in rows:
        produce = row.get("produce", {})
        if "mb_per_s" in produce:
            produce["ratio_to_min_reference"] = round(produce["mb_per_s"] / refs["min_mb_per_s"], 3)
    return {
        "machine": machine,
        "config": asdict(cfg) | {"brokers": BROKERS, "replication_factor": REPLICATION_FACTOR},
        "references": refs,
        "rows": rows,
    }


# ---------------------------------------------------------------------------------- main


def parse_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        counts = ()
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive partition counts like 100,1000; got {text!r}"
        )
    return counts


QUICK = {  # --quick: the whole path in about a minute; explicit flags still win
    "idle_s": 3.0,
    "settle_s": 10.0,
    "latency_records": 100,
    "produce_mb": 20.0,
    "produce_s": 10.0,
    "ref_mb": 32,
    "ref_runs": 1,
}
FLOATS = ("idle_s", "settle_s", "settle_pct", "latency_rate", "produce_mb", "produce_s")
FLOATS += ("create_timeout_s", "catchup_timeout_s")
INTS = ("latency_records", "ref_mb", "ref_runs")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = ScaleConfig(seed=0, partitions=DEFAULT_COUNTS)
    p.add_argument(
        "--partitions",
        type=parse_counts,
        default=None,
        help=f"counts to sweep (default {','.join(map(str, DEFAULT_COUNTS))})",
    )
    p.add_argument("--quick", action="store_true", help="smoke run: counts 10,100, small and short")
    for name in FLOATS + INTS:
        p.add_argument(
            f"--{name.replace('_', '-')}",
            type=float if name in FLOATS else int,
            default=None,
            help=f"default {getattr(d, name)}"
            + (f", {QUICK[name]} with --quick" if name in QUICK else ""),
        )
    add_run_options(
        p, set_help="node config for every node (repeatable), e.g. metrics.interval.ms=5000"
    )
    args = p.parse_args(argv)
    try:
        args.node_configs = parse_node_configs(args.set)
    except ConfigError as exc:
        p.error(str(exc))
    resolve_args_seed(p, args)
    for name in FLOATS + INTS:
        value = getattr(args, name)
        if value is not None and value <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {value}")
    return args


def config_from(args: argparse.Namespace) -> ScaleConfig:
    """Flags given win; else --quick's values; else ScaleConfig's defaults."""
    chosen = {}
    for name in FLOATS + INTS:
        value = getattr(args, name)
        if value is None and args.quick:
            value = QUICK.get(name)
        if value is not None:
            chosen[name] = value
    counts = args.partitions or (QUICK_COUNTS if args.quick else DEFAULT_COUNTS)
    return ScaleConfig(
        seed=args.seed, partitions=counts, keep=args.keep, node_configs=args.node_configs, **chosen
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_main(args, config_from(args), run_sweep, render, prefix="minikafka-scale-")


if __name__ == "__main__":
    sys.exit(main())
