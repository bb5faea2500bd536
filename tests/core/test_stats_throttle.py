"""Quotas on windowed rates (core/quota/stats.py): KIP-13 throttle time, the bytes remaining under the
bound and the allowance of precise mode.

Kafka's metrics and quota test stories in spirit (MetricsTest, SampledStatTest, RateTest,
ClientQuotaManagerTest, ReplicationQuotaManagerTest), with the arithmetic in the comments. The
clock is a plain int: N samples of W ms, times in ms.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.core.quota.stats import (
    LONG_MAX_MS,
    MetricConfig,
    Rate,
    Sensor,
    SimpleRate,
    throttle_time_ms,
)
from minikafka.testing.sensors import sensor

# -- client throttle time (KIP-13) ----------------------------------------------------------------


def test_kip13_example() -> None:
    # 5 MB/s quota, 10 s window, 60 MB produced -> O = 6 MB/s: (6 - 5) / 5 * 10000 = 2000 ms.
    assert throttle_time_ms(6e6, 5e6, 10_000) == 2000
    assert throttle_time_ms(5e6, 5e6, 10_000) == 0  # at the bound: no delay
    assert throttle_time_ms(4e6, 5e6, 10_000) == 0


def test_throttle_rounds_half_up_like_java() -> None:
    # (O - T) / T * W with T = 2, W = 4: O = 2.25 -> 0.5, O = 3.25 -> 2.5 (exact in binary).
    assert throttle_time_ms(2.25, 2.0, 4) == 1  # Python's round(0.5) would give 0
    assert throttle_time_ms(3.25, 2.0, 4) == 3  # round(2.5) would give 2
    assert throttle_time_ms(2.74, 2.0, 4) == 1  # 1.48


def test_zero_quota_throttles_for_ever_like_kafka() -> None:
    assert throttle_time_ms(1.0, 0.0, 1000) == LONG_MAX_MS  # Math.round(+Infinity)
    assert throttle_time_ms(0.0, 0.0, 1000) == 0
    with pytest.raises(ValueError):
        throttle_time_ms(1.0, -1.0, 1000)


def test_client_quota_manager_story() -> None:
    # ClientQuotaManagerTest.testQuotaViolation: quota 500 B/s, 11 samples of 1 s.
    s = sensor(Rate, quota=500.0)
    t = 0
    for _ in range(10):  # 400 B every second: under the quota
        s.record(400, t)
        # at t = 9000: 4000 B, elapsed 9000 ms, 9 < 10 full windows -> padded to 10 s = 400 B/s
        assert s.throttle_time_ms(t) == 0
        t += 1000
    t += 500  # t = 10500
    s.record(2300, t)
    # 400 * 10 + 2300 = 6300 B over 10.5 s (oldest start 0, 10 full windows) = 600 B/s
    # (600 - 500) / 500 * 10500 = 2100 ms
    assert s.measure(t) == 600.0
    assert s.stat.window_size_ms(t) == 10_500
    assert s.throttle_time_ms(t) == 2100
    t += 2100  # t = 12600: the samples of 0 and 1000 expire (12600 - 1000 >= 11000)
    # 6300 - 800 = 5500 B over 12600 - 2000 = 10.6 s = 518.9 B/s: still above the bound, the
    # KIP-13 identity assumed the window would grow to 12.6 s with all 6300 B still in it.
    assert s.stat.total(t) == 5500.0
    assert s.measure(t) == pytest.approx(5500 / 10.6)
    # (5500 / 10.6 - 500) / 500 * 10600 = (5_500_000 - 5_300_000) / 500 = 400 ms
    assert s.throttle_time_ms(t) == 400
    throttles = []
    for _ in range(10):  # "Could continue to see delays until the bursty sample disappears"
        s.record(400, t)
        throttles.append(s.throttle_time_ms(t))
        t += 1000
    # t = 12600: 400 (new) + 8 * 400 (2000..9000) + 2300 = 5900 B / 10.6 s -> 1200 ms
    assert throttles[0] == 1200
    # t = 20600: 9 * 400 (12600..20600) + 2300 (10500, still live) = 5900 B / 10.1 s
    #   -> (5_900_000 - 500 * 10100) / 500 = 1700 ms
    assert throttles[8] == 1700
    # t = 21600: the burst expired (21600 - 10500 >= 11000): 4000 B / 10 s = 400 B/s
    assert throttles[9] == 0
    s.record(0, t)
    assert s.throttle_time_ms(t) == 0  # "unthrottled since bursty sample has rolled over"


def test_padded_window_does_not_grow_while_the_client_waits() -> None:
    # Rate's first N - 1 windows: a burst at t = 900 in a stat started at t = 0.
    s = sensor(Rate, quota=500.0)
    s.record(0, 0)
    s.record(6000, 900)
    # window 900 + 10 * 1000 = 10900 ms -> 550.46 B/s; X = (6_000_000 - 500 * 10900) / 500 = 1100
    assert s.throttle_time_ms(900) == 1100
    # t = 2000: 2 full windows -> 2000 + 8 * 1000 = 10000 ms: the window shrank, 600 B/s
    assert s.stat.window_size_ms(2000) == 10_000
    assert s.measure(2000) == 600.0 and s.quota_exceeded(2000)


@settings(max_examples=300, deadline=None)
@given(
    measured=st.floats(min_value=1e-3, max_value=1e9),
    quota=st.floats(min_value=1e-3, max_value=1e9),
    window_ms=st.integers(min_value=1, max_value=10**6),
)
def test_throttle_time_solves_the_kip13_identity(measured, quota, window_ms) -> None:
    # O * W / (W + X) = T  <=>  W + X = O * W / T; X is rounded, so within half a ms.
    x = throttle_time_ms(measured, quota, window_ms)
    if measured <= quota:
        assert x == 0
    else:
        assert x >= 0
        assert abs(window_ms + x - measured * window_ms / quota) <= 0.5 + 1e-9 * (window_ms + x)


@settings(max_examples=300, deadline=None)
@given(
    samples=st.integers(min_value=2, max_value=12),
    window_ms=st.integers(min_value=100, max_value=2000),
    quota=st.integers(min_value=1, max_value=10**6),
    fill=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=11, max_size=11),
    d_frac=st.floats(min_value=0.0, max_value=1.0),
    excess=st.floats(min_value=1e-3, max_value=1.0),
)
def test_waiting_the_throttle_time_brings_a_steady_rate_to_the_bound(
    samples, window_ms, quota, fill, d_frac, excess
) -> None:
    # Steady regime: one record per window from t = 0 for N - 1 windows (each at most the
    # quota's share of a window), then a burst at now = (N-1)*W + d, so the Rate window is the
    # true elapsed time w = (N-1)*W + d. The burst makes O = T * (1 + e) with e chosen so the
    # delay X ~ e * w stays under W - d: no sample expires while the client waits (the oldest,
    # written at 0, expires at N*W). Then the same total over w + X must be the bound, within
    # the half millisecond of rounding.
    s = sensor(Rate, samples=samples, window_ms=window_ms, quota=float(quota))
    d = int(d_frac * (window_ms - 2))
    prefix = 0.0
    for k in range(samples - 1):
        value = fill[k] * quota * window_ms / 1000
        s.record(value, k * window_ms)
        prefix += value
    now = (samples - 1) * window_ms + d
    w = now
    target = quota * (1 + excess * (window_ms - d - 1.5) / w)
    s.record(target * w / 1000 - prefix, now)
    assert s.stat.window_size_ms(now) == w
    total = s.stat.total(now)
    x = s.throttle_time_ms(now)
    assert 0 <= x < window_ms - d  # by construction
    # nothing expired, the window grew by exactly X
    assert s.stat.total(now + x) == total
    assert s.stat.window_size_ms(now + x) == w + x
    measured = s.measure(now + x)
    tol = 1e-9 * quota
    assert measured <= quota * (w + x + 0.5) / (w + x) + tol
    assert measured >= quota * (w + x - 0.5) / (w + x) - tol


# -- remaining bytes (precise mode) ---------------------------------------------------------------


def test_remaining_bytes_exactly_fills_the_bound() -> None:
    s = sensor(SimpleRate, quota=1000.0)
    s.record(400, 0)
    # t=500: window max(500, 1000) = 1000 ms; room = 1000 B/s * 1 s - 400 = 600 B
    assert s.remaining_bytes(500) == 600.0
    s.record(600, 500)
    assert s.measure(500) == 1000.0 and not s.quota_exceeded(500)
    assert s.remaining_bytes(500) == 0.0
    s.record(1, 500)
    assert s.quota_exceeded(500)
    assert s.remaining_bytes(500) == -1.0


def test_remaining_bytes_sees_the_window_shrink_of_the_record_itself() -> None:
    # N = 2, W = 1000, three slots. 100 @0 (slot 0), 50 @1000 (slot 1); a measurement at 2000
    # purges slot 0 into an empty sample starting at 2000; 500 @2100 opens slot 2.
    def history() -> Sensor:
        s = sensor(SimpleRate, samples=2, quota=1000.0)
        s.record(100, 0)
        s.record(50, 1000)
        s.measure(2000)
        s.record(500, 2100)
        return s

    s = history()
    # t=3100: slot 1 expires (3100 - 1000 >= 2000); the empty slot 0 (start 2000) is the
    # oldest: window 1100 ms, so a naive room is 1000 * 1.1 - 500 = 600 B.
    assert s.stat.window_size_ms(3100) == 1100
    # But a record at 3100 completes slot 2 (3100 - 2100 >= W) and wraps onto slot 0, resetting
    # it to start 3100: the window becomes 3100 - 2100 = 1000 ms, room 1000 * 1 - 500 = 500 B.
    assert s.remaining_bytes(3100) == 500.0
    naive = history()
    naive.record(600, 3100)
    assert naive.measure(3100) == 1100.0 and naive.quota_exceeded(3100)
    s.record(500, 3100)
    assert s.measure(3100) == 1000.0 and not s.quota_exceeded(3100)


op_st = st.tuples(
    st.sampled_from(["record", "measure"]),
    st.one_of(st.integers(0, 1500), st.integers(0, 40_000)),  # gap in ms, sometimes long
    st.integers(0, 5000),
)


@settings(max_examples=400, deadline=None)
@given(
    kind=st.sampled_from([Rate, SimpleRate]),
    samples=st.integers(min_value=1, max_value=12),
    window_ms=st.integers(min_value=1, max_value=2000),
    quota=st.one_of(st.integers(0, 100_000), st.floats(min_value=0.0, max_value=1e5)),
    ops=st.lists(op_st, max_size=30),
    gap=st.integers(0, 5000),
)
def test_remaining_bytes_is_exactly_the_room_under_the_bound(
    kind, samples, window_ms, quota, ops, gap
) -> None:
    s = sensor(kind, samples=samples, window_ms=window_ms, quota=float(quota))
    now = 0
    for op, dt, value in ops:
        now += dt
        if op == "record":
            s.record(value, now)
        else:
            s.measure(now)
    now += gap
    room = s.remaining_bytes(now)
    if room > 0:
        s.record(room, now)  # exactly the room: the bound holds
        assert not s.quota_exceeded(now)
    s.record(1, now)  # one more unit than fits
    assert s.quota_exceeded(now)


# -- precise-mode allowance ---------------------------------------------------------------------------


def test_precise_allowance_of_an_idle_but_measured_sensor_is_one_window() -> None:
    # A metrics reporter measures every second; no traffic for 30 s. Kafka's window then starts
    # at an empty sample up to 11 windows back, so remaining_bytes offers ~11 s of budget.
    s = Sensor(
        "x",
        SimpleRate(MetricConfig(samples=11, window_ms=1000, quota=1000.0)),
        MetricConfig(samples=11, window_ms=1000, quota=1000.0),
    )
    for t in range(0, 30_001, 1000):
        s.measure(t)
    assert s.remaining_bytes(30_500) > 5000  # the burst the precise mode must not allow
    assert s.precise_remaining_bytes(30_500) == 1000.0  # T * W = 1000 B/s * 1 s


def test_precise_allowance_tracks_steady_traffic_as_samples_expire() -> None:
    # 1000 B every second at exactly the bound: the allowance stays about one window's worth
    # or less, never a multi-second burst, including after the first samples expire (t > 11 s).
    cfg = MetricConfig(samples=11, window_ms=1000, quota=1000.0)
    s = Sensor("x", SimpleRate(cfg), cfg)
    for t in range(0, 20_000, 1000):
        s.record(1000, t)
        assert s.precise_remaining_bytes(t + 999) <= 1000.0


def test_peek_reads_the_rate_without_moving_the_window() -> None:
    # Measuring an empty SimpleRate at t=0 creates a sample starting at 0 (Kafka's oldest());
    # a record at t=5000 then sees a 5 s window. Peeking must not do that.
    cfg = MetricConfig(samples=11, window_ms=1000, quota=1000.0)
    measured, peeked = Sensor("m", SimpleRate(cfg), cfg), Sensor("p", SimpleRate(cfg), cfg)
    measured.measure(0)
    assert peeked.peek(0) == 0.0
    measured.record(3000, 5000)
    peeked.record(3000, 5000)
    assert measured.measure(5000) == 600.0  # 3000 B over 5 s: the early measure moved the window
    assert peeked.peek(5000) == 3000.0  # 3000 B over max(0, 1 s): the window starts at the record
    assert peeked.quota_exceeded(5000) and not measured.quota_exceeded(5000)
