"""Which replica traffic is throttled, and by which quota (core/replication_quota.py)."""

from __future__ import annotations

import itertools

import pytest

from minikafka.core.dynamic_config import BrokerThrottleConfig, ThrottledReplicas
from minikafka.core.replication_quota import (
    ThrottleClass,
    class_rate,
    follower_caught_up,
    follower_throttle_class,
    leader_throttle_class,
    should_throttle,
)

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
