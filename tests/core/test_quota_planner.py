"""The replication throttle of a fetch, both sides, as stories without Trio
(core/quota/planner.py): real sensors (`ReplicationQuotas`), time given as `now_ms`.

A leader at T = 1,000 B/s over 2 x 1 s windows (so one window's worth, 2,000 B over the two
samples, fills the quota), a follower catching up partition 0 while partition 1 is in sync.
"""

from __future__ import annotations

import pytest

from minikafka.core.dynamic_config import BrokerThrottleConfig, ThrottledReplicas
from minikafka.core.quota.charge import Charge, ChargedPartition, kafka_fetch_response_size
from minikafka.core.quota.classes import QuotaSide, ThrottleClass
from minikafka.core.quota.planner import (
    NOT_THROTTLED,
    PRECISE_RECHECK_MS,
    FollowerFetchPlan,
    LeaderFetchPlan,
    ThrottleSettings,
    ThrottleView,
    exempt,
    follower_backoff_ms,
    follower_view,
    leader_recheck_ms,
    leader_view,
)
from minikafka.core.quota.sensors import ReplicationQuotas

REPL, REASSIGN = ThrottleClass.REPLICATION, ThrottleClass.REASSIGNMENT
LEADER, FOLLOWER = QuotaSide.LEADER, QuotaSide.FOLLOWER
KAFKA, PRECISE = ThrottleSettings(), ThrottleSettings(precise=True)
T = 1_000
LISTED = ThrottledReplicas(all=True)


def quotas(**rates: int) -> ReplicationQuotas:
    q = ReplicationQuotas(samples=2, window_ms=1000)
    q.apply(BrokerThrottleConfig(**rates))
    return q


def catching_up(cls: ThrottleClass | None = REPL) -> ThrottleView:
    return ThrottleView(throttle_class=cls, charge_class=cls, in_sync=False)


def in_sync(cls: ThrottleClass | None = REPL) -> ThrottleView:
    return ThrottleView(throttle_class=cls, charge_class=cls, in_sync=True)


def sent(*records: int) -> list[ChargedPartition]:
    return [
        ChargedPartition(topic="t", partition=i, records_bytes=n) for i, n in enumerate(records)
    ]


def test_a_leader_sends_until_its_quota_is_exceeded_then_holds_back_only_the_one_catching_up():
    q = quotas(leader_rate=T)
    plan = LeaderFetchPlan([catching_up(), in_sync()], KAFKA)
    assert plan.limits(q, 0, [0, 1]) == [None, None]  # nothing recorded yet
    for charge in plan.charges(sent(3_000, 100)):
        q.charge(charge, 0)
    # Over the quota: the catching-up replica gets nothing; the in-sync one is exempt.
    assert plan.limits(q, 100, [0, 1]) == [0, None]
    # Its rate falls back under T once the windows move on, and it is served again.
    assert plan.limits(q, 2_500, [0, 1]) == [None, None]


def test_without_the_in_sync_exemption_both_are_held_back():
    q = quotas(leader_rate=T)
    q.record(LEADER, REPL, 5_000, 0)
    plan = LeaderFetchPlan([catching_up(), in_sync()], ThrottleSettings(exempt_in_sync=False))
    assert plan.limits(q, 100, [0, 1]) == [0, 0]


def test_a_class_with_no_bound_is_never_held_back_and_classes_have_their_own_sensors():
    q = quotas(leader_rate=T, leader_reassignment_rate=T)
    q.record(LEADER, REPL, 5_000, 0)  # only the REPLICATION sensor is over
    plan = LeaderFetchPlan([catching_up(REPL), catching_up(REASSIGN), catching_up(None)], KAFKA)
    assert plan.limits(q, 100, [0, 1, 2]) == [0, None, None]


def test_a_kafka_leader_charges_the_responses_wire_size_and_an_empty_fetch_too():
    plan = LeaderFetchPlan([catching_up(), in_sync(), catching_up(None)], KAFKA)
    parts = sent(300, 200, 5_000)
    (charge,) = plan.charges(parts)
    wire = kafka_fetch_response_size(parts[:2])  # the unthrottled partition is not charged
    assert charge == Charge(LEADER, REPL, wire, exempt=200, overhead=wire - 500)
    # Kafka records `sizeOfThrottledPartitions` on every fetch, so even an empty one costs.
    (empty,) = LeaderFetchPlan([], KAFKA).charges([])
    assert empty.bytes == kafka_fetch_response_size([]) > 0 and empty.throttle_class is REPL


def test_a_precise_leader_charges_record_bytes_only_and_nothing_for_an_empty_fetch():
    plan = LeaderFetchPlan([catching_up(), in_sync(), catching_up(REASSIGN)], PRECISE)
    assert plan.charges(sent(300, 200, 700)) == [
        Charge(LEADER, REPL, 500, exempt=200),
        Charge(LEADER, REASSIGN, 700),
    ]
    assert LeaderFetchPlan([], PRECISE).charges([]) == []


def test_a_partition_a_session_leaves_out_is_not_charged():
    plan = LeaderFetchPlan([catching_up(), catching_up()], PRECISE)
    assert plan.charges([*sent(300), None]) == [Charge(LEADER, REPL, 300)]


def test_a_precise_leader_shares_the_allowance_among_the_partitions_read():
    q = quotas(leader_rate=T)
    plan = LeaderFetchPlan([catching_up(), catching_up(), catching_up(), in_sync()], PRECISE)
    allowance = q.remaining(LEADER, REPL, 0)
    assert allowance > 0
    # Three eligible partitions read: a third each; the in-sync one is exempt and unlimited.
    assert plan.limits(q, 0, [0, 1, 2, 3]) == [int(allowance // 3)] * 3 + [None]
    # Only two of them read (the third answered with an error): a half each.
    assert plan.limits(q, 0, [0, 2]) == [int(allowance // 2)] * 2
    q.record(LEADER, REPL, 10 * T, 0)  # overdrawn: nothing, not a negative budget
    assert plan.limits(q, 0, [0, 1]) == [0, 0]


def test_a_follower_leaves_out_what_it_may_not_fetch_and_caps_what_it_may():
    q = quotas(follower_rate=T)
    views = [catching_up(), in_sync(), catching_up(None)]
    assert FollowerFetchPlan(views, KAFKA).decide(q, 0) == (set(), {})
    q.record(FOLLOWER, REPL, 5_000, 0)
    assert FollowerFetchPlan(views, KAFKA).decide(q, 100) == ({0}, {})
    q2 = quotas(follower_rate=T)
    excluded, limits = FollowerFetchPlan(views, PRECISE).decide(q2, 0)
    assert excluded == set() and limits == {0: int(q2.remaining(FOLLOWER, REPL, 0))}


def test_a_follower_plan_is_needed_only_with_a_follower_bound_or_in_precise_mode():
    assert not FollowerFetchPlan.needed(KAFKA, quotas(leader_rate=T))
    assert FollowerFetchPlan.needed(KAFKA, quotas(follower_reassignment_rate=T))
    assert FollowerFetchPlan.needed(PRECISE, quotas())


def test_a_follower_charges_what_it_appended_by_class_exempt_bytes_apart():
    views = [catching_up(), in_sync(), catching_up(REASSIGN), NOT_THROTTLED]
    charges = FollowerFetchPlan(views, KAFKA).charges(
        [(0, 300, False), (1, 200, True), (2, 700, False), (3, 900, False)]
    )
    assert charges == [Charge(FOLLOWER, REPL, 500, exempt=200), Charge(FOLLOWER, REASSIGN, 700)]


def test_a_listed_partition_is_charged_before_any_rate_is_set():
    """Kafka's `isThrottled` is the list alone: the sensor has its history once a rate comes."""
    view = leader_view(
        partition=0,
        local_id=1,
        follower_id=2,
        adding_replicas=(),
        leader_list=LISTED,
        config=BrokerThrottleConfig(),
        in_sync=False,
    )
    assert (view.throttle_class, view.charge_class) == (None, REPL)
    fview = follower_view(
        partition=0,
        local_id=2,
        adding_replicas=(),
        follower_list=LISTED,
        config=BrokerThrottleConfig(),
        lag=None,
    )
    assert (fview.throttle_class, fview.charge_class, fview.in_sync) == (None, REPL, False)


def test_the_views_carry_the_classes_and_the_sync_state():
    adding = leader_view(
        partition=0,
        local_id=1,
        follower_id=3,
        adding_replicas=(3,),
        leader_list=ThrottledReplicas(),
        config=BrokerThrottleConfig(leader_reassignment_rate=T),
        in_sync=False,
    )
    assert adding == catching_up(REASSIGN)
    unhosted = leader_view(
        partition=0,
        local_id=1,
        follower_id=3,
        adding_replicas=None,
        leader_list=LISTED,
        config=BrokerThrottleConfig(leader_rate=T),
        in_sync=False,
    )
    assert (unhosted.throttle_class, unhosted.charge_class) == (None, REPL)
    caught_up = follower_view(
        partition=0,
        local_id=2,
        adding_replicas=(),
        follower_list=LISTED,
        config=BrokerThrottleConfig(follower_rate=T),
        lag=0,
    )
    assert caught_up == in_sync(REPL)
    assert exempt(caught_up, KAFKA)
    assert not exempt(caught_up, ThrottleSettings(exempt_in_sync=False))
    assert not exempt(catching_up(), KAFKA) and not exempt(in_sync(None), KAFKA)


def test_charges_name_their_counters():
    assert Charge(LEADER, REPL, 500, exempt=200, overhead=40).counters() == {
        "leader_replication_throttled_bytes": 500,
        "leader_replication_exempt_bytes": 200,
        "leader_replication_overhead_bytes": 40,
    }
    assert Charge(FOLLOWER, REASSIGN, 7).counters() == {"follower_reassignment_throttled_bytes": 7}


@pytest.mark.parametrize(
    ("settings", "limits", "expected"),
    [
        (PRECISE, [0, None], PRECISE_RECHECK_MS),
        (PRECISE, [None, 10], None),
        (KAFKA, [0, None], None),
    ],
)
def test_a_long_poll_looks_again_soon_only_while_a_precise_plan_holds_back(
    settings, limits, expected
):
    assert leader_recheck_ms(settings, limits) == expected


@pytest.mark.parametrize(
    ("ready", "throttled", "precise", "expected"),
    [
        (5_000, False, False, 4_000),  # nothing to fetch: until the next partition is ready
        (1_000, False, False, 1),  # ready now: at least 1 ms
        (1_000, True, False, 1_000),  # all held back, ready now: replica.fetch.backoff.ms
        (1_500, True, False, 500),  # ... unless a partition is ready sooner
        (1_000, True, True, 100),  # precise: a tenth of the 1 s quota window
    ],
)
def test_a_fetcher_with_nothing_to_fetch_backs_off(ready, throttled, precise, expected):
    got = follower_backoff_ms(
        ready_ms=ready,
        now_ms=1_000,
        throttled=throttled,
        backoff_ms=1_000,
        precise=precise,
        window_s=1,
    )
    assert got == expected
