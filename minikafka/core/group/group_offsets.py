"""A group's committed offsets and their expiry: the offsets half of Kafka's GroupMetadata and
of GroupCoordinator.handleCommitOffsets, mixed into core/group/group.py's Group.

Expiry is KIP-211's (GroupMetadata.removeExpiredOffsets, run by
GroupMetadataManager.cleanupGroupMetadata every offsets.retention.check.interval.ms):
- a group with a protocol type (it had members) that is Empty: every offset expires once
  offsets.retention.minutes have passed since the group became Empty (its
  currentStateTimestamp; a group loaded without one counts from each offset's commit);
- a standalone group (no protocol type: it only commits, generation -1): each offset expires
  retention after its own commit;
- a group with members keeps its offsets. Kafka also expires, in a Stable consumer group, the
  offsets of topics no member subscribes to; that needs the consumer protocol's subscription
  parsed, and is not done here.
An offset whose commit is still being appended never expires (Kafka's pendingOffsetCommits),
nor does a group waiting for a KIP-394 pending member or for its metadata record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from minikafka.core.group.messages import (
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_GENERATION,
    NO_OFFSET,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    CommitOutcome,
    GroupConfig,
    GroupState,
    OffsetAndMetadata,
    OffsetFetch,
    PersistOffsets,
    TopicPartitionKey,
)


class GroupOffsets:
    """The offsets methods of Group (core/group/group.py), which holds these attributes."""

    group_id: str
    config: GroupConfig
    state: GroupState
    generation_id: int
    protocol_type: str | None
    state_timestamp_ms: int | None
    members: dict
    pending_members: dict[str, int]
    offsets: dict[TopicPartitionKey, OffsetAndMetadata]
    _log_offsets: dict[TopicPartitionKey, int]
    pending_commits: int
    _storing: int | None

    def commit(
        self,
        *,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str]],
        now_ms: int,
    ) -> CommitOutcome:
        """GroupCoordinator.handleCommitOffsets / doCommitOffsets."""
        keys = [(tp[0], tp[1]) for tp in offsets]

        def all_error(code: int) -> CommitOutcome:
            return CommitOutcome(errors={tp: code for tp in keys})

        if self.state is GroupState.DEAD:
            return all_error(COORDINATOR_NOT_AVAILABLE)
        simple = generation_id < 0 and self.state is GroupState.EMPTY
        if not simple:
            # The group manages its members: only a current member of this generation commits.
            member = self.members.get(member_id)
            if member is None:
                return all_error(UNKNOWN_MEMBER_ID)
            if generation_id != self.generation_id:
                return all_error(ILLEGAL_GENERATION)
            if self.state is GroupState.COMPLETING_REBALANCE:
                return all_error(REBALANCE_IN_PROGRESS)
            member.session_deadline_ms = now_ms + member.session_timeout_ms
        errors: dict[TopicPartitionKey, int] = {}
        accepted: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for tp, (offset, metadata) in offsets.items():
            key = (tp[0], tp[1])
            meta = metadata or ""
            if len(meta.encode()) > self.config.max_metadata_bytes:
                errors[key] = OFFSET_METADATA_TOO_LARGE
                continue
            errors[key] = NONE
            accepted[key] = OffsetAndMetadata(
                offset=offset, metadata=meta, commit_timestamp_ms=now_ms
            )
        # Not served yet: as Kafka's GroupMetadata.prepareOffsetCommit, a commit counts once it
        # is durable (the shell appends the effect, then calls `restore` with it: Kafka's
        # onOffsetCommitAppend). A failed append leaves the offsets as they were.
        if not accepted:
            return CommitOutcome(errors=errors)
        self.pending_commits += 1  # until `commit_settled`
        effects = (PersistOffsets(group_id=self.group_id, offsets=accepted),)
        return CommitOutcome(errors=errors, effects=effects)

    def fetch_offsets(
        self, partitions: Iterable[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, OffsetFetch]:
        """OffsetFetch: every committed offset (None), or the ones asked, NO_OFFSET if none."""
        if partitions is None:
            return {
                tp: OffsetFetch(offset=o.offset, metadata=o.metadata)
                for tp, o in self.offsets.items()
            }
        result: dict[TopicPartitionKey, OffsetFetch] = {}
        for tp in partitions:
            key = (tp[0], tp[1])
            o = self.offsets.get(key)
            result[key] = (
                OffsetFetch(offset=o.offset, metadata=o.metadata)
                if o is not None
                else OffsetFetch(offset=NO_OFFSET)
            )
        return result

    def restore(
        self,
        committed: Mapping[TopicPartitionKey, OffsetAndMetadata],
        log_offset: int | None = None,
    ) -> None:
        """Serve these offsets: a PersistOffsets written at `log_offset` of the offsets
        partition (onOffsetCommitAppend), or what a load read back (`log_offset` None).

        Appends of one partition may be acknowledged in any order, so a commit only replaces
        one written before it in the log: as Kafka's onOffsetCommitAppend, which keeps the
        record with the higher appended offset, the group serves what a reload would read."""
        if log_offset is not None:
            self.commit_settled()
        for tp, o in committed.items():
            key = (tp[0], tp[1])
            if log_offset is not None and self._log_offsets.get(key, -1) > log_offset:
                continue  # a later commit of this partition is already served
            self.offsets[key] = o
            if log_offset is None:
                self._log_offsets.pop(key, None)
            else:
                self._log_offsets[key] = log_offset

    def commit_settled(self) -> None:
        """An append of a PersistOffsets of this group finished (restored, or failed): it no
        longer holds expiry back."""
        self.pending_commits = max(self.pending_commits - 1, 0)

    # --- expiry (KIP-211) ------------------------------------------------------------------

    def _expiry_base_ms(self) -> int | None:
        """When an Empty group's offsets start ageing: the moment it became Empty for a group
        that had members; None (each offset's commit) for a standalone group."""
        return self.state_timestamp_ms if self.protocol_type is not None else None

    def expiry_ms(self, now_ms: int | None) -> int | None:
        """When the next cleanup has something to do for this group: an offset expires, or
        the group, Empty with no offsets, is removed (at once: `now_ms`). None while it has
        members, pending members or appends in flight."""
        if (
            self.state is not GroupState.EMPTY
            or self.pending_members
            or self.pending_commits
            or self._storing is not None
        ):
            return None
        if not self.offsets:
            return now_ms if now_ms is not None else (self.state_timestamp_ms or 0)
        retention = self.config.offsets_retention_ms
        base = self._expiry_base_ms()
        if base is not None:
            return base + retention
        return min(o.commit_timestamp_ms for o in self.offsets.values()) + retention

    def expire_offsets(self, now_ms: int) -> tuple[TopicPartitionKey, ...]:
        """GroupMetadata.removeExpiredOffsets: forget the offsets retention has passed for;
        -> their partitions, for the shell's tombstones."""
        if self.expiry_ms(now_ms) is None:
            return ()
        retention = self.config.offsets_retention_ms
        base = self._expiry_base_ms()
        expired = tuple(
            tp
            for tp, o in self.offsets.items()
            if now_ms - (o.commit_timestamp_ms if base is None else base) >= retention
        )
        for tp in expired:
            del self.offsets[tp]
            self._log_offsets.pop(tp, None)
        return expired
