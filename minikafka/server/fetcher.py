"""Replica fetchers: the follower side of replication (Kafka's ReplicaFetcherManager and
ReplicaFetcherThread, as Trio tasks around the pure FetchPlanner).

One fetcher per (source broker, fetcher index); `num.replica.fetchers` spreads a broker's
partitions over several (core/fetcher.py `fetcher_index`). A fetcher sends one long-poll fetch at
a time on its own connection, appends what comes back through the node's single log writer (one
transaction per response), and only then asks again, from the new log end offset. A leader's
diverging-epoch answer makes it truncate first (core/log.py). Retriable partition errors delay
that partition by `replica.fetch.backoff.ms`; a broken connection delays the whole fetcher.
A fetcher with no partitions left exits (Kafka's shutdownIdleFetcherThreads).

Each connection holds a KIP-227 fetch session (core/fetch_session_handler.py) unless
`replica.fetch.session.enable` is false: the first fetch lists every partition, the next ones
only the partitions whose fetch state moved (the planner's `take_changed`) or whose follower
throttle decision changed, and a partition left out (delayed, held back) is forgotten. A session
error makes the next fetch a full one; a new connection starts a new session.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import trio

from minikafka.client.connection import Connection, open_connection
from minikafka.clock import now_ms
from minikafka.common import EpochEntry, TopicPartition
from minikafka.core.fetch_session_handler import FetchSessionHandler, SessionRequest
from minikafka.core.fetcher import FetchPlanner, FetchSettings, FollowerFetchState, fetcher_index
from minikafka.core.log import latest_epoch, truncate_epochs_from_end
from minikafka.core.log_retention import follower_log_start_offset, follower_out_of_range_reset
from minikafka.core.quota.planner import (
    NOT_THROTTLED,
    FollowerFetchPlan,
    ThrottleView,
    exempt,
    follower_backoff_ms,
    follower_view,
)
from minikafka.core.quota.sensors import ReplicationQuotas
from minikafka.core.records import iter_batches
from minikafka.errors import BrokerError, CorruptRecordError, ErrorCode, MiniKafkaError
from minikafka.server.config import NodeConfig
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.eventlog import EventLog
from minikafka.server.local_partition import LocalPartition
from minikafka.server.log_writer import LogWriter
from minikafka.server.metrics import Metrics
from minikafka.storage import AppendWrite
from minikafka.wire.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerInfo,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
)

REQUEST_TIMEOUT_S = 30.0  # replica.socket.timeout.ms


class ReplicaFetcherManager:
    def __init__(
        self,
        *,
        config: NodeConfig,
        writer: LogWriter,
        events: EventLog,
        metrics: Metrics,
        rng: random.Random,
        lookup: Callable[[TopicPartition], LocalPartition | None],
        quotas: ReplicationQuotas,
        dynamic: DynamicConfigs,
        on_append_error: Callable[..., bool],
        on_log_start_moved: Callable[..., None],
        connect: Callable[..., AbstractAsyncContextManager[Connection]] = open_connection,
    ) -> None:
        self.config = config
        self.connect = connect  # open_connection's signature; tests pass in-memory streams
        self.writer = writer
        self.events = events
        self.metrics = metrics
        self.rng = rng
        self.lookup = lookup
        self.quotas = quotas  # the replication quotas, shared with the leader side
        self.dynamic = dynamic  # live configs: which partitions are throttled
        # A failed append may take the replica offline (ReplicaManager.on_log_error).
        self.on_append_error = on_append_error
        # The log start offset moved on disk (ReplicaManager.log_start_moved).
        self.log_start_moved = on_log_start_moved
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._owner: dict[TopicPartition, tuple[int, int]] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def add(
        self, p: LocalPartition, leader: BrokerInfo, *, leader_epoch: int, last_fetched_epoch: int
    ) -> None:
        self.remove([p.tp])
        key = (leader.node_id, fetcher_index(p.tp, self.config.num_replica_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None or fetcher.stopped or fetcher.leader != leader:
            fetcher = ReplicaFetcher(self, leader, key[1])
            self.fetchers[key] = fetcher
            assert self._nursery is not None, "fetcher manager not running"
            self._nursery.start_soon(fetcher.run)
        fetcher.planner.add(
            p.tp,
            FollowerFetchState(
                fetch_offset=p.log_end_offset,
                current_leader_epoch=leader_epoch,
                last_fetched_epoch=last_fetched_epoch,
                log_start_offset=p.log_start_offset,
            ),
        )
        self._owner[p.tp] = key
        fetcher.wakeup.set()

    def set_log_start(self, tp: TopicPartition, log_start_offset: int) -> None:
        """Our log start of `tp` moved: its fetcher reports it next (the leader's low watermark)."""
        key = self._owner.get(tp)
        if key is not None and key in self.fetchers:
            self.fetchers[key].planner.set_log_start(tp, log_start_offset)

    def remove(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = self._owner.pop(tp, None)
            if key is not None and key in self.fetchers:
                self.fetchers[key].planner.remove([tp])

    def describe(self) -> list[dict[str, object]]:
        return [
            {"leader": k[0], "fetcher": k[1], "partitions": len(f.planner.partitions)}
            for k, f in self.fetchers.items()
        ]


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader: BrokerInfo, index: int) -> None:
        c = manager.config
        self.manager = manager
        self.leader = leader
        self.index = index
        self.planner = FetchPlanner(
            FetchSettings(
                replica_id=c.node_id,
                max_wait_ms=c.replica_fetch_wait_max_ms,
                min_bytes=c.replica_fetch_min_bytes,
                response_max_bytes=c.replica_fetch_response_max_bytes,
                partition_max_bytes=c.replica_fetch_max_bytes,
                backoff_ms=c.replica_fetch_backoff_ms,
                partition_order=c.replica_fetch_partition_order,
            ),
            manager.rng,
        )
        # KIP-227: this fetcher's session with its leader (one per connection); the partitions
        # that may differ from it, and the throttle's last decisions (`_plan`).
        self.session = FetchSessionHandler(enabled=c.replica_fetch_session_enable)
        self._unsent: set[TopicPartition] = set()
        self._excluded: frozenset[TopicPartition] = frozenset()
        self._limited: frozenset[TopicPartition] = frozenset()
        self.settings = c.throttle_settings
        self.wakeup = trio.Event()
        self.stopped = False

    async def run(self) -> None:
        try:
            while self.planner.partitions:
                try:
                    async with self.manager.connect(
                        *self.manager.config.route(self.leader.host, self.leader.port),
                        client_id=f"replica-fetcher-{self.manager.config.node_id}-{self.index}",
                        max_frame_bytes=self.manager.config.socket_max_frame_bytes,
                        credential=self.manager.config.credential,  # a follower proves membership
                    ) as conn:
                        await self._fetch_loop(conn)
                except MiniKafkaError as exc:
                    self.manager.events.emit(
                        "fetch_error", leader=self.leader.node_id, error=str(exc)
                    )
                    self.manager.metrics.inc("fetch_errors")
                    await trio.sleep(self.manager.config.replica_fetch_backoff_ms / 1000)
        finally:
            self.stopped = True

    async def _fetch_loop(self, conn) -> None:  # noqa: ANN001 - client Connection
        # A new connection starts a new session, closing the old one if the leader has it.
        self.session.on_error()
        while self.planner.partitions:
            t = now_ms()
            held = self._hold_back(t)
            sent = self._plan(t, held)
            if sent is None:
                await self._back_off(throttled=bool(held.excluded))
                continue
            s = self.planner.settings
            request = FetchRequest(
                replica_id=s.replica_id,
                max_wait_ms=s.max_wait_ms,
                min_bytes=s.min_bytes,
                max_bytes=s.response_max_bytes,
                partitions=sent.to_send,
                session_id=sent.session_id,
                session_epoch=sent.session_epoch,
                forgotten=sent.forgotten,
                partition_order=s.partition_order if self.session.enabled else "",
            )
            response = await conn.request(
                request, timeout_s=request.max_wait_ms / 1000 + REQUEST_TIMEOUT_S
            )
            if not self.session.handle_response(sent, response.error_code, response.session_id):
                self.manager.events.emit(
                    "fetch_session_error",
                    leader=self.leader.node_id,
                    error_code=response.error_code,
                )
                self.manager.metrics.inc("fetch_session_errors")
                continue  # the next fetch is a full one
            self._unsent = set()
            # Exempt (KAFKA-4313: counted, never held back): caught up as of the request, so
            # decided before the response moves the lags.
            got = [TopicPartition(r.topic, r.partition) for r in response.partitions if r.records]
            exempt_now = frozenset(tp for tp in got if exempt(self._view(tp), self.settings))
            await self._process(conn, sent.get, response, exempt=exempt_now)

    def _view(self, tp: TopicPartition) -> ThrottleView:
        """`tp` as the follower's throttle plan sees it (core/quota/planner.py)."""
        p, st = self.manager.lookup(tp), self.planner.partitions.get(tp)
        if p is None or p.state is None or st is None:
            return NOT_THROTTLED
        m = self.manager
        return follower_view(
            partition=tp.partition,
            local_id=m.config.node_id,
            adding_replicas=p.state.adding_replicas,
            follower_list=m.dynamic.topic_throttled_replicas(tp.topic)[1],
            config=m.dynamic.broker_config(m.config.node_id),
            lag=st.lag,
        )

    def _hold_back(self, t: int) -> HeldBack:
        """The follower side of KIP-73 for the next fetch (Kafka's shouldFollowerThrottle),
        decided by core/quota/planner.py `FollowerFetchPlan`. Without any follower bound (and
        not precise) nothing is left out or capped whatever the classes, so the per-partition
        views are skipped: an idle fetcher of thousands of partitions pays nothing per
        partition here."""
        if not FollowerFetchPlan.needed(self.settings, self.manager.quotas):
            return HeldBack()
        tps = list(self.planner.partitions)
        plan = FollowerFetchPlan([self._view(tp) for tp in tps], self.settings)
        excluded, limits = plan.decide(self.manager.quotas, t)
        return HeldBack(
            excluded=frozenset(tps[i] for i in excluded),
            limits={tps[i]: n for i, n in limits.items()},
        )

    def _plan(self, t: int, throttle: HeldBack) -> SessionRequest | None:
        """The next fetch (None: nothing to fetch). A full one lists every ready partition not
        held back, shuffled or rotated (KIP-73); an incremental one looks only at the partitions
        that may differ from the session: moved in the planner since the last confirmed fetch,
        or held back or capped by the throttle now or the time before (FetchSessionHandler)."""
        changed = self.planner.take_changed(t)
        if self.session.next_is_full:
            self._unsent = set()
            planned = self.planner.build_request(
                t, exclude=throttle.excluded, limits=throttle.limits
            )
            return None if planned is None else self.session.build(planned.partitions)
        limited = frozenset(throttle.limits)
        self._unsent |= changed | throttle.excluded | self._excluded | limited | self._limited
        self._excluded, self._limited = throttle.excluded, limited
        sent = self.session.build_changes(
            sorted(self._unsent),  # sorted: the same seed gives the same requests
            lambda tp: self.planner.entry(tp, t, exclude=throttle.excluded, limits=throttle.limits),
        )
        return sent if sent.size() else None

    async def _back_off(self, *, throttled: bool) -> None:
        """Nothing fetchable: wait until a delayed partition is ready or partitions arrive; when
        the follower quota held everything back, wait replica.fetch.backoff.ms (Kafka's
        maybeFetch waits fetchBackOffMs when the request comes out empty)."""
        self.wakeup = trio.Event()
        ready = self.planner.next_deadline_ms()
        if ready is None:
            return
        c = self.manager.config
        wait_ms = follower_backoff_ms(
            ready_ms=ready,
            now_ms=now_ms(),
            throttled=throttled,
            backoff_ms=c.replica_fetch_backoff_ms,
            precise=c.replication_quota_precise,
            window_s=c.replication_quota_window_size_seconds,
        )
        with trio.move_on_after(wait_ms / 1000):
            await self.wakeup.wait()

    async def _process(
        self,
        conn: Connection,
        asked: Callable[[TopicPartition], FetchPartition | None],
        response: FetchResponse,
        *,
        exempt: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        """Append what came for the partitions `asked` (a session's response carries only those
        with news); `exempt`: the throttled partitions that were caught up when asked for
        (KAFKA-4313: counted, never held back)."""
        t = now_ms()
        writes: list[AppendWrite] = []
        appended: list[tuple[LocalPartition, int, int]] = []
        leader_starts: dict[TopicPartition, int] = {}
        for pr in response.partitions:
            tp = TopicPartition(pr.topic, pr.partition)
            st = self.planner.partitions.get(tp)
            p = self.manager.lookup(tp)
            fp = asked(tp)
            if st is None or p is None or fp is None or st.fetch_offset != fp.fetch_offset:
                continue  # removed or moved on while the fetch was in flight
            if p.is_leader:
                continue  # removed or moved on while the fetch was in flight
            if pr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._reset_out_of_range(conn, p, t)
            elif pr.error_code != ErrorCode.NONE:
                self._on_partition_error(tp, pr, t)
            elif pr.diverging_epoch is not None:
                await self._truncate(p, pr)
            elif pr.records:
                write = self._prepare_append(p, pr, t)
                if write is not None:
                    writes.append(write)
                    appended.append((p, pr.high_watermark, len(pr.records)))
                    leader_starts[tp] = pr.log_start_offset
            else:
                p.replica.on_leader_high_watermark(pr.high_watermark)
                self.planner.observe_leader(tp, pr.high_watermark)
                await self._follow_log_start(p, pr.log_start_offset)
        if writes:
            failed = await self.manager.writer.append_each(writes)
            if failed:
                appended = [a for a in appended if a[0].tp not in failed]
                self._on_append_failed(failed, t)
            t = now_ms()
            for p, leader_hw, size in appended:
                p.replica.on_leader_high_watermark(leader_hw)
                self.planner.advance(
                    p.tp,
                    fetch_offset=p.log_end_offset,
                    last_fetched_epoch=latest_epoch(p.epochs),
                    returned_data=True,  # with `rotate`, to the end of the next request
                )
                self.planner.observe_leader(p.tp, leader_hw)
                self.manager.metrics.inc("replication_bytes_in", size)
                p.bytes_in.record(size, t)
            for p, _hw, _n in appended:
                await self._follow_log_start(p, leader_starts[p.tp])
            # After appending, what it cost the follower's sensors (`FollowerFetchPlan`).
            plan = FollowerFetchPlan([self._view(p.tp) for p, _hw, _n in appended], self.settings)
            costs = [(k, n, p.tp in exempt) for k, (p, _hw, n) in enumerate(appended)]
            for charge in plan.charges(costs):
                self.manager.quotas.charge(charge, t)
                self.manager.metrics.inc_all(charge.counters())

    def _on_append_failed(self, failed: dict[TopicPartition, Exception], t: int) -> None:
        """A partition whose append failed is fetched again after a backoff, unless the failure
        took the replica offline (server/offline_replicas.py removes it from its fetcher); the
        others go on (Kafka's AbstractFetcherThread marks only the failed partition)."""
        for tp, exc in failed.items():
            self.manager.events.emit(
                "fetch_append_failed", topic=tp.topic, partition=tp.partition, error=str(exc)
            )
            self.manager.metrics.inc("append_failures")
            if not self.manager.on_append_error(tp, exc, during="replica_fetch"):
                self.planner.delay(tp, t)

    def _prepare_append(
        self, p: LocalPartition, pr: FetchPartitionResponse, t: int
    ) -> AppendWrite | None:
        try:
            batches = list(iter_batches(pr.records))
        except CorruptRecordError as exc:
            self.manager.events.emit(
                "fetch_corrupt", topic=p.tp.topic, partition=p.tp.partition, error=str(exc)
            )
            self.planner.delay(p.tp, t)
            return None
        # The leader returns whole batches from the one containing fetch_offset; ours end at our
        # log end offset, so a batch starting below it is one we already have. The first may
        # start past it: the leader's cleaner removed the batches between (core/compaction.py).
        batches = [b for b in batches if b.base_offset >= p.log_end_offset]
        if not batches:
            self.planner.delay(p.tp, t)
            return None
        # The epoch cache and the producers' state the batches need (core/replica.py): adopted
        # or undone by the writer's hooks, so a failed append is retried with the same cache.
        epochs, high_watermark = p.replica.stage_fetched(batches, pr.high_watermark)
        return AppendWrite(
            tp=p.tp,
            batches=[b.raw for b in batches],
            epochs=epochs,
            high_watermark=high_watermark,
        )

    async def _truncate_log(self, p: LocalPartition, offset: int, epochs: list[EpochEntry]) -> int:
        """Truncate `p`'s log at `offset` with the epoch cache `epochs`; -> the new LEO. The
        producers' state of the truncated log is undone in memory down to the HW, else reloaded
        from the snapshot and the log (ProducerStateManager.truncateAndReload)."""
        new_leo = await self.manager.writer.truncate(p.tp, offset, epochs)
        reloaded = None
        if not p.producers.can_roll_back_to(new_leo):
            reloaded = await self.manager.writer.load_producers(p.tp)
        p.replica.on_truncated(new_leo, epochs, reloaded)
        return new_leo

    async def _truncate(self, p: LocalPartition, pr: FetchPartitionResponse) -> None:
        div = pr.diverging_epoch
        assert div is not None
        offset, epochs = p.replica.truncation(div.epoch, div.end_offset)
        old = p.log_end_offset
        new_leo = await self._truncate_log(p, offset, epochs)
        self.planner.advance(p.tp, fetch_offset=new_leo, last_fetched_epoch=latest_epoch(epochs))
        self.manager.events.emit(
            "truncated",
            topic=p.tp.topic,
            partition=p.tp.partition,
            from_offset=old,
            to_offset=new_leo,
            diverging_epoch=div.epoch,
            leader_end_offset=div.end_offset,
        )

    async def _follow_log_start(self, p: LocalPartition, leader_log_start_offset: int) -> None:
        """Take the leader's log start offset after the answer's records and HW
        (ReplicaFetcherThread.processPartitionData, core/log_retention.py
        `follower_log_start_offset`): forward only, never past our own HW."""
        move = follower_log_start_offset(
            log_start_offset=p.log_start_offset,
            leader_log_start_offset=leader_log_start_offset,
            high_watermark=p.high_watermark,
        )
        if not move.moved:
            return
        await self.manager.writer.advance_log_start(p.tp, move.log_start_offset)
        self.manager.log_start_moved(p, move.log_start_offset, reason=move.reason.value)

    async def _reset_out_of_range(self, conn: Connection, p: LocalPartition, t: int) -> None:
        """OFFSET_OUT_OF_RANGE: ask the leader where its log ends and starts, then truncate or
        start again from its log start (AbstractFetcherThread.fetchOffsetAndTruncate, decided
        by core/log_retention.py `follower_out_of_range_reset`)."""
        tp = p.tp
        try:
            ends = [
                await self._leader_offset(conn, tp, ts)
                for ts in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP)
            ]
        except BrokerError as exc:
            self._on_partition_error(tp, FetchPartitionResponse(
                topic=tp.topic, partition=tp.partition, error_code=exc.code), t)  # fmt: skip
            return
        leader_end, leader_start = ends
        old_end = p.log_end_offset
        reset = follower_out_of_range_reset(
            log_end_offset=old_end,
            leader_log_start_offset=leader_start,
            leader_log_end_offset=leader_end,
        )
        if reset.truncate_fully_and_start_at is not None:
            await self.manager.writer.truncate_fully(tp, reset.truncate_fully_and_start_at)
            p.replica.on_truncated_fully(reset.truncate_fully_and_start_at)
            self.planner.set_log_start(tp, p.log_start_offset)
        elif reset.truncate_to is not None:
            epochs = truncate_epochs_from_end(p.epochs, reset.truncate_to)
            await self._truncate_log(p, reset.truncate_to, epochs)
        self.planner.advance(
            tp, fetch_offset=reset.fetch_offset, last_fetched_epoch=latest_epoch(p.epochs)
        )
        self.manager.metrics.inc("fetch_offset_out_of_range")
        self.manager.events.emit(
            "fetch_offset_out_of_range",
            topic=tp.topic,
            partition=tp.partition,
            leader=self.leader.node_id,
            log_end_offset=old_end,
            leader_log_start_offset=leader_start,
            leader_log_end_offset=leader_end,
            truncated_fully=reset.truncate_fully_and_start_at is not None,
            fetch_offset=reset.fetch_offset,
        )

    async def _leader_offset(self, conn: Connection, tp: TopicPartition, timestamp: int) -> int:
        """The leader's log end (LATEST, asked as a replica) or start (EARLIEST)."""
        request = ListOffsetsRequest(
            replica_id=self.manager.config.node_id,
            partitions=[
                ListOffsetsPartition(topic=tp.topic, partition=tp.partition, timestamp=timestamp)
            ],
        )
        (answer,) = (await conn.request(request, timeout_s=REQUEST_TIMEOUT_S)).partitions
        if answer.error_code != ErrorCode.NONE:
            raise BrokerError(answer.error_code, f"ListOffsets {tp} on the leader")
        return answer.offset

    def _on_partition_error(self, tp: TopicPartition, pr: FetchPartitionResponse, t: int) -> None:
        self.manager.events.emit(
            "fetch_partition_error",
            topic=tp.topic,
            partition=tp.partition,
            leader=self.leader.node_id,
            error_code=pr.error_code,
        )
        self.planner.delay(tp, t)


@dataclass(frozen=True, slots=True)
class HeldBack:
    """What the follower's throttle holds back of the next fetch: partitions left out, and the
    precise mode's byte caps."""

    excluded: frozenset[TopicPartition] = frozenset()
    limits: dict[TopicPartition, int] = field(default_factory=dict)
