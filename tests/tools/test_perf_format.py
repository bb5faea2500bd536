"""tools/perf_format.py: Kafka's perf-tool lines, parsed the way scripts parse Kafka's."""

from __future__ import annotations

import re

from minikafka.tools.perf_format import (
    CONSUMER_HEADER,
    consumer_perf_lines,
    producer_perf_line,
    weighted_percentiles,
)

# The total line of Kafka's ProducerPerformance, as scripts match it.
KAFKA_PRODUCER_LINE = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)


def test_weighted_percentiles_equal_kafkas_over_the_expanded_list() -> None:
    pairs = [(5, 3), (1, 10), (40, 1), (9, 6)]
    expanded = sorted(ms for ms, n in pairs for _ in range(n))  # 20 per-record latencies
    qs = (0.0, 0.5, 0.95, 0.99, 0.999)
    assert weighted_percentiles(pairs, qs) == [expanded[int(q * len(expanded))] for q in qs]
    assert weighted_percentiles([], qs) == [0] * len(qs)


def test_producer_line_has_kafkas_shape_and_figures() -> None:
    # 1,048,576 records of 100 B in 2 s: 524,288 rec/s and 50.00 MB/s with MB = 2^20.
    line = producer_perf_line(
        records=1_048_576,
        bytes_sent=104_857_600,
        elapsed_ms=2000,
        latencies=[(3, 1_000_000), (250, 48_576)],
    )
    m = KAFKA_PRODUCER_LINE.match(line)
    assert m, line
    assert m.group(2) == "524288.000000"  # Java's %f
    assert m.group(3) == "50.00"
    avg = (3 * 1_000_000 + 250 * 48_576) / 1_048_576
    assert m.group(4) == f"{avg:.2f}" and m.group(5) == "250.00"
    assert [int(m.group(i)) for i in range(6, 10)] == [
        3,
        3,
        250,
        250,
    ]  # 95th: index 996,147 < 1,000,000


def test_consumer_lines_have_kafkas_columns() -> None:
    header, line = consumer_perf_lines(
        start_ms=1_700_000_000_000, end_ms=1_700_000_004_000, records=400_000,
        bytes_read=40 * 1024 * 1024, rebalance_ms=0,
    )  # fmt: skip
    assert header == CONSUMER_HEADER
    cells = [c.strip() for c in line.split(",")]
    assert len(cells) == len(header.split(","))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", cells[0])
    assert cells[2:] == ["40.0000", "10.0000", "400000", "100000.0000", "0", "4000",
                         "10.0000", "100000.0000"]  # fmt: skip
