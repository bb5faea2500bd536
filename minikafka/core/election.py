"""Partition leader election: who leads when the current leader is gone.

Mirrors Kafka's `PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection` (and the
ISR rule of `PartitionStateMachine.leaderForOffline`): walk the replicas in assignment order
and take the first one that is both live and in the ISR, so the preferred replica (the first
one) wins whenever it qualifies. If none qualifies and unclean election is allowed
(`unclean.leader.election.enable`), take the first live replica at all and restart the ISR
from it: data it never had may be lost, which is what "unclean" means. Otherwise there is no
leader and the ISR is kept, so that the last in-sync replica can take over when it returns.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from minikafka.common import NO_LEADER


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionResult:
    leader: int  # NO_LEADER (-1) when nobody qualifies
    isr: list[int]
    unclean: bool = False


def elect_leader(
    *, replicas: Sequence[int], isr: Sequence[int], live: Set[int], unclean_allowed: bool
) -> ElectionResult:
    """Elect a leader for a partition whose leader is offline (or that has none)."""
    in_isr = set(isr)
    for replica in replicas:
        if replica in live and replica in in_isr:
            # Kafka keeps the live part of the ISR on a clean election.
            return ElectionResult(leader=replica, isr=[r for r in isr if r in live])
    if unclean_allowed:
        for replica in replicas:
            if replica in live:
                return ElectionResult(leader=replica, isr=[replica], unclean=True)
    return ElectionResult(leader=NO_LEADER, isr=list(isr))


def preferred_leader(replicas: Sequence[int]) -> int:
    """The preferred leader is the first replica of the assignment (NO_LEADER if none)."""
    return replicas[0] if replicas else NO_LEADER
