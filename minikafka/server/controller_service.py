"""The controller role: the Trio shell around the pure ControllerState (core/controller/state.py).

Every state change follows one path, under one lock: call the state machine, persist the records
it changed to LMDB (`take_changes`: so a restarted controller resumes where it left off, with a
new controller epoch, and a save costs the change, not the cluster), then hand the effects to
the per-broker channels. A channel (Kafka's
ControllerChannelManager RequestSendThread) sends its broker's requests one at a time, in order,
retrying on connection failure; a LeaderAndIsr addressed to an older incarnation of the broker
is dropped, since the new incarnation gets fresh ones when it registers.

Dynamic configs: IncrementalAlterConfigs goes through the same lock/persist/execute path (the
snapshot is part of the document, so it survives a restart); DescribeConfigs reads the state.
An UpdateMetadata effect that carries the config snapshot is sent with it and its version.

Reassignments (KIP-455): AlterPartitionReassignments goes through the same path (the state
persists the ongoing moves and their throttles); ListPartitionReassignments reads the state.
A StopReplica effect (replicas a reassignment removed) goes down the broker's channel after its
LeaderAndIsr and UpdateMetadata, and like them is dropped if that incarnation is gone.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import trio

from minikafka.client.connection import Connection, hold_connection
from minikafka.clock import RunSync, now_ms
from minikafka.common import TopicPartition
from minikafka.core.controller import (
    ControllerConfig,
    ControllerState,
    Event,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError
from minikafka.server.config import FRAME_HEADROOM_BYTES, NodeConfig
from minikafka.server.eventlog import EventLog
from minikafka.server.metadata_cache import metadata_response
from minikafka.server.routes import Call, Handler
from minikafka.storage import MetadataStore
from minikafka.wire.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerInfo,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    LeaderAndIsrRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    PartitionState,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

RETRY_BACKOFF_S = 0.2


class ControllerService:
    def __init__(
        self,
        *,
        config: NodeConfig,
        store: MetadataStore,
        events: EventLog,
        rng: random.Random,
        hold: Callable[..., Awaitable[None]] = hold_connection,
        run_sync: RunSync = trio.to_thread.run_sync,
    ) -> None:
        self.config = config
        self.hold = hold  # hold_connection's signature; tests pass in-memory streams
        self.run_sync = run_sync  # the metadata store's calls (minikafka/clock.py RunSync)
        self.store = store
        self.events = events
        self.rng = rng
        self.state: ControllerState | None = None
        self.routes = self._routes()  # built once (server/routes.py)
        self._lock = trio.Lock()
        self._channels: dict[int, BrokerChannel] = {}
        self._nursery: trio.Nursery | None = None
        self._deadline_changed = trio.Event()

    def _controller_config(self) -> ControllerConfig:
        c = self.config
        return ControllerConfig(
            session_timeout_ms=c.broker_session_timeout_ms,
            unclean_leader_election=c.unclean_leader_election_enable,
            default_num_partitions=c.num_partitions,
            default_replication_factor=c.default_replication_factor,
            max_partitions_per_topic=c.max_topic_partitions,
            max_partitions_per_broker=c.max_broker_partitions,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        records = await self.run_sync(self.store.read)
        self.state = self._restored(records)
        await self._save()  # the new controller epoch (and a pre-records store, rewritten)
        self.events.emit(
            "controller_started",
            controller_epoch=self.state.controller_epoch,
            restored=bool(records),
        )
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            async with self._lock:  # a restored state starts the brokers' session clocks now
                await self._commit(self.state.on_deadline(now_ms()))
            task_status.started()
            await self._run_deadlines()

    async def _run_deadlines(self) -> None:
        """Fence brokers whose session timed out (Kafka's BrokerHeartbeatManager)."""
        assert self.state is not None
        while True:
            self._deadline_changed = trio.Event()
            deadline = self.state.next_deadline_ms()
            with trio.move_on_after(
                1.0 if deadline is None else max(deadline - now_ms() + 1, 0) / 1000
            ):
                await self._deadline_changed.wait()
            async with self._lock:
                effects = self.state.on_deadline(now_ms())
                try:
                    await self._commit(effects)
                except BrokerError:
                    pass  # reverted and logged by _commit; the next deadline decides again

    async def _commit(self, effects: list[object]) -> None:
        """Persist, then execute. Called with the lock held.

        A failed save sends nothing and puts memory back to what the disk holds (reloaded, as a
        restarted controller would, with a new controller epoch): Kafka's QuorumController
        renounces and reverts to the last committed state when a metadata write fails. The
        caller's request fails with KAFKA_STORAGE_ERROR; nothing it decided happened."""
        assert self.state is not None
        if effects:
            try:
                await self._save()
            except Exception as exc:  # noqa: BLE001 - memory goes back to the disk's state
                await self._revert_to_disk(exc)
                raise BrokerError(
                    ErrorCode.KAFKA_STORAGE_ERROR, f"controller metadata not saved: {exc}"
                ) from exc
        for effect in effects:
            self._execute(effect)
        self._deadline_changed.set()

    async def _save(self) -> None:
        """Write what changed since the last save (core/controller/records.py): one
        transaction whose size is the change, not the cluster (KRaft's records do the same)."""
        assert self.state is not None
        changes = self.state.take_changes()
        await self.run_sync(self.store.write, changes.puts, changes.deletes)

    def _restored(self, records: dict[str, object]) -> ControllerState:
        kw = dict(controller_id=self.config.node_id, config=self._controller_config(), rng=self.rng)
        return ControllerState.from_records(records, **kw) if records else ControllerState(**kw)

    async def _revert_to_disk(self, exc: Exception) -> None:
        self.state = self._restored(await self.run_sync(self.store.read))
        self.events.emit(
            "controller_save_failed", error=str(exc), controller_epoch=self.state.controller_epoch
        )
        self._deadline_changed.set()  # restored sessions start now (as after a restart)

    def _execute(self, effect: object) -> None:
        assert self.state is not None
        c = self.state
        match effect:
            case Event(name=name, fields=fields):
                self.events.emit(name, **fields)
            case SendLeaderAndIsr():
                for req in self._leader_and_isr(effect):
                    self._channel(effect.broker_id).send(req)
            case SendUpdateMetadata():
                requests = self._update_metadata(effect)
                for broker_id in effect.broker_ids:
                    for req in requests:
                        self._channel(broker_id).send(req)
            case SendStopReplica():
                req = StopReplicaRequest(
                    controller_id=self.config.node_id,
                    controller_epoch=c.controller_epoch,
                    broker_epoch=effect.broker_epoch,
                    partitions=[
                        StopReplicaPartition(
                            topic=topic,
                            partition=partition,
                            leader_epoch=epoch,
                            delete=effect.delete,
                        )
                        for topic, partition, epoch in effect.partitions
                    ],
                )
                self._channel(effect.broker_id).send(req)

    def _chunks(self, states: Sequence[PartitionState]) -> list[list[PartitionState]]:
        """`states` in runs that fit a frame: the frame cap (socket.max.frame.bytes) bounds a
        request, and a creation of 20,000 partitions makes a 2.4 MB UpdateMetadata."""
        return chunk_states(states, self.config.socket_max_frame_bytes - FRAME_HEADROOM_BYTES)

    def _leader_and_isr(self, effect: SendLeaderAndIsr) -> list[LeaderAndIsrRequest]:
        assert self.state is not None
        return [
            LeaderAndIsrRequest(
                controller_id=self.config.node_id,
                controller_epoch=self.state.controller_epoch,
                broker_epoch=effect.broker_epoch,
                partitions=chunk,
                live_leaders=self.state.live_brokers(),
            )
            for chunk in self._chunks(effect.partitions)
        ]

    def _update_metadata(self, effect: SendUpdateMetadata) -> list[UpdateMetadataRequest]:
        """One request per chunk; the config snapshot rides with the first."""
        assert self.state is not None
        configs = effect.configs
        return [
            UpdateMetadataRequest(
                controller_id=self.config.node_id,
                controller_epoch=self.state.controller_epoch,
                brokers=self.state.live_brokers(),
                partitions=chunk,
                configs=[] if configs is None or i else configs.to_wire(),
                configs_version=-1 if configs is None or i else configs.version,
                deleted_topics=[] if i else list(effect.deleted_topics),
                replace=effect.full and i == 0,
            )
            for i, chunk in enumerate(self._chunks(effect.partitions))
        ]

    def full_state_requests(self, broker_id: int) -> list[object]:
        """What tells `broker_id` everything, as its registration does: UpdateMetadata with every
        partition and the configs, then LeaderAndIsr for the replicas it hosts (if live). A
        channel that overflowed sends these instead of its backlog."""
        assert self.state is not None
        states = tuple(self.state.partition_states())
        requests: list[object] = [
            *self._update_metadata(
                SendUpdateMetadata(
                    broker_ids=(broker_id,),
                    partitions=states,
                    configs=self.state.pushed_configs(),
                    full=True,
                )
            )
        ]
        epoch = self.state.broker_epoch(broker_id)
        mine = tuple(s for s in states if broker_id in s.replicas)
        if epoch is not None and not self.state.is_fenced(broker_id) and mine:
            requests += self._leader_and_isr(
                SendLeaderAndIsr(broker_id=broker_id, broker_epoch=epoch, partitions=mine)
            )
        return requests

    def _channel(self, broker_id: int) -> BrokerChannel:
        assert self.state is not None and self._nursery is not None
        info = self.state.broker_info(broker_id)
        ch = self._channels.get(broker_id)
        if ch is None or (info is not None and ch.broker != info):
            if ch is not None:
                ch.close()
            ch = BrokerChannel(self, info or BrokerInfo(node_id=broker_id, host="", port=0))
            self._channels[broker_id] = ch
            self._nursery.start_soon(ch.run)
        return ch

    async def dispatch(self, body: object) -> object:
        """The response to a controller API request, or NotImplemented if this is not one."""
        handler = self.routes.get(type(body))
        if handler is None:
            return NotImplemented
        return await handler(body, Call())

    def _routes(self) -> dict[type, Handler]:
        """What the controller serves (server/routes.py): its brokers' registrations,
        heartbeats and AlterPartition, and the admin APIs (on a combined node it answers them
        before the broker could forward them)."""
        return {
            BrokerRegistrationRequest: self._register_broker,
            BrokerHeartbeatRequest: self._heartbeat,
            CreateTopicsRequest: self._create_topics,
            CreatePartitionsRequest: self._create_partitions,
            DeleteTopicsRequest: self._delete_topics,
            AlterPartitionRequest: self._alter_partition,
            IncrementalAlterConfigsRequest: self._alter_configs,
            DescribeConfigsRequest: self._describe_configs,
            AlterPartitionReassignmentsRequest: self._alter_reassignments,
            ListPartitionReassignmentsRequest: self._list_reassignments,
            AllocateProducerIdsRequest: self._allocate_producer_ids,
            MetadataRequest: self._metadata,
        }

    def _state(self) -> ControllerState:
        assert self.state is not None, "the controller answers once its state is restored"
        return self.state

    async def _register_broker(
        self, body: BrokerRegistrationRequest, call: Call
    ) -> BrokerRegistrationResponse:
        state = self._state()
        async with self._lock:
            code, epoch, effects = state.register_broker(
                broker_id=body.broker_id,
                incarnation_id=body.incarnation_id,
                host=body.host,
                port=body.port,
                kafka_host=body.kafka_host,
                kafka_port=body.kafka_port,
                now_ms=now_ms(),
            )
            if code == 0:
                # A newcomer learns the whole cluster, configs included, BEFORE its
                # LeaderAndIsr: its first fetch must already be under the throttles.
                newcomer = SendUpdateMetadata(
                    broker_ids=(body.broker_id,),
                    partitions=tuple(state.partition_states()),
                    configs=state.pushed_configs(),
                )
                effects = [newcomer, *effects]
            await self._commit(effects)
        return BrokerRegistrationResponse(error_code=code, broker_epoch=epoch)

    async def _heartbeat(self, body: BrokerHeartbeatRequest, call: Call) -> BrokerHeartbeatResponse:
        async with self._lock:
            code, fenced, effects = self._state().heartbeat(
                broker_id=body.broker_id,
                broker_epoch=body.broker_epoch,
                now_ms=now_ms(),
                offline=[TopicPartition(r.topic, r.partition) for r in body.offline_replicas],
            )
            await self._commit(effects)
        return BrokerHeartbeatResponse(error_code=code, is_fenced=fenced)

    async def _create_topics(self, body: CreateTopicsRequest, call: Call) -> CreateTopicsResponse:
        async with self._lock:
            results, effects = self._state().create_topics(
                body.topics, now_ms(), validate_only=body.validate_only
            )
            await self._commit(effects)
        return CreateTopicsResponse(topics=results)

    async def _create_partitions(
        self, body: CreatePartitionsRequest, call: Call
    ) -> CreatePartitionsResponse:
        async with self._lock:
            results, effects = self._state().create_partitions(
                body.topics, now_ms(), validate_only=body.validate_only
            )
            await self._commit(effects)
        return CreatePartitionsResponse(results=results)

    async def _delete_topics(self, body: DeleteTopicsRequest, call: Call) -> DeleteTopicsResponse:
        async with self._lock:
            results, effects = self._state().delete_topics(body.topics, now_ms())
            await self._commit(effects)
        return DeleteTopicsResponse(results=results)

    async def _alter_partition(
        self, body: AlterPartitionRequest, call: Call
    ) -> AlterPartitionResponse:
        async with self._lock:
            code, items, effects = self._state().alter_partition(
                broker_id=body.broker_id,
                broker_epoch=body.broker_epoch,
                items=body.partitions,
            )
            await self._commit(effects)
        return AlterPartitionResponse(error_code=code, partitions=items)

    async def _alter_configs(
        self, body: IncrementalAlterConfigsRequest, call: Call
    ) -> IncrementalAlterConfigsResponse:
        async with self._lock:
            responses, effects = self._state().alter_configs(
                body.resources, validate_only=body.validate_only
            )
            await self._commit(effects)
        return IncrementalAlterConfigsResponse(responses=responses)

    async def _describe_configs(
        self, body: DescribeConfigsRequest, call: Call
    ) -> DescribeConfigsResponse:
        return DescribeConfigsResponse(results=self._state().describe_configs(body.resources))

    async def _alter_reassignments(
        self, body: AlterPartitionReassignmentsRequest, call: Call
    ) -> AlterPartitionReassignmentsResponse:
        async with self._lock:
            code, message, responses, effects = self._state().alter_partition_reassignments(
                body.partitions, body.throttle_configs
            )
            await self._commit(effects)
        return AlterPartitionReassignmentsResponse(
            responses=responses, error_code=code, error_message=message
        )

    async def _list_reassignments(
        self, body: ListPartitionReassignmentsRequest, call: Call
    ) -> ListPartitionReassignmentsResponse:
        return ListPartitionReassignmentsResponse(
            reassignments=self._state().list_partition_reassignments(body.topics)
        )

    async def _allocate_producer_ids(
        self, body: AllocateProducerIdsRequest, call: Call
    ) -> AllocateProducerIdsResponse:
        """KIP-730: the block is persisted before it is answered."""
        async with self._lock:
            code, block, effects = self._state().allocate_producer_ids(
                broker_id=body.broker_id, broker_epoch=body.broker_epoch
            )
            await self._commit(effects)
        if block is None:
            return AllocateProducerIdsResponse(error_code=code)
        return AllocateProducerIdsResponse(
            error_code=code, producer_id_start=block.first_id, producer_id_len=block.size
        )

    async def _metadata(self, body: MetadataRequest, call: Call) -> object:
        state = self._state()
        return metadata_response(
            state.live_brokers(),
            state.partition_states(body.topics),
            self.config.node_id,
            body.topics,
        )


def chunk_states(states: Sequence[PartitionState], budget_bytes: int) -> list[list[PartitionState]]:
    """Consecutive runs of `states` whose estimated encoding fits `budget_bytes` (at least one
    state per run, and one empty run for no states: a request is still sent)."""
    chunks: list[list[PartitionState]] = [[]]
    size = 0
    for st in states:
        estimate = _estimated_bytes(st)
        if chunks[-1] and size + estimate > budget_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(st)
        size += estimate
    return chunks


def _estimated_bytes(st: PartitionState) -> int:
    # Measured: 123 bytes of msgpack for a state of an 8-character topic with 2 replicas and
    # 2 in sync (field names, small ints); twice the measure, so an estimate never falls short.
    ids = len(st.replicas) + len(st.isr) + len(st.adding_replicas) + len(st.removing_replicas)
    return 2 * (100 + len(st.topic.encode()) + 9 * ids)


class BrokerChannel:
    """Kafka's queue is unbounded; this one holds `max_queued` requests. A broker that cannot be
    reached for long makes it overflow: the backlog is then dropped and replaced by the requests
    that tell the broker everything (`full_state_requests`), which supersede it, so memory stays
    bounded and nothing the broker must learn is lost."""

    def __init__(
        self, service: ControllerService, broker: BrokerInfo, *, max_queued: int = 10_000
    ) -> None:
        self.service = service
        self.broker = broker
        self._send, self._recv = trio.open_memory_channel[object](max_queued)

    def send(self, request: object) -> None:
        try:
            self._send.send_nowait(request)
        except trio.WouldBlock:
            self._resync()

    def _resync(self) -> None:
        dropped = 1  # the request that did not fit
        while True:
            try:
                self._recv.receive_nowait()
            except trio.WouldBlock:
                break
            dropped += 1
        for request in self.service.full_state_requests(self.broker.node_id):
            self._send.send_nowait(request)
        self.service.events.emit(
            "controller_channel_overflow", broker=self.broker.node_id, dropped=dropped
        )

    def close(self) -> None:
        self._send.close()

    async def run(self) -> None:
        conn: Connection | None = None
        scope: trio.CancelScope | None = None
        async with trio.open_nursery() as nursery:
            async for request in self._recv:
                while not self._obsolete(request):
                    try:
                        if conn is None or conn.broken:
                            if scope is not None:
                                scope.cancel()
                            c = self.service.config
                            conn, scope = await nursery.start(
                                partial(
                                    self.service.hold,
                                    c.route(self.broker.host, self.broker.port),
                                    f"controller-{c.node_id}",
                                    credential=c.credential,  # prove cluster membership
                                )
                            )
                        await conn.request(request, timeout_s=30)
                        break
                    except MiniKafkaError as exc:
                        conn = None
                        self.service.events.emit(
                            "controller_send_failed",
                            broker=self.broker.node_id,
                            request=type(request).__name__,
                            error=str(exc),
                        )
                        await trio.sleep(RETRY_BACKOFF_S)
            nursery.cancel_scope.cancel()

    def _obsolete(self, request: object) -> bool:
        state = self.service.state
        if state is None or state.broker_info(self.broker.node_id) != self.broker:
            return True  # the broker moved (restart on another address): a new channel serves it
        if isinstance(request, LeaderAndIsrRequest | StopReplicaRequest):
            return request.broker_epoch != state.broker_epoch(self.broker.node_id)
        return False
