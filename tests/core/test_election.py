"""Offline-partition leader election (PartitionLeaderElectionAlgorithms)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from minikafka.common import NO_LEADER
from minikafka.core.election import ElectionResult, elect_leader, preferred_leader


def test_preferred_replica_wins_when_live_and_in_sync():
    got = elect_leader(replicas=[1, 2, 3], isr=[3, 2, 1], live={1, 2, 3}, unclean_allowed=False)
    assert got == ElectionResult(leader=1, isr=[3, 2, 1], unclean=False)


def test_replica_order_not_isr_order_decides():
    got = elect_leader(replicas=[1, 2, 3], isr=[3, 2], live={1, 2, 3}, unclean_allowed=False)
    assert got.leader == 2


def test_dead_preferred_skipped_and_isr_keeps_only_live_members():
    got = elect_leader(replicas=[1, 2, 3], isr=[1, 2, 3], live={2, 3}, unclean_allowed=True)
    assert got == ElectionResult(leader=2, isr=[2, 3], unclean=False)


def test_no_live_isr_member_and_unclean_off_keeps_isr():
    got = elect_leader(replicas=[1, 2, 3], isr=[1], live={2, 3}, unclean_allowed=False)
    assert got == ElectionResult(leader=NO_LEADER, isr=[1], unclean=False)


def test_unclean_takes_first_live_replica_and_restarts_isr():
    got = elect_leader(replicas=[1, 3, 2], isr=[1], live={2, 3}, unclean_allowed=True)
    assert got == ElectionResult(leader=3, isr=[3], unclean=True)


def test_unclean_with_nobody_live_is_no_leader():
    got = elect_leader(replicas=[1, 2], isr=[1], live={5}, unclean_allowed=True)
    assert got.leader == NO_LEADER
    assert got.isr == [1]
    assert not got.unclean


def test_preferred_leader():
    assert preferred_leader([4, 1, 2]) == 4
    assert preferred_leader([]) == NO_LEADER


@given(
    replicas=st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True),
    data=st.data(),
    unclean=st.booleans(),
)
def test_election_properties(replicas, data, unclean):
    isr = data.draw(st.lists(st.sampled_from(replicas), unique=True))
    live = set(data.draw(st.lists(st.integers(0, 6), unique=True)))
    got = elect_leader(replicas=replicas, isr=isr, live=live, unclean_allowed=unclean)
    clean = [r for r in replicas if r in live and r in isr]
    if clean:
        assert got.leader == clean[0] and not got.unclean
        assert got.leader in got.isr and set(got.isr) <= live
    elif unclean and live & set(replicas):
        assert got.unclean and got.isr == [got.leader] and got.leader in live
    else:
        assert got.leader == NO_LEADER and got.isr == isr
