"""Windowed rates, averages and maxima, sensors and their config (core/quota/stats.py): a fresh
sensor, the bound, the ring of samples, config, Avg and Max.

Kafka's metrics and quota test stories in spirit (MetricsTest, SampledStatTest, RateTest,
ClientQuotaManagerTest, ReplicationQuotaManagerTest), with the arithmetic in the comments. The
clock is a plain int: N samples of W ms, times in ms.
"""

from __future__ import annotations

import math

import pytest

from minikafka.core.quota.stats import Avg, Max, MetricConfig, Rate, Sensor, SimpleRate
from minikafka.errors import ConfigError
from minikafka.testing.sensors import sensor

# -- a fresh sensor -------------------------------------------------------------------------------


def test_simple_rate_first_recording_counts_one_full_window() -> None:
    s = sensor(SimpleRate)
    s.record(1000, 0)
    # window = max(0 - 0, W) = 1000 ms -> 1000 B / 1 s
    assert s.stat.window_size_ms(0) == 1000
    assert s.measure(0) == 1000.0
    # t=500: still max(500, 1000) = 1000 ms
    assert s.measure(500) == 1000.0
    # t=2000: the true elapsed time, 2000 ms -> 500 B/s
    assert s.stat.window_size_ms(2000) == 2000
    assert s.measure(2000) == 500.0


def test_rate_first_recording_counts_n_minus_1_windows() -> None:
    s = sensor(Rate)
    s.record(1000, 0)
    # elapsed 0, full windows 0 < N-1 = 10: window = 0 + 10 * 1000 -> 1000 B / 10 s = 100 B/s
    assert s.stat.window_size_ms(0) == 10_000
    assert s.measure(0) == 100.0
    # t=500: 500 + 10 * 1000 = 10500 ms
    assert s.stat.window_size_ms(500) == 10_500
    # t=1000: one full window, 1000 + 9 * 1000 = 10000 ms: the padded window falls back by W
    assert s.stat.window_size_ms(1000) == 10_000
    # t=10999: 10 full windows = N - 1, no padding: 1000 B / 10.999 s
    assert s.stat.window_size_ms(10_999) == 10_999
    # t=11000: 11000 - last event 0 >= N*W: the sample expires and restarts empty at 11000,
    # so elapsed is 0 again and the window is padded back to 10 s.
    assert s.stat.total(11_000) == 0.0
    assert s.stat.window_size_ms(11_000) == 10_000


def test_rate_window_is_at_least_one_ms() -> None:
    # N = 1: no padding (N - 1 = 0 prior windows); measured at the sample's first instant the
    # elapsed time is 0, which Kafka lifts to 1 ms: 5 B / 0.001 s = 5000 B/s.
    s = sensor(Rate, samples=1)
    s.record(5, 0)
    assert s.stat.window_size_ms(0) == 1
    assert s.measure(0) == 5000.0
    assert s.stat.window_size_ms(400) == 400  # then the true elapsed time


def test_measuring_before_any_record_starts_the_window() -> None:
    # SampledStat.oldest creates the first sample at the time of the first measurement.
    early = sensor(SimpleRate)
    assert early.measure(5000) == 0.0  # sample created, start = 5000
    early.record(1000, 5900)  # 5900 - 5000 < W: same sample
    # t=6800: window = max(6800 - 5000, 1000) = 1800 ms -> 1000 / 1.8 = 555.5 B/s
    assert early.measure(6800) == pytest.approx(1000 / 1.8)

    late = sensor(SimpleRate)
    late.record(1000, 5900)  # first sample starts at the record
    # t=6800: max(900, 1000) = 1000 ms -> 1000 B/s
    assert late.measure(6800) == 1000.0


# -- bound: exceeded, equal, falling back --------------------------------------------------------


def test_quota_exceeded_then_falls_back_as_time_passes() -> None:
    s = sensor(SimpleRate, quota=1000.0)
    s.record(3000, 0)  # recorded although it is 3x the bound
    assert s.measure(0) == 3000.0 and s.quota_exceeded(0)
    assert s.quota_exceeded(2000)  # 3000 / 2 s = 1500 > 1000
    assert s.quota_exceeded(2999)  # 3000 / 2.999 s = 1000.33 > 1000
    assert s.measure(3000) == 1000.0 and not s.quota_exceeded(3000)  # 3000 / 3 s: equal is fine
    assert s.measure(10_999) == pytest.approx(3000 / 10.999)  # 272.7: the sample is still live
    # t=11000: 11000 - last event 0 >= N*W = 11000: purged (start 11000, value 0)
    assert s.stat.total(11_000) == 0.0
    assert s.measure(11_000) == 0.0


def test_a_zero_bound_holds_back_everything_once_anything_is_measured() -> None:
    # A replication rate of 0 (accepted, as Kafka's atLeast(0) accepts it). Quota.acceptable(0)
    # is `measured <= 0`: true only for a measured 0.
    s = sensor(SimpleRate, quota=0.0)
    assert s.measure(0) == 0.0 and not s.quota_exceeded(0)  # nothing measured: acceptable
    s.record(1, 0)  # one byte
    for t in (0, 1000, 5000, 10_999):  # 1 B / max(t, 1 s) > 0 while the sample lives
        assert s.quota_exceeded(t), t
    # t=11000: the sample is N*W old and purged: measured 0 is acceptable again (a fetcher
    # that recorded nothing meanwhile may send one more response; see docs/throttling.md#overshoot).
    assert not s.quota_exceeded(11_000)
    # The precise mode's allowance is T * window - S' = 0 - S' <= 0: it never admits a byte.
    fresh = sensor(SimpleRate, quota=0.0)
    for t in (0, 500, 20_000):
        assert fresh.precise_remaining_bytes(t) <= 0 and s.precise_remaining_bytes(t) <= 0
        assert fresh.remaining_bytes(t) <= 0


def test_equal_is_acceptable() -> None:
    s = sensor(Rate, quota=100.0)
    s.record(1000, 0)
    # 1000 B / 10 s (elapsed 0, padded to N - 1 = 10 whole windows) = 100 B/s == bound
    assert s.measure(0) == 100.0
    assert not s.quota_exceeded(0)
    assert s.throttle_time_ms(0) == 0
    s.record(1, 0)  # 1001 / 10 = 100.1 > 100
    assert s.quota_exceeded(0)
    assert s.throttle_time_ms(0) == 10  # (100.1 - 100) / 100 * 10000 = 10 ms


def test_no_quota_is_never_exceeded() -> None:
    s = sensor(SimpleRate)
    s.record(10**12, 0)
    assert not s.quota_exceeded(0)
    assert s.throttle_time_ms(0) == 0
    assert s.remaining_bytes(0) == math.inf


def test_change_of_quota_keeps_the_samples() -> None:
    # ClientQuotaManagerTest.testQuotaParsing in spirit: quota 2000 B/s, 2500 * 11 B recorded.
    s = sensor(Rate, quota=2000.0)
    s.record(2500 * 11, 0)
    # 27500 B / 10 s = 2750 B/s > 2000: throttle (2750 - 2000) / 2000 * 10000 = 3750 ms
    assert s.throttle_time_ms(0) == 3750
    s.reconfigure(MetricConfig(quota=3000.0))
    # same 27500 B of history, now under the bound: 2750 <= 3000
    s.record(0, 0)
    assert s.measure(0) == 2750.0
    assert s.throttle_time_ms(0) == 0
    s.reconfigure(MetricConfig(quota=500.0))
    # the history is still there: (2750 - 500) / 500 * 10000 = 45000 ms
    assert s.throttle_time_ms(0) == 45_000
    s.reconfigure(MetricConfig(quota=None))
    assert not s.quota_exceeded(0) and s.measure(0) == 2750.0


def test_change_of_window_keeps_the_samples() -> None:
    s = sensor(SimpleRate, window_ms=1000)
    s.record(1000, 0)
    assert s.measure(500) == 1000.0  # max(500, 1000) ms
    s.reconfigure(MetricConfig(window_ms=2000))
    assert s.measure(500) == 500.0  # max(500, 2000) ms: same 1000 B over 2 s


def test_change_of_sample_count_keeps_the_newest_samples() -> None:
    # N = 3, W = 1000: four slots. 100 B each at 0, 999 (slot 0, last event 999), 1000
    # (slot 1), 2000, 2999 (slot 2, last event 2999), 3000 (slot 3). At 3000 all four are live
    # (3000 - 999 < 3 * 1000): 600 B.
    s = sensor(SimpleRate, samples=3)
    for t in (0, 999, 1000, 2000, 2999, 3000):
        s.record(100, t)
    assert s.stat.total(3000) == 600.0
    # N = 1: two slots, the newest kept: slot 2 (200 B, last event 2999, live under the new
    # expire age 1 * 1000 since 3000 - 2999 < 1000) and slot 3 (100 B): 300 B.
    s.reconfigure(MetricConfig(samples=1))
    assert s.stat.total(3000) == 300.0
    assert s.stat.window_size_ms(3000) == 1000  # max(3000 - 2000, 1000)
    # Back to N = 3 (expire age 3000): the next advance appends, no live sample is reset.
    s.reconfigure(MetricConfig(samples=3))
    s.record(100, 4000)
    assert s.stat.total(4000) == 400.0  # 200 (2000) + 100 (3000) + 100 (4000)


# -- the ring -------------------------------------------------------------------------------------


def test_ring_keeps_n_plus_1_samples_and_wraps_onto_an_expired_one() -> None:
    # N = 3, W = 1000: 100 B at 0 and 200 B at 900 (slot 0 started at 0, last event 900), then
    # 200 @1000 (slot 1), 300 @2000 (slot 2), 400 @3000 (slot 3): all four slots live at 3000,
    # since 3000 - 900 = 2100 < N*W = 3000. Sum 1200 B over max(3000 - 0, 1000) ms = 400 B/s.
    s = sensor(SimpleRate, samples=3)
    for value, t in ((100, 0), (200, 900), (200, 1000), (300, 2000), (400, 3000)):
        s.record(value, t)
    assert s.stat.total(3000) == 1200.0
    assert s.measure(3000) == 400.0
    # Rate: 3 full windows >= N - 1 = 2, no padding: 1200 B / 3 s as well.
    r = sensor(Rate, samples=3)
    for value, t in ((100, 0), (200, 900), (200, 1000), (300, 2000), (400, 3000)):
        r.record(value, t)
    assert r.stat.window_size_ms(3000) == 3000 and r.measure(3000) == 400.0
    # 500 @4000: slot 3 is complete, the ring wraps to slot 0 and resets it. Slot 0 was expired
    # anyway (4000 - 900 >= 3000), and so is slot 1 (4000 - 1000 >= 3000, purged to start 4000).
    # Live: 300 (2000) + 400 (3000) + 500 (4000) = 1200 B over 4000 - 2000 = 2000 ms = 600 B/s.
    s.record(500, 4000)
    assert s.stat.total(4000) == 1200.0
    assert s.stat.window_size_ms(4000) == 2000
    assert s.measure(4000) == 600.0


def test_purge_of_obsolete_samples() -> None:
    # N = 2, W = 1000: 100 @0 (slot 0), 200 @1000 (slot 1). Expire age N*W = 2000.
    s = sensor(SimpleRate, samples=2)
    s.record(100, 0)
    s.record(200, 1000)
    assert s.stat.total(1999) == 300.0  # 1999 - 0 < 2000: kept
    # t=2000: slot 0 reset (start 2000, 0 B). Oldest start now 1000: 200 B / 1 s.
    assert s.stat.total(2000) == 200.0
    assert s.measure(2000) == 200.0
    assert s.stat.total(3000) == 0.0  # slot 1: 3000 - 1000 >= 2000


def test_a_sample_is_kept_while_its_last_event_is_young() -> None:
    # Started at 0 but written at 1900: live until 1900 + 2000, "samples overlapping the
    # monitored window are kept, even if they started before it" (SampledStat).
    s = sensor(SimpleRate, samples=2)
    s.record(100, 0)
    s.record(100, 900)  # same sample (900 - 0 < 1000)
    assert s.stat.total(2899) == 200.0
    assert s.measure(2899) == pytest.approx(200 / 2.899)  # window from the start at 0
    assert s.stat.total(2900) == 0.0


def test_record_after_a_gap_longer_than_n_windows() -> None:
    # N = 11, W = 1000: 500 @0, then nothing until 300 @20000 (> N*W = 11000 later).
    s = sensor(Rate)
    s.record(500, 0)
    s.record(300, 20_000)  # 20000 - 0 >= W: advance to slot 1, start 20000
    # slot 0 expired (20000 - 0 >= 11000) and reset to start 20000: only 300 B, elapsed 0,
    # padded to N - 1 = 10 windows -> 30 B/s (Kafka: "prior windows with zero records").
    assert s.stat.total(20_000) == 300.0
    assert s.measure(20_000) == 30.0
    simple = sensor(SimpleRate)
    simple.record(500, 0)
    simple.record(300, 20_000)
    assert simple.measure(20_000) == 300.0  # max(0, 1000) ms


def test_record_into_a_sample_reset_by_a_measurement() -> None:
    # A measurement after the gap resets slot 0 to start 10000; the next record lands in it.
    s = sensor(SimpleRate, samples=2)
    s.record(500, 0)
    assert s.measure(10_000) == 0.0
    s.record(300, 10_500)  # 10500 - 10000 < W: same slot
    assert s.stat.total(10_500) == 300.0
    assert s.measure(11_500) == pytest.approx(300 / 1.5)  # window from 10000


# -- config ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"samples": 0},
        {"window_ms": 0},
        {"samples": 1.5},
        {"quota": -1.0},
        {"quota": math.nan},
        {"quota": "10"},
    ],
)
def test_metric_config_rejects_bad_values(kwargs) -> None:
    with pytest.raises(ConfigError):
        MetricConfig(**kwargs)


def test_metric_config_defaults_are_kafkas() -> None:
    # quota.window.num = 11, quota.window.size.seconds = 1, no bound
    assert MetricConfig() == MetricConfig(samples=11, window_ms=1000, quota=None)


def test_sensor_config_governs_its_stat() -> None:
    stat = SimpleRate(MetricConfig(window_ms=5000))
    s = Sensor("x", stat, MetricConfig(window_ms=1000, quota=10.0))
    assert stat.config.window_ms == 1000
    s.record(10, 0)
    assert s.measure(0) == 10.0  # 10 B over max(0, 1000) ms


# -- Avg and Max: the throttle-time sensor ------------------------------------------------------


def test_avg_and_max_over_the_live_samples() -> None:
    # N = 2 samples of W = 1000 ms: a sample expires once its last event is N * W = 2000 ms old.
    cfg = MetricConfig(samples=2, window_ms=1000)
    avg, mx = Avg(cfg), Max(cfg)
    for value, t in ((100, 0), (300, 500), (50, 1000)):  # 50 at t = 1000 opens a second sample
        avg.record(value, t)
        mx.record(value, t)
    assert avg.measure(1000) == 150.0  # (100 + 300 + 50) / 3 events
    assert mx.measure(1000) == 300.0
    # t = 2499: the first sample's last event (500) is 1999 ms old: still live.
    assert avg.measure(2499) == 150.0
    # t = 2500: 2500 - 500 >= 2000, the first sample is purged; only the 50 is left.
    assert avg.measure(2500) == 50.0
    assert mx.measure(2500) == 50.0
    # t = 3000: the second sample (last event 1000) goes too: no event, Kafka's NaN.
    assert math.isnan(avg.measure(3000)) and math.isnan(mx.measure(3000))


def test_avg_and_max_of_nothing_are_nan_and_create_no_sample() -> None:
    cfg = MetricConfig(samples=2, window_ms=1000)
    avg, mx = Avg(cfg), Max(cfg)
    assert math.isnan(avg.measure(0)) and math.isnan(mx.measure(0))
    # Unlike Rate (SampledStat.oldest), measuring did not start a sample at t = 0: a record at
    # t = 1500 opens the first sample there, and it lives until 1500 + 2000.
    avg.record(10, 1500)
    assert avg.measure(3499) == 10.0
    assert math.isnan(avg.measure(3500))


def test_max_starts_below_any_value() -> None:
    # Kafka's Max starts a sample at -inf, so negative values are maxed correctly (0 would win).
    mx = Max(MetricConfig(samples=2, window_ms=1000))
    mx.record(-5, 0)
    mx.record(-7, 10)
    assert mx.measure(10) == -5.0


def test_avg_counts_events_across_the_ring_as_it_wraps() -> None:
    # N = 2, W = 1000: the ring holds N + 1 = 3 samples. One throttle of t / 1000 ms each second:
    # at t = 5000 the live samples are those with a last event younger than 2000 ms: the
    # records of t = 4000 and 5000 (3000 is exactly 2000 ms old: expired) -> (4 + 5) / 2.
    cfg = MetricConfig(samples=2, window_ms=1000)
    avg, mx = Avg(cfg), Max(cfg)
    for t in range(0, 6000, 1000):
        avg.record(t / 1000, t)
        mx.record(t / 1000, t)
    assert avg.measure(5000) == 4.5
    assert mx.measure(5000) == 5.0
    # Ten more events in the current sample: (4 + 5 + 10 * 1) / 12.
    for _ in range(10):
        avg.record(1, 5000)
    assert avg.measure(5000) == pytest.approx(19 / 12)


def test_avg_peek_leaves_the_samples_as_they_are() -> None:
    # measure() purges (resets) the expired sample, restarting it at `now`; peek() must not.
    cfg = MetricConfig(samples=2, window_ms=1000)
    measured, peeked = Avg(cfg), Avg(cfg)
    for stat in (measured, peeked):
        stat.record(8, 0)
    assert math.isnan(measured.measure(2000)) and math.isnan(peeked.peek(2000))
    assert peeked._samples[0].value == 8 and peeked._samples[0].event_count == 1
    assert measured._samples[0].value == 0 and measured._samples[0].event_count == 0
    # The restart moved the sample's start to 2000: a record at 2500 joins it (not complete).
    measured.record(2, 2500)
    peeked.record(2, 2500)
    assert len(measured._samples) == 1 and len(peeked._samples) == 2
    assert measured.measure(2500) == peeked.measure(2500) == 2.0
