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
import bisect
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import trio
from cluster_bench import BenchError, Say, machine_info, run_main

from minikafka.cluster.ports import free_ports
from minikafka.faults.config import ProxyConfig, ProxyLink
from minikafka.faults.control import FaultProxyClient
from minikafka.faults.links import burst_bytes
from minikafka.faults.proxy import FaultProxy

HOST = "127.0.0.1"
LINK = (1, 2)
WRITE_BYTES = 64 * 1024
RECV_BYTES = 1 << 20
PING_BYTES = 1024
WINDOW_S = 1.0  # the sliding window of the pacing peak
DEFAULT_SEED = 42


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyBenchConfig:
    seed: int
    proxy_mode: str  # "process" | "in-process"
    mb: int  # MiB per throughput run
    runs: int
    caps_mb: tuple[float, ...]
    pace_s: float
    latency_ms: int
    rounds: int
    rtt_rounds: int
    block_s: float
    block_mib: int
    timeout_s: float


@contextmanager
def bounded(what: str, timeout_s: float) -> Iterator[None]:
    try:
        with trio.fail_after(timeout_s):
            yield
    except trio.TooSlowError:
        raise BenchError(f"{what} took over {timeout_s:g}s") from None


class Bench:
    """The sink (node 2), the proxy's addresses and a control client; opens connection pairs."""

    def __init__(self, cfg: ProxyBenchConfig, accepted: trio.MemoryReceiveChannel) -> None:
        self.cfg = cfg
        self.accepted = accepted
        self.sink_port = 0
        self.proxy_port = 0
        self.control = FaultProxyClient(HOST, 0)
        self.proxy_pid: int | None = None  # --proxy-mode process

    async def pair(self, port: int) -> tuple[trio.SocketStream, trio.SocketStream]:
        """A connection to `port` (the sink or the proxy link): (client end, sink end)."""
        with bounded(f"connecting to {HOST}:{port}", self.cfg.timeout_s):
            client = await trio.open_tcp_stream(HOST, port)
            server = await self.accepted.receive()
        return client, server

    async def set_faults(self, **faults: Any) -> None:
        await self.control.set_links([LINK], **faults)


async def receive_exactly(stream: trio.SocketStream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        data = await stream.receive_some(n - len(buf))
        if not data:
            raise BenchError("a connection closed in the middle of a message")
        buf += data
    return bytes(buf)


async def close_pair(*streams: trio.SocketStream) -> None:
    for stream in streams:
        await trio.aclose_forcefully(stream)  # the phase is over; no need to flush anything


# ---------------------------------------------------------------------------------- phases


def cpu_s(pid: int | None = None) -> float | None:
    """CPU seconds (user + system) used so far by process `pid` (None: this one), if known."""
    if pid is None:
        return time.process_time()
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 (state) on
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def machine_cpu_s() -> tuple[float, float] | None:
    """CPU seconds all CPUs spent in processes so far (user, nice, system; not irq and softirq,
    where the kernel counts loopback's receive path and not in any process), and the seconds
    the hypervisor took from this VM (steal); None if unknown."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split(maxsplit=9)[1:9]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return (ticks[0] + ticks[1] + ticks[2]) / hz, ticks[7] / hz


async def one_way(bench: Bench, port: int, total: int, chunk: bytes) -> dict[str, float | None]:
    """`total` bytes in `chunk` writes from a client to the sink via `port`: MB/s, and the CPU
    seconds this process (both endpoints) and the proxy process used meanwhile."""
    client, server = await bench.pair(port)
    t: dict[str, float] = {}

    async def send() -> None:
        for _ in range(total // len(chunk)):
            await client.send_all(chunk)

    async def receive() -> None:
        got = 0
        while got < total:
            data = await server.receive_some(RECV_BYTES)
            if not data:
                raise BenchError(f"the stream ended after {got} of {total} bytes")
            got += len(data)
        t["end"] = time.perf_counter()

    cpu0, proxy0 = cpu_s(), cpu_s(bench.proxy_pid) if bench.proxy_pid else None
    all0 = machine_cpu_s()
    with bounded(f"sending {total >> 20} MiB to port {port}", bench.cfg.timeout_s):
        t["start"] = time.perf_counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            nursery.start_soon(send)
    cpu1, proxy1 = cpu_s(), cpu_s(bench.proxy_pid) if bench.proxy_pid else None
    all1 = machine_cpu_s()
    await close_pair(client, server)
    wall = t["end"] - t["start"]
    return {
        "mb_per_s": total / 1e6 / wall,
        "wall_s": wall,
        "endpoints_cpu_s": cpu1 - cpu0,
        "proxy_cpu_s": None if proxy0 is None or proxy1 is None else proxy1 - proxy0,
        "machine_cpu_s": None if all0 is None or all1 is None else all1[0] - all0[0],
        "steal_s": None if all0 is None or all1 is None else all1[1] - all0[1],
    }


async def throughput(bench: Bench, say: Say) -> dict[str, Any]:
    cfg = bench.cfg
    total = (cfg.mb << 20) // WRITE_BYTES * WRITE_BYTES
    chunk = random.Random(cfg.seed).randbytes(WRITE_BYTES)
    direct, proxied = [], []
    for n in range(cfg.runs):
        direct.append(await one_way(bench, bench.sink_port, total, chunk))
        proxied.append(await one_way(bench, bench.proxy_port, total, chunk))
        say(
            f"run {n + 1}: direct {direct[-1]['mb_per_s']:.1f} MB/s, "
            f"through the proxy {proxied[-1]['mb_per_s']:.1f} MB/s"
        )
    row = next(r for r in await bench.control.show() if (r["src"], r["dst"]) == LINK)
    d = statistics.median(r["mb_per_s"] for r in direct)
    p = statistics.median(r["mb_per_s"] for r in proxied)
    gb = cfg.runs * total / 1e9

    def cpu(runs: list[dict[str, Any]], key: str) -> dict[str, float] | None:
        """CPU seconds per GB moved, and per wall second (1.0: one core kept busy)."""
        if any(r[key] is None for r in runs):
            return None
        used = sum(r[key] for r in runs)
        return {
            "cpu_s_per_gb": round(used / gb, 3),
            "busy": round(used / sum(r["wall_s"] for r in runs), 2),
        }

    return {
        "bytes_per_run": total,
        "direct_mb_per_s": round(d, 1),
        "direct_runs": [round(r["mb_per_s"], 1) for r in direct],
        "proxy_mb_per_s": round(p, 1),
        "proxy_runs": [round(r["mb_per_s"], 1) for r in proxied],
        "proxy_over_direct": round(p / d, 3),
        "cpu_endpoints_direct": cpu(direct, "endpoints_cpu_s"),
        "cpu_endpoints_proxied": cpu(proxied, "endpoints_cpu_s"),
        "cpu_proxy_process": cpu(proxied, "proxy_cpu_s"),  # None in-process
        "cpu_rest_of_machine": rest_of_machine([*direct, *proxied]),
        "proxy_counted_bytes": row["bytes_to_dst"],
        "proxy_counted_matches": row["bytes_to_dst"] == cfg.runs * total,
    }


def rest_of_machine(runs: list[dict[str, Any]]) -> dict[str, float] | None:
    """CPU seconds per wall second other processes used during the runs (besides this one and
    the proxy), and steal: above a few tenths, the throughput runs were contended."""
    if any(r["machine_cpu_s"] is None for r in runs):
        return None
    wall = sum(r["wall_s"] for r in runs)
    used = sum(r["machine_cpu_s"] - r["endpoints_cpu_s"] - (r["proxy_cpu_s"] or 0) for r in runs)
    steal = sum(r["steal_s"] for r in runs)
    return {"busy": round(max(0.0, used) / wall, 2), "steal": round(steal / wall, 2)}


async def paced(bench: Bench, cap: int, say: Say) -> dict[str, Any]:
    """A writer that never stops, on a link capped at `cap` B/s, for pace_s seconds."""
    say(f"pacing at {cap / 1e6:g} MB/s for {bench.cfg.pace_s:g} s")
    await bench.set_faults(bandwidth_bps=cap)
    client, server = await bench.pair(bench.proxy_port)
    chunk = bytes(WRITE_BYTES)
    times, totals = [0.0], [0]

    async def send() -> None:
        while True:
            await client.send_all(chunk)

    async def receive() -> None:
        while True:
            data = await server.receive_some(RECV_BYTES)
            if not data:
                raise BenchError("the paced stream ended")
            times.append(time.perf_counter() - start)
            totals.append(totals[-1] + len(data))

    start = time.perf_counter()
    with bounded(f"pacing at {cap} B/s", bench.cfg.pace_s + bench.cfg.timeout_s):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            nursery.start_soon(send)
            await trio.sleep(bench.cfg.pace_s)
            nursery.cancel_scope.cancel()
    elapsed = time.perf_counter() - start
    await close_pair(client, server)
    await bench.set_faults(bandwidth_bps=None)
    peak = 0
    for i, t0 in enumerate(times):  # bytes received in (t0, t0 + WINDOW_S]
        if t0 + WINDOW_S > elapsed:
            break
        j = bisect.bisect_right(times, t0 + WINDOW_S) - 1
        peak = max(peak, totals[j] - totals[i])
    first_s = totals[bisect.bisect_right(times, WINDOW_S) - 1]
    return {
        "cap_bps": cap,
        "seconds": round(elapsed, 3),
        "bytes": totals[-1],
        "mb_per_s": round(totals[-1] / elapsed / 1e6, 3),
        "avg_over_cap": round(totals[-1] / elapsed / cap, 3),
        "ideal_avg_over_cap": round(1 + burst_bytes(cap) / cap / elapsed, 3),
        "first_1s_over_cap": round(first_s / WINDOW_S / cap, 3),
        "max_1s_over_cap": round(peak / WINDOW_S / cap, 3),
    }


async def round_trips(bench: Bench, port: int, rounds: int) -> dict[str, float]:
    """`rounds` 1 KiB ping-pongs through `port`; RTT statistics in ms."""
    client, server = await bench.pair(port)
    msg = random.Random(bench.cfg.seed).randbytes(PING_BYTES)
    rtts = []

    async def echo() -> None:
        for _ in range(rounds):
            await server.send_all(await receive_exactly(server, PING_BYTES))

    with bounded(f"{rounds} round trips via port {port}", bench.cfg.timeout_s + rounds * 1.0):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(echo)
            for _ in range(rounds):
                t0 = time.perf_counter()
                await client.send_all(msg)
                if await receive_exactly(client, PING_BYTES) != msg:
                    raise BenchError("a round trip came back altered")
                rtts.append((time.perf_counter() - t0) * 1000)
    await close_pair(client, server)
    rtts.sort()
    return {
        "rounds": rounds,
        "median_ms": round(statistics.median(rtts), 3),
        "p90_ms": round(rtts[min(len(rtts) - 1, int(0.9 * len(rtts)))], 3),
        "min_ms": round(rtts[0], 3),
        "max_ms": round(rtts[-1], 3),
    }


async def latency(bench: Bench, say: Say) -> dict[str, Any]:
    cfg = bench.cfg
    direct = await round_trips(bench, bench.sink_port, cfg.rtt_rounds)
    through = await round_trips(bench, bench.proxy_port, cfg.rtt_rounds)
    say(f"{cfg.rounds} round trips with latency_ms={cfg.latency_ms}")
    await bench.set_faults(latency_ms=cfg.latency_ms)
    slowed = await round_trips(bench, bench.proxy_port, cfg.rounds)
    await bench.set_faults(latency_ms=None)
    expected = 2 * cfg.latency_ms + direct["median_ms"]
    added = slowed["median_ms"] - through["median_ms"]
    return {
        "latency_ms": cfg.latency_ms,
        "direct": direct,
        "proxy": through,
        "proxy_with_latency": slowed,
        "expected_median_ms": round(expected, 3),
        "excess_ms": round(slowed["median_ms"] - expected, 3),
        "added_by_latency_ms": round(added, 3),  # with latency minus without, both proxied
    }


async def blocked_then_healed(bench: Bench) -> dict[str, Any]:
    cfg = bench.cfg
    payload = random.Random(cfg.seed + 1).randbytes(cfg.block_mib << 20)
    client, server = await bench.pair(bench.proxy_port)
    await bench.set_faults(blocked=True)
    received = bytearray()
    st: dict[str, Any] = {"writes": 0, "first": None, "last": None}

    async def send() -> None:
        for off in range(0, len(payload), WRITE_BYTES):
            await client.send_all(payload[off : off + WRITE_BYTES])
            st["writes"] += 1

    async def receive() -> None:
        while len(received) < len(payload):
            data = await server.receive_some(RECV_BYTES)
            if not data:
                raise BenchError(f"the stream ended after {len(received)} bytes")
            now = time.perf_counter()
            st["first"] = st["first"] or now
            st["last"] = now
            received.extend(data)

    with bounded("the blocked-then-healed transfer", cfg.block_s + cfg.timeout_s):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(receive)
            nursery.start_soon(send)
            await trio.sleep(cfg.block_s)
            before = len(received)
            written = min(st["writes"] * WRITE_BYTES, len(payload))
            t_heal = time.perf_counter()
            await bench.control.heal()
            t_healed = time.perf_counter()
    await close_pair(client, server)
    return {
        "bytes": len(payload),
        "blocked_s": cfg.block_s,
        "received_while_blocked": before,
        "written_while_blocked": written,
        "heal_request_ms": round((t_healed - t_heal) * 1000, 3),
        "heal_to_first_byte_ms": round((st["first"] - t_heal) * 1000, 3),
        "heal_to_last_byte_ms": round((st["last"] - t_heal) * 1000, 3),
        "intact_in_order": bytes(received) == payload,
    }


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
    p.add_argument("--seed", type=int, default=None, help="default: $MINIKAFKA_SEED or 42")
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
    if args.seed is None:
        env = os.environ.get("MINIKAFKA_SEED", str(DEFAULT_SEED))
        if not env.isdigit():
            p.error(f"MINIKAFKA_SEED={env!r}: expected a non-negative integer")
        args.seed = int(env)
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
