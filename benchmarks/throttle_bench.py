"""Throttle fidelity: how closely a wiped broker's re-replication follows a replication throttle.

One run on 127.0.0.1, everything under a fresh temporary dir, removed at the end unless `--keep`.
Each case gets a fresh cluster (a controller and 2 brokers, `--set` node configs on top of
Kafka's defaults): a topic of `--partitions` partitions, replication factor 2, is filled with
`--data-mb` MB of record values (acks=all, whole batches only); broker 2 is killed and fenced
(broker 1 then leads every partition), its `lmdb/` and `node.json` are wiped, the throttle is set
live through the admin client (IncrementalAlterConfigs via the controller), and broker 2 is
restarted: a new incarnation with empty logs that re-replicates every partition from broker 1
under the throttle. The case ends when Metadata shows broker 2 back in every ISR.

Cases, in each mode (`--mode kafka`, `precise` or `both`, the default; precise is the node config
`replication.quota.precise=true`), at each rate of `--rates` (MB/s, default 1 and 4):
- leader:   `leader.replication.throttled.rate` on broker 1, `leader.replication.throttled.replicas=*`
- follower: `follower.replication.throttled.rate` on broker 2, `follower.replication.throttled.replicas=*`

Figures per case, from broker 2's `replication_bytes_in` counter in its metrics.jsonl, written
every 100 ms (`metrics.interval.ms=100`) with the broker's own monotonic clock:
- elapsed / ideal: seconds from the last line with the counter at 0 to the first line with it at
  its final total, over bytes / throttle. Target 0.95-1.10 (both modes).
- average rate / throttle: bytes / elapsed / throttle.
- largest 2 s rate / throttle: the most bytes moved between two lines 2 s apart (the first line
  at least 2 s after the start), per second, over the throttle. Target <= 1.10 in precise mode.
- first second: the bytes counted at the first line >= 1 s after the start (and / throttle).
The counter's total is checked against the leader's logs (whole batches: end offset / records
per batch x the exact batch size). MB = 10**6 bytes. Progress goes to stderr; the table, or with
`--json` one JSON object, to stdout. Every wait is bounded; a failure stops the cluster and ends
the run with one `bench: FAILED: ...` line.

    .venv/bin/python benchmarks/throttle_bench.py [--data-mb 20] [--mode both] [--json]
"""

from __future__ import annotations

import argparse
import shutil
import sys
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

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster, parse_node_configs, plan_cluster
from minikafka.core.records import make_batch
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig
from minikafka.tools.perf import PerfSpec, run_produce_perf

TOPIC = "throttled"
LEADER, VICTIM = 1, 2
METRICS_INTERVAL_MS = 100
ELAPSED_TARGET = (0.95, 1.10)
PEAK_TARGET = 1.10  # largest 2 s rate / throttle, precise mode
PEAK_WINDOW_MS = 2000
# Fast failure detection (the victim is fenced ~1.5 s after the kill) and 100 ms metrics lines.
NODE_CONFIGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "1500",
    "metrics.interval.ms": str(METRICS_INTERVAL_MS),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ThrottleConfig:
    seed: int
    data_mb: int
    partitions: int
    record_size: int
    batch_bytes: int
    rates_mb: tuple[float, ...]
    modes: tuple[str, ...]
    timeout_s: float
    node_configs: dict[str, str] = field(default_factory=dict)  # on top of NODE_CONFIGS

    @property
    def records_per_batch(self) -> int:
        return max(1, self.batch_bytes // self.record_size)

    @property
    def fill_records(self) -> int:
        """Whole rounds of one full batch per partition, about data_mb MB of values."""
        per_round = self.records_per_batch * self.partitions
        rounds = max(1, round(self.data_mb * 10**6 / self.record_size / per_round))
        return rounds * per_round


@dataclass(frozen=True, slots=True)
class Case:
    mode: str  # "kafka" | "precise"
    side: str  # "leader" | "follower"
    rate: int  # B/s

    @property
    def label(self) -> str:
        return f"{self.mode} {self.side} {self.rate / 1e6:g} MB/s"


# ---------------------------------------------------------------------------------- one case


async def fill(bootstrap: str, cfg: ThrottleConfig) -> None:
    async with open_client(bootstrap, client_id="throttle-bench") as client:
        await Admin(client).create_topic(TOPIC, partitions=cfg.partitions, replication_factor=2)
    spec = PerfSpec(
        topic=TOPIC,
        num_records=cfg.fill_records,
        record_size=cfg.record_size,
        batch_bytes=cfg.records_per_batch * cfg.record_size,
        acks=-1,
        in_flight=8,
        batches_per_request=10,
    )
    with trio.move_on_after(cfg.timeout_s) as scope:
        await run_produce_perf(bootstrap, spec)
    if scope.cancelled_caught:
        raise BenchError(f"filling {TOPIC} took over {cfg.timeout_s}s")


async def set_throttle(bootstrap: str, case: Case) -> None:
    broker = LEADER if case.side == "leader" else VICTIM
    async with open_client(bootstrap, client_id="throttle-bench") as client:
        admin = Admin(client)
        await admin.alter_configs(
            "brokers",
            str(broker),
            set_configs={f"{case.side}.replication.throttled.rate": str(case.rate)},
        )
        await admin.alter_configs(
            "topics", TOPIC, set_configs={f"{case.side}.replication.throttled.replicas": "*"}
        )


def expected_bytes(bootstrap: str, cfg: ThrottleConfig) -> int:
    ends = trio.run(log_end_offsets, bootstrap, TOPIC)
    per_batch = cfg.records_per_batch
    if any(end % per_batch for end in ends.values()):
        raise BenchError("a partition holds a partial batch; byte count would be inexact")
    value = b"\0" * cfg.record_size
    size = len(make_batch([(int(time.time() * 1000), None, value)] * per_batch))
    return sum(end // per_batch for end in ends.values()) * size


def run_case(case: Case, cfg: ThrottleConfig, base: Path, *, say: Say) -> dict[str, Any]:
    configs = NODE_CONFIGS | cfg.node_configs
    configs["replication.quota.precise"] = "true" if case.mode == "precise" else "false"
    spec = plan_cluster(base_dir=base, brokers=2, seed=cfg.seed, node_configs=configs)
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        leader = lc.spec.node(LEADER).address
        trio.run(fill, lc.bootstrap(), cfg)
        trio.run(
            lambda: wait_for_isr(
                leader, TOPIC, VICTIM, member=True, timeout_s=60, what="did not replicate the fill"
            )
        )
        lc.kill(VICTIM)
        trio.run(
            lambda: wait_for_isr(
                leader, TOPIC, VICTIM, member=False, timeout_s=30, what="was not fenced"
            )
        )
        total = expected_bytes(leader, cfg)
        node_dir = lc.spec.node(VICTIM).data_dir
        shutil.rmtree(node_dir / "lmdb")
        (node_dir / "node.json").unlink(missing_ok=True)
        metrics_path = lc.log_path(VICTIM, "metrics")
        offset = metrics_path.stat().st_size
        trio.run(set_throttle, leader, case)
        say(f"{case.label}: restarting broker {VICTIM} wiped, {total / 1e6:.1f} MB to copy")
        t0 = time.monotonic()
        lc.restart(VICTIM, ready_timeout_s=30)
        budget = cfg.timeout_s + 3 * total / case.rate
        t_isr, _ = trio.run(
            lambda: wait_for_isr(
                leader, TOPIC, VICTIM, member=True, timeout_s=budget, what="did not catch up"
            )
        )
        time.sleep(3 * METRICS_INTERVAL_MS / 1000)  # the counter's final total is written
        lines = metrics_after(metrics_path, offset)
        say("stopping the cluster")
    return figures(case, lines, total, isr_s=t_isr - t0)


def figures(case: Case, lines: list[dict[str, Any]], total: int, *, isr_s: float) -> dict:
    """The case's figures from the restarted broker's metrics lines (module docstring)."""
    series = [(ln["mono_ms"], ln.get("replication_bytes_in", 0)) for ln in lines]
    if not series or series[-1][1] == 0:
        raise BenchError(f"{case.label}: broker {VICTIM} wrote no replication_bytes_in")
    got = series[-1][1]
    t_start = max((t for t, b in series if b == 0), default=series[0][0] - METRICS_INTERVAL_MS)
    t_end = next(t for t, b in series if b == got)
    elapsed_s = (t_end - t_start) / 1000
    ideal_s = got / case.rate
    first_second = next((b for t, b in series if t >= t_start + 1000), got)
    peak = 0.0  # windows from a line >= 2 s after the start to the first line 2 s later, inside
    for i, (ta, ba) in enumerate(series):
        if ta < t_start + PEAK_WINDOW_MS:
            continue
        tb, bb = next(((t, b) for t, b in series[i:] if t - ta >= PEAK_WINDOW_MS), (0, 0))
        if ta < tb <= t_end:
            peak = max(peak, (bb - ba) / ((tb - ta) / 1000))
    ratio = elapsed_s / ideal_s
    lo, hi = ELAPSED_TARGET
    out = asdict(case) | {
        "bytes": got,
        "bytes_match_logs": got == total,
        "elapsed_s": round(elapsed_s, 3),
        "ideal_s": round(ideal_s, 3),
        "elapsed_over_ideal": round(ratio, 3),
        "avg_rate_over_throttle": round(got / elapsed_s / case.rate, 3),
        "peak_2s_rate_over_throttle": round(peak / case.rate, 3) if peak else None,
        "first_second_bytes": first_second,
        "first_second_over_throttle": round(first_second / case.rate, 3),
        "restart_to_isr_s": round(isr_s, 3),
        "elapsed_met": lo <= ratio <= hi,
        # No 2 s window after the first 2 s (a case over within 4 s): nothing to judge.
        "peak_met": None if case.mode != "precise" or not peak else peak / case.rate <= PEAK_TARGET,
    }
    return out


# ---------------------------------------------------------------------------------- report


def run_bench(cfg: ThrottleConfig, base: Path, *, say: Say) -> dict[str, Any]:
    cases = [
        Case(mode, side, int(rate * 1e6))
        for mode in cfg.modes
        for side in ("leader", "follower")
        for rate in cfg.rates_mb
    ]
    results = []
    started = time.monotonic()
    for n, case in enumerate(cases):
        results.append(run_case(case, cfg, base / f"case-{n}", say=say))
        r = results[-1]
        say(
            f"{case.label}: {r['elapsed_s']} s for {r['bytes'] / 1e6:.1f} MB, "
            f"elapsed/ideal {r['elapsed_over_ideal']}"
        )
    return {
        "machine": machine_info(),
        "config": asdict(cfg)
        | {
            "node_configs": NODE_CONFIGS | cfg.node_configs,
            "records_per_batch": cfg.records_per_batch,
            "fill_records": cfg.fill_records,
        },
        "targets": {"elapsed_over_ideal": ELAPSED_TARGET, "peak_2s_precise": PEAK_TARGET},
        "cases": results,
        "wall_s": round(time.monotonic() - started, 1),
    }


def render(r: dict[str, Any]) -> str:
    m, c = r["machine"], r["config"]
    verdict = {True: "met", False: "NOT met", None: "-"}
    head = (
        f"{'mode':<8} {'side':<9} {'MB/s':>5} {'MB':>6} {'elapsed s':>9} {'ideal s':>8} "
        f"{'el/ideal':>8} {'avg/T':>6} {'max2s/T':>8} {'1st s MB':>8} {'1st s/T':>7} "
        f"{'el target':>9} {'2s target':>9}"
    )
    rows = []
    for k in r["cases"]:
        peak = k["peak_2s_rate_over_throttle"]
        rows.append(
            f"{k['mode']:<8} {k['side']:<9} {k['rate'] / 1e6:>5g} {k['bytes'] / 1e6:>6.1f} "
            f"{k['elapsed_s']:>9.2f} {k['ideal_s']:>8.2f} {k['elapsed_over_ideal']:>8.3f} "
            f"{k['avg_rate_over_throttle']:>6.3f} {'-' if peak is None else f'{peak:.3f}':>8} "
            f"{k['first_second_bytes'] / 1e6:>8.2f} {k['first_second_over_throttle']:>7.2f} "
            f"{verdict[k['elapsed_met']]:>9} {verdict[k['peak_met']]:>9}"
        )
    mismatched = [k for k in r["cases"] if not k["bytes_match_logs"]]
    lo, hi = ELAPSED_TARGET
    return "\n".join(
        [
            f"minikafka throttle fidelity benchmark  {m['date']}  commit {m['commit']}  "
            f"seed {c['seed']}",
            f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, {m['platform']}",
            "node configs: " + ", ".join(f"{n}={v}" for n, v in c["node_configs"].items()),
            f"each case: fresh cluster (controller + 2 brokers), {c['partitions']} partitions r=2, "
            f"{c['data_mb']} MB of values in batches of {c['records_per_batch']} x "
            f"{c['record_size']} B; broker {VICTIM} wiped and restarted under the throttle",
            "",
            head,
            *rows,
            "",
            f"targets: elapsed/ideal in [{lo}, {hi}] (every case); largest 2 s rate after the "
            f"first 2 s <= {PEAK_TARGET} x throttle (precise mode)",
            "replication_bytes_in equal to the logs in every case"
            if not mismatched
            else "replication_bytes_in DIFFERS from the logs in: "
            + ", ".join(f"{k['mode']} {k['side']} {k['rate'] / 1e6:g}" for k in mismatched),
            f"wall time {r['wall_s']} s",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-mb", type=int, default=20, help="MB of record values to re-replicate")
    p.add_argument("--partitions", type=int, default=10)
    p.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    p.add_argument("--batch-bytes", type=int, default=16_000, help="record bytes per batch")
    p.add_argument("--rates", default="1,4", help="throttles in MB/s, comma-separated")
    p.add_argument("--mode", choices=("kafka", "precise", "both"), default="both")
    p.add_argument("--timeout-s", type=float, default=60.0, help="bound of each wait")
    add_run_options(
        p, set_help="node config for every node (repeatable), e.g. replica.fetch.backoff.ms=100"
    )
    args = p.parse_args(argv)
    try:
        args.node_configs = parse_node_configs(args.set)
        NodeConfig(node_id=0).with_settings(args.node_configs)  # refuse bad ones before starting
        args.rates_mb = tuple(float(x) for x in args.rates.split(","))
    except ConfigError as exc:
        p.error(str(exc))
    except ValueError:
        p.error(f"--rates {args.rates!r}: expected MB/s values separated by commas, e.g. 1,4")
    if "replication.quota.precise" in args.node_configs:
        p.error("replication.quota.precise is set per case; choose with --mode")
    resolve_args_seed(p, args)
    for name in ("data_mb", "partitions", "record_size", "batch_bytes", "timeout_s"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if any(r <= 0 for r in args.rates_mb):
        p.error(f"--rates {args.rates!r}: every rate must be positive")
    if args.batch_bytes < args.record_size:
        p.error("--batch-bytes must be at least --record-size")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = ThrottleConfig(
        seed=args.seed,
        data_mb=args.data_mb,
        partitions=args.partitions,
        record_size=args.record_size,
        batch_bytes=args.batch_bytes,
        rates_mb=args.rates_mb,
        modes=("kafka", "precise") if args.mode == "both" else (args.mode,),
        timeout_s=args.timeout_s,
        node_configs=args.node_configs,
    )
    return run_main(args, cfg, run_bench, render, prefix="minikafka-throttle-")


if __name__ == "__main__":
    sys.exit(main())
