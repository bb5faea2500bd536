"""Reading one `__consumer_offsets` partition back into groups (pure): Kafka's
GroupMetadataManager.doLoadGroupsAndOffsets over the records core/group/offsets_log.py reads.

Records are replayed in log order: the last record of a key wins, a tombstone removes it. A
group's metadata record makes it a loaded group (Stable with its members, or Empty); offsets of
a group without one make an Empty standalone group, as Kafka's `emptyGroupOffsets`. A tombstone
for a group removes its metadata only (its offsets have their own tombstones).

A record that cannot be read (bytes that do not parse, a key or value version this broker does
not read) is skipped and reported with its log offset, and the rest of the partition loads:
Kafka's loader likewise skips unknown record types ("It could be a left over from an aborted
upgrade"), and one bad record must not cost every group of the partition its coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from minikafka.core.group.group import Group
from minikafka.core.group.member import Member
from minikafka.core.group.messages import (
    GroupConfig,
    GroupRecord,
    GroupState,
    OffsetAndMetadata,
    TopicPartitionKey,
)
from minikafka.core.group.offsets_log import read_record


@dataclass(slots=True, kw_only=True)
class LoadedPartition:
    """What a partition holds after replay. `unreadable`: (log offset, why) per record
    skipped."""

    offsets: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupRecord] = field(default_factory=dict)
    unreadable: list[tuple[int, str]] = field(default_factory=list)

    @property
    def group_ids(self) -> set[str]:
        """Every group this partition brings back: with metadata, or with offsets only."""
        return {g for g, o in self.offsets.items() if o} | set(self.groups)


def replay(records: Iterable[tuple[int, bytes | None, bytes | None]]) -> LoadedPartition:
    """(log offset, key, value) in log order -> the partition's groups and offsets. Records
    with no key are not the coordinator's and are skipped silently, as Kafka does."""
    out = LoadedPartition()
    for log_offset, key, value in records:
        if key is None:
            continue
        try:
            read = read_record(key, value)
        except ValueError as exc:
            out.unreadable.append((log_offset, str(exc)))
            continue
        if len(read) == 3:
            group, tp, offset = read  # type: ignore[misc]
            if offset is None:
                out.offsets.get(group, {}).pop(tp, None)
            else:
                out.offsets.setdefault(group, {})[tp] = offset
        else:
            group, record = read  # type: ignore[misc]
            if record is None:
                out.groups.pop(group, None)  # GroupMetadataManager: removedGroups
            else:
                out.groups[group] = record
    return out


def group_of(
    record: GroupRecord, *, config: GroupConfig, id_factory: Callable[[], str], now_ms: int
) -> Group:
    """GroupMetadata.loadGroup + GroupCoordinator.onGroupLoaded: the group Stable with its
    members (Empty if none), each member's session starting now, so members that keep
    heartbeating at the new coordinator carry on without a rebalance."""
    group = Group(record.group_id, config=config, id_factory=id_factory)
    group.generation_id = record.generation_id
    group.protocol_type = record.protocol_type or None
    group.protocol_name = record.protocol
    group.leader_id = record.leader if record.members else None
    group.state_timestamp_ms = None if record.state_timestamp_ms < 0 else record.state_timestamp_ms
    for m in record.members:
        group.members[m.member_id] = Member(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            protocol_type=record.protocol_type,
            protocols=((record.protocol or "", m.subscription),),
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_deadline_ms=now_ms + m.session_timeout_ms,
            assignment=m.assignment,
        )
    group.state = GroupState.STABLE if record.members else GroupState.EMPTY
    return group
