"""The groups one broker coordinates, by id (Kafka's GroupCoordinator and the cache of its
GroupMetadataManager; see core/group/__init__.py).

A group exists only as Kafka creates one: a JoinGroup it accepts (a refused one, say for its
session timeout, leaves nothing behind), a standalone commit (generation -1) with an offset to
store, or a load. Empty groups go again: their offsets expire (core/group/group_offsets.py),
and an Empty group with none left is removed, with tombstones (GroupMetadataManager's
cleanupGroupMetadata).

Timers: each group's earliest deadline (session, rebalance, initial delay, KIP-394 pending
member) and its next expiry sit in one heap, so the next deadline, and firing the due ones,
cost O(log n) per due group whatever the number n of groups: a request touches only its own
group's entries (Kafka keeps these timers in the timing wheel of its purgatories for the same
reason). `_due` holds each group's current deadline of each kind; a heap entry that disagrees
with it is stale and dropped when it surfaces. An expiry is due at the first multiple of
offsets.retention.check.interval.ms at or after it: cleanupGroupMetadata runs on that period,
but here visits only the groups that have something to expire.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from minikafka.core.group.group import Group
from minikafka.core.group.load import LoadedPartition, group_of
from minikafka.core.group.member import default_id_factory
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
    Effect,
    ExpireGroup,
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

_TIMER, _EXPIRY = 0, 1
_COMPACT_AT = 1024  # rebuild the heap when it holds over 4x its live entries, and this many


@dataclass(slots=True, kw_only=True)
class GroupCoordinator:
    """The groups this broker coordinates, by id (GroupCoordinator + GroupMetadataManager's
    cache). Requests for a group it does not hold follow Kafka: a join with no member id or a
    "simple" commit (generation < 0) creates the group; the rest answer UNKNOWN_MEMBER_ID /
    ILLEGAL_GENERATION, fetches -1, describe Dead. The appends the groups ask for (their
    metadata records, expiry tombstones) are collected for the shell: `take_effects`."""

    config: GroupConfig = field(default_factory=GroupConfig)
    id_factory: Callable[[], str] = default_id_factory
    groups: dict[str, Group] = field(default_factory=dict)
    _heap: list[tuple[int, int, str]] = field(default_factory=list)
    _due: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))
    _effects: list[Effect] = field(default_factory=list)

    # --- bookkeeping -------------------------------------------------------------------------

    def _new_group(self, group_id: str) -> Group:
        """A group not yet held: the caller adds it once a request made it (Kafka's addGroup)."""
        return Group(group_id, config=self.config, id_factory=self.id_factory)

    def _after(self, group: Group, now_ms: int | None) -> None:
        """After any call on `group`: collect its effects and file its deadlines again."""
        self._effects.extend(group.take_effects())
        if self.groups.get(group.group_id) is not group:
            return
        self._schedule(_TIMER, group.group_id, group.next_deadline_ms())
        expiry = group.expiry_ms(now_ms)
        if expiry is not None:
            period = self.config.retention_check_interval_ms
            expiry = -(-expiry // period) * period  # the next cleanup at or after it
        self._schedule(_EXPIRY, group.group_id, expiry)

    def _schedule(self, kind: int, group_id: str, at: int | None) -> None:
        due = self._due[kind]
        if due.get(group_id) == at:
            return
        if at is None:
            del due[group_id]
            return
        due[group_id] = at
        heapq.heappush(self._heap, (at, kind, group_id))
        live = len(self._due[0]) + len(self._due[1])
        if len(self._heap) > max(_COMPACT_AT, 4 * live):
            # Stale entries pile up when deadlines move later (every heartbeat): drop them.
            self._heap = [(at, k, g) for k, d in enumerate(self._due) for g, at in d.items()]
            heapq.heapify(self._heap)

    def _drop(self, group_id: str) -> Group | None:
        for due in self._due:
            due.pop(group_id, None)
        return self.groups.pop(group_id, None)

    def take_effects(self) -> list[Effect]:
        """The appends asked for since the last call, in order (messages.Effect)."""
        out, self._effects = self._effects, []
        return out

    # --- requests ----------------------------------------------------------------------------

    def join(self, group_id: str, **kwargs: object) -> JoinOutcome:
        """Group.join's keywords; INVALID_GROUP_ID for an empty group id. A new group is kept
        only if the join made it a member or a KIP-394 pending member (handleJoinGroup checks
        the session timeout and the rest before getOrMaybeCreateGroup)."""
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
            out = group.join(**kwargs)  # type: ignore[arg-type]
            if group.members or group.pending_members:
                self.groups[group_id] = group
        else:
            out = group.join(**kwargs)  # type: ignore[arg-type]
        self._after(group, int(kwargs["now_ms"]))  # type: ignore[call-overload]
        return out

    def sync(self, group_id: str, **kwargs: object) -> SyncOutcome:
        group = self.groups.get(group_id)
        if group is None:
            mid = str(kwargs.get("member_id", ""))
            resp = SyncResponse(group_id=group_id, member_id=mid, error=UNKNOWN_MEMBER_ID)
            return SyncOutcome(response=resp)
        out = group.sync(**kwargs)  # type: ignore[arg-type]
        self._after(group, int(kwargs["now_ms"]))  # type: ignore[call-overload]
        return out

    def group_stored(
        self, group_id: str, *, generation_id: int, error: int, now_ms: int
    ) -> tuple[Response, ...]:
        """The answer to a PersistGroup with `awaited` (Group.stored); what it completed."""
        group = self.groups.get(group_id)
        if group is None:
            return ()
        out = group.stored(generation_id=generation_id, error=error, now_ms=now_ms)
        self._after(group, now_ms)
        return out

    def heartbeat(self, group_id: str, *, member_id: str, generation_id: int, now_ms: int) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        code = group.heartbeat(member_id=member_id, generation_id=generation_id, now_ms=now_ms)
        self._after(group, now_ms)
        return code

    def leave(self, group_id: str, *, member_ids: Iterable[str], now_ms: int) -> LeaveOutcome:
        group = self.groups.get(group_id)
        if group is None:
            return LeaveOutcome(error=NONE, members={m: UNKNOWN_MEMBER_ID for m in member_ids})
        out = group.leave(member_ids=member_ids, now_ms=now_ms)
        self._after(group, now_ms)
        return out

    def commit(
        self,
        group_id: str,
        *,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str]],
        now_ms: int,
    ) -> CommitOutcome:
        """A standalone commit (generation < 0) to a group not held creates it, Empty, if it
        has an offset to store (handleCommitOffsets: a group "not relying on Kafka for group
        management")."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group we do not hold: stale, reject it.
                return CommitOutcome(errors={(tp[0], tp[1]): ILLEGAL_GENERATION for tp in offsets})
            group = self._new_group(group_id)
        out = group.commit(
            member_id=member_id, generation_id=generation_id, offsets=offsets, now_ms=now_ms
        )
        if out.effects:
            self.groups.setdefault(group_id, group)
        self._after(group, now_ms)
        return out

    def commit_failed(self, group_id: str, now_ms: int) -> None:
        """A PersistOffsets was not appended: nothing is served, and it holds expiry back no
        longer (Kafka's failPendingOffsetWrite)."""
        group = self.groups.get(group_id)
        if group is not None:
            group.commit_settled()
            self._after(group, now_ms)

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
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = self._new_group(group_id)
        group.restore(committed, log_offset)
        self._after(group, None)

    # --- loading and unloading ---------------------------------------------------------------

    def load(self, loaded: LoadedPartition, now_ms: int) -> None:
        """Serve the groups of a partition just read (GroupMetadataManager.loadGroup +
        GroupCoordinator.onGroupLoaded): a group with a metadata record comes back with its
        generation and members, each with a fresh session; one with offsets only, Empty."""
        for gid in loaded.group_ids:
            self._drop(gid)
            record = loaded.groups.get(gid)
            group = (
                self._new_group(gid)
                if record is None
                else group_of(record, config=self.config, id_factory=self.id_factory, now_ms=now_ms)
            )
            group.restore(loaded.offsets.get(gid, {}))
            self.groups[gid] = group
            self._after(group, now_ms)

    def unload(self, group_ids: Iterable[str]) -> tuple[Response, ...]:
        """This broker stops coordinating these groups (GroupMetadataManager.removeGroupsForPartition:
        the offsets partition's leadership moved). Every parked join and sync is answered
        NOT_COORDINATOR, so its member finds the new coordinator."""
        out: list[Response] = []
        for gid in group_ids:
            group = self._drop(gid)
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
        """DeleteGroups: only an Empty group goes (-> Dead, with tombstones for its offsets and
        its metadata: GroupCoordinator.handleDeleteGroups)."""
        result: dict[str, int] = {}
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                result[gid] = GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                result[gid] = NON_EMPTY_GROUP
            else:
                self._remove(group, tuple(group.offsets))
                result[gid] = NONE
        return result

    def _remove(self, group: Group, offsets: tuple[TopicPartitionKey, ...]) -> None:
        """The group goes Dead and is forgotten; tombstones for `offsets`, and for its metadata
        record if it ever had one (Kafka writes none for generation 0: only offsets)."""
        group.state = GroupState.DEAD
        self._drop(group.group_id)
        if offsets or group.generation_id > 0:
            self._effects.append(
                ExpireGroup(
                    group_id=group.group_id,
                    partitions=offsets,
                    group_removed=group.generation_id > 0,
                )
            )

    # --- queries -----------------------------------------------------------------------------

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

    # --- time --------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of any group (stale heap entries on top are dropped)."""
        heap = self._heap
        while heap:
            at, kind, gid = heap[0]
            if self._due[kind].get(gid) == at:
                return at
            heapq.heappop(heap)
        return None

    def on_deadline(self, now_ms: int) -> tuple[Response, ...]:
        """Fire the timers due at `now_ms` (Group.on_deadline) and expire what is due
        (cleanupGroupMetadata), visiting only the groups concerned. A deadline a group sets
        at `now_ms` itself fires at the next call."""
        due: list[tuple[int, str]] = []
        while self._heap and self._heap[0][0] <= now_ms:
            at, kind, gid = heapq.heappop(self._heap)
            if self._due[kind].get(gid) == at:
                del self._due[kind][gid]
                due.append((kind, gid))
        out: list[Response] = []
        for kind, gid in due:
            group = self.groups.get(gid)
            if group is None:
                continue
            if kind == _TIMER:
                out.extend(group.on_deadline(now_ms))
            else:
                self._expire(group, now_ms)
            self._after(group, now_ms)
        return tuple(out)

    def _expire(self, group: Group, now_ms: int) -> None:
        """GroupMetadataManager.cleanupGroupMetadata for one group: its expired offsets go,
        and, Empty with none left, the group goes too (-> Dead)."""
        expired = group.expire_offsets(now_ms)
        if group.expiry_ms(now_ms) is not None and not group.offsets:
            self._remove(group, expired)
        elif expired:
            self._effects.append(
                ExpireGroup(group_id=group.group_id, partitions=expired, group_removed=False)
            )
