"""Client quota fidelity: produce and consumer byte-rate quotas against pipelining clients.

One run on 127.0.0.1, everything under a fresh temporary dir, removed at the end unless `--keep`.
One cluster (a controller and one broker: client quotas are per broker) holds two topics of
`--partitions` (64) partitions, r=1: `quota-produce`, written by the produce cases, and
`quota-fetch`, filled first with `--fill-batches` batches per partition for the fetch cases.

Cases: kind (produce, fetch) x requests in flight (`--in-flight`, default 1, 8, 64). Each case
uses the project's own clients (KIP-219 on both sides: the broker answers a throttled request at
once and mutes the connection for the throttle time, and the client's Connection sends that
broker nothing meanwhile), one ClusterClient (one connection) with `in_flight` tasks, each
keeping one request outstanding on its own partition:
- produce: `Producer(acks=1).send_batches` (the load kit, minikafka/testing/load.py) of one batch of `--batch-records` x `--record-size`
  B per request, over and over;
- fetch: `Consumer(max_wait_ms=0).fetch_once` of its partition with `partition_max_bytes` one
  batch, so each answer is one batch, wrapping to offset 0 at the end of the fill.
Bytes are whole batches, as the broker's sensor counts them (produce: the request's records;
fetch: the response's records).

Per case, two phases on the same setup:
1. reference: a client id without a quota, `--ref-s` seconds: the physical rate of this client
   setup on this machine, measured in this run.
2. throttled: a fresh client id with `producer_byte_rate` / `consumer_byte_rate` = `--quota-mb`,
   run for a warm-up of quota.window.num x quota.window.size.seconds (a fresh sensor's padded
   window lets (N - 1) x W worth of quota through at once: Kafka's Rate, not the client) and
   then `--seconds` (30) measured: rate = bytes answered in that span / span. Target: rate /
   quota <= 1.05 in every case. The broker's own throttle-time avg and max for the client id
   (its metrics.jsonl, 1-s snapshots within the span) are printed beside it.

Quota windows: the nodes run quota.window.num=2 (quota.window.size.seconds=1) unless `--set`
says otherwise. With Kafka's 11 x 1 s, a client that always has data bursts 10 s of quota
whenever an old sample expires, about every 11 s, so any 30-s rate swings between ~0.76 and
~1.13 x the quota even with one request in flight (tests/server/test_client_quota_pipelining.py);
2 x 1 s keeps that burst to 1 s of quota, and the figure shows what pipelining does.

Progress goes to stderr; the table, or with `--json` one JSON object, to stdout. Every loop is
bounded in time and count; a failure stops the cluster and ends the run with one
`bench: FAILED: ...` line. MB = 10**6 bytes.

    .venv/bin/python benchmarks/client_quota_bench.py [--seconds 30] [--in-flight 1,8,64] [--json]
"""

from __future__ import annotations

import argparse
import statistics
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
    machine_info,
    metrics_after,
    resolve_args_seed,
    run_main,
)

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.client.consumer import Consumer
from minikafka.cluster import LocalCluster, parse_node_configs, plan_cluster
from minikafka.common import TopicPartition
from minikafka.core.dynamic_config import CLIENTS, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from minikafka.core.records import make_batch
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig
from minikafka.testing.load import Bounds, load_producer, run_senders
from minikafka.tools.perf import PerfSpec, run_produce_perf
from minikafka.wire.admin_messages import AlterableConfig, AlterConfigsResource

BROKER = 1
TARGET = 1.05  # rate / quota, every case
MAX_REQUESTS_PER_TASK = 10_000_000  # the count bound of every client loop (time ends it first)
NODE_CONFIGS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
TOPIC = {"produce": "quota-produce", "fetch": "quota-fetch"}
RATE_CONFIG = {"produce": PRODUCER_BYTE_RATE, "fetch": CONSUMER_BYTE_RATE}


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaBenchConfig:
    seed: int
    seconds: float
    ref_s: float
    quota_mb: float
    in_flight: tuple[int, ...]
    kinds: tuple[str, ...]
    partitions: int
    record_size: int
    batch_records: int
    fill_batches: int
    timeout_s: float
    node_configs: dict[str, str] = field(default_factory=dict)  # on top of NODE_CONFIGS

    @property
    def quota_bytes_per_s(self) -> int:
        return int(self.quota_mb * 1e6)

    @property
    def effective_node_configs(self) -> dict[str, str]:
        return NODE_CONFIGS | self.node_configs

    @property
    def warm_up_s(self) -> float:
        """N x W of the client quota sensors: the fresh sensor's first burst is inside it."""
        nc = NodeConfig(node_id=0).with_settings(self.effective_node_configs)
        return float(nc.quota_window_num * nc.quota_window_size_seconds)


def client_id(kind: str, in_flight: int, phase: str) -> str:
    return f"quota-bench-{kind}-{in_flight}-{phase}"


# ---------------------------------------------------------------------------------- clients


class Tally:
    """(answered at, bytes) of every answer, from all the tasks of one phase."""

    def __init__(self) -> None:
        self.answers: list[tuple[float, int]] = []

    def add(self, nbytes: int) -> None:
        self.answers.append((trio.current_time(), nbytes))

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.answers if start <= t < end) / (end - start)


async def produce_phase(
    client: ClusterClient, cfg: QuotaBenchConfig, in_flight: int, until: float
) -> Tally:
    producer = load_producer(client, acks=1, delivery_timeout_s=cfg.timeout_s)
    tps = client.partitions_of(TOPIC["produce"])
    batch = one_batch(cfg)
    tally = Tally()

    async def task(k: int) -> bool:  # task k keeps one request outstanding on its partition
        await producer.send_batches([(tps[k % len(tps)], batch, cfg.batch_records)])
        tally.add(len(batch))
        return True

    # A request still waiting for a throttle is cut at the end (`cut`).
    bounds = Bounds(until=until, max_sends=MAX_REQUESTS_PER_TASK * in_flight, cut=True)
    await run_senders(in_flight, task, bounds)
    return tally


async def fetch_phase(
    client: ClusterClient, cfg: QuotaBenchConfig, in_flight: int, until: float, batch_len: int
) -> Tally:
    # One batch per answer: the partition cap is below two batches (KIP-74 returns the first
    # batch whole in any case). At the end of the fill a task goes round from offset 0 again.
    consumer = Consumer(client, max_wait_ms=0, partition_max_bytes=batch_len + 100)
    tps = client.partitions_of(TOPIC["fetch"])
    end = cfg.fill_batches * cfg.batch_records
    tally = Tally()

    async def task(tp: TopicPartition) -> None:
        position = 0
        for _ in range(MAX_REQUESTS_PER_TASK):
            if trio.current_time() >= until:
                return
            records = (await consumer.fetch_once({tp: position}))[tp]
            if records:
                position = records[-1].offset + 1
                tally.add(len(records) // cfg.batch_records * batch_len)
            if position >= end:
                position = 0

    with trio.move_on_at(until):
        async with trio.open_nursery() as nursery:
            for i in range(in_flight):
                nursery.start_soon(task, tps[i % len(tps)])
    return tally


async def run_phase(
    bootstrap: str, cfg: QuotaBenchConfig, kind: str, in_flight: int, cid: str, span_s: float
) -> tuple[Tally, float, float]:
    """One client id, `in_flight` tasks, for `span_s`. Returns the answers, the start on the
    Trio clock, and the start in wall-clock time (what the broker's metrics lines carry)."""
    async with open_client(bootstrap, client_id=cid) as client:
        await client.refresh_metadata([TOPIC[kind]])
        start, wall_start = trio.current_time(), time.time()
        if kind == "produce":
            tally = await produce_phase(client, cfg, in_flight, start + span_s)
        else:
            tally = await fetch_phase(client, cfg, in_flight, start + span_s, len(one_batch(cfg)))
    return tally, start, wall_start


def one_batch(cfg: QuotaBenchConfig) -> bytes:
    """The batch of every request (the fill's batches have the same size)."""
    value = b"\0" * cfg.record_size
    return make_batch([(int(time.time() * 1000), None, value)] * cfg.batch_records)


# ---------------------------------------------------------------------------------- set-up


async def prepare(bootstrap: str, cfg: QuotaBenchConfig, *, say: Say) -> None:
    """Both topics, the fill, and every throttled client id's quota (one config push)."""
    async with open_client(bootstrap, client_id="quota-bench-admin") as client:
        admin = Admin(client)
        for kind in cfg.kinds:
            await admin.create_topic(TOPIC[kind], partitions=cfg.partitions, replication_factor=1)
        quota = str(cfg.quota_bytes_per_s)
        resources = [
            AlterConfigsResource(
                resource_type=CLIENTS,
                resource_name=client_id(kind, n, "quota"),
                configs=[AlterableConfig(name=RATE_CONFIG[kind], op="set", value=quota)],
            )
            for kind in cfg.kinds
            for n in cfg.in_flight
        ]
        for result in await admin.alter_configs_many(resources):
            if result.error_code:
                raise BenchError(f"setting a client quota failed: {result.error_message}")
    if "fetch" in cfg.kinds:
        n_records = cfg.partitions * cfg.fill_batches * cfg.batch_records
        say(f"filling {TOPIC['fetch']}: {cfg.fill_batches} batches x {cfg.partitions} partitions")
        spec = PerfSpec(
            topic=TOPIC["fetch"],
            num_records=n_records,
            record_size=cfg.record_size,
            batch_bytes=cfg.batch_records * cfg.record_size,
            acks=1,
            in_flight=8,
            batches_per_request=cfg.partitions,
        )
        with trio.move_on_after(cfg.timeout_s) as scope:
            await run_produce_perf(bootstrap, spec)
        if scope.cancelled_caught:
            raise BenchError(f"filling {TOPIC['fetch']} took over {cfg.timeout_s}s")


def wait_for_quotas(lc: LocalCluster, cfg: QuotaBenchConfig) -> None:
    """Until the broker has applied a config snapshot with every quota (its events.jsonl)."""
    wanted = len(cfg.kinds) * len(cfg.in_flight)
    deadline = time.monotonic() + cfg.timeout_s
    path = lc.log_path(BROKER, "events")
    while time.monotonic() < deadline:
        for line in metrics_after(path, 0):  # JSON lines: the same reader serves events
            if line.get("event") == "configs_applied" and line.get("entities", 0) >= wanted:
                return
        time.sleep(0.1)
    raise BenchError(f"broker {BROKER} did not apply the client quotas within {cfg.timeout_s}s")


# ---------------------------------------------------------------------------------- one case


def broker_throttle_times(
    lc: LocalCluster, offset: int, kind: str, cid: str, wall_span: tuple[float, float]
) -> dict[str, float | None]:
    """The broker's throttle-time avg and max for `cid` in its 1-s metrics lines written in the
    measured span (by their wall-clock `ts`: the broker's monotonic clock is its own): the mean
    of the avg readings and the largest max reading; None without a reading."""
    lo, hi = wall_span
    lines = [
        ln
        for ln in metrics_after(lc.log_path(BROKER, "metrics"), offset)
        if lo <= ln.get("ts", 0) <= hi
    ]

    def readings(name: str) -> list[float]:
        values = [(ln.get(name) or {}).get(kind, {}).get(cid) for ln in lines]
        return [v for v in values if v is not None]

    avg, mx = readings("client_throttle_time_ms_avg"), readings("client_throttle_time_ms_max")
    return {
        "broker_throttle_time_ms_avg": round(statistics.fmean(avg), 1) if avg else None,
        "broker_throttle_time_ms_max": max(mx) if mx else None,
    }


def run_case(lc: LocalCluster, cfg: QuotaBenchConfig, kind: str, n: int, *, say: Say) -> dict:
    bootstrap = lc.bootstrap()
    quota = cfg.quota_bytes_per_s
    ref, ref_start, _wall = trio.run(
        run_phase, bootstrap, cfg, kind, n, client_id(kind, n, "reference"), cfg.ref_s
    )
    ref_rate = ref.rate(ref_start, ref_start + cfg.ref_s)
    say(f"{kind} x{n}: reference {ref_rate / 1e6:.2f} MB/s; throttled for {cfg.seconds:g} s")
    metrics_path = lc.log_path(BROKER, "metrics")
    offset = metrics_path.stat().st_size if metrics_path.exists() else 0
    cid = client_id(kind, n, "quota")
    span_s = cfg.warm_up_s + cfg.seconds
    tally, start, wall_start = trio.run(run_phase, bootstrap, cfg, kind, n, cid, span_s)
    lo, hi = start + cfg.warm_up_s, start + span_s
    rate = tally.rate(lo, hi)
    time.sleep(1.5)  # one more metrics interval: the broker's last reading of the span is written
    wall_span = (wall_start + cfg.warm_up_s, wall_start + span_s)
    out = {
        "kind": kind,
        "in_flight": n,
        "quota_bytes_per_s": quota,
        "reference_bytes_per_s": round(ref_rate),
        "reference_answers": len(ref.answers),
        "rate_bytes_per_s": round(rate),
        "rate_over_quota": round(rate / quota, 3),
        "quota_over_reference": round(quota / ref_rate, 3) if ref_rate else None,
        "answers": sum(1 for t, _n in tally.answers if lo <= t < hi),
        "warm_up_bytes": sum(b for t, b in tally.answers if t < lo),
        "met": rate / quota <= TARGET,
    }
    out |= broker_throttle_times(lc, offset, kind, cid, wall_span)
    return out


# ---------------------------------------------------------------------------------- report


def run_bench(cfg: QuotaBenchConfig, base: Path, *, say: Say) -> dict[str, Any]:
    spec = plan_cluster(
        base_dir=base / "cluster",
        brokers=1,
        seed=cfg.seed,
        node_configs=cfg.effective_node_configs,
    )
    started = time.monotonic()
    cases = []
    with LocalCluster.up(spec, ready_timeout_s=30, progress=say) as lc:
        trio.run(lambda: prepare(lc.bootstrap(), cfg, say=say))
        wait_for_quotas(lc, cfg)
        for kind in cfg.kinds:
            for n in cfg.in_flight:
                cases.append(run_case(lc, cfg, kind, n, say=say))
                c = cases[-1]
                say(f"{kind} x{n}: {c['rate_over_quota']} x quota over {cfg.seconds:g} s")
        say("stopping the cluster")
    return {
        "machine": machine_info(),
        "config": asdict(cfg)
        | {"node_configs": cfg.effective_node_configs, "warm_up_s": cfg.warm_up_s},
        "batch_bytes": len(one_batch(cfg)),
        "target_rate_over_quota": TARGET,
        "cases": cases,
        "wall_s": round(time.monotonic() - started, 1),
    }


def render(r: dict[str, Any]) -> str:
    m, c = r["machine"], r["config"]
    head = (
        f"{'kind':<8} {'in flight':>9} {'quota MB/s':>10} {'rate MB/s':>9} {'rate/quota':>10} "
        f"{'target':>7} {'ref MB/s':>8} {'quota/ref':>9} {'answers':>7} "
        f"{'broker throttle avg/max ms':>26}"
    )
    rows = []
    for k in r["cases"]:
        avg, mx = k["broker_throttle_time_ms_avg"], k["broker_throttle_time_ms_max"]
        throttle = f"{'-' if avg is None else f'{avg:.0f}'} / {'-' if mx is None else f'{mx:.0f}'}"
        rows.append(
            f"{k['kind']:<8} {k['in_flight']:>9} {k['quota_bytes_per_s'] / 1e6:>10.2f} "
            f"{k['rate_bytes_per_s'] / 1e6:>9.3f} {k['rate_over_quota']:>10.3f} "
            f"{'met' if k['met'] else 'NOT met':>7} {k['reference_bytes_per_s'] / 1e6:>8.2f} "
            f"{k['quota_over_reference']:>9.3f} {k['answers']:>7} {throttle:>26}"
        )
    return "\n".join(
        [
            f"minikafka client quota benchmark  {m['date']}  commit {m['commit']}  "
            f"seed {c['seed']}",
            f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, {m['platform']}",
            "node configs: " + ", ".join(f"{n}={v}" for n, v in c["node_configs"].items()),
            f"one broker, {c['partitions']} partitions per topic, r=1; one request = one batch of "
            f"{c['batch_records']} x {c['record_size']} B ({r['batch_bytes']} B); one client "
            "connection, one request outstanding per task",
            f"each case: reference (no quota) {c['ref_s']:g} s, then throttled: warm-up "
            f"{c['warm_up_s']:g} s, measured {c['seconds']:g} s",
            "",
            head,
            *rows,
            "",
            f"target: rate/quota <= {r['target_rate_over_quota']} in every case; "
            f"wall time {r['wall_s']} s",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0, help="measured span of each case")
    p.add_argument("--ref-s", type=float, default=5.0, help="unthrottled reference per case")
    p.add_argument("--quota-mb", type=float, default=1.0, help="the quota, MB/s (10**6 B)")
    p.add_argument("--in-flight", default="1,8,64", help="requests in flight, comma-separated")
    p.add_argument("--kinds", default="produce,fetch", help="produce, fetch or both")
    p.add_argument("--partitions", type=int, default=64, help="per topic (>= largest in flight)")
    p.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    p.add_argument("--batch-records", type=int, default=100, help="records per batch (request)")
    p.add_argument("--fill-batches", type=int, default=20, help="batches per fetched partition")
    p.add_argument("--timeout-s", type=float, default=60.0, help="bound of each set-up wait")
    add_run_options(
        p, set_help="node config (repeatable), e.g. quota.window.num=11 for Kafka's default windows"
    )
    args = p.parse_args(argv)
    try:
        args.node_configs = parse_node_configs(args.set)
        NodeConfig(node_id=0).with_settings(NODE_CONFIGS | args.node_configs)
        args.in_flight_list = tuple(int(x) for x in args.in_flight.split(","))
    except ConfigError as exc:
        p.error(str(exc))
    except ValueError:
        p.error(f"--in-flight {args.in_flight!r}: expected whole numbers separated by commas")
    args.kinds_list = tuple(k.strip() for k in args.kinds.split(","))
    if not args.kinds_list or any(k not in TOPIC for k in args.kinds_list):
        p.error(f"--kinds {args.kinds!r}: expected produce, fetch or produce,fetch")
    resolve_args_seed(p, args)
    positive = ("seconds", "ref_s", "quota_mb", "partitions", "record_size", "batch_records")
    for name in (*positive, "fill_batches", "timeout_s"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if any(n < 1 for n in args.in_flight_list):
        p.error(f"--in-flight {args.in_flight!r}: every value must be at least 1")
    if max(args.in_flight_list) > args.partitions:
        p.error("--partitions must be at least the largest --in-flight (one partition per task)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = QuotaBenchConfig(
        seed=args.seed,
        seconds=args.seconds,
        ref_s=args.ref_s,
        quota_mb=args.quota_mb,
        in_flight=args.in_flight_list,
        kinds=args.kinds_list,
        partitions=args.partitions,
        record_size=args.record_size,
        batch_records=args.batch_records,
        fill_batches=args.fill_batches,
        timeout_s=args.timeout_s,
        node_configs=args.node_configs,
    )
    return run_main(args, cfg, run_bench, render, prefix="minikafka-quota-")


if __name__ == "__main__":
    sys.exit(main())
