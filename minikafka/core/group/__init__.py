"""Kafka's classic consumer-group protocol (pre-KIP-848) as a sans-IO state machine.

Modelled on Kafka's GroupCoordinator.scala, GroupMetadata.scala, MemberMetadata.scala,
DelayedJoin.scala / InitialDelayedJoin. A Kafka-protocol listener drives it: it passes requests
and `now_ms` in and answers what comes out. Nothing here reads a clock or does I/O.

Requests that Kafka parks in a purgatory (a JoinGroup waiting for the rebalance, a follower's
SyncGroup waiting for the leader's assignment) return no response at once: their answer comes
later, in the `completed` of whatever call finished them (another member's join or sync, a
leave, or `on_deadline`). Each answer names its group and member, so the shell can match it to
the request it parked. A member that sends a second JoinGroup while its first is parked
supersedes it (Kafka's updateMember replaces the awaiting callback): only the newest is answered.

States (GroupState.scala): Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and
back to PreparingRebalance on any membership or metadata change; Dead once deleted.

Kept from GroupMetadataManager: the group metadata record, stored when the leader's SyncGroup
completes a rebalance (the group goes Stable once it is durable) and when a group becomes Empty,
and loaded with the offsets, so a coordinator move does not make a Stable group rebalance
(core/group/offsets_log.py, load.py); KIP-211 offset expiry, with Empty groups removed
(group_offsets.py, coordinator.py). Timers are kept in a heap: no request or deadline costs
time in proportion to the number of groups.

Left out, on purpose: static membership (KIP-345; a non-null group.instance.id is refused with
UNSUPPORTED_VERSION), KIP-848, transactional offset commits, expiry of a Stable consumer
group's offsets for topics it no longer subscribes to, and the newMemberJoinTimeout that Kafka
uses for new members which disconnect while awaiting their join (a member awaiting join or sync
is simply kept alive; the rebalance timeout bounds the wait).
"""

from __future__ import annotations

from minikafka.core.group.coordinator import GroupCoordinator
from minikafka.core.group.group import Group, Member, default_id_factory
from minikafka.core.group.messages import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NO_GENERATION,
    NO_OFFSET,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
    CommitOutcome,
    Effect,
    ExpireGroup,
    GroupConfig,
    GroupRecord,
    GroupState,
    GroupSummary,
    JoinedMember,
    JoinOutcome,
    JoinResponse,
    LeaveOutcome,
    ListedGroup,
    MemberRecord,
    MemberSummary,
    OffsetAndMetadata,
    OffsetFetch,
    PersistGroup,
    PersistOffsets,
    SyncOutcome,
    SyncResponse,
)

__all__ = [
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "CommitOutcome",
    "Effect",
    "ExpireGroup",
    "GroupRecord",
    "MemberRecord",
    "PersistGroup",
    "GROUP_ID_NOT_FOUND",
    "GROUP_MAX_SIZE_REACHED",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "GroupSummary",
    "ILLEGAL_GENERATION",
    "INCONSISTENT_GROUP_PROTOCOL",
    "INVALID_GROUP_ID",
    "INVALID_SESSION_TIMEOUT",
    "JoinOutcome",
    "JoinResponse",
    "JoinedMember",
    "LeaveOutcome",
    "ListedGroup",
    "MEMBER_ID_REQUIRED",
    "Member",
    "MemberSummary",
    "NONE",
    "NOT_COORDINATOR",
    "NON_EMPTY_GROUP",
    "NO_GENERATION",
    "NO_OFFSET",
    "OFFSET_METADATA_TOO_LARGE",
    "OffsetAndMetadata",
    "OffsetFetch",
    "PersistOffsets",
    "REBALANCE_IN_PROGRESS",
    "SyncOutcome",
    "SyncResponse",
    "UNKNOWN_MEMBER_ID",
    "UNSUPPORTED_VERSION",
    "default_id_factory",
]
