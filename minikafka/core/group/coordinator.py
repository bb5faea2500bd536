"""The groups one broker coordinates, by id (Kafka's GroupCoordinator and the cache of its
GroupMetadataManager; see core/group/__init__.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from minikafka.core.group.group import (
    Group,
    default_id_factory,
)
from minikafka.core.group.messages import (
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    NO_OFFSET,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
    CommitOutcome,
    GroupConfig,
    GroupState,
    GroupSummary,
    JoinOutcome,
    JoinResponse,
    LeaveOutcome,
    ListedGroup,
    OffsetAndMetadata,
    OffsetFetch,
    Response,
    SyncOutcome,
    SyncResponse,
    TopicPartitionKey,
)


@dataclass(slots=True, kw_only=True)
class GroupCoordinator:
    """The groups this broker coordinates, by id (GroupCoordinator + GroupMetadataManager's
    cache). Requests for a group it does not hold follow Kafka: a join with no member id or a
    "simple" commit (generation < 0) creates the group; the rest answer UNKNOWN_MEMBER_ID /
    ILLEGAL_GENERATION, fetches -1, describe Dead."""

    config: GroupConfig = field(default_factory=GroupConfig)
    id_factory: Callable[[], str] = default_id_factory
    groups: dict[str, Group] = field(default_factory=dict)

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, config=self.config, id_factory=self.id_factory)
        self.groups[group_id] = group
        return group

    def join(self, group_id: str, **kwargs: object) -> JoinOutcome:
        """Group.join's keywords; INVALID_GROUP_ID for an empty group id."""
        member_id = str(kwargs.get("member_id", ""))
        if not group_id:
            resp = JoinResponse(group_id=group_id, member_id=member_id, error=INVALID_GROUP_ID)
            return JoinOutcome(member_id=member_id, response=resp)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                resp = JoinResponse(group_id=group_id, member_id=member_id, error=UNKNOWN_MEMBER_ID)
                return JoinOutcome(member_id=member_id, response=resp)
            group = self._new_group(group_id)
        return group.join(**kwargs)  # type: ignore[arg-type]

    def sync(self, group_id: str, **kwargs: object) -> SyncOutcome:
        group = self.groups.get(group_id)
        if group is None:
            mid = str(kwargs.get("member_id", ""))
            resp = SyncResponse(group_id=group_id, member_id=mid, error=UNKNOWN_MEMBER_ID)
            return SyncOutcome(response=resp)
        return group.sync(**kwargs)  # type: ignore[arg-type]

    def heartbeat(self, group_id: str, *, member_id: str, generation_id: int, now_ms: int) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        return group.heartbeat(member_id=member_id, generation_id=generation_id, now_ms=now_ms)

    def leave(self, group_id: str, *, member_ids: Iterable[str], now_ms: int) -> LeaveOutcome:
        group = self.groups.get(group_id)
        if group is None:
            return LeaveOutcome(error=NONE, members={m: UNKNOWN_MEMBER_ID for m in member_ids})
        return group.leave(member_ids=member_ids, now_ms=now_ms)

    def commit(
        self,
        group_id: str,
        *,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str]],
        now_ms: int,
    ) -> CommitOutcome:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group we do not hold: stale, reject it.
                return CommitOutcome(errors={(tp[0], tp[1]): ILLEGAL_GENERATION for tp in offsets})
            group = self._new_group(group_id)
        return group.commit(
            member_id=member_id, generation_id=generation_id, offsets=offsets, now_ms=now_ms
        )

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, OffsetFetch]:
        group = self.groups.get(group_id)
        if group is None:
            return {(tp[0], tp[1]): OffsetFetch(offset=NO_OFFSET) for tp in (partitions or ())}
        return group.fetch_offsets(partitions)

    def restore(
        self,
        group_id: str,
        committed: Mapping[TopicPartitionKey, OffsetAndMetadata],
        log_offset: int | None = None,
    ) -> None:
        """Group.restore: a commit written at `log_offset`, or loaded (None)."""
        group = self.groups.get(group_id) or self._new_group(group_id)
        group.restore(committed, log_offset)

    def unload(self, group_ids: Iterable[str]) -> tuple[Response, ...]:
        """This broker stops coordinating these groups (GroupMetadataManager.removeGroupsForPartition:
        the offsets partition's leadership moved). Every parked join and sync is answered
        NOT_COORDINATOR, so its member finds the new coordinator."""
        out: list[Response] = []
        for gid in group_ids:
            group = self.groups.pop(gid, None)
            if group is None:
                continue
            group.state = GroupState.DEAD
            for m in group.members.values():
                if m.awaiting_join:
                    out.append(
                        JoinResponse(group_id=gid, member_id=m.member_id, error=NOT_COORDINATOR)
                    )
                elif m.awaiting_sync:
                    out.append(
                        SyncResponse(group_id=gid, member_id=m.member_id, error=NOT_COORDINATOR)
                    )
        return tuple(out)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        """DeleteGroups: only an Empty group goes (-> Dead, then dropped with its offsets)."""
        result: dict[str, int] = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                result[gid] = GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                result[gid] = NON_EMPTY_GROUP
            else:
                group.state = GroupState.DEAD
                del self.groups[gid]
                result[gid] = NONE
        return result

    def describe(self, group_id: str) -> GroupSummary:
        group = self.groups.get(group_id)
        if group is None:
            # GroupCoordinator.DeadGroup: an unknown group describes as Dead, without error.
            return GroupSummary(
                group_id=group_id, state="Dead", protocol_type="", protocol="", members=()
            )
        return group.describe()

    def list_groups(self) -> tuple[ListedGroup, ...]:
        return tuple(
            ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type or "", state=g.state.value
            )
            for g in self.groups.values()
        )

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() if (d := g.next_deadline_ms()) is not None]
        return min(deadlines) if deadlines else None

    def on_deadline(self, now_ms: int) -> tuple[Response, ...]:
        out: list[Response] = []
        for group in self.groups.values():
            out.extend(group.on_deadline(now_ms))
        return tuple(out)
