"""The simulation's own Kafka rate and charge (tools/reassign/kafka_rate.py, fetch_size.py),
held to Kafka's published unit-test numbers and to the bytes kio serializes, never to the
brokers' code (minikafka/core/quota/stats.py, core/quota/charge.py).

Each rate test names the Kafka test it ports (apache/kafka, clients/src/test/java/org/apache/
kafka/common/metrics/... and core/src/test/scala/unit/kafka/server/...); MockTime's clock is
`now` here, advanced as the Java test's `time.sleep` does, and every measurement the Java test
makes is made here in the same order (a measurement purges and may create a sample).
"""

from __future__ import annotations

import io
import math
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import Records, i32, i64

from minikafka.tools.reassign.fetch_size import (
    EMPTY_RESPONSE_BYTES,
    fetch_response_v12_size,
    uvarint_bytes,
)
from minikafka.tools.reassign.kafka_rate import (
    QuotaSensor,
    Rate,
    RateConfig,
    SimpleRate,
    WindowedSum,
    acceptable,
)

EPS = 0.000001  # the Java tests' EPS


class Clock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.ms = start_ms  # MockTime starts at the wall clock: any origin will do

    def sleep(self, ms: int) -> None:
        self.ms += ms


def test_simple_rate_metrics_test_test_simple_rate():
    """MetricsTest.testSimpleRate: 10 samples of 1 s; the first window counts as full."""
    clock, rate = Clock(), SimpleRate()
    config = RateConfig(samples=10, window_ms=1000)

    def measure() -> float:
        return rate.measure(config, clock.ms)

    rate.record(config, 1000, clock.ms)
    assert measure() == 1000
    for step in (100, 100, 200, 600):  # 0.1, 0.2, 0.4, 1.0 s: still 1000 B over one window
        clock.sleep(step)
        assert measure() == 1000
    clock.sleep(200)
    assert measure() == 1000 / 1.2
    clock.sleep(200)
    assert measure() == 1000 / 1.4
    rate.record(config, 1000, clock.ms)
    assert measure() == 2000 / 1.4
    clock.sleep(1100)
    assert measure() == 2000 / 2.5
    rate.record(config, 1000, clock.ms)
    assert measure() == 3000 / 2.5
    clock.sleep(6500)
    assert measure() == pytest.approx(3000 / 9, abs=1)
    rate.record(config, 1000, clock.ms)
    assert measure() == pytest.approx(4000 / 9, abs=1)
    # The first sample's last event (t = 0) is 10 windows old at 10.5 s: purged; the oldest
    # start is then the sample begun at 1.4 s.
    clock.sleep(1500)
    assert measure() == pytest.approx((4000 - 1000) / (10.5 - 1.4), abs=1)
    rate.record(config, 1000, clock.ms)
    assert measure() == pytest.approx((5000 - 1000) / (10.5 - 1.4), abs=1)


def test_quota_replication_quota_manager_test_exceed_then_return_below_bound():
    """ReplicationQuotaManagerTest.shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses:
    ReplicationQuotaManagerConfig(10 samples, 1 s), Quota(100, upper). The first check creates
    the sample the window starts from; 'exceeded' is measured > 100, equal passes."""
    clock = Clock()
    quota = QuotaSensor(RateConfig(samples=10, window_ms=1000, quota=100))
    assert not quota.quota_exceeded(clock.ms)
    clock.sleep(1000)  # "First window is fixed, so we'll skip it"
    clock.sleep(500)
    quota.record(1, clock.ms)
    assert not quota.quota_exceeded(clock.ms)
    quota.record(149, clock.ms)  # 150 B, 1.5 s
    assert not quota.quota_exceeded(clock.ms)
    quota.record(1, clock.ms)  # 151 B, 1.5 s
    assert quota.measure(clock.ms) == 151 / 1.5
    assert quota.quota_exceeded(clock.ms)
    clock.sleep(500)  # 151 B, 2 s
    assert not quota.quota_exceeded(clock.ms)
    assert quota.measure(clock.ms) == pytest.approx(151 / 2, abs=0.1)
    clock.sleep(500)
    quota.record(99, clock.ms)  # 250 B, 2.5 s: exactly the bound, acceptable
    assert quota.measure(clock.ms) == 250 / 2.5
    assert not quota.quota_exceeded(clock.ms)
    quota.record(1, clock.ms)
    assert quota.quota_exceeded(clock.ms)
    assert quota.measure(clock.ms) == 251 / 2.5
    clock.sleep(2 * 1000)
    assert not quota.quota_exceeded(clock.ms)
    assert quota.measure(clock.ms) == 251 / 4.5


def test_rate_metrics_test_test_rate_windowing():
    """MetricsTest.testRateWindowing: 3 samples of the default 30 s; 100 recorded at 0 and
    30 s, measured at 75 s: 200 / 75 s, and nothing once every sample has expired."""
    clock, rate = Clock(), Rate()
    config = RateConfig(samples=3, window_ms=30_000)
    for _ in range(config.samples - 1):
        rate.record(config, 100, clock.ms)
        clock.sleep(config.window_ms)
    clock.sleep(config.window_ms // 2)
    elapsed_s = config.window_ms / 1000 * (config.samples - 0.5)
    assert rate.measure(config, clock.ms) == pytest.approx(200 / elapsed_s, abs=EPS)
    assert rate.window_size(config, clock.ms) / 1000 == pytest.approx(elapsed_s, abs=EPS)
    clock.sleep(config.window_ms * config.samples)
    assert rate.measure(config, clock.ms) == pytest.approx(0, abs=EPS)


@pytest.mark.parametrize(("samples", "window_s"), [(1, 1), (1, 11), (11, 1), (11, 11)])
def test_rate_rate_test_with_no_prior_available_samples(samples, window_s):
    """RateTest.testRateWithNoPriorAvailableSamples: a fresh Rate counts N - 1 empty windows
    before its first one."""
    clock, rate = Clock(), Rate()
    config = RateConfig(samples=samples, window_ms=window_s * 1000)
    rate.record(config, 50.0, clock.ms)
    measured_ms = window_s * 1000 - 1
    clock.sleep(measured_ms)
    observed = rate.measure(config, clock.ms)
    window_s_assumed = measured_ms / 1000 + (samples - 1) * window_s
    assert observed == pytest.approx(50.0 / window_s_assumed, abs=EPS)


def test_rate_rate_test_is_consistent_after_the_first_window():
    """RateTest.testRateIsConsistentAfterTheFirstWindow: an event every ~100 ms reads 10-11/s
    from the second window on, and a repeated measurement at the same time is the same."""
    clock, rate = Clock(), Rate()
    config = RateConfig(samples=2, window_ms=1000)
    steps = [0, 99, 100, 100, 100, 100, 100, 100, 100, 100, 100]
    for step in steps:
        clock.sleep(step)
        rate.record(config, 1, clock.ms)
    clock.sleep(101)
    for step in steps:
        clock.sleep(step)
        rate.record(config, 1, clock.ms)
        observed = rate.measure(config, clock.ms)
        assert 10 <= observed <= 11
        assert rate.measure(config, clock.ms) == observed


def live_samples(stat: WindowedSum, config: RateConfig, now_ms: int) -> int:
    """SampledStatTest's SampleCount (a sample is 1 once recorded into): the samples with an
    event after the purge a measurement makes."""
    stat.measure(config, now_ms)
    return sum(1 for s in stat.samples if s.event_count)


def complete_sample(stat: WindowedSum, config: RateConfig, clock: Clock) -> None:
    """SampledStatTest.completeSample: events at a sample's start and end, clock at its end."""
    stat.record(config, 1, clock.ms)
    clock.sleep(config.window_ms - 1)
    stat.record(config, 1, clock.ms)
    clock.sleep(1)


@pytest.mark.parametrize(
    ("story", "expected"),
    [("purged_if_no_overlap", 0), ("kept_if_overlaps", 1), ("kept_if_overlaps_and_extra", 3)],
)
def test_sampled_stat_sampled_stat_test(story, expected):
    """SampledStatTest: 2 samples of 1 s, so a sample lives until its LAST event is 2 s old;
    the ring holds N + 1 samples, so three can be live at once."""
    clock, stat = Clock(), WindowedSum()
    config = RateConfig(samples=2, window_ms=1000)
    complete_sample(stat, config, clock)
    if story == "purged_if_no_overlap":
        clock.sleep(2500)
    elif story == "kept_if_overlaps":
        clock.sleep(1500)
    else:
        clock.sleep(100)
        complete_sample(stat, config, clock)
        clock.sleep(100)
        stat.record(config, 1, clock.ms)
    assert live_samples(stat, config, clock.ms) == expected


def test_windowed_sum_metrics_test_time_windowing_and_initial_value():
    """MetricsTest.testTimeWindowing (WindowedCount: a sum of ones, 1 ms windows, 2 samples)
    and testSampledStatReturnsInitialValueWhenNoValuesExist (expired: the initial 0)."""
    clock, count = Clock(), WindowedSum()
    config = RateConfig(samples=2, window_ms=1)
    count.record(config, 1.0, clock.ms)
    clock.sleep(1)
    count.record(config, 1.0, clock.ms)
    assert count.measure(config, clock.ms) == pytest.approx(2.0, abs=EPS)
    clock.sleep(1)
    count.record(config, 1.0, clock.ms)  # the oldest event times out
    assert count.measure(config, clock.ms) == pytest.approx(2.0, abs=EPS)

    clock, total = Clock(), WindowedSum()
    config = RateConfig(samples=2, window_ms=100)
    total.record(config, 50, clock.ms)
    clock.sleep(2 * 100)
    assert total.measure(config, clock.ms) == 0.0


def test_quota_metrics_test_test_quotas_upper_bound_is_inclusive():
    """MetricsTest.testQuotas: Quota.upperBound(5.0) accepts 5.0 and refuses 6.0."""
    assert acceptable(5.0, 5.0)
    assert not acceptable(6.0, 5.0)
    assert QuotaSensor(RateConfig(samples=1, window_ms=1000)).quota_exceeded(0) is False


def test_simple_rate_oldest_is_the_earliest_start_after_the_ring_wraps():
    """Our own arithmetic (SampledStat.oldest scans the ring): 2 samples of 1 s, one event per
    second from 0 s; the fourth record reuses slot 0 (start 3 s). At 3.5 s the purge resets the
    sample last written at 1 s (2.5 s old) to start at 3.5 s, so the oldest start is 2 s, not
    slot 0's: 2 events / 1.5 s."""
    clock, rate = Clock(0), SimpleRate()
    config = RateConfig(samples=2, window_ms=1000)
    for _ in range(4):
        rate.record(config, 1, clock.ms)
        clock.sleep(1000)
    clock.sleep(-500)  # back to 3.5 s: the last record was at 3 s
    assert [s.start_ms for s in rate.stat.samples] == [3000, 1000, 2000]
    assert rate.measure(config, clock.ms) == 2 / 1.5
    assert [s.start_ms for s in rate.stat.samples] == [3000, 3500, 2000]


def test_rate_config_refuses_empty_windows():
    with pytest.raises(ValueError, match="must be >= 1"):
        RateConfig(samples=0, window_ms=1000)


# -- the leader's charge: FetchResponse v12's size against kio's bytes ------------------------


def kio_size(runs: list[tuple[str, int, int]]) -> int:
    """4 + the bytes kio writes for a v12 FetchResponse holding these partitions, grouped into
    topics as Kafka's toMessage groups them, every field at a non-trivial value."""
    topics: list[tuple[str, list[PartitionData]]] = []
    index = 0
    for topic, records_bytes, count in runs:
        for _ in range(count):
            part = PartitionData(
                partition_index=i32(index),
                error_code=ErrorCode.none,
                high_watermark=i64(10**12 + index),
                last_stable_offset=i64(10**12),
                log_start_offset=i64(7),
                aborted_transactions=None,
                preferred_read_replica=i32(-1),
                records=Records(b"\x01" * records_bytes),
            )
            index += 1
            if topics and topics[-1][0] == topic:
                topics[-1][1].append(part)
            else:
                topics.append((topic, [part]))
    response = FetchResponse(
        throttle_time=timedelta(milliseconds=0),
        error_code=ErrorCode.none,
        session_id=i32(123456),
        responses=tuple(
            FetchableTopicResponse(topic=TopicName(name), partitions=tuple(parts))
            for name, parts in topics
        ),
    )
    out = io.BytesIO()
    entity_writer(FetchResponse)(out, response)
    return 4 + len(out.getvalue())


@pytest.mark.parametrize(
    "runs",
    [
        [],
        [("t", 0, 1)],
        [("t", 0, 100)],
        [("t", 1_048_576, 10)],  # ten whole 1 MiB partitions: a default-size response
        [("t", 126, 1), ("t", 127, 1), ("t", 16_383, 1), ("t", 16_384, 1)],  # varint edges
        [("events", 5000, 3), ("t", 0, 2), ("events", 7, 1)],  # a topic seen twice
        [("ü-topic", 10, 2)],  # a name's UTF-8 bytes, not its characters
        [("t", 0, 127)],  # 128 partitions: the array length needs two varint bytes
    ],
    ids=["empty", "one", "hundred-empty", "ten-mib", "varints", "topics", "utf8", "count"],
)
def test_charge_is_the_size_kio_serializes(runs):
    assert fetch_response_v12_size(runs) == kio_size(runs)


def test_charge_arithmetic_by_hand():
    # 4 frame + 10 fixed + 1 (one-element array: varint 2) + 1 tagged = 16 for no partition.
    assert EMPTY_RESPONSE_BYTES == 16
    # One empty partition of topic "t": + name 1 + 1, partitions array 1, 36 + records 1,
    # the topic's tagged fields 1.
    assert fetch_response_v12_size([("t", 0, 1)]) == 16 + 2 + 1 + 37 + 1
    assert [uvarint_bytes(n) for n in (0, 127, 128, 16_383, 16_384)] == [1, 1, 2, 2, 3]
    assert math.isclose(fetch_response_v12_size([("t", 0, 0)]), 16)
