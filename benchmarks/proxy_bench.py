"""Fault proxy benchmark: throughput, pacing, added latency and heal of one proxied TCP link.

One run on 127.0.0.1, bounded in bytes and time (about 25 s with the defaults). A sink listener
plays node 2; one proxy link 1->2 (`minikafka/faults`) forwards to it. The proxy runs as its own
process, `python -m minikafka proxy --spec-file` as `cluster up --fault-proxy` starts it
(`--proxy-mode process`, the default), or inside this benchmark's Trio run
(`--proxy-mode in-process`: it then shares one thread with both endpoints). Faults are set
through its control port with `FaultProxyClient`, as `minikafka net` does. In order:

1. Reference and pass-through, interleaved `--runs` times: `--mb` MiB sent one way in 64 KiB
   `send_all` writes, read with `receive_some(1 MiB)`, direct to the sink and then through the
   proxy with no faults; the clock runs from the first write to the last byte received (the
   connection is up before it starts); medians, and their ratio: the same code measures both
   (`trio_reference.py` dials its own listener, so it cannot be pointed at the proxy). Also the
   CPU seconds per GB of this process (both endpoints) and of the proxy process, and how busy
   other processes kept the machine meanwhile: the proxied runs need two free cores.
2. Pacing: `bandwidth_bps` set to each of `--caps` (MB/s), a writer that never stops, for
   `--pace-s` seconds; the bytes received over those seconds per second, over the cap, and the
   largest 1 s window over the cap. A fresh bucket is full (50 ms of the rate, at most 64 KiB:
   `burst_bytes` in faults/links.py), so the ideal average is 1 + burst / (cap x pace-s).
3. Latency: 1 KiB ping-pong round trips (the echo reads 1 KiB, writes it back), direct and
   through the proxy with no faults (`--rtt-rounds` each), then with `latency_ms` = `--latency-ms`
   (`--rounds`). The latency applies to each direction of the link, so the expected round trip
   is 2 x latency plus the direct round trip; the excess over that is printed.
4. Blocked, then healed: the link blocked, `--block-mib` MiB of seeded random bytes written in
   64 KiB writes; after `--block-s` seconds the control `heal`; checked: nothing arrived while
   blocked, everything arrived intact and in order; timed: heal request sent -> first and last
   byte received. Also how much the writer got rid of before the heal (TCP back-pressure).

MB are 10**6 bytes. Progress goes to stderr; the table, or with `--json` one JSON object, to
stdout. Every phase is bounded by `--timeout-s`; a failure ends the run with one
`bench: FAILED: ...` line.

    .venv/bin/python benchmarks/proxy_bench.py [--mb 256] [--caps 1,4] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import trio
from bench_harness import SEED_HELP, BenchError, Say, machine_info, resolve_args_seed, run_main
from proxy_bench_phases import (
    HOST,
    LINK,
    Bench,
    ProxyBenchConfig,
    blocked_then_healed,
    bounded,
    latency,
    paced,
    throughput,
)

from minikafka.cluster.ports import free_ports
from minikafka.faults.config import ProxyConfig, ProxyLink
from minikafka.faults.control import FaultProxyClient
from minikafka.faults.proxy import FaultProxy

# ---------------------------------------------------------------------------------- the run


@contextmanager
def proxy_process(config: ProxyConfig, base: Path) -> Iterator[subprocess.Popen]:
    """`python -m minikafka proxy --spec-file` serving `config`; SIGTERM at the end."""
    spec, ready, out = base / "links.json", base / "proxy.json", base / "proxy.out"
    spec.write_text(json.dumps(config.to_json()))
    cmd = [sys.executable, "-m", "minikafka", "proxy", "--spec-file", str(spec)]
    with out.open("ab") as log:
        proc = subprocess.Popen(
            [*cmd, "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def wait_ready(proc: subprocess.Popen, base: Path, timeout_s: float) -> None:
    ready = base / "proxy.json"
    with bounded("starting the proxy process", timeout_s):
        while not ready.exists():
            if proc.poll() is not None:
                tail = (base / "proxy.out").read_text(errors="replace").strip().splitlines()[-3:]
                raise BenchError(f"the proxy exited with {proc.returncode}: {' | '.join(tail)}")
            await trio.sleep(0.02)


async def run_phases(cfg: ProxyBenchConfig, base: Path, say: Say) -> dict[str, Any]:
    send_accepted, accepted = trio.open_memory_channel[trio.SocketStream](4)

    async def sink(stream: trio.SocketStream) -> None:
        await send_accepted.send(stream)
        await trio.sleep_forever()  # the phase that took the stream closes it

    bench = Bench(cfg, accepted)
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host=HOST)
        await nursery.start(trio.serve_listeners, sink, listeners)
        sink_port = bench.sink_port = listeners[0].socket.getsockname()[1]
        control_port, port = free_ports(2, HOST)
        bench.proxy_port = port
        bench.control = FaultProxyClient(HOST, control_port, timeout_s=cfg.timeout_s)
        src, dst = LINK
        link = ProxyLink(src=src, dst=dst, port=port, target_host=HOST, target_port=sink_port)
        config = ProxyConfig(host=HOST, control_port=control_port, links=(link,))
        in_process = cfg.proxy_mode == "in-process"
        with nullcontext() if in_process else proxy_process(config, base) as proc:
            if proc is None:
                await nursery.start(FaultProxy(config).run)
            else:
                await wait_ready(proc, base, cfg.timeout_s)
                bench.proxy_pid = proc.pid
            say(f"proxy ({cfg.proxy_mode}) on {HOST}:{bench.proxy_port} -> sink {bench.sink_port}")
            result = {"throughput": await throughput(bench, say)}
            result["pacing"] = [await paced(bench, int(cap * 1e6), say) for cap in cfg.caps_mb]
            result["latency"] = await latency(bench, say)
            say(f"blocked for {cfg.block_s:g} s, then healed")
            result["blocked"] = await blocked_then_healed(bench)
        nursery.cancel_scope.cancel()
    return result


def run_bench(cfg: ProxyBenchConfig, base: Path, *, say: Say) -> dict[str, Any]:
    started = time.monotonic()
    result = trio.run(run_phases, cfg, base, say)
    return {
        "machine": machine_info(),
        "config": asdict(cfg),
        **result,
        "wall_s": round(time.monotonic() - started, 1),
    }


# ---------------------------------------------------------------------------------- report


def _rtt(label: str, r: dict[str, Any]) -> str:
    return (
        f"  {label:<44} median {r['median_ms']:8.3f} ms  p90 {r['p90_ms']:.3f}  "
        f"min {r['min_ms']:.3f}  max {r['max_ms']:.3f}  ({r['rounds']} rounds)"
    )


def _cpu(label: str, c: dict[str, float] | None) -> str:
    if c is None:
        return f"{label} -"
    return f"{label} {c['cpu_s_per_gb']:.2f} s/GB (busy {c['busy']:.2f})"


def render(r: dict[str, Any]) -> str:
    m, c, tp, lat, blk = (r[k] for k in ("machine", "config", "throughput", "latency", "blocked"))
    runs = lambda xs: ", ".join(f"{x:.0f}" for x in xs)  # noqa: E731
    rest = tp["cpu_rest_of_machine"]
    mode = {
        "process": "its own process (python -m minikafka proxy)",
        "in-process": "in-process (one thread with both endpoints)",
    }[c["proxy_mode"]]
    lines = [
        f"minikafka fault proxy benchmark  {m['date']}  commit {m['commit']}  seed {c['seed']}",
        f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, {m['platform']}",
        f"proxy: {mode}, one link 1->2 on {HOST}; MB = 10**6 bytes",
        "",
        f"one way, {c['mb']} MiB in 64 KiB writes, median of {c['runs']} interleaved runs",
        f"  {'reference: direct loopback':<44} {tp['direct_mb_per_s']:8.1f} MB/s  "
        f"(runs: {runs(tp['direct_runs'])})",
        f"  {'through the proxy, no faults':<44} {tp['proxy_mb_per_s']:8.1f} MB/s  "
        f"(runs: {runs(tp['proxy_runs'])})  proxy / direct {tp['proxy_over_direct']:.3f}",
        f"  CPU, both endpoints: {_cpu('direct', tp['cpu_endpoints_direct'])}, "
        f"{_cpu('proxied', tp['cpu_endpoints_proxied'])}",
        f"  CPU, {_cpu('proxy process', tp['cpu_proxy_process'])}; other processes busy "
        f"{rest['busy'] if rest else '-'}, steal {rest['steal'] if rest else '-'}",
        f"  proxy's bytes_to_dst counter: {tp['proxy_counted_bytes']} "
        f"({'equal to' if tp['proxy_counted_matches'] else 'DIFFERS from'} the bytes sent)",
        "",
        f"pacing: bandwidth_bps set, a writer that never stops, {c['pace_s']:g} s each",
        f"  {'cap MB/s':>8} {'seconds':>8} {'MB':>7} {'MB/s':>7} {'avg/cap':>8} "
        f"{'ideal':>6} {'1st s/cap':>9} {'max 1s/cap':>10}",
    ]
    for p in r["pacing"]:
        lines.append(
            f"  {p['cap_bps'] / 1e6:>8g} {p['seconds']:>8.2f} {p['bytes'] / 1e6:>7.2f} "
            f"{p['mb_per_s']:>7.3f} {p['avg_over_cap']:>8.3f} {p['ideal_avg_over_cap']:>6.3f} "
            f"{p['first_1s_over_cap']:>9.3f} {p['max_1s_over_cap']:>10.3f}"
        )
    lines += [
        "",
        "1 KiB ping-pong round trips",
        _rtt("reference: direct", lat["direct"]),
        _rtt("through the proxy, no faults", lat["proxy"]),
        _rtt(f"through the proxy, latency_ms={lat['latency_ms']}", lat["proxy_with_latency"]),
        f"  expected 2 x {lat['latency_ms']} ms + direct median = "
        f"{lat['expected_median_ms']:.3f} ms; excess {lat['excess_ms']:+.3f} ms",
        f"  the latency added {lat['added_by_latency_ms']:.3f} ms to the proxied median "
        f"(2 x {lat['latency_ms']} = {2 * lat['latency_ms']} ms asked)",
        "",
        f"blocked {blk['blocked_s']:g} s, then healed: {blk['bytes'] >> 20} MiB in 64 KiB writes",
        f"  received while blocked {blk['received_while_blocked']} B; the writer had handed "
        f"{blk['written_while_blocked'] / 1024:.0f} KiB to the kernel",
        f"  heal request {blk['heal_request_ms']:.2f} ms; heal sent -> first byte "
        f"{blk['heal_to_first_byte_ms']:.2f} ms, -> last byte {blk['heal_to_last_byte_ms']:.2f} ms",
        f"  all bytes intact and in order: {'yes' if blk['intact_in_order'] else 'NO'}",
        "",
        f"wall time {r['wall_s']} s",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--proxy-mode", choices=("process", "in-process"), default="process")
    p.add_argument("--mb", type=int, default=256, help="MiB per one-way throughput run")
    p.add_argument("--runs", type=int, default=3, help="throughput runs, direct and proxied")
    p.add_argument("--caps", default="1,4", help="bandwidth caps in MB/s, comma-separated")
    p.add_argument("--pace-s", type=float, default=5.0, help="seconds per bandwidth cap")
    p.add_argument("--latency-ms", type=int, default=50, help="latency_ms for the round trips")
    p.add_argument("--rounds", type=int, default=50, help="round trips with the latency")
    p.add_argument("--rtt-rounds", type=int, default=200, help="round trips without it")
    p.add_argument("--block-s", type=float, default=1.0, help="seconds blocked before the heal")
    p.add_argument("--block-mib", type=int, default=1, help="MiB written while blocked")
    p.add_argument("--timeout-s", type=float, default=30.0, help="bound of each phase")
    p.add_argument("--seed", type=int, default=None, help=SEED_HELP)
    p.add_argument("--keep", action="store_true", help="keep the working dir and print it")
    p.add_argument("--dir", default=None, help="parent of the temporary working dir")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    try:
        args.caps_mb = tuple(float(x) for x in args.caps.split(","))
    except ValueError:
        p.error(f"--caps {args.caps!r}: expected MB/s values separated by commas, e.g. 1,4")
    if any(cap * 1e6 < 1 for cap in args.caps_mb):
        p.error(f"--caps {args.caps!r}: every cap must be at least 1 B/s")
    resolve_args_seed(p, args)
    positive = ("mb", "runs", "pace_s", "rounds", "rtt_rounds", "block_s", "block_mib")
    for name in (*positive, "timeout_s"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if not 0 <= args.latency_ms <= 600_000:
        p.error(f"--latency-ms must be 0..600000, got {args.latency_ms}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = ProxyBenchConfig(**{f.name: getattr(args, f.name) for f in fields(ProxyBenchConfig)})
    return run_main(args, cfg, run_bench, render, prefix="minikafka-proxy-")


if __name__ == "__main__":
    sys.exit(main())
