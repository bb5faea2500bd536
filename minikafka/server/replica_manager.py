"""The broker's replicas: the shell around each partition's machine (core/replica.py).

Mirrors Kafka's ReplicaManager (becomeLeaderOrFollower, stopReplicas, the isr-expiration task).
Every decision about a replica (is this LeaderAndIsr stale, which role, where offsets and the HW
move, when the ISR changes) is the core machine's; this module feeds it LeaderAndIsr,
UpdateMetadata, StopReplica and the log writer's commits and failures, and carries out the
effects it returns (`execute`):
- LeaderAndIsr is applied under one lock. A role change is two steps around one writer barrier
  for the whole request: `begin_*` stops the old role at once, `become_*` takes the new one at the
  log end offset once every queued append is committed. New leaders' epoch entries are written in
  one batch; new followers' fetchers start at their log end offset.
- ISR changes (server/isr_updates.py) go to the controller as AlterPartition and take effect
  only when accepted (KIP-497).
- StopReplica(delete) stops the replica, forgets it and drops its log. StopReplica carrying an
  older leader epoch than the one known is refused (FENCED_LEADER_EPOCH), as Kafka's
  ReplicaManager.stopReplicas does.
- The periodic tasks visit only what moved (an idle partition costs nothing): `changes` hears of
  every partition whose machine reports a change (core/replica.py `on_change`), `index` keeps the
  led ones, the under-replicated ones and the leader-side lag from it (server/replica_index.py), and
  the HW checkpoints look only at the partitions that changed since their last round.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial

import trio

from minikafka.client.connection import Connection, open_connection
from minikafka.clock import RunSync, now_ms
from minikafka.common import TopicPartition
from minikafka.core.leader_and_isr import LeaderAndIsrAction, classify_leader_and_isr
from minikafka.core.log_config import LogConfig
from minikafka.core.log_config import effective as effective_log_config
from minikafka.core.quota.sensors import ClientQuotas, ReplicationQuotas
from minikafka.core.records import peek_header
from minikafka.core.replica_effects import (
    Effect,
    PersistEpochs,
    ProposeIsr,
    ReplicaEvent,
    StartFetching,
    StopFetching,
    WakeWaiters,
)
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.eventlog import EventLog
from minikafka.server.fetch_sessions import FetchSessions
from minikafka.server.fetcher import ReplicaFetcherManager
from minikafka.server.isr_updates import ControllerLinkLike, IsrUpdates
from minikafka.server.local_partition import LocalPartition
from minikafka.server.log_cleaner import run_log_cleaner
from minikafka.server.log_cleanup import run_log_retention
from minikafka.server.log_writer import LogWriter
from minikafka.server.metrics import Metrics
from minikafka.server.offline_replicas import OfflineReplicas
from minikafka.server.partition_changes import PartitionChanges, drain
from minikafka.server.producer_state_tasks import ProducerSnapshots, run_producer_expiration
from minikafka.server.replica_gauges import register_replica_gauges
from minikafka.server.replica_index import ReplicaIndex
from minikafka.storage import AppendWrite, LoadedPartition, LogDirError, LogStore, StorageError
from minikafka.wire.messages import (
    BrokerInfo,
    PartitionState,
    StopReplicaPartition,
    TopicPartitionError,
)


class ReplicaManager:
    """Owns the hosted partitions and, as Kafka's ReplicaManager does, the parts that act on
    them: the log writer (its commit hooks move the machines' offsets), the replica fetchers,
    the ISR updates. Everything is given or built here, at construction."""

    def __init__(
        self,
        *,
        config: NodeConfig,
        store: LogStore,
        events: EventLog,
        metrics: Metrics,
        controller: ControllerLinkLike,
        dynamic: DynamicConfigs,
        offline: OfflineReplicas,
        rng: random.Random,
        connect: Callable[..., AbstractAsyncContextManager[Connection]] = open_connection,
        run_sync: RunSync = trio.to_thread.run_sync,
    ) -> None:
        self.config = config
        self.store = store
        self.events = events
        self.metrics = metrics
        self.controller = controller
        self.dynamic = dynamic  # live configs: quotas, topic overrides
        self.offline = offline  # shared with the controller link, which reports it
        self.run_sync = run_sync  # every LMDB read of the shell (fetches, the startup load)
        self.partitions: dict[TopicPartition, LocalPartition] = {}
        self.changes = PartitionChanges()  # every partition's touches (server/partition_changes.py)
        self.index = ReplicaIndex(self.partitions, self.changes, local_id=config.node_id)
        self._hw_touched = self.changes.subscribe()  # from the start: nothing moved is missed
        self.producer_snapshots = ProducerSnapshots(self.partitions.get, run_sync)
        self.writer = LogWriter(
            store,
            on_committed=self._on_committed,
            on_failed=self._on_failed,
            run_sync=run_sync,
            log_config=lambda tp: self.log_config(tp.topic),
        )
        self.replication_quotas = ReplicationQuotas(
            samples=config.replication_quota_window_num,
            window_ms=config.replication_quota_window_size_seconds * 1000,
        )
        self.fetchers = ReplicaFetcherManager(
            config=config,
            writer=self.writer,
            events=events,
            metrics=metrics,
            rng=rng,
            lookup=self.partitions.get,
            quotas=self.replication_quotas,  # both sides of replication share the sensors
            dynamic=dynamic,
            on_append_error=self.on_log_error,
            on_log_start_moved=self.log_start_moved,
            connect=connect,
        )
        client_window = dict(
            samples=config.quota_window_num, window_ms=config.quota_window_size_seconds * 1000
        )
        # KIP-227 sessions of the followers fetching from here. Their RNG (session ids, the
        # `random` read order) is derived from the node's seed, so the fetchers' draws stay
        # what they were for a given seed.
        self.fetch_sessions = FetchSessions(
            max_slots=config.max_incremental_fetch_session_cache_slots,
            rng=random.Random(f"fetch-sessions-{config.seed}-{config.node_id}"),
            lookup=self.partitions.get,
            execute=self.execute,
        )
        self.produce_quotas = ClientQuotas("produce", **client_window)
        self.fetch_quotas = ClientQuotas("fetch", **client_window)
        self._lock = trio.Lock()
        self.isr_updates = IsrUpdates(
            config=config,
            events=events,
            metrics=metrics,
            partitions=self.partitions,
            controller=controller,
            execute=self.execute,
            index=self.index,
        )
        # Every config change re-bounds the replication sensors (keeping their samples).
        dynamic.subscribe(lambda _snapshot: self.on_configs_changed())
        self.on_configs_changed()
        register_replica_gauges(self, metrics)

    def log_config(self, topic: str) -> LogConfig:
        """The topic's log settings: its own configs over the broker's `log.*` defaults."""
        return effective_log_config(self.config.log_config, self.dynamic.topic_overrides(topic))

    def log_start_moved(self, p: LocalPartition, log_start_offset: int, *, reason: str) -> None:
        """The store moved `p`'s log start offset (retention, DeleteRecords, the leader's taken
        by a follower): the machine takes it, so fetches below it are out of range and a
        DeleteRecords waiting on the low watermark wakes; a follower reports it in its next
        fetch. Kafka's reasons (LogStartOffsetIncrementReason) name why, in the event."""
        before = p.log_start_offset
        self.execute(p, p.replica.on_log_start_offset_moved(log_start_offset))
        if p.log_start_offset == before:
            return
        self.fetchers.set_log_start(p.tp, p.log_start_offset)
        self.events.emit(
            "log_start_offset_moved",
            topic=p.tp.topic,
            partition=p.tp.partition,
            log_start_offset=p.log_start_offset,
            reason=reason,
        )

    def on_configs_changed(self) -> None:
        """The dynamic configs changed: new replication bounds (samples kept)."""
        self.replication_quotas.apply(self.dynamic.broker_config(self.config.node_id))

    def on_log_error(self, tp: TopicPartition, exc: BaseException, *, during: str) -> bool:
        """A write of `tp` failed: if the disk or LMDB did it (a LogDirError), take the replica
        offline (server/offline_replicas.py). Returns whether it is offline now."""
        if isinstance(exc, LogDirError):
            self.mark_offline(tp, str(exc), during=during)
        return tp in self.offline

    def mark_offline(self, tp: TopicPartition, error: str, *, during: str) -> None:
        if not self.offline.add(tp):
            return
        self.fetchers.remove([tp])  # also when no replica was ever created for it
        p = self.partitions.get(tp)
        if p is not None:  # waiting produces and fetches learn it is no longer served here
            self.execute(p, p.replica.go_offline())
        self.events.emit(
            "replica_offline", topic=tp.topic, partition=tp.partition, error=error, during=during
        )

    async def run(
        self,
        *,
        isr_expiration: bool = True,
        hw_checkpoints: bool = True,
        log_retention: bool = True,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the log writer and the fetchers, load the hosted partitions, then the ISR tasks
        (the AlterPartition sender; Kafka's isr-expiration task), the HW checkpoints and the
        log retention task (server/log_cleanup.py) and the log cleaner (server/log_cleaner.py,
        with `log.cleaner.enable`). The in-memory test node leaves the timed
        ones out unless a test asks for them."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.writer.run)
            await nursery.start(self.fetchers.run)
            await self.load()
            await nursery.start(self.isr_updates.run_sender)
            if isr_expiration:
                await nursery.start(self.isr_updates.run_expiration)
            if hw_checkpoints:
                await nursery.start(self.run_hw_checkpoints)
            await nursery.start(self.run_producer_expiration)
            if log_retention:
                await nursery.start(
                    partial(
                        run_log_retention,
                        self,
                        interval_ms=self.config.log_retention_check_interval_ms,
                    )
                )
                if self.config.log_cleaner_enable:
                    await nursery.start(
                        partial(
                            run_log_cleaner,
                            self,
                            backoff_ms=self.config.log_cleaner_backoff_ms,
                            now_ms=self.store.now_ms,
                        )
                    )
            task_status.started()

    async def load(self) -> None:
        loaded = await self.run_sync(self.store.load_all)
        for tp, lp in loaded.items():
            self.partitions[tp] = self._hosted(lp)

    def _hosted(self, loaded: LoadedPartition) -> LocalPartition:
        return LocalPartition(
            loaded,
            local_id=self.config.node_id,
            lag_max_ms=self.config.replica_lag_time_max_ms,
            changes=self.changes,
            on_notify=self.fetch_sessions.partition_changed,
        )

    def execute(self, p: LocalPartition, effects: Iterable[Effect]) -> None:
        """Carry out what the replica machine (core/replica.py) asked for. StartFetching and
        PersistEpochs come only from LeaderAndIsr, which carries them out itself."""
        for effect in effects:
            match effect:
                case WakeWaiters():
                    p.notify()
                case StopFetching():
                    self.fetchers.remove([p.tp])
                case ProposeIsr():
                    self.isr_updates.send(p, effect)
                case ReplicaEvent(name=name, fields=fields):
                    self.events.emit(name, topic=p.tp.topic, partition=p.tp.partition, **fields)
                case _:
                    raise TypeError(f"{effect!r} is carried out by apply_leader_and_isr only")

    def _on_committed(self, writes: Sequence[AppendWrite]) -> None:
        for w in writes:
            p = self.partitions.get(w.tp)
            if p is None:
                continue
            end = None
            if w.batches:
                base, _epoch, count = peek_header(w.batches[-1])
                end = base + count
                # Followers idle in a fetch session at the old LEO fetched it last (KIP-227).
                self.fetch_sessions.before_leader_append(p)
            self.execute(p, p.replica.on_append_committed(end_offset=end, epochs=w.epochs))

    def _on_failed(self, writes: Sequence[AppendWrite]) -> None:
        for w in writes:
            p = self.partitions.get(w.tp)
            if p is not None and w.batches:
                p.replica.on_append_failed(peek_header(w.batches[0])[0])

    # ------------------------------------------------------------------ LeaderAndIsr

    async def apply_leader_and_isr(
        self, states: Sequence[PartitionState], brokers: Sequence[BrokerInfo]
    ) -> list[TopicPartitionError]:
        """Kafka's becomeLeaderOrFollower: each entry decided by core/leader_and_isr.py, the new
        partitions' logs created in one writer op (one transaction, not one each), then leaders and
        followers switched in two batches. Linear in the entries."""
        async with self._lock:
            codes: list[ErrorCode] = []
            roles: list[tuple[int, TopicPartition, LeaderAndIsrAction]] = []
            for index, st in enumerate(states):
                tp = TopicPartition(st.topic, st.partition)
                p = self.partitions.get(tp)
                codes.append(ErrorCode.NONE)
                if tp in self.offline:  # Kafka's makeLeaders/makeFollowers skip offline ones
                    codes[index] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                action = classify_leader_and_isr(
                    p.state if p is not None else None, st, self.config.node_id
                )
                if action is LeaderAndIsrAction.FENCED:
                    codes[index] = ErrorCode.FENCED_LEADER_EPOCH
                elif action is LeaderAndIsrAction.STOP:
                    assert p is not None
                    await self._stop(p, delete=False, reason="not_a_replica")
                elif action is not LeaderAndIsrAction.IGNORE:
                    roles.append((index, tp, action))
            await self._create_missing([tp for _i, tp, _a in roles if tp not in self.partitions])
            leaders, followers = [], []
            for index, tp, action in roles:
                p = self.partitions.get(tp)
                if p is None:  # its creation failed: offline now
                    codes[index] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                (leaders if action is LeaderAndIsrAction.LEAD else followers).append(
                    (p, states[index])
                )
            await self._make_leaders(leaders)
            await self._make_followers(followers, {b.node_id: b for b in brokers})
            return [_error(st, code) for st, code in zip(states, codes, strict=True)]

    async def _create_missing(self, tps: list[TopicPartition]) -> None:
        """Create (or load, if their logs exist) the partitions a LeaderAndIsr brings. A store
        that refuses one (its partition cap) or fails (full disk or map) takes it offline."""
        if not tps:
            return
        try:
            created = await self.writer.create_many(tps)
        except StorageError as exc:
            created = dict.fromkeys(tps, exc)
        for tp, result in created.items():
            if isinstance(result, StorageError):
                self.mark_offline(tp, str(result), during="create")
            else:
                self.partitions[tp] = self._hosted(result)

    async def _make_leaders(self, items: list[tuple[LocalPartition, PartitionState]]) -> None:
        if not items:
            return
        for p, st in items:
            self.execute(p, p.replica.begin_leading(st))
        await self.writer.barrier()  # appends fetched as a follower are all committed
        writes = []
        t = now_ms()
        for p, st in items:
            effects = p.replica.become_leader(st, t)
            for effect in effects:
                if isinstance(effect, PersistEpochs):
                    # Adopted at its commit; produce carries the entry too (`epochs_for_append`)
                    # until it is durable, so a failed write here is repaired by the next one.
                    writes.append(AppendWrite(tp=p.tp, batches=[], epochs=list(effect.epochs)))
            self.execute(p, [e for e in effects if not isinstance(e, PersistEpochs)])
        if writes:
            try:
                failed = await self.writer.append_each(writes)
            except Exception as exc:  # noqa: BLE001 - the writer stopped
                failed = {w.tp: exc for w in writes}
            for tp, exc in failed.items():
                # The next produce write carries the epoch, unless the log itself failed.
                self.events.emit("epoch_write_failed", partitions=[str(tp)], error=str(exc))
                self.on_log_error(tp, exc, during="become_leader")

    async def _make_followers(
        self, items: list[tuple[LocalPartition, PartitionState]], brokers: dict[int, BrokerInfo]
    ) -> None:
        restart = []
        for p, st in items:
            effects = p.replica.begin_following(st)
            self.execute(p, effects)
            if StopFetching() in effects:
                restart.append(p)
        if not restart:
            return
        await self.writer.barrier()  # no append of the old role lands after this point
        for p in restart:
            for effect in p.replica.become_follower():
                if not isinstance(effect, StartFetching):
                    self.execute(p, [effect])
                elif effect.leader in brokers:
                    self.fetchers.add(
                        p,
                        brokers[effect.leader],
                        leader_epoch=effect.leader_epoch,
                        last_fetched_epoch=effect.last_fetched_epoch,
                    )

    def apply_metadata(self, states: Sequence[PartitionState]) -> None:
        """UpdateMetadata: a leader adopts ISR changes the controller made for its epoch (the
        controller tells only the new leaders by LeaderAndIsr when it fences a follower)."""
        t = now_ms()
        for st in states:
            p = self.partitions.get(TopicPartition(st.topic, st.partition))
            if p is not None:
                self.execute(p, p.replica.on_controller_state(st, t))

    async def apply_stop_replica(
        self, items: Sequence[StopReplicaPartition]
    ) -> list[TopicPartitionError]:
        async with self._lock:
            out = []
            for item in items:
                tp = TopicPartition(item.topic, item.partition)
                p = self.partitions.get(tp)
                code = ErrorCode.NONE
                if p is not None and p.state is not None and item.leader_epoch < p.leader_epoch:
                    code = ErrorCode.FENCED_LEADER_EPOCH  # a newer LeaderAndIsr overtook it
                elif p is not None:
                    await self._stop(p, delete=item.delete, reason="stop_replica")
                out.append(
                    TopicPartitionError(topic=item.topic, partition=item.partition, error_code=code)
                )
            return out

    async def _stop(self, p: LocalPartition, *, delete: bool, reason: str) -> None:
        """Stop fetching and serving `p`; with `delete`, forget it and drop its log too.
        Called with the lock held."""
        self.execute(p, p.replica.stop())
        if delete:
            del self.partitions[p.tp]
            await self.writer.delete(p.tp)
        self.events.emit(
            "stop_replica", topic=p.tp.topic, partition=p.tp.partition, delete=delete, reason=reason
        )

    async def run_hw_checkpoints(
        self,
        *,
        interval_s: float = 5.0,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Kafka's replica.high.watermark.checkpoint.interval.ms: persist HWs that moved.
        Only the partitions whose machine reported a change since the last round are looked at
        (an HW moves only in its machine, which says so: core/replica.py `on_change`)."""
        task_status.started()
        touched = self._hw_touched
        saved: dict[TopicPartition, int] = {}
        while True:
            await trio.sleep(interval_s)
            moved = {}
            for tp in drain(touched):
                p = self.partitions.get(tp)
                if p is None:
                    saved.pop(tp, None)  # deleted: a partition created again starts afresh
                elif saved.get(tp) != p.high_watermark:
                    moved[tp] = p.high_watermark
            if not moved:
                continue
            try:
                snapshots = await self.producer_snapshots.take(moved)
                await self.writer.checkpoint(moved, snapshots)
            except Exception as exc:  # noqa: BLE001 - retried at the next interval
                # Kafka's ReplicaManager.checkpointHighWatermarks logs and goes on (the log dir is
                # marked offline); the HWs stay "moved", so the next interval writes them again.
                self.metrics.inc("hw_checkpoint_failures")
                self.events.emit("hw_checkpoint_failed", partitions=len(moved), error=str(exc))
                touched.update(moved)
                continue
            saved.update(moved)
            self.producer_snapshots.written()

    async def run_producer_expiration(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """KIP-854: producer ids idle for producer.id.expiration.ms are forgotten, checked every
        producer.id.expiration.check.interval.ms (server/producer_state_tasks.py)."""
        await run_producer_expiration(
            self.partitions.values,
            expiration_ms=self.config.producer_id_expiration_ms,
            interval_ms=self.config.producer_id_expiration_check_interval_ms,
            on_expired=lambda n: self.metrics.inc("producer_ids_expired", n),
            task_status=task_status,
        )


def _error(st: PartitionState, code: ErrorCode) -> TopicPartitionError:
    return TopicPartitionError(topic=st.topic, partition=st.partition, error_code=code)
