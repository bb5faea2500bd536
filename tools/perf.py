"""Produce load generator (in the spirit of kafka-producer-perf-test).

Records of `record_size` bytes are packed into batches of about `batch_bytes`; batches go to the
topic's partitions round-robin, several partitions per Produce request (one per leader), with
`in_flight` requests outstanding (the idempotent producer, on by default with acks=all, keeps
at most 5 batches per partition unresolved). An optional target rate paces the sends. The load
is the kit's (minikafka/testing/load.py): bounded by `num_records` and `max_s`. The report gives
records/s, MB/s and per-batch latency percentiles (send to acknowledgement), and the same run
as kafka-producer-perf-test's total line (`kafka_summary`, tools/perf_format.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from minikafka.client.cluster_client import open_client
from minikafka.core.records import make_batch
from minikafka.errors import ConfigError
from minikafka.testing.load import Bounds, Rate, load_producer, run_senders
from minikafka.tools.perf_format import producer_perf_line


@dataclass(frozen=True, slots=True, kw_only=True)
class PerfSpec:
    topic: str
    num_records: int
    record_size: int = 100
    throughput: float = -1  # records/s; -1 = unthrottled
    batch_bytes: int = 100_000
    acks: int = -1
    in_flight: int = 8
    batches_per_request: int = 10
    # Kafka's enable.idempotence: None = on with acks=all (the producer's default), else off.
    idempotence: bool | None = None
    max_s: float = 24 * 3600.0  # the run's time bound (its count bound is num_records)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


async def run_produce_perf(
    bootstrap: str, spec: PerfSpec, progress: Callable[[str], None] | None = None
) -> dict[str, object]:
    per_batch = max(1, spec.batch_bytes // spec.record_size)
    value = os.urandom(spec.record_size)
    async with open_client(bootstrap, client_id="minikafka-perf") as client:
        await client.refresh_metadata([spec.topic])
        tps = client.partitions_of(spec.topic)
        if not tps:
            raise ConfigError(
                f"unknown topic {spec.topic!r}: create it first (minikafka topics create)"
            )
        now = int(time.time() * 1000)
        full = make_batch([(now, None, value)] * per_batch)
        tail_count = spec.num_records % per_batch
        n_batches = spec.num_records // per_batch + (1 if tail_count else 0)
        producer = load_producer(client, acks=spec.acks, idempotence=spec.idempotence)
        latencies: list[float] = []
        record_latencies: list[tuple[int, int]] = []  # (ms, records): Kafka's per-record view
        sent = {"records": 0, "bytes": 0}
        next_batch = 0
        start = trio.current_time()
        pace = Rate(spec.throughput, start) if spec.throughput > 0 else None
        bounds = Bounds(until=start + spec.max_s, max_sends=n_batches, cut=True)

        def take() -> list[tuple]:
            nonlocal next_batch
            items = []
            while next_batch < n_batches and len(items) < spec.batches_per_request:
                count = tail_count if (next_batch == n_batches - 1 and tail_count) else per_batch
                batch = full if count == per_batch else make_batch([(now, None, value)] * count)
                items.append((tps[next_batch % len(tps)], batch, count))
                next_batch += 1
            return items

        async def send(_k: int) -> bool:
            items = take()
            if not items:
                return False
            if pace is not None:  # the first record of this request may go when it is due
                await pace.wait_for(sent["records"])
            t0 = trio.current_time()
            await producer.send_batches(items)
            dt = (trio.current_time() - t0) * 1000
            latencies.extend([dt] * len(items))
            record_latencies.append((int(dt), sum(c for _tp, _b, c in items)))
            sent["records"] += sum(c for _tp, _b, c in items)
            sent["bytes"] += sum(c * spec.record_size for _tp, _b, c in items)
            return True

        async def reporter() -> None:
            while progress is not None:
                await trio.sleep(1)
                el = trio.current_time() - start
                progress(
                    f"  {sent['records']:>10} records  {sent['bytes'] / el / 1e6:8.1f} MB/s  {sent['records'] / el:10.0f} rec/s"
                )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reporter)
            await run_senders(spec.in_flight, send, bounds)
            nursery.cancel_scope.cancel()
        elapsed = trio.current_time() - start
    latencies.sort()
    mb_s = sent["bytes"] / elapsed / 1e6
    rec_s = sent["records"] / elapsed
    report = {
        "records": sent["records"],
        "bytes": sent["bytes"],
        "elapsed_s": round(elapsed, 3),
        "records_per_s": round(rec_s, 1),
        "mb_per_s": round(mb_s, 2),
        "batch_latency_ms": {
            q: round(percentile(latencies, v), 1)
            for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
        },
        "retries": producer.retries,
        "idempotence": producer.idempotent,
        "window_waits": producer.deferred,
        "throttle_time_ms_total": producer.throttle_time_ms_total,
    }
    lat = report["batch_latency_ms"]
    report["summary"] = (
        f"{sent['records']} records sent, {rec_s:.1f} records/sec ({mb_s:.2f} MB/sec), "
        f"batch latency p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms, max {lat['max']} ms"
        + (
            f", throttled {producer.throttle_time_ms_total} ms (client quota)"
            if producer.throttle_time_ms_total
            else ""
        )
    )
    # The same run in kafka-producer-perf-test's words, for scripts that parse Kafka's line.
    report["kafka_summary"] = producer_perf_line(
        records=sent["records"],
        bytes_sent=sent["bytes"],
        elapsed_ms=int(elapsed * 1000),
        latencies=record_latencies,
    )
    return report
