"""The operator's arithmetic (KIP-73 Q&A): move time, IN < T < N - IN/R, the quota window, and
the throttle for a deadline next to the allowed network share. Decimal units: 1 MB = 10**6 B."""

from __future__ import annotations

import json
import math

import pytest

from minikafka.errors import ConfigError
from minikafka.tools.reassign import (
    MovePrediction,
    check_throttle,
    predict_move_time,
    throttle_for_deadline,
)
from minikafka.tools.reassign.plan import (
    RULE_CLIENT_ROOM,
    RULE_PROGRESS,
    RULE_SHARE,
    RULE_WINDOW,
    RULE_WINDOW_NETWORK,
)

MB = 10**6
GB = 10**9
MIB = 1024 * 1024


# ---------------------------------------------------------------------------- move time


def test_move_time_subtracts_max_bytes_in():
    # 10 GB at T = 50 MB/s with 10 MB/s in: 10_000 MB / (50 - 10) MB/s = 250 s.
    # Broker 2 copies 5 GB: 5_000 / 40 = 125 s (its own 4 MB/s in is not used: KIP-73 takes
    # the max over brokers, 10 MB/s, for every broker).
    p = predict_move_time(
        bytes_to_move_per_broker={2: 5 * GB, 1: 10 * GB, 3: 0},
        throttle=50 * MB,
        bytes_in_per_broker={1: 4 * MB, 2: 10 * MB},
    )
    assert isinstance(p, MovePrediction)
    assert p.max_bytes_in == 10 * MB and p.max_bytes_in_broker == 2
    assert p.catch_up_rate == 40 * MB
    assert [(b.broker, b.seconds) for b in p.brokers] == [(1, 250.0), (2, 125.0), (3, 0.0)]
    assert p.finishes and p.max_seconds == 250.0 and p.slowest == 1
    text = "\n".join(p.lines())
    assert "throttle 50.0 MB/s, max bytes in 10.0 MB/s (broker 2): 40.0 MB/s left" in text
    assert "broker 1: 10.0 GB to copy -> 250 s" in text
    assert "the move takes 250 s (broker 1 is the slowest)" in text


def test_move_time_without_bytes_in_is_bytes_over_throttle():
    # 3 GB at 20 MB/s, nothing produced: 3_000 / 20 = 150 s; brokers missing from bytes in
    # count as 0 B/s.
    p = predict_move_time(
        bytes_to_move_per_broker={4: 3 * GB}, throttle=20 * MB, bytes_in_per_broker={}
    )
    assert p.max_seconds == 150.0 and p.max_bytes_in == 0 and p.max_bytes_in_broker is None


@pytest.mark.parametrize("throttle", [10 * MB, 8 * MB])
def test_move_never_finishes_when_throttle_is_not_above_bytes_in(throttle):
    # T - IN <= 0: keeping up with new data uses the whole throttle; not a negative time.
    p = predict_move_time(
        bytes_to_move_per_broker={1: GB, 2: 0},
        throttle=throttle,
        bytes_in_per_broker={1: 10 * MB},
    )
    assert [(b.broker, b.seconds) for b in p.brokers] == [(1, None), (2, 0.0)]
    assert not p.finishes and p.max_seconds is None and p.slowest is None
    last = p.lines()[-1]
    assert last.startswith("the move never finishes")
    assert "set a throttle above 10.0 MB/s" in last
    assert json.loads(json.dumps(p.to_json()))["max_seconds"] is None


def test_move_prediction_to_json():
    p = predict_move_time(
        bytes_to_move_per_broker={1: 10 * GB}, throttle=50 * MB, bytes_in_per_broker={1: 10 * MB}
    )
    assert p.to_json() == {
        "throttle": 50 * MB,
        "max_bytes_in": 10 * MB,
        "max_bytes_in_broker": 1,
        "catch_up_rate": 40 * MB,
        "finishes": True,
        "max_seconds": 250.0,
        "slowest_broker": 1,
        "brokers": [{"broker": 1, "bytes_to_move": 10 * GB, "seconds": 250.0}],
    }


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"throttle": 0}, r"throttle 0: expected a number > 0"),
        ({"throttle": -1.0}, r"throttle -1.0: expected a number > 0"),
        ({"throttle": math.nan}, r"throttle nan: expected a number > 0"),
        ({"throttle": math.inf}, r"throttle inf: expected a finite number > 0"),
        (
            {"bytes_to_move_per_broker": {1: -1}},
            r"bytes to move of broker 1 is -1: expected a number >= 0",
        ),
        (
            {"bytes_in_per_broker": {2: math.nan}},
            r"bytes in of broker 2 is nan: expected a number >= 0",
        ),
    ],
)
def test_move_time_refuses_bad_numbers(kwargs, pattern):
    args = {"bytes_to_move_per_broker": {1: GB}, "throttle": 50 * MB, "bytes_in_per_broker": {}}
    with pytest.raises(ConfigError, match=pattern):
        predict_move_time(**(args | kwargs))


# ---------------------------------------------------------------------------- IN < T < N - IN/R


def check(**overrides):
    args = dict(
        throttle=50 * MB,
        bytes_in_per_broker={1: 10 * MB, 2: 4 * MB},
        network_bytes_per_s=125 * MB,
        replication_factor=3,
    )
    return check_throttle(**(args | overrides))


def test_check_passes_inside_the_bounds():
    # 10 < 50 < 125 - 10/3 = 121.7 MB/s; 10 MiB < 50 MB/s x 11 s; 10 MiB < 11 s x 125 / 2.
    c = check()
    assert c.ok and c.failures == () and c.window_total_s == 11.0
    assert c.lines() == [
        "throttle 50.0 MB/s passes IN < T < N - IN/R on every broker and 10.5 MB responses fit "
        "the 11 s quota window"
    ]


def test_check_fails_in_below_t_per_broker_including_equality():
    # T = 8 MB/s: broker 1 (10 MB/s in) and broker 2 (8 MB/s, equal) make no progress; 3 is fine.
    c = check(throttle=8 * MB, bytes_in_per_broker={3: 5 * MB, 1: 10 * MB, 2: 8 * MB})
    progress = [f for f in c.failures if f.rule == RULE_PROGRESS]
    assert [f.broker for f in progress] == [1, 2]
    assert progress[0].message == (
        "broker 1: throttle 8.0 MB/s is not above its bytes in 10.0 MB/s, so keeping the "
        "throttled replicas up with new data uses the whole throttle and the move never finishes"
    )
    assert not c.ok


def test_check_fails_t_below_n_minus_in_over_r_per_broker_including_equality():
    # N = 100 MB/s, R = 2. Broker 1: 100 - 40/2 = 80 MB/s; broker 2: 100 - 10/2 = 95 MB/s.
    # T = 85: broker 1 fails, broker 2 passes. T = 80: broker 1 fails on equality.
    for t in (85 * MB, 80 * MB):
        c = check(
            throttle=t,
            bytes_in_per_broker={1: 40 * MB, 2: 10 * MB},
            network_bytes_per_s=100 * MB,
            replication_factor=2,
        )
        assert [(f.rule, f.broker) for f in c.failures] == [(RULE_CLIENT_ROOM, 1)]
    assert c.failures[0].message == (
        "broker 1: throttle 80.0 MB/s is not below network 100.0 MB/s - bytes in 40.0 MB/s / "
        "RF 2 = 80.0 MB/s, so if leaders rebalance onto it its clients' inbound traffic no "
        "longer fits beside replication"
    )
    ok = check(
        throttle=79 * MB,
        bytes_in_per_broker={1: 40 * MB},
        network_bytes_per_s=100 * MB,
        replication_factor=2,
    )
    assert ok.ok


def test_check_fails_both_bounds_when_they_cross():
    # IN = 90, N = 100, R = 1: no T satisfies 90 < T < 10; T = 50 fails both for broker 1.
    c = check(
        throttle=50 * MB,
        bytes_in_per_broker={1: 90 * MB},
        network_bytes_per_s=100 * MB,
        replication_factor=1,
    )
    assert [(f.rule, f.broker) for f in c.failures] == [(RULE_PROGRESS, 1), (RULE_CLIENT_ROOM, 1)]


def test_check_first_response_must_fit_the_quota_window():
    # 10 MiB = 10_485_760 B. T = 0.5 MB/s x 11 s = 5.5 MB: too small. T = 1 MB/s: 11 MB, fits.
    c = check(throttle=500_000, bytes_in_per_broker={})
    assert [f.rule for f in c.failures] == [RULE_WINDOW]
    assert c.failures[0].broker is None
    assert c.failures[0].message.startswith(
        "replica.fetch.response.max.bytes 10.5 MB is not below throttle x window total = "
        "500.0 kB/s x 11 s = 5.5 MB"
    )
    assert check(throttle=1 * MB, bytes_in_per_broker={}).ok
    # KIP-73 Q&A 5: 1 MB/s x 10 s window = 10 MB is the largest permissible; equal fails.
    at_limit = dict(throttle=1 * MB, bytes_in_per_broker={}, window_num=10)
    assert not check(fetch_response_max_bytes=10 * MB, **at_limit).ok
    assert check(fetch_response_max_bytes=10 * MB - 1, **at_limit).ok


def test_check_large_cluster_network_bound():
    # KIP-73 Q&A 5: 500 brokers, 100 MB/s network, 10 s window -> 10 x 100 / 500 = 2 MB.
    base = dict(
        throttle=10 * MB,
        bytes_in_per_broker={},
        network_bytes_per_s=100 * MB,
        window_num=10,
        num_brokers=500,
    )
    c = check(**base)  # 10 MiB default
    assert [f.rule for f in c.failures] == [RULE_WINDOW_NETWORK]
    assert "= 10 s x 100.0 MB/s / 500 = 2.0 MB" in c.failures[0].message
    assert check(fetch_response_max_bytes=1_999_999, **base).ok
    # num_brokers defaults to the brokers whose bytes in are given.
    assert (
        check(
            throttle=10 * MB,
            bytes_in_per_broker={b: 0 for b in range(500)},
            network_bytes_per_s=100 * MB,
            window_num=10,
        )
        .failures[-1]
        .rule
        == RULE_WINDOW_NETWORK
    )


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        ({"replication_factor": 0}, r"replication factor 0: expected an integer >= 1"),
        ({"replication_factor": 2.0}, r"replication factor 2.0: expected an integer >= 1"),
        ({"network_bytes_per_s": 0}, r"network bytes per second 0: expected a number > 0"),
        ({"window_num": 0}, r"replication.quota.window.num 0: expected an integer >= 1"),
        ({"window_size_s": -1}, r"replication.quota.window.size.seconds -1: expected a number > 0"),
        (
            {"fetch_response_max_bytes": 0},
            r"replica.fetch.response.max.bytes 0: expected a number > 0",
        ),
        ({"bytes_in_per_broker": {1: -5}}, r"bytes in of broker 1 is -5: expected a number >= 0"),
    ],
)
def test_check_refuses_bad_numbers(overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        check(**overrides)


# ---------------------------------------------------------------------------- deadline


def plan(**overrides):
    args = dict(
        bytes_per_broker={1: 10 * GB, 2: 5 * GB},
        deadline_s=250,
        bytes_in_per_broker={1: 10 * MB, 2: 4 * MB},
        network_bytes_per_s=125 * MB,  # 1 Gb/s
        max_fraction=0.5,
        replication_factor=3,
    )
    return throttle_for_deadline(**(args | overrides))


def test_deadline_throttle_fits_the_share():
    # T = max IN + max bytes / Y = 10 MB/s + 10 GB / 250 s = 50 MB/s; 50% of 125 = 62.5 MB/s.
    # At 62.5 MB/s: 10_000 / 52.5 = 190.5 s.
    p = plan()
    assert p.required_throttle == 50 * MB
    assert p.allowed_throttle == 62.5 * MB
    assert p.fits and p.check.ok and p.ok and p.failures == ()
    assert p.at_required.max_seconds == 250.0
    assert p.at_allowed.max_seconds == pytest.approx(10_000 / 52.5)
    assert p.lines() == [
        "to finish in 250 s: throttle 50.0 MB/s (50000000 B/s)",
        "50% of the network: throttle 62.5 MB/s, the move takes 190 s",
        "throttle 50.0 MB/s passes IN < T < N - IN/R on every broker and 10.5 MB responses fit "
        "the 11 s quota window",
    ]
    doc = json.loads(json.dumps(p.to_json()))
    assert doc["required_throttle"] == 50 * MB and doc["fits"] and doc["ok"]
    assert doc["seconds_at_required"] == 250.0


def test_deadline_throttle_exceeds_the_share():
    # 30% of 125 = 37.5 MB/s < 50 MB/s needed; at 37.5: 10_000 / 27.5 = 363.6 s.
    p = plan(max_fraction=0.3)
    assert not p.fits and not p.ok and p.check.ok
    (share,) = p.failures
    assert share.rule == RULE_SHARE
    assert share.message == (
        "finishing in 250 s needs 50.0 MB/s, more than 30% of the network = 37.5 MB/s, at which "
        "the move takes 364 s"
    )
    assert f"[{RULE_SHARE}] {share.message}" in p.lines()


def test_deadline_share_below_bytes_in_never_finishes():
    # 5% of 125 = 6.25 MB/s is below the 10 MB/s in: at that share the move never finishes.
    p = plan(max_fraction=0.05)
    assert p.at_allowed.max_seconds is None
    assert p.failures[0].message.endswith("at which the move takes never")


def test_deadline_rounds_up_to_whole_bytes_per_second():
    # 1 GB / 3 s = 333_333_333.3 B/s -> 333_333_334 B/s; then 1 GB / that <= 3 s.
    p = plan(
        bytes_per_broker={1: GB}, deadline_s=3, bytes_in_per_broker={}, network_bytes_per_s=10 * GB
    )
    assert p.required_throttle == 333_333_334
    assert p.at_required.max_seconds <= 3


def test_deadline_plan_reports_the_checks_at_the_required_throttle():
    # Tight deadline: 10 GB in 100 s needs 10 + 100 = 110 MB/s; broker 1's room is
    # 125 - 10/3 = 121.7 (fine), but on a 100 MB/s network: 100 - 3.3 = 96.7 < 110 -> fails.
    p = plan(deadline_s=100, network_bytes_per_s=100 * MB, max_fraction=1.0)
    assert p.required_throttle == 110 * MB
    assert [(f.rule, f.broker) for f in p.failures] == [
        (RULE_SHARE, None),
        (RULE_CLIENT_ROOM, 1),
        (RULE_CLIENT_ROOM, 2),
    ]


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        ({"deadline_s": 0}, r"deadline seconds 0: expected a number > 0"),
        ({"max_fraction": 0}, r"max fraction 0: expected a fraction in \(0, 1\], e.g. 0.3 for 30%"),
        ({"max_fraction": 30}, r"max fraction 30: expected a fraction in \(0, 1\]"),
        ({"max_fraction": True}, r"max fraction True: expected a fraction"),
        ({"network_bytes_per_s": -1}, r"network bytes per second -1: expected a number > 0"),
        ({"bytes_per_broker": {3: -1}}, r"bytes to move of broker 3 is -1: expected a number >= 0"),
        ({"replication_factor": 0}, r"replication factor 0: expected an integer >= 1"),
    ],
)
def test_deadline_refuses_bad_numbers(overrides, pattern):
    with pytest.raises(ConfigError, match=pattern):
        plan(**overrides)


def test_a_move_within_the_quotas_first_window_is_flagged_as_an_upper_bound():
    """SimpleRate treats its first window as full-sized: an idle sensor admits T x window
    before it reads "exceeded" (docs/throttling.md#overshoot). At T = 1 MB/s and 1 s
    windows, broker 2's 0.8 MB fits in that burst, broker 1's 5 MB does not."""
    prediction = predict_move_time(
        bytes_to_move_per_broker={1: 5_000_000, 2: 800_000, 3: 0},
        throttle=1_000_000,
        bytes_in_per_broker={},
    )
    assert prediction.burst_bytes(1.0) == 1_000_000
    assert prediction.within_first_window(1.0) == [2]
    assert prediction.within_first_window(10.0) == [1, 2]  # 10 MB admitted at once
