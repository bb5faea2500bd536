"""What one LeaderAndIsr entry does to a partition this broker may host.

Kafka's ReplicaManager.becomeLeaderOrFollower, the per-partition checks before makeLeader /
makeFollower: a stale entry is refused (FENCED_LEADER_EPOCH), an entry that leaves this broker
out stops the replica it hosts, and the rest make it lead or follow (core/replica.py carries
that out).
"""

from __future__ import annotations

import enum

from minikafka.wire.messages import PartitionState

__all__ = ["LeaderAndIsrAction", "classify_leader_and_isr"]


class LeaderAndIsrAction(enum.Enum):
    FENCED = "fenced"  # older than what we hold: FENCED_LEADER_EPOCH, nothing changes
    STOP = "stop"  # this broker is no longer a replica: stop serving and fetching (no delete)
    IGNORE = "ignore"  # not a replica, and nothing hosted here to stop
    LEAD = "lead"
    FOLLOW = "follow"


def classify_leader_and_isr(
    current: PartitionState | None, new: PartitionState, local_id: int
) -> LeaderAndIsrAction:
    """What a LeaderAndIsr entry does to a partition whose last controller state is `current`.

    Stale (Kafka's Partition.makeLeader/makeFollower checks): an older leader epoch, or the same
    leader epoch with an older partition epoch. The same state again is not stale (a resend)."""
    if current is not None:
        if new.leader_epoch != current.leader_epoch:
            stale = new.leader_epoch < current.leader_epoch
        else:
            stale = new.partition_epoch < current.partition_epoch
        if stale:
            return LeaderAndIsrAction.FENCED
    if local_id not in new.replicas:
        return LeaderAndIsrAction.STOP if current is not None else LeaderAndIsrAction.IGNORE
    return LeaderAndIsrAction.LEAD if new.leader == local_id else LeaderAndIsrAction.FOLLOW
