"""Each deliberate bug of minikafka/testing/mutants.py breaks the decision it names, and only
under its patch: applied here in-process, with every patched attribute restored after the test
(the system tests apply them inside node processes only; a cluster started under the mutant
launcher: tests/integration/test_mutants.py)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import trio

from minikafka.common import TopicPartition
from minikafka.core import fetcher as core_fetcher
from minikafka.core.quota import planner
from minikafka.core.quota.charge import ChargedPartition
from minikafka.core.quota.classes import ThrottleClass
from minikafka.core.quota.stats import MetricConfig, SampledStat, SimpleRate
from minikafka.server import fetch_serve, fetch_sessions
from minikafka.testing.mutants import CONTROL, MUTANTS, node_command

REPL = ThrottleClass.REPLICATION
PATCHED = [
    (planner, "decide_fetch_throttles"),
    (planner.LeaderFetchPlan, "decisions"),
    (planner.FollowerFetchPlan, "decisions"),
    (core_fetcher.FetchPlanner, "__init__"),
    (fetch_sessions, "order_partitions"),
    (fetch_serve, "read_once"),
    (fetch_sessions, "read_once"),
    (planner.LeaderFetchPlan, "charges"),
    (SampledStat, "_purge"),
    (planner, "kafka_fetch_response_size"),
]
EXCEEDED = SimpleNamespace(exceeded=lambda *_: True, remaining=lambda *_: 0.0)


@pytest.fixture
def apply(monkeypatch):
    """apply(name): the mutant patched in; everything it may patch is restored afterwards."""
    for owner, attr in PATCHED:
        monkeypatch.setattr(owner, attr, getattr(owner, attr))
    return lambda name: MUTANTS[name].apply()


def limits(side, parts):
    """The decision of `side`'s plan for (class, in sync) parts, the quota exceeded."""
    plan_of = {"leader": planner.LeaderFetchPlan, "follower": planner.FollowerFetchPlan}[side]
    views = [planner.ThrottleView(cls, cls, in_sync) for cls, in_sync in parts]
    return [d.limit for d in plan_of(views, planner.ThrottleSettings()).decisions(EXCEEDED, 0)]


def test_the_real_decisions_first():
    # Out of sync and exceeded: held back; in sync: exempt (KAFKA-4313).
    assert limits("leader", [(REPL, False), (REPL, True)]) == [0, None]
    assert limits("follower", [(REPL, False), (REPL, True)]) == [0, None]


def test_the_control_changes_nothing(apply):
    before = [getattr(owner, attr) for owner, attr in PATCHED]
    apply(CONTROL)
    assert [getattr(owner, attr) for owner, attr in PATCHED] == before


@pytest.mark.parametrize(
    ("mutant", "leader", "follower"),
    [
        ("leader-throttle-off", [None, None], [0, None]),
        ("follower-throttle-off", [0, None], [None, None]),
        ("kafka-4313-off", [0, 0], [0, 0]),
        ("kafka-4313-inverted", [None, 0], [None, 0]),
    ],
)
def test_throttle_decisions(apply, mutant, leader, follower):
    apply(mutant)
    assert limits("leader", [(REPL, False), (REPL, True)]) == leader
    assert limits("follower", [(REPL, False), (REPL, True)]) == follower


def test_fixed_partition_order(apply):
    tps = [TopicPartition("t", p) for p in range(20)]
    settings = core_fetcher.FetchSettings(
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        response_max_bytes=1 << 20,
        partition_max_bytes=1 << 16,
        backoff_ms=1000,
    )
    shuffled = list(tps)
    core_fetcher.FetchPlanner(settings, random.Random(1))._rng.shuffle(shuffled)
    assert shuffled != tps  # the real planner shuffles
    apply("fixed-partition-order")
    mixed = list(reversed(tps))
    core_fetcher.FetchPlanner(settings, random.Random(1))._rng.shuffle(mixed)
    assert mixed == tps
    session = SimpleNamespace(partitions=dict.fromkeys(tps))
    assert fetch_sessions.order_partitions(session, reversed(tps), random.Random(1)) == tps


def test_response_cap_ignored(apply, monkeypatch):
    seen = []

    async def spy(rm, readable, limits, *, is_follower, max_bytes):
        seen.append((is_follower, max_bytes))
        return []

    monkeypatch.setattr(fetch_serve, "read_once", spy)
    monkeypatch.setattr(fetch_sessions, "read_once", spy)
    apply("response-cap-ignored")

    async def main():
        for module in (fetch_serve, fetch_sessions):
            await module.read_once(None, [], [], is_follower=True, max_bytes=10 << 20)
            await module.read_once(None, [], [], is_follower=False, max_bytes=10 << 20)

    trio.run(main)
    assert seen == [(True, 2**31 - 1), (False, 10 << 20)] * 2


def test_uncharged_tenth_partition(apply, monkeypatch):
    seen = []
    monkeypatch.setattr(planner.LeaderFetchPlan, "charges", lambda self, sent: seen.append(sent))
    apply("uncharged-tenth-partition")
    parts = [ChargedPartition(topic="t", partition=p) for p in range(21)]
    planner.LeaderFetchPlan.charges(None, [*parts, None])
    assert [p is None for p in seen[0]] == [p % 10 == 0 for p in range(21)] + [True]


def test_simplerate_purge_by_start(apply):
    def rate_after_a_long_sample() -> float:
        # One sample from 0 to 999 ms of a 2 x 1 s quota: its last event is 1,501 ms old at
        # 2,500, so Kafka keeps it (expiry at 2 s); by its start it is 2.5 s old and gone.
        rate = SimpleRate(MetricConfig(samples=2, window_ms=1000))
        rate.record(100, 0)
        rate.record(100, 999)
        return rate.measure(2500)

    assert rate_after_a_long_sample() > 0
    apply("simplerate-purge-by-start")
    assert rate_after_a_long_sample() == 0


def test_records_only_charge(apply):
    parts = [ChargedPartition(topic="t", records_bytes=100)] * 3
    views = [planner.ThrottleView(REPL, REPL, in_sync=False)] * 3
    plan = planner.LeaderFetchPlan(views, planner.ThrottleSettings())
    (charge,) = plan.charges(parts)
    assert charge.bytes > 300 and charge.overhead == charge.bytes - 300
    apply("records-only-charge")
    (charge,) = plan.charges(parts)
    assert (charge.bytes, charge.overhead) == (300, 0)


def test_every_mutant_has_a_node_command():
    for name in MUTANTS:
        assert node_command(name)[-2:] == (name, "node")
    with pytest.raises(KeyError, match="no mutant"):
        node_command("nope")
