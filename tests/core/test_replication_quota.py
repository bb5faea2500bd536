"""Which replica traffic is throttled, and by which quota (core/quota/classes.py)."""

from __future__ import annotations

import itertools

import pytest

from minikafka.core.dynamic_config import BrokerThrottleConfig, ThrottledReplicas
from minikafka.core.quota.classes import (
    ThrottleClass,
    class_rate,
    follower_charge_class,
    follower_throttle_class,
    leader_throttle_class,
    should_throttle,
)
from minikafka.core.quota.planner import decide_fetch_throttles, follower_caught_up

NONE = ThrottledReplicas()
ALL = ThrottledReplicas(all=True)
P0_ON_1 = ThrottledReplicas(pairs=frozenset({(0, 1)}))
REP, REA = ThrottleClass.REPLICATION, ThrottleClass.REASSIGNMENT


def leader(config: BrokerThrottleConfig, *, lst=NONE, partition=0, adding=()):  # noqa: ANN001, ANN201
    return leader_throttle_class(
        partition=partition,
        local_id=1,
        follower_id=2,
        adding_replicas=adding,
        topic_leader_list=lst,
        config=config,
    )


def follower(config: BrokerThrottleConfig, *, lst=NONE, partition=0, adding=()):  # noqa: ANN001, ANN201
    return follower_throttle_class(
        partition=partition,
        local_id=1,
        adding_replicas=adding,
        topic_follower_list=lst,
        config=config,
    )


def test_a_rate_without_a_list_or_a_list_without_a_rate_throttles_nothing():
    assert leader(BrokerThrottleConfig(leader_rate=100)) is None
    assert leader(BrokerThrottleConfig(), lst=ALL) is None
    assert follower(BrokerThrottleConfig(follower_rate=100)) is None
    assert follower(BrokerThrottleConfig(), lst=ALL) is None


def test_the_list_names_partition_and_this_broker():
    cfg = BrokerThrottleConfig(leader_rate=100, follower_rate=100)
    assert leader(cfg, lst=P0_ON_1) is REP  # broker 1 leads partition 0: listed as 0:1
    assert leader(cfg, lst=P0_ON_1, partition=1) is None
    assert follower(cfg, lst=P0_ON_1) is REP
    other = ThrottledReplicas(pairs=frozenset({(0, 2)}))
    assert leader(cfg, lst=other) is None  # 0:2 is about broker 2, not us
    assert leader(cfg, lst=ALL, partition=7) is REP


def test_kip_1009_booleans_throttle_every_replica_without_a_list():
    assert leader(BrokerThrottleConfig(leader_rate=100, leader_all=True)) is REP
    assert follower(BrokerThrottleConfig(follower_rate=100, follower_all=True)) is REP
    assert leader(BrokerThrottleConfig(leader_all=True)) is None  # still needs a rate


def test_kip_542_adding_replicas_use_the_reassignment_class():
    cfg = BrokerThrottleConfig(leader_reassignment_rate=50, follower_reassignment_rate=50)
    assert leader(cfg, adding=(2,)) is REA  # the fetching follower is being added
    assert leader(cfg, adding=(3,)) is None
    assert follower(cfg, adding=(1,)) is REA  # we are the replica being added
    # Without a reassignment rate an adding replica falls back to the KIP-73 list and rate.
    both = BrokerThrottleConfig(leader_rate=100)
    assert leader(both, lst=ALL, adding=(2,)) is REP


def test_class_rate_picks_the_side_and_class():
    cfg = BrokerThrottleConfig(
        leader_rate=1, follower_rate=2, leader_reassignment_rate=3, follower_reassignment_rate=4
    )
    assert [class_rate(cfg, s, c) for s in ("leader", "follower") for c in (REP, REA)] == [
        1,
        3,
        2,
        4,
    ]


@pytest.mark.parametrize(
    "in_sync, cls, exceeded, exempt",
    list(itertools.product([False, True], [None, REP, REA], [False, True], [False, True])),
)
def test_the_three_part_condition_exhaustively(in_sync, cls, exceeded, exempt):
    # Kafka: !inSync && isThrottled && isQuotaExceeded; without the exemption, in-sync too.
    expected = cls is not None and exceeded and (not in_sync or not exempt)
    assert (
        should_throttle(
            in_sync=in_sync, throttle_class=cls, quota_exceeded=exceeded, exempt_in_sync=exempt
        )
        is expected
    )


def test_follower_is_caught_up_only_with_a_known_zero_lag():
    assert not follower_caught_up(None)  # no response yet: unknown lag is not in sync
    assert follower_caught_up(0)
    assert not follower_caught_up(1)


# ---------------------------------------------------------------------------- one fetch's throttling

R, A = ThrottleClass.REPLICATION, ThrottleClass.REASSIGNMENT


def decide(parts, *, over=(), left=None, precise=False, exempt=True):
    left = left or {}
    return [
        (t.limit, t.exempt)
        for t in decide_fetch_throttles(
            parts,
            exceeded=lambda cls: cls in over,
            remaining=lambda cls: left[cls],
            precise=precise,
            exempt_in_sync=exempt,
        )
    ]


@pytest.mark.parametrize(
    ("parts", "over", "left", "precise", "exempt", "expected"),
    [
        # Kafka's mode: only out-of-sync partitions of an exceeded class are held back.
        ([(None, False), (R, False), (R, True)], {R}, None, False, True,
         [(None, False), (0, False), (None, True)]),
        ([(R, False), (A, False)], {A}, None, False, True, [(None, False), (0, False)]),
        ([(R, False), (R, True)], (), None, False, True, [(None, False), (None, True)]),
        # Without KAFKA-4313's exemption the in-sync one is held back too, and not exempt.
        ([(R, False), (R, True)], {R}, None, False, False, [(0, False), (0, False)]),
        # Precise: the allowance left is shared by the class's non-exempt partitions.
        ([(R, False), (R, False), (R, True), (A, False)], (), {R: 1000.0, A: 300.0}, True, True,
         [(500, False), (500, False), (None, True), (300, False)]),
        ([(R, False), (R, False), (R, False)], (), {R: 100.0}, True, True,
         [(33, False), (33, False), (33, False)]),
        # ... floored at nothing when the allowance is spent (an overdraft from KIP-74's batch).
        ([(R, False)], (), {R: -5000.0}, True, True, [(0, False)]),
        # ... and an exceeded quota holds back before any share is given.
        ([(R, False), (R, True)], {R}, {R: 1000.0}, True, True, [(0, False), (None, True)]),
        ([(R, False), (R, True)], (), {R: 1000.0}, True, False, [(500, False), (500, False)]),
        ([], {R}, None, True, True, []),
    ],
)  # fmt: skip
def test_one_decision_throttles_a_fetch_on_either_side(
    parts, over, left, precise, exempt, expected
):
    assert decide(parts, over=over, left=left, precise=precise, exempt=exempt) == expected


@pytest.mark.parametrize(
    ("config", "lst", "adding", "expected"),
    [
        (BrokerThrottleConfig(), NONE, (), None),
        (BrokerThrottleConfig(), P0_ON_1, (), REP),  # listed, no rate: recorded, not held
        (BrokerThrottleConfig(), ALL, (), REP),
        (BrokerThrottleConfig(follower_all=True), NONE, (), REP),  # KIP-1009 boolean
        (BrokerThrottleConfig(follower_rate=100), NONE, (), None),  # a rate, no list
        (BrokerThrottleConfig(follower_rate=100), P0_ON_1, (), REP),
        (BrokerThrottleConfig(follower_reassignment_rate=100), NONE, (1,), REA),
        (BrokerThrottleConfig(follower_reassignment_rate=100), P0_ON_1, (1,), REA),
        (BrokerThrottleConfig(), NONE, (1,), None),  # adding without a reassignment rate
        (BrokerThrottleConfig(), P0_ON_1, (1,), REP),
        (BrokerThrottleConfig(), ThrottledReplicas(pairs=frozenset({(0, 2)})), (), None),
        (BrokerThrottleConfig(), ThrottledReplicas(pairs=frozenset({(1, 1)})), (), None),
    ],
)
def test_follower_charge_class(config, lst, adding, expected):
    """The follower sensor fetched bytes go to: the throttle class when there is one, else
    REPLICATION on list membership alone (ReplicaFetcherThread: `if (quota.isThrottled(tp))
    quota.record(...)`), the leader side's rule. Which partitions are held back is unchanged:
    a listed partition without a rate has no throttle class."""
    throttle_class = follower(config, lst=lst, adding=adding)
    got = follower_charge_class(
        throttle_class, partition=0, local_id=1, topic_follower_list=lst, config=config
    )
    assert got is expected
    if expected is REP and config.follower_rate is None:
        assert throttle_class is None
