"""Fire mutated requests at a running node over TCP, on both listeners (docs/front-door.md).

A malformed request closes its connection, so each request gets a connection of its own: the
frame is sent, the write side closed (EOF: a request that still decoded is answered, then the
broker closes), and the answer read to the end. Pipelining on one connection cannot help (the
first malformed request ends it), so the rate comes from many connections at once
(`concurrency`, below the node's max.connections.per.ip), kept full: a new one opens as soon
as one ends. After every `batch` requests, while the next ones go on, the node must
still answer a valid request on each listener (Kafka ApiVersions v3, native ApiVersions) and
its RSS is read from /proc/<pid>/status. A node that stops answering is a death: the run stops
there and keeps the batch's requests for the reproduction.

`python -m minikafka.testing.fuzz_driver --native HOST:PORT --kafka HOST:PORT --pid PID -n N`
runs it against any node; tests/integration/test_fuzz_node.py starts one.
"""

from __future__ import annotations

import argparse
import random
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import trio
from kio.schema.api_versions.v3.request import ApiVersionsRequest as KafkaApiVersions

from minikafka.testing.fuzz import KAFKA_SERVED, encode_kafka, examples, kafka_request
from minikafka.testing.fuzz import mutate_kafka as _mutate_kafka
from minikafka.testing.fuzz_native import NATIVE_SERVED, mutate_native, native_request
from minikafka.wire.codec import RequestHeader, encode_request
from minikafka.wire.messages import ApiKey, ApiVersionsRequest

Address = tuple[str, int]


@dataclass(kw_only=True)
class FuzzReport:
    sent: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # closed, answered, slow, reset
    mutations: Counter[str] = field(default_factory=Counter)
    deaths: int = 0
    rss_kib: list[int] = field(default_factory=list)
    seconds: float = 0.0
    node_cpu_s: float = 0.0
    peak_rss_kib: int = 0  # the node's VmHWM at the end: its highest RSS ever
    death_batch: list[tuple[str, bytes]] = field(default_factory=list)
    slow: list[tuple[str, bytes]] = field(default_factory=list)  # the first few, to look at

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        rss = f"{min(self.rss_kib)}..{max(self.rss_kib)} KiB" if self.rss_kib else "n/a"
        return (
            f"{self.sent} requests in {self.seconds:.0f} s ({self.rate:.0f}/s), "
            f"deaths {self.deaths}, RSS {rss} (peak {self.peak_rss_kib} KiB), "
            f"node CPU {self.node_cpu_s:.0f} s, "
            f"outcomes {dict(self.outcomes)}"
        )


def corpus(seed: int, per_api: int) -> tuple[list[bytes], list[bytes]]:
    """Valid payloads: `per_api` of every served Kafka API/version and native request."""
    kafka = [p for kv in KAFKA_SERVED for p in examples(kafka_request(*kv), per_api, seed)]
    native = [p for cls in NATIVE_SERVED for p in examples(native_request(cls), per_api, seed)]
    return kafka, native


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (/proc/<pid>/stat, clock ticks)."""
    import os

    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int, field_name: str = "VmRSS") -> int:
    """The resident set of a process now (VmRSS), or its peak so far (VmHWM: a spike freed
    before anyone looks, such as a decompression bomb inflated then dropped, shows there)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1])
    raise ValueError(f"no {field_name} for pid {pid}")


async def exchange(address: Address, payload: bytes, timeout_s: float) -> tuple[str, bytes]:
    """Send one framed request, close our side, read to the end: (outcome, what came back).
    A plain socket: trio.open_tcp_stream's happy eyeballs cost more than the request."""
    got = bytearray()
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    stream = trio.SocketStream(sock)
    try:
        with trio.move_on_after(timeout_s) as scope:
            await sock.connect(address)
            await stream.send_all(struct.pack(">I", len(payload)) + payload)
            await stream.send_eof()
            while data := await stream.receive_some(65536):
                got += data
        if scope.cancelled_caught:
            return "slow", bytes(got)
        return ("answered" if got else "closed"), bytes(got)
    except ConnectionRefusedError:
        return "refused", b""
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return "reset", bytes(got)
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


def _kafka_probe() -> bytes:
    return encode_kafka(
        KafkaApiVersions(client_software_name="fuzz", client_software_version="1"),
        correlation_id=1,
    )


def _native_probe() -> bytes:
    header = RequestHeader(
        api_key=ApiKey.API_VERSIONS, api_version=0, correlation_id=1, client_id="fuzz"
    )
    return encode_request(header, ApiVersionsRequest())


async def alive(native: Address, kafka: Address, timeout_s: float = 10.0) -> bool:
    """The node answers a valid request on each listener."""
    for address, probe in ((kafka, _kafka_probe()), (native, _native_probe())):
        outcome, got = await exchange(address, probe, timeout_s)
        if outcome != "answered" or len(got) < 8:
            return False
    return True


async def fuzz_node(
    *,
    native: Address,
    kafka: Address,
    pid: int,
    requests: int,
    seed: int = 0,
    per_api: int = 3,
    concurrency: int = 48,
    batch: int = 1000,
    timeout_s: float = 5.0,
    progress_every_s: float = 60.0,
) -> FuzzReport:
    """Send `requests` mutated requests, half to each listener; stop at the first death."""
    kafka_pool, native_pool = corpus(seed, per_api)
    rng = random.Random(seed)
    report = FuzzReport(rss_kib=[rss_kib(pid)])
    limit = trio.Semaphore(concurrency)
    start = last_print = time.monotonic()
    cpu_at_start = cpu_seconds(pid)

    async def fire(listener: str, address: Address, payload: bytes) -> None:
        try:
            outcome, _got = await exchange(address, payload, timeout_s)
            report.outcomes[outcome] += 1
            if outcome == "slow" and len(report.slow) < 20:
                report.slow.append((listener, payload))
        finally:
            limit.release()

    recent: list[tuple[str, bytes]] = []  # since the last liveness check, for a death
    async with trio.open_nursery() as nursery:
        while report.sent < requests and not report.deaths:
            listener, address, name, payload = _case(rng, kafka_pool, native_pool, kafka, native)
            await limit.acquire()
            report.mutations[name] += 1
            recent.append((listener, payload))
            nursery.start_soon(fire, listener, address, payload)
            report.sent += 1
            if report.sent % batch and report.sent < requests:
                continue
            # The node answers valid requests while the next batch goes on.
            if not await alive(native, kafka):
                report.deaths += 1
                report.death_batch = recent
            recent = []
            report.rss_kib.append(rss_kib(pid))
            report.seconds = time.monotonic() - start
            report.node_cpu_s = cpu_seconds(pid) - cpu_at_start
            report.peak_rss_kib = rss_kib(pid, "VmHWM")
            if time.monotonic() - last_print >= progress_every_s:
                last_print = time.monotonic()
                print(f"fuzz: {report.summary()}", flush=True)
    report.seconds = time.monotonic() - start
    return report


def _case(
    rng: random.Random,
    kafka_pool: list[bytes],
    native_pool: list[bytes],
    kafka: Address,
    native: Address,
) -> tuple[str, Address, str, bytes]:
    """(listener, its address, mutation name, payload): half to each listener."""
    if rng.random() < 0.5:
        name, payload = _mutate_kafka(rng.choice(kafka_pool), rng)
        return "kafka", kafka, f"kafka:{name}", payload
    name, payload = mutate_native(rng.choice(native_pool), rng)
    return "native", native, f"native:{name}", payload


def _address(text: str) -> Address:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--native", type=_address, required=True)
    parser.add_argument("--kafka", type=_address, required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("-n", "--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=48)
    args = parser.parse_args()
    report = trio.run(
        lambda: fuzz_node(
            native=args.native,
            kafka=args.kafka,
            pid=args.pid,
            requests=args.requests,
            seed=args.seed,
            concurrency=args.concurrency,
        )
    )
    print(report.summary())
    raise SystemExit(1 if report.deaths else 0)


if __name__ == "__main__":
    main()
