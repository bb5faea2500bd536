"""The group coordinator of one broker: core/group's state machine, its offsets made durable in
`__consumer_offsets`, and the coordinator moving with that topic's leaders, where Kafka's clients
look for it (FindCoordinator).

Kafka's design (GroupCoordinator, GroupMetadataManager), kept:
- A group belongs to partition `partitionFor(groupId)` of `__consumer_offsets`
  (core/group/offsets_log.py); its coordinator is that partition's leader. FindCoordinator on
  any broker names it. The topic is created on the first FindCoordinator (AutoTopicCreationManager),
  with `offsets.topic.num.partitions` and `offsets.topic.replication.factor`; while it cannot be
  (too few brokers) or has no leader, the answer is COORDINATOR_NOT_AVAILABLE.
- An OffsetCommit is appended to that partition with acks=all (Kafka's storeOffsets, required
  acks -1, `offsets.commit.timeout.ms`) and served only once the append succeeded; a failed
  append answers Kafka's mapped error and leaves the old offset.
- On becoming the partition's leader the broker loads its groups' offsets from the log
  (loadGroupsAndOffsets); meanwhile it answers COORDINATOR_LOAD_IN_PROGRESS. On losing it the
  groups are dropped (removeGroupsForPartition) and members parked in a join or sync are answered
  NOT_COORDINATOR, so clients find the new coordinator.
- JoinGroup and SyncGroup requests wait in a purgatory (DelayedJoin and the sync callbacks): here a
  parked request waits for its answer, which the state machine gives out when another member's
  request or a deadline completes it. The deadline task runs the session, rebalance and initial
  delay timers.

- The leader's SyncGroup appends the group's metadata record (storeGroup) and the group goes
  Stable once it is durable; a group that becomes Empty is stored too. A new coordinator loads
  these with the offsets, so the members of a Stable group keep heartbeating there without a
  rebalance.
- Every offsets.retention.check.interval.ms the expired offsets of Empty groups, and Empty groups
  with none left, are dropped (KIP-211, cleanupGroupMetadata; core/group/group_offsets.py) and
  tombstones appended, so a reload does not bring them back.
- A record the load cannot read is reported in the event log (`group_record_unreadable`) and
  skipped; the rest of the partition loads (server/group_load.py). No failure inside this service
  ends the broker: the timer task reports it (`group_service_error`) and carries on.

Differences, on purpose: the load reads up to the log end offset the partition had when it was
won, once the high watermark has reached it (Kafka reads to the log end and lets the HW catch
up); the log is not compacted, so a load reads every record ever written to its partition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

import trio

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.core import record_batch_v2
from minikafka.core.group import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NONE,
    NOT_COORDINATOR,
    ExpireGroup,
    GroupConfig,
    GroupCoordinator,
    GroupSummary,
    JoinResponse,
    ListedGroup,
    OffsetFetch,
    PersistGroup,
    PersistOffsets,
    SyncResponse,
    default_id_factory,
)
from minikafka.core.group.load import replay
from minikafka.core.group.messages import REBALANCE_IN_PROGRESS, Response, TopicPartitionKey
from minikafka.core.group.offsets_log import (
    OFFSETS_TOPIC,
    commit_records,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    partition_for,
)
from minikafka.core.log_topic_configs import CLEANUP_POLICY, SEGMENT_BYTES
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.eventlog import EventLog
from minikafka.server.group_load import read_partition
from minikafka.server.local_partition import LocalPartition, wait_for_change
from minikafka.server.metadata_cache import MetadataCache
from minikafka.server.produce import handle_produce
from minikafka.server.replica_manager import ReplicaManager
from minikafka.wire.messages import (
    BrokerInfo,
    CreatableTopic,
    CreateTopicsRequest,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)

INVALID_COMMIT_OFFSET_SIZE = 28
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

# GroupMetadataManager.storeOffsets: how a failed append to __consumer_offsets is answered.
_APPEND_ERRORS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: INVALID_COMMIT_OFFSET_SIZE,
}
# GroupMetadataManager.storeGroup: how a failed append of a group's metadata is answered.
_STORE_ERRORS: dict[int, int] = {
    **_APPEND_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: int(ErrorCode.UNKNOWN_SERVER_ERROR),
    ErrorCode.RECORD_LIST_TOO_LARGE: int(ErrorCode.UNKNOWN_SERVER_ERROR),
}
_UNREADABLE_REPORTED = 20  # per load: one event each, then only the count


class _Parked:
    """A JoinGroup or SyncGroup waiting for its answer."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.response: Response | None = None

    def answer(self, response: Response) -> None:
        self.response = response
        self.done.set()


class GroupService:
    """One broker's group coordinator; `run` is its deadline and leadership task."""

    def __init__(
        self,
        *,
        config: NodeConfig,
        rm: ReplicaManager,
        cache: MetadataCache,
        events: EventLog,
        forward: Callable[[object], Awaitable[object]],
        member_ids: Callable[[], str] = default_id_factory,
    ) -> None:
        """`forward` sends a native request to the controller (Broker.dispatch): the topic's
        creation. `member_ids` draws the random part of a new member's id (Kafka: a UUID)."""
        self.config = config
        self.rm = rm
        self.cache = cache
        self.events = events
        self.forward = forward
        self.partitions = config.offsets_topic_num_partitions
        self.coordinator = GroupCoordinator(
            config=GroupConfig(
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                max_size=config.group_max_size,
                max_metadata_bytes=config.offset_metadata_max_bytes,
                offsets_retention_ms=config.offsets_retention_minutes * 60_000,
                retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            ),
            id_factory=member_ids,
        )
        self._loaded: dict[int, int] = {}  # offsets partition -> the leader epoch loaded
        self._loading: dict[int, int] = {}
        self._parked: dict[tuple[type, str, str], _Parked] = {}
        self._creating = False
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------------ the task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire the groups' timers when due, and drop the groups of partitions no longer led
        here (checked at least every second, and at every request)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                wait_ms = self._guarded("timers", self._wait_ms)
                with trio.move_on_after((1000 if wait_ms is None else wait_ms) / 1000):
                    await self._wake.wait()
                self._wake = trio.Event()
                self._guarded("timers", self._fire)

    def _wait_ms(self) -> int:
        self._resign_lost()
        deadline = self.coordinator.next_deadline_ms()
        return 1000 if deadline is None else min(1000, max(0, deadline - now_ms()))

    def _fire(self) -> None:
        self._settle(self.coordinator.on_deadline(now_ms()), wake=False)

    def _guarded(self, where: str, fn: Callable[[], int | None]) -> int | None:
        """fn(), or None once an error inside it is reported: a bug in the group coordinator
        costs its groups a round, never the broker (which would end with this task)."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - reported; the broker keeps serving
            self.events.emit("group_service_error", where=where, error=repr(exc))
            return None

    def _deliver(self, responses: Iterable[Response]) -> None:
        for r in responses:
            parked = self._parked.pop((type(r), r.group_id, r.member_id), None)
            if parked is not None:
                parked.answer(r)

    def _settle(self, responses: Iterable[Response] = (), *, wake: bool = True) -> None:
        """After a call into the coordinator: answer what it completed, start the appends it
        asked for, and let `run` read the next deadline again."""
        self._deliver(responses)
        for effect in self.coordinator.take_effects():
            if self._nursery is None:
                continue
            if isinstance(effect, PersistGroup):
                self._nursery.start_soon(self._store_group, effect)
            elif isinstance(effect, ExpireGroup):
                self._nursery.start_soon(self._tombstones, effect)
        if wake:  # never from `run` itself, which would then never sleep
            self._wake.set()

    async def _park(self, kind: type, group_id: str, member_id: str) -> Response:
        key = (kind, group_id, member_id)
        old = self._parked.get(key)
        if old is not None:
            # A newer request of the same member replaces it (Kafka's updateMember swaps the
            # callback); the old one is told to rejoin rather than left hanging.
            old.answer(kind(group_id=group_id, member_id=member_id, error=REBALANCE_IN_PROGRESS))
        parked = self._parked[key] = _Parked()
        self._wake.set()
        await parked.done.wait()
        assert parked.response is not None
        return parked.response

    # ------------------------------------------------------------------------ coordination

    def _local(self, p: int) -> LocalPartition | None:
        lp = self.rm.partitions.get(TopicPartition(OFFSETS_TOPIC, p))
        return lp if lp is not None and lp.is_leader and not lp.offline else None

    def check(self, group_id: str) -> int:
        """NONE if this broker coordinates `group_id` now; else why not (Kafka's
        validateGroupStatus): NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while its
        offsets are read (the read is started here)."""
        p = partition_for(group_id, self.partitions)
        lp = self._local(p)
        loaded = self._loaded.get(p)
        if loaded is not None and (lp is None or loaded != lp.leader_epoch):
            self._resign_lost()  # answer its parked members now, not at the next round
        if lp is None:
            return NOT_COORDINATOR
        if loaded == lp.leader_epoch:
            return NONE
        if self._loading.get(p) != lp.leader_epoch and self._nursery is not None:
            self._loading[p] = lp.leader_epoch
            self._nursery.start_soon(self._load, p, lp.leader_epoch)
        return COORDINATOR_LOAD_IN_PROGRESS

    def _resign_lost(self) -> None:
        """removeGroupsForPartition for every loaded partition no longer led here in its epoch."""
        for p, epoch in list(self._loaded.items()):
            lp = self._local(p)
            if lp is None or lp.leader_epoch != epoch:
                del self._loaded[p]
                self._unload(p)
                self.events.emit("group_coordinator_resigned", partition=p, leader_epoch=epoch)

    def _unload(self, p: int) -> None:
        gone = [g for g in self.coordinator.groups if partition_for(g, self.partitions) == p]
        self._deliver(self.coordinator.unload(gone))

    async def _load(self, p: int, epoch: int) -> None:
        """Read partition `p`'s records and serve its groups (loadGroupsAndOffsets). Records
        it cannot read are reported and skipped. Should the load itself fail, that is reported
        and the next request starts it again, a second later at the soonest."""
        try:
            await self._load_partition(p, epoch)
        except Exception as exc:  # noqa: BLE001 - reported; never ends the broker
            self.events.emit("group_load_failed", partition=p, leader_epoch=epoch, error=repr(exc))
            await trio.sleep(1)
        finally:
            if self._loading.get(p) == epoch:
                del self._loading[p]

    async def _load_partition(self, p: int, epoch: int) -> None:
        lp = self._local(p)
        if lp is None or lp.leader_epoch != epoch:
            return
        target = lp.log_end_offset
        # Everything in the log at election, once committed: an acknowledged commit is
        # there (this replica was in the ISR), and the HW reaching it means it stays.
        while lp.high_watermark < target:
            await wait_for_change([lp], trio.current_time() + 1)
            if self._local(p) is not lp or lp.leader_epoch != epoch:
                return
        tp = TopicPartition(OFFSETS_TOPIC, p)
        records, problems = await read_partition(self.rm, lp, tp, target)
        loaded = replay(records)
        if self._local(p) is not lp or lp.leader_epoch != epoch:
            return
        self._unload(p)  # anything held from an older epoch
        self.coordinator.load(loaded, now_ms())
        self._loaded[p] = epoch
        unreadable = sorted(problems + loaded.unreadable)
        for offset, why in unreadable[:_UNREADABLE_REPORTED]:
            self.events.emit("group_record_unreadable", partition=p, offset=offset, error=why)
        self.events.emit(
            "group_offsets_loaded",
            partition=p,
            leader_epoch=epoch,
            groups=len(loaded.group_ids),
            records=len(records),
            unreadable=len(unreadable),
        )
        self._settle()

    async def _append(self, group_id: str, batch: bytes, acks: int) -> tuple[int, int]:
        """Append `batch` to the group's partition -> (the produce error, the offset written
        at). Internal: no client quota is charged (Kafka appends through ReplicaManager)."""
        request = ProduceRequest(
            acks=acks,
            timeout_ms=self.config.offsets_commit_timeout_ms,
            partitions=[
                ProducePartition(
                    topic=OFFSETS_TOPIC,
                    partition=partition_for(group_id, self.partitions),
                    records=batch,
                )
            ],
        )
        reply = await handle_produce(self.rm, request, self.cache.topics, internal=True)
        response = reply.response
        assert isinstance(response, ProduceResponse), response
        answer = response.partitions[0]
        return int(answer.error_code), answer.base_offset

    async def _persist(self, effect: PersistOffsets) -> tuple[int, int]:
        """Append the commit to the group's partition with acks=all; -> (Kafka's mapped error,
        the offset it was written at)."""
        records = commit_records(effect.group_id, effect.offsets)
        ts = max(o.commit_timestamp_ms for o in effect.offsets.values())
        batch = make_batch([(ts, k, v) for k, v in records])
        code, offset = await self._append(effect.group_id, batch, -1)
        if code == ErrorCode.NONE:
            return NONE, offset
        return _APPEND_ERRORS.get(code, int(ErrorCode.UNKNOWN_SERVER_ERROR)), -1

    async def _store_group(self, effect: PersistGroup) -> None:
        """storeGroup: the group's metadata record, with acks=all; an awaited store is answered
        to the coordinator (Kafka's mapped error), which then answers the parked syncs."""
        g = effect.record
        batch = make_batch([(now_ms(), group_metadata_key(g.group_id), group_metadata_value(g))])
        try:
            code, _ = await self._append(g.group_id, batch, -1)
            error = NONE if code == ErrorCode.NONE else _STORE_ERRORS.get(code, code)
        except Exception as exc:  # noqa: BLE001 - reported; the syncs get an error
            self.events.emit("group_service_error", where="store_group", error=repr(exc))
            error = COORDINATOR_NOT_AVAILABLE
        if error != NONE:
            self.events.emit("group_store_failed", group=g.group_id, error=error)
        if effect.awaited and self.check(g.group_id) == NONE:
            done = self.coordinator.group_stored(
                g.group_id, generation_id=g.generation_id, error=error, now_ms=now_ms()
            )
            self._settle(done)

    async def _tombstones(self, effect: ExpireGroup) -> None:
        """cleanupGroupMetadata's tombstones (RecordBatch v2: a native batch has no null
        value). Kafka appends them without waiting for replicas (a lost one is written again at
        the next cleanup after a reload); here acks=1."""
        ts = now_ms()
        gid = effect.group_id
        records = [(ts, offset_commit_key(gid, t, p), None) for t, p in effect.partitions]
        if effect.group_removed:
            records.append((ts, group_metadata_key(gid), None))
        try:
            code, _ = await self._append(gid, record_batch_v2.build(records), 1)
        except Exception as exc:  # noqa: BLE001 - reported; the broker keeps serving
            code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            self.events.emit("group_service_error", where="tombstones", error=repr(exc))
        self.events.emit(
            "group_expired",
            group=gid,
            offsets=len(effect.partitions),
            group_removed=effect.group_removed,
            error=code,
        )

    # ------------------------------------------------------------------------ FindCoordinator

    def find_coordinator(self, group_id: str) -> tuple[int, BrokerInfo | None]:
        """The group's coordinator, or COORDINATOR_NOT_AVAILABLE (creating the topic if it does
        not exist yet)."""
        states = self.cache.partitions_of(OFFSETS_TOPIC)
        if not states:
            self._create_offsets_topic()
            return COORDINATOR_NOT_AVAILABLE, None
        st = states.get(partition_for(group_id, self.partitions))
        broker = None if st is None else self.cache.brokers.get(st.leader)
        if broker is None or broker.kafka_port <= 0:
            return COORDINATOR_NOT_AVAILABLE, None
        return NONE, broker

    def _create_offsets_topic(self) -> None:
        if self._creating or self._nursery is None:
            return
        self._creating = True
        self._nursery.start_soon(self._create)

    async def _create(self) -> None:
        c = self.config
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=OFFSETS_TOPIC,
                    num_partitions=c.offsets_topic_num_partitions,
                    replication_factor=c.offsets_topic_replication_factor,
                    # GroupCoordinator.offsetsTopicConfigs: only a group's latest commit per
                    # partition (and its latest metadata) is kept, so a coordinator's load reads
                    # what is live, not every commit ever made; segments of
                    # offsets.topic.segment.bytes (100 MiB), so that they close and get cleaned.
                    configs={
                        CLEANUP_POLICY: "compact",
                        SEGMENT_BYTES: str(c.offsets_topic_segment_bytes),
                    },
                )
            ]
        )
        try:
            response = await self.forward(request)
            errors = [(r.error_code, r.error_message) for r in getattr(response, "topics", ())]
        except Exception as exc:  # noqa: BLE001 - reported, retried on the next FindCoordinator
            errors = [(int(ErrorCode.NETWORK_EXCEPTION), str(exc))]
        finally:
            self._creating = False
        self.events.emit("offsets_topic_create", topic=OFFSETS_TOPIC, errors=errors)

    # ------------------------------------------------------------------------ group APIs

    async def join(self, group_id: str, kwargs: Mapping[str, object]) -> JoinResponse:
        member_id = str(kwargs.get("member_id", ""))
        code = self.check(group_id)
        if code != NONE:
            return JoinResponse(group_id=group_id, member_id=member_id, error=code)
        out = self.coordinator.join(group_id, now_ms=now_ms(), **kwargs)
        self._settle(out.completed)
        if out.response is not None:
            return out.response
        response = await self._park(JoinResponse, group_id, out.member_id)
        assert isinstance(response, JoinResponse)
        return response

    async def sync(self, group_id: str, kwargs: Mapping[str, object]) -> SyncResponse:
        member_id = str(kwargs.get("member_id", ""))
        code = self.check(group_id)
        if code != NONE:
            return SyncResponse(group_id=group_id, member_id=member_id, error=code)
        out = self.coordinator.sync(group_id, now_ms=now_ms(), **kwargs)
        self._settle(out.completed)  # the leader's store starts: it answers the parked syncs
        if out.response is not None:
            return out.response
        response = await self._park(SyncResponse, group_id, member_id)
        assert isinstance(response, SyncResponse)
        return response

    def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> int:
        code = self.check(group_id)
        if code != NONE:
            return code
        code = self.coordinator.heartbeat(
            group_id, member_id=member_id, generation_id=generation_id, now_ms=now_ms()
        )
        self._settle()
        return code

    def leave(self, group_id: str, member_ids: Iterable[str]) -> tuple[int, dict[str, int]]:
        code = self.check(group_id)
        if code != NONE:
            return code, {}
        out = self.coordinator.leave(group_id, member_ids=member_ids, now_ms=now_ms())
        self._settle(out.completed)
        return out.error, out.members

    async def commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartitionKey, tuple[int, str]],
    ) -> dict[TopicPartitionKey, int]:
        """Per partition: NONE once durable, else the error (unknown topics refused first, as
        KafkaApis.handleOffsetCommitRequest does)."""
        code = self.check(group_id)
        if code != NONE:
            return {tp: code for tp in offsets}
        known = self.cache.topics
        errors = {tp: UNKNOWN_TOPIC_OR_PARTITION for tp in offsets if tp[0] not in known}
        wanted = {tp: v for tp, v in offsets.items() if tp not in errors}
        out = self.coordinator.commit(
            group_id,
            member_id=member_id,
            generation_id=generation_id,
            offsets=wanted,
            now_ms=now_ms(),
        )
        errors.update(out.errors)
        self._settle()  # a commit extends the member's session
        for effect in out.effects:
            code, log_offset = int(ErrorCode.UNKNOWN_SERVER_ERROR), -1
            try:
                code, log_offset = await self._persist(effect)
            finally:  # even when cancelled: a commit left pending would hold expiry back
                if code == NONE and self.check(group_id) == NONE:
                    self.coordinator.restore(effect.group_id, effect.offsets, log_offset)
                else:
                    self.coordinator.commit_failed(effect.group_id, now_ms())
                    if code == NONE:
                        code = NOT_COORDINATOR  # durable, but the group moved meanwhile
                self._settle()
            for tp in effect.offsets:
                errors[tp] = code
        return errors

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartitionKey] | None
    ) -> tuple[int, dict[TopicPartitionKey, OffsetFetch]]:
        code = self.check(group_id)
        if code != NONE:
            return code, {}
        return NONE, self.coordinator.fetch_offsets(group_id, partitions)

    def list_groups(self) -> tuple[int, tuple[ListedGroup, ...]]:
        """The groups coordinated here; COORDINATOR_LOAD_IN_PROGRESS while any partition loads
        (GroupCoordinator.handleListGroups)."""
        self._resign_lost()
        code = COORDINATOR_LOAD_IN_PROGRESS if self._loading else NONE
        return code, self.coordinator.list_groups()

    def describe(self, group_id: str) -> tuple[int, GroupSummary]:
        code = self.check(group_id)
        return code, self.coordinator.describe(group_id)
