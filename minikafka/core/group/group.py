"""One consumer group's state machine (Kafka's GroupMetadata with the parts of
GroupCoordinator that act on one group; see core/group/__init__.py). Its offsets and their
expiry are core/group/group_offsets.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from minikafka.core.group.group_offsets import GroupOffsets
from minikafka.core.group.member import Member, default_id_factory
from minikafka.core.group.messages import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
    Effect,
    GroupConfig,
    GroupRecord,
    GroupState,
    GroupSummary,
    JoinedMember,
    JoinOutcome,
    JoinResponse,
    LeaveOutcome,
    MemberRecord,
    MemberSummary,
    OffsetAndMetadata,
    PersistGroup,
    Protocols,
    Response,
    SyncOutcome,
    SyncResponse,
    TopicPartitionKey,
)

# --- state -------------------------------------------------------------------------------------


class Group(GroupOffsets):
    """GroupMetadata plus the parts of GroupCoordinator that act on one group."""

    def __init__(
        self,
        group_id: str,
        *,
        config: GroupConfig | None = None,
        id_factory: Callable[[], str] = default_id_factory,
    ) -> None:
        self.group_id = group_id
        self.config = config or GroupConfig()
        self._id_factory = id_factory
        self.state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = None  # Kafka's currentStateTimestamp
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # join order: the first one leads
        # KIP-394: ids handed out with MEMBER_ID_REQUIRED, with the deadline to rejoin by.
        self.pending_members: dict[str, int] = {}
        self.offsets: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        # Where in the offsets partition each served commit was written (see `restore`).
        self._log_offsets: dict[TopicPartitionKey, int] = {}
        self.pending_commits = 0  # PersistOffsets not yet appended
        # The generation whose GroupMetadata record is being appended before it goes Stable.
        self._storing: int | None = None
        self._effects: list[Effect] = []
        # The rebalance timer: DelayedJoin, or InitialDelayedJoin when `_initial`.
        self._join_deadline_ms: int | None = None
        self._initial = False
        self._initial_delay_ms = 0
        self._initial_remaining_ms = 0
        self._new_member_added = False
        self._out: list[Response] = []

    # --- queries ---------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def candidate_protocols(self, excluding: str | None = None) -> set[str]:
        """GroupMetadata.candidateProtocols: the protocols every member supports."""
        sets = [
            {name for name, _ in m.protocols}
            for m in self.members.values()
            if m.member_id != excluding
        ]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """GroupMetadata.selectProtocol: each member votes for its most preferred candidate;
        the most votes win. Kafka breaks ties arbitrarily; here the earliest-joined member's
        preference order does, so the choice is deterministic."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [name for name, _ in first.protocols if name in candidates]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def _supports_protocols(self, member_id: str, protocol_type: str, protocols: Protocols) -> bool:
        """GroupMetadata.supportsProtocols. Kafka counts the joining member's own old protocols
        too; here a rejoining member is measured against the others only."""
        if not protocol_type or not protocols:
            return False
        others = [m for m in self.members.values() if m.member_id != member_id]
        if self.state is GroupState.EMPTY or not others:
            return True
        if protocol_type != self.protocol_type:
            return False
        candidates = self.candidate_protocols(excluding=member_id)
        return any(name in candidates for name, _ in protocols)

    def next_deadline_ms(self) -> int | None:
        """The earliest of: the rebalance timer (initial delay or rebalance timeout), the
        session deadline of each member not parked in a join or sync (Kafka keeps those alive,
        MemberMetadata.shouldKeepAlive), and each KIP-394 pending member's deadline."""
        deadlines = list(self.pending_members.values())
        if self._join_deadline_ms is not None:
            deadlines.append(self._join_deadline_ms)
        deadlines.extend(
            m.session_deadline_ms
            for m in self.members.values()
            if not m.awaiting_join and not m.awaiting_sync
        )
        return min(deadlines) if deadlines else None

    # --- JoinGroup -------------------------------------------------------------------------

    def join(
        self,
        *,
        member_id: str,
        client_id: str,
        protocol_type: str,
        protocols: Iterable[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
        now_ms: int,
        group_instance_id: str | None = None,
        client_host: str = "",
    ) -> JoinOutcome:
        """GroupCoordinator.handleJoinGroup / doUnknownJoinGroup / doJoinGroup."""
        protos: Protocols = tuple((name, bytes(meta)) for name, meta in protocols)

        def refuse(code: int, mid: str = member_id) -> JoinOutcome:
            resp = JoinResponse(group_id=self.group_id, member_id=mid, error=code)
            return JoinOutcome(member_id=mid, response=resp)

        if group_instance_id is not None:
            return refuse(UNSUPPORTED_VERSION)  # static membership (KIP-345) is not served
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return refuse(INVALID_SESSION_TIMEOUT)
        if self.state is GroupState.DEAD:
            # The group was deleted under the request: the client finds the coordinator again.
            return refuse(COORDINATOR_NOT_AVAILABLE)
        known = member_id in self.members or member_id in self.pending_members
        if not known and cfg.max_size is not None:
            if len(self.members) + len(self.pending_members) >= cfg.max_size:
                return refuse(GROUP_MAX_SIZE_REACHED)  # acceptJoiningMember
        if not self._supports_protocols(member_id, protocol_type, protos):
            return refuse(INCONSISTENT_GROUP_PROTOCOL)

        def add() -> JoinOutcome:
            self._add_member_and_rebalance(
                member_id=new_id,
                client_id=client_id,
                client_host=client_host,
                protocol_type=protocol_type,
                protocols=protos,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                now_ms=now_ms,
            )
            return self._join_outcome(new_id)

        if not member_id:
            new_id = f"{client_id}-{self._id_factory()}"
            if require_known_member_id:
                # KIP-394: hand the id out and wait for the member to come back with it, so a
                # client that times out and retries does not leave a ghost member behind.
                self.pending_members[new_id] = now_ms + session_timeout_ms
                return refuse(MEMBER_ID_REQUIRED, new_id)
            return add()
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            new_id = member_id
            return add()
        member = self.members.get(member_id)
        if member is None:
            return refuse(UNKNOWN_MEMBER_ID)
        member.session_deadline_ms = now_ms + session_timeout_ms
        unchanged = member.protocols == protos
        if self.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # It joined already and lost the response: repeat it (doJoinGroup).
            return JoinOutcome(member_id=member_id, response=self._join_response(member))
        if self.state is GroupState.STABLE and unchanged and not self.is_leader(member_id):
            # A follower with the same metadata: nothing to rebalance for.
            return JoinOutcome(member_id=member_id, response=self._join_response(member))
        # PreparingRebalance, the leader rejoining (it may want to reassign), or new metadata.
        member.protocols = protos
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id = client_id
        member.client_host = client_host or member.client_host
        member.awaiting_join = True
        self._maybe_prepare_rebalance(now_ms)
        self._try_complete_join(now_ms)
        return self._join_outcome(member_id)

    def _join_outcome(self, member_id: str) -> JoinOutcome:
        out = self._drain()
        mine = [r for r in out if isinstance(r, JoinResponse) and r.member_id == member_id]
        rest = tuple(r for r in out if not any(r is x for x in mine))
        return JoinOutcome(member_id=member_id, response=mine[0] if mine else None, completed=rest)

    def _add_member_and_rebalance(self, *, member_id: str, now_ms: int, **fields: object) -> None:
        """GroupCoordinator.addMemberAndRebalance."""
        member = Member(member_id=member_id, session_deadline_ms=0, **fields)  # type: ignore[arg-type]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        member.awaiting_join = True
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member_id
        self.members[member_id] = member
        if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
            self._new_member_added = True  # extends InitialDelayedJoin
        self._maybe_prepare_rebalance(now_ms)
        self._try_complete_join(now_ms)

    def _join_response(self, member: Member) -> JoinResponse:
        assert self.protocol_name is not None
        members: tuple[JoinedMember, ...] = ()
        if self.is_leader(member.member_id):
            members = tuple(
                JoinedMember(member_id=m.member_id, metadata=m.metadata(self.protocol_name))
                for m in self.members.values()
            )
        return JoinResponse(
            group_id=self.group_id,
            member_id=member.member_id,
            error=NONE,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id or "",
            members=members,
        )

    # --- rebalance -------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, now_ms: int) -> None:
        if self.state in (
            GroupState.EMPTY,
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
        ):
            self._prepare_rebalance(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        """GroupCoordinator.prepareRebalance."""
        if self.state is GroupState.COMPLETING_REBALANCE:
            # resetAndPropagateAssignmentError: parked syncs learn a new rebalance started.
            for m in self.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    self._out.append(self._sync_error(m.member_id, REBALANCE_IN_PROGRESS))
            for m in self.members.values():
                m.assignment = b""
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        if self.state is GroupState.EMPTY:
            # InitialDelayedJoin: wait for more members before the first generation, so a
            # consumer group starting up does not rebalance once per member.
            delay = self.config.initial_rebalance_delay_ms
            self._initial = True
            self._initial_delay_ms = delay
            self._initial_remaining_ms = max(timeout - delay, 0)
            self._join_deadline_ms = now_ms + delay
        else:
            self._initial = False
            self._join_deadline_ms = now_ms + timeout
        self._storing = None  # a store still in flight no longer makes this generation Stable
        self._transition(GroupState.PREPARING_REBALANCE, now_ms)

    def _try_complete_join(self, now_ms: int) -> None:
        """DelayedJoin.tryComplete: done when every member has rejoined and no KIP-394 pending
        member is still expected (GroupMetadata.hasAllMembersJoined). InitialDelayedJoin never
        completes early."""
        if self.state is not GroupState.PREPARING_REBALANCE or self._initial:
            return
        if self.pending_members:
            return
        if all(m.awaiting_join for m in self.members.values()):
            self._complete_join(now_ms)

    def _complete_join(self, now_ms: int) -> None:
        """GroupCoordinator.onCompleteJoin: drop members that did not rejoin, start the next
        generation (GroupMetadata.initNextGeneration) and answer every parked join."""
        self._join_deadline_ms = None
        self._initial = False
        self._new_member_added = False
        for m in [m for m in self.members.values() if not m.awaiting_join]:
            self._remove_member(m.member_id)
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, now_ms)
            # onCompleteJoin stores the Empty group (no waiting): a reload then knows when it
            # became Empty, which its offsets' expiry counts from.
            self._effects.append(PersistGroup(record=self.to_record(), awaited=False))
            return
        self.protocol_name = self.select_protocol()
        self._transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for m in self.members.values():
            m.awaiting_join = False
            m.session_deadline_ms = now_ms + m.session_timeout_ms
            self._out.append(self._join_response(m))

    def _remove_member(self, member_id: str) -> None:
        """GroupMetadata.remove: a parked request of the member is answered UNKNOWN_MEMBER_ID;
        if it led, the next member in join order leads."""
        m = self.members.pop(member_id)
        if m.awaiting_join:
            self._out.append(
                JoinResponse(group_id=self.group_id, member_id=member_id, error=UNKNOWN_MEMBER_ID)
            )
        if m.awaiting_sync:
            self._out.append(self._sync_error(member_id, UNKNOWN_MEMBER_ID))
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _after_removal(self, now_ms: int) -> None:
        """GroupCoordinator.removeMemberAndUpdateGroup's state switch."""
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms)
        self._try_complete_join(now_ms)

    # --- SyncGroup -------------------------------------------------------------------------

    def _sync_error(self, member_id: str, code: int) -> SyncResponse:
        return SyncResponse(group_id=self.group_id, member_id=member_id, error=code)

    def sync(
        self,
        *,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes] | None = None,
        now_ms: int,
    ) -> SyncOutcome:
        """GroupCoordinator.doSyncGroup. Only the leader's `assignments` count; members it
        leaves out get an empty assignment, ids that are not members are ignored."""
        if self.state is GroupState.DEAD:
            return SyncOutcome(response=self._sync_error(member_id, COORDINATOR_NOT_AVAILABLE))
        member = self.members.get(member_id)
        if member is None:
            return SyncOutcome(response=self._sync_error(member_id, UNKNOWN_MEMBER_ID))
        if generation_id != self.generation_id:
            return SyncOutcome(response=self._sync_error(member_id, ILLEGAL_GENERATION))
        if self.state is GroupState.PREPARING_REBALANCE:
            return SyncOutcome(response=self._sync_error(member_id, REBALANCE_IN_PROGRESS))
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.STABLE:
            return SyncOutcome(response=self._sync_response(member))
        # CompletingRebalance
        member.awaiting_sync = True
        if self.is_leader(member_id) and self._storing is None:
            # The leader's assignment is stored with the group (storeGroup); the group goes
            # Stable, and the parked syncs are answered, once that append succeeded: `stored`.
            given = assignments or {}
            for m in self.members.values():
                m.assignment = bytes(given.get(m.member_id, b""))
            self._storing = self.generation_id
            self._effects.append(PersistGroup(record=self.to_record(), awaited=True))
        return SyncOutcome(response=None)

    def stored(self, *, generation_id: int, error: int, now_ms: int) -> tuple[Response, ...]:
        """The GroupMetadata record of `generation_id` was appended (error NONE) or not: the
        callback of storeGroup in doSyncGroup. Appended: Stable, and every parked sync gets its
        assignment. Not: they get the error and the group rebalances
        (resetAndPropagateAssignmentError, maybePrepareRebalance). The store of a generation
        the group has left behind changes nothing."""
        if self.state is not GroupState.COMPLETING_REBALANCE or self._storing != generation_id:
            return ()
        self._storing = None
        if error == NONE:
            self._transition(GroupState.STABLE, now_ms)
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                m.session_deadline_ms = now_ms + m.session_timeout_ms
                ok = error == NONE
                reply = self._sync_response(m) if ok else self._sync_error(m.member_id, error)
                self._out.append(reply)
        if error != NONE:
            self._prepare_rebalance(now_ms)
        return tuple(self._drain())

    def to_record(self) -> GroupRecord:
        """GroupMetadataManager.groupMetadataValue: this group as its GroupMetadata record."""
        protocol = self.protocol_name
        return GroupRecord(
            group_id=self.group_id,
            protocol_type=self.protocol_type or "",
            generation_id=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            state_timestamp_ms=-1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            members=tuple(
                MemberRecord(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol else b"",
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )

    def _sync_response(self, member: Member) -> SyncResponse:
        return SyncResponse(
            group_id=self.group_id,
            member_id=member.member_id,
            error=NONE,
            assignment=member.assignment,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
        )

    # --- Heartbeat / LeaveGroup ------------------------------------------------------------

    def heartbeat(self, *, member_id: str, generation_id: int, now_ms: int) -> int:
        """GroupCoordinator.handleHeartbeat: the error code to answer."""
        if self.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        member = self.members.get(member_id)
        if self.state is GroupState.EMPTY or member is None:
            return UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ILLEGAL_GENERATION
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS  # the member learns it must rejoin
        return NONE  # Stable, or CompletingRebalance (a member may beat before it syncs)

    def leave(self, *, member_ids: Iterable[str], now_ms: int) -> LeaveOutcome:
        """GroupCoordinator.handleLeaveGroup (v3+ batch form)."""
        if self.state is GroupState.DEAD:
            return LeaveOutcome(error=COORDINATOR_NOT_AVAILABLE, members={})
        errors: dict[str, int] = {}
        for mid in member_ids:
            if mid in self.pending_members:
                del self.pending_members[mid]
                errors[mid] = NONE
            elif mid in self.members:
                self._remove_member(mid)
                errors[mid] = NONE
            else:
                errors[mid] = UNKNOWN_MEMBER_ID
        if any(code == NONE for code in errors.values()):
            self._after_removal(now_ms)
        return LeaveOutcome(error=NONE, members=errors, completed=tuple(self._drain()))

    # --- time ------------------------------------------------------------------------------

    def on_deadline(self, now_ms: int) -> tuple[Response, ...]:
        """Fire every timer due at `now_ms`: session expiry (GroupCoordinator.onExpireHeartbeat
        -> onMemberFailure), KIP-394 pending-member expiry, the initial delay and the rebalance
        timeout (DelayedJoin.onExpiration). Returns the parked requests this answered."""
        expired = [
            m.member_id
            for m in self.members.values()
            if not m.awaiting_join and not m.awaiting_sync and m.session_deadline_ms <= now_ms
        ]
        for mid in expired:
            self._remove_member(mid)
        if expired:
            self._after_removal(now_ms)
        lapsed = [mid for mid, deadline in self.pending_members.items() if deadline <= now_ms]
        for mid in lapsed:
            del self.pending_members[mid]
        if lapsed:
            self._try_complete_join(now_ms)
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and self._join_deadline_ms is not None
            and self._join_deadline_ms <= now_ms
        ):
            if self._initial and self._new_member_added and self._initial_remaining_ms != 0:
                # InitialDelayedJoin.onComplete: members still arriving; wait one more delay,
                # never past the rebalance timeout in total.
                self._new_member_added = False
                delay = min(self.config.initial_rebalance_delay_ms, self._initial_remaining_ms)
                self._initial_remaining_ms = max(
                    self._initial_remaining_ms - self._initial_delay_ms, 0
                )
                self._initial_delay_ms = delay
                self._join_deadline_ms = now_ms + delay
            else:
                self._complete_join(now_ms)
        return tuple(self._drain())

    # --- describe --------------------------------------------------------------------------

    def describe(self) -> GroupSummary:
        """GroupMetadata.summary: protocol, metadata and assignments only while Stable."""
        stable = self.state is GroupState.STABLE
        members = tuple(
            MemberSummary(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                assignment=m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return GroupSummary(
            group_id=self.group_id,
            state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol=(self.protocol_name or "") if stable else "",
            members=members,
        )

    def _transition(self, state: GroupState, now_ms: int) -> None:
        """GroupMetadata.transitionTo: the state, and when it was entered."""
        self.state = state
        self.state_timestamp_ms = now_ms

    def _drain(self) -> list[Response]:
        out, self._out = self._out, []
        return out

    def take_effects(self) -> list[Effect]:
        """The appends this group asked for since the last call (see messages.Effect)."""
        out, self._effects = self._effects, []
        return out
