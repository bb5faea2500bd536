"""Kafka's perf tools' summary lines, so that scripts written for them parse ours.

- `producer_perf_line`: kafka-producer-perf-test's total line (ProducerPerformance.Stats
  .printTotal): records/sec with Java's `%f`, MB = 2^20 bytes, latencies in whole ms per record,
  percentiles as `latencies[(int) (p * size)]` over the sorted per-record latencies.
- `consumer_perf_lines`: kafka-consumer-perf-test's header and line (ConsumerPerformance):
  times as `yyyy-MM-dd HH:mm:ss:SSS`, MB = 2^20 bytes, `%.4f`; rebalance.time.ms is the time
  to join a group (0 without one), fetch.time.ms the rest.

Our producer measures latency per batch (send to acknowledgement), so each record of a batch
gets its batch's latency; the lines take (latency_ms, records) pairs for that reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

MB = 1024 * 1024
CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def weighted_percentiles(
    latencies: Iterable[tuple[int, int]], quantiles: Iterable[float]
) -> list[int]:
    """Kafka's `latencies[(int) (q * size)]` over the per-record latencies that the
    (latency_ms, records) pairs stand for, without expanding them."""
    pairs = sorted((ms, n) for ms, n in latencies if n > 0)
    size = sum(n for _ms, n in pairs)
    out = []
    for q in quantiles:
        if size == 0:
            out.append(0)
            continue
        index, seen = int(q * size), 0
        for ms, n in pairs:
            seen += n
            if index < seen:
                out.append(ms)
                break
    return out


def producer_perf_line(
    *, records: int, bytes_sent: int, elapsed_ms: int, latencies: Iterable[tuple[int, int]]
) -> str:
    """kafka-producer-perf-test's last line for a run."""
    pairs = list(latencies)
    elapsed_ms = max(elapsed_ms, 1)
    total = sum(ms * n for ms, n in pairs)
    count = sum(n for _ms, n in pairs)
    p50, p95, p99, p999 = weighted_percentiles(pairs, (0.5, 0.95, 0.99, 0.999))
    return (
        f"{records} records sent, {1000.0 * records / elapsed_ms:f} records/sec "
        f"({1000.0 * bytes_sent / elapsed_ms / MB:.2f} MB/sec), "
        f"{total / count if count else 0.0:.2f} ms avg latency, "
        f"{float(max((ms for ms, _n in pairs), default=0)):.2f} ms max latency, "
        f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th."
    )


def _java_time(epoch_ms: int) -> str:
    """SimpleDateFormat("yyyy-MM-dd HH:mm:ss:SSS") in the local time zone, as Kafka prints."""
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f":{millis:03d}"


def consumer_perf_lines(
    *, start_ms: int, end_ms: int, records: int, bytes_read: int, rebalance_ms: int = 0
) -> tuple[str, str]:
    """kafka-consumer-perf-test's header and line (wall-clock epoch ms for start and end)."""
    elapsed_s = max(end_ms - start_ms, 1) / 1000
    fetch_ms = max(end_ms - start_ms - rebalance_ms, 0)
    fetch_s = max(fetch_ms, 1) / 1000
    mb = bytes_read / MB
    line = (
        f"{_java_time(start_ms)}, {_java_time(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, "
        f"{records}, {records / elapsed_s:.4f}, {rebalance_ms}, {fetch_ms}, "
        f"{mb / fetch_s:.4f}, {records / fetch_s:.4f}"
    )
    return CONSUMER_HEADER, line
