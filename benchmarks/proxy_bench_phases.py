"""The phases of proxy_bench.py, and the bench they run on: a sink listener (node 2), one
proxied link 1->2 and the proxy's control client (proxy_bench.py's docstring says what each
phase measures and how).

Rules: every wait is bounded by the run's `timeout_s` (`bounded`), and a phase that fails raises
`BenchError` with one line; each phase closes the connections it opened.
"""

from __future__ import annotations

import bisect
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from bench_harness import BenchError, Say

from minikafka.faults.control import FaultProxyClient
from minikafka.faults.links import burst_bytes
from minikafka.testing.seeds import derive_rng

HOST = "127.0.0.1"
LINK = (1, 2)
WRITE_BYTES = 64 * 1024
RECV_BYTES = 1 << 20
PING_BYTES = 1024
WINDOW_S = 1.0  # the sliding window of the pacing peak


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
    chunk = derive_rng(cfg.seed, "throughput-bytes").randbytes(WRITE_BYTES)
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
    msg = derive_rng(bench.cfg.seed, "ping-bytes").randbytes(PING_BYTES)
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
    payload = derive_rng(cfg.seed, "blocked-bytes").randbytes(cfg.block_mib << 20)
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
