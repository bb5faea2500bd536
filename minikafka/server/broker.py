"""The broker role: its link to the controller and the dispatch of client and controller APIs.

The controller link registers the broker (a fresh incarnation id per process start, so the
controller can tell a restart from a retry), heartbeats every `broker.heartbeat.interval.ms`,
re-registers when the controller no longer knows its epoch, and carries AlterPartition and
forwarded CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs, DescribeConfigs, AlterPartitionReassignments and
ListPartitionReassignments (KIP-590 style forwarding: clients may send admin requests to any
broker). UpdateMetadata may carry the controller's dynamic
config snapshot, which goes to the `DynamicConfigs` holder (server/dynamic_configs.py).
Requests from a controller carry its epoch: an older epoch than one already accepted is refused
with STALE_CONTROLLER_EPOCH, and LeaderAndIsr/StopReplica meant for an older incarnation of this
broker with STALE_BROKER_EPOCH. The controller epoch is remembered only once a request has passed
every check (a refused request, say one with a forged huge epoch, must not make the real
controller's next request look stale). Only the cluster's own nodes reach this dispatch with a
control request: the listener's ClusterGate refuses the others first (server/cluster_gate.py), and
the controller link proves this broker's membership on every connection it opens.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace

import trio

from minikafka.client.connection import Connection, open_connection
from minikafka.clock import RunSync
from minikafka.core.controller.topics import INTERNAL_TOPICS  # Kafka's Topic.isInternal
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError
from minikafka.server.config import NodeConfig
from minikafka.server.delete_records import handle_delete_records
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.eventlog import EventLog
from minikafka.server.fetch_serve import handle_fetch, handle_list_offsets
from minikafka.server.listener import Ordering
from minikafka.server.metadata_cache import MetadataCache
from minikafka.server.metrics import Metrics
from minikafka.server.offline_replicas import OfflineReplicas
from minikafka.server.produce import handle_produce
from minikafka.server.producer_ids import ProducerIdManager, controller_block_source
from minikafka.server.replica_manager import ReplicaManager
from minikafka.server.routes import Call, Handler
from minikafka.storage import LogStore
from minikafka.wire.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    OfflineReplica,
    ProduceRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from minikafka.wire.request import R, Request


def internal_creation_refused(name: str) -> CreatableTopicResult:
    """A client's CreateTopics of an internal topic, answered as Kafka's ControllerApis answers
    creating its own (INVALID_REQUEST, "Creation of internal topic ... is prohibited."): a
    client that made `__consumer_offsets` with its own partition count would move every
    group's coordinator; only the group coordinator creates it (`internal=True`)."""
    return CreatableTopicResult(
        name=name,
        error_code=ErrorCode.INVALID_REQUEST,
        error_message=f"Creation of internal topic {name} is prohibited.",
    )


def forward_timeout_s(timeout_ms: int) -> float:
    """How long to wait for the controller's answer to a forwarded admin request: its own
    timeout (Kafka's: a timeout <= 0 asks for no wait, not for an error, found by fuzzing) and 5 s to travel."""
    return max(timeout_ms, 0) / 1000 + 5


# The admin requests forwarded to the controller as they are, and the response that carries a
# top-level error code when the controller cannot be reached.
_FORWARDED: dict[type, type] = {
    IncrementalAlterConfigsRequest: IncrementalAlterConfigsResponse,
    DescribeConfigsRequest: DescribeConfigsResponse,
    AlterPartitionReassignmentsRequest: AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest: ListPartitionReassignmentsResponse,
}


class ControllerLink:
    def __init__(
        self,
        config: NodeConfig,
        events: EventLog,
        *,
        port: int,
        offline: OfflineReplicas,
        kafka_endpoint: tuple[str, int] | None = None,
        connect: Callable[..., AbstractAsyncContextManager[Connection]] = open_connection,
        incarnation_id: str | None = None,
    ) -> None:
        self.config = config
        self.events = events
        self.port = port  # our advertised port
        self.kafka_endpoint = kafka_endpoint  # our Kafka-protocol listener, advertised too
        # New at every start, so the controller can tell this run of the broker from the last.
        self.incarnation_id = uuid.uuid4().hex if incarnation_id is None else incarnation_id
        self.connect = connect  # open_connection's signature (server/edges.py)
        self.broker_epoch = -1
        self.registered = trio.Event()
        self._epoch_changed = trio.Event()
        self._conn: Connection | None = None
        self.offline = offline  # reported in every heartbeat

    async def request(self, body: Request[R], *, timeout_s: float = 30.0) -> R:
        conn = self._conn
        if conn is None or conn.broken:
            raise BrokerError(ErrorCode.NETWORK_EXCEPTION, "no connection to the controller")
        return await conn.request(body, timeout_s=timeout_s)

    async def run(self) -> None:
        c = self.config
        backoff_s = min(c.broker_heartbeat_interval_ms, 1000) / 1000
        host, port = c.route(c.controller_host, c.controller_port)  # maybe via the fault proxy
        while True:
            try:
                async with self.connect(
                    host, port, client_id=f"broker-{c.node_id}", credential=c.credential
                ) as conn:
                    self._conn = conn
                    while True:
                        await self._register(conn)
                        await self._heartbeat_until_lost(conn)
            except MiniKafkaError as exc:
                self._conn = None
                refused = (
                    isinstance(exc, BrokerError)
                    and exc.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                # Refused: another cluster's controller on that port, or the wrong secret. Say so
                # plainly, never register, and keep trying (the operator may fix the files).
                event = "controller_refused_membership" if refused else "controller_unreachable"
                self.events.emit(event, error=str(exc))
                await trio.sleep(backoff_s)

    async def _register(self, conn: Connection) -> None:
        c = self.config
        resp = await conn.request(
            BrokerRegistrationRequest(
                broker_id=c.node_id,
                incarnation_id=self.incarnation_id,
                host=c.host,
                port=self.port,
                kafka_host=self.kafka_endpoint[0] if self.kafka_endpoint else "",
                kafka_port=self.kafka_endpoint[1] if self.kafka_endpoint else -1,
            ),
            timeout_s=30,
        )
        if resp.error_code != ErrorCode.NONE:
            raise BrokerError(resp.error_code, "broker registration refused")
        self.broker_epoch = resp.broker_epoch
        self.events.emit(
            "registered", broker_epoch=resp.broker_epoch, incarnation_id=self.incarnation_id
        )
        self.registered.set()
        self._epoch_changed.set()
        self._epoch_changed = trio.Event()

    async def wait_for_epoch(self, epoch: int, timeout_s: float) -> None:
        """The controller may push LeaderAndIsr for our new epoch before its registration answer
        reaches us on the other connection: wait a little for that answer."""
        with trio.move_on_after(timeout_s):
            while self.broker_epoch < epoch:
                await self._epoch_changed.wait()

    async def _heartbeat_until_lost(self, conn: Connection) -> None:
        """Heartbeat; return when the controller wants us to register again. A replica going
        offline brings the next heartbeat forward: the controller moves its leadership now."""
        c = self.config
        reported = 0
        while True:
            with trio.move_on_after(c.broker_heartbeat_interval_ms / 1000):
                await self.offline.wait_beyond(reported)
            offline = sorted(self.offline.tps)
            resp = await conn.request(
                BrokerHeartbeatRequest(
                    broker_id=c.node_id,
                    broker_epoch=self.broker_epoch,
                    offline_replicas=[
                        OfflineReplica(topic=tp.topic, partition=tp.partition) for tp in offline
                    ],
                ),
                timeout_s=c.broker_session_timeout_ms / 1000,
            )
            reported = len(offline)
            if resp.error_code in (
                ErrorCode.STALE_BROKER_EPOCH,
                ErrorCode.BROKER_ID_NOT_REGISTERED,
            ):
                self.events.emit("reregistering", error_code=resp.error_code)
                return


class Broker:
    def __init__(
        self,
        *,
        config: NodeConfig,
        rm: ReplicaManager,  # the keyword server/node.py and testing/memory_node.py pass
        link: ControllerLink,
        cache: MetadataCache,
        events: EventLog,
    ) -> None:
        self.config = config
        self.replica_manager = rm
        self.link = link
        self.cache = cache
        self.events = events
        self.dynamic = rm.dynamic  # one live config for the broker and its replicas
        self.controller_epoch = -1
        # InitProducerId (KIP-98) from blocks the controller allocates (KIP-730).
        self.producer_ids = ProducerIdManager(controller_block_source(link, config.node_id))
        # What the broker serves (server/routes.py): client data APIs, the controller's
        # requests to its brokers, and the admin APIs it forwards to the controller.
        self.routes: dict[type, Handler] = {
            ProduceRequest: self._produce,
            FetchRequest: self._fetch,
            ListOffsetsRequest: self._list_offsets,
            DeleteRecordsRequest: self._delete_records,
            MetadataRequest: self._metadata,
            LeaderAndIsrRequest: self._leader_and_isr,
            UpdateMetadataRequest: self._update_metadata,
            StopReplicaRequest: self._stop_replica,
            CreateTopicsRequest: self._create_topics,
            DeleteTopicsRequest: self._to_controller,
            CreatePartitionsRequest: self._to_controller,
            InitProducerIdRequest: self._init_producer_id,
            **dict.fromkeys(_FORWARDED, self._forward),
        }

    def _stale_controller(self, epoch: int) -> bool:
        """Whether `epoch` is older than the newest controller epoch accepted. Only a check: the
        epoch is remembered by `_accept_controller`, after every other check passed."""
        return epoch < self.controller_epoch

    def _accept_controller(self, epoch: int) -> None:
        self.controller_epoch = max(self.controller_epoch, epoch)

    async def _refused(self, controller_epoch: int, broker_epoch: int) -> ErrorCode | None:
        """Why a controller's LeaderAndIsr or StopReplica is refused (an older controller, or
        meant for an older incarnation of this broker), or None, its controller epoch then
        accepted. A request may overtake this broker's registration answer: it waits up to 5 s
        for `broker_epoch` to be known."""
        if self._stale_controller(controller_epoch):
            return ErrorCode.STALE_CONTROLLER_EPOCH
        await self.link.wait_for_epoch(broker_epoch, timeout_s=5)
        if self._stale_controller(controller_epoch):  # a newer one came meanwhile
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch != self.link.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        self._accept_controller(controller_epoch)
        return None

    async def _create_topics(self, body: CreateTopicsRequest, call: Call) -> object:
        """A client's CreateTopics: internal names refused here, the others created; the
        broker's own (`call.internal`: the group coordinator's `__consumer_offsets`) goes to
        the controller as it is."""
        if call.internal:
            return await self._to_controller(body, call)
        refused = {t.name for t in body.topics if t.name in INTERNAL_TOPICS}
        if not refused:
            return await self.link.request(body, timeout_s=forward_timeout_s(body.timeout_ms))
        rest = [t for t in body.topics if t.name not in refused]
        created: dict[str, CreatableTopicResult] = {}
        if rest:
            answer = await self.link.request(
                replace(body, topics=rest), timeout_s=forward_timeout_s(body.timeout_ms)
            )
            if not isinstance(answer, CreateTopicsResponse):
                return answer
            created = {r.name: r for r in answer.topics}
        return CreateTopicsResponse(
            topics=[
                internal_creation_refused(t.name) if t.name in refused else created[t.name]
                for t in body.topics
            ]
        )

    async def dispatch(
        self,
        body: object,
        *,
        client_id: str = "",
        internal: bool = False,
        order: Ordering | None = None,
    ) -> object:
        """The response to a broker API request (for Produce and Fetch a listener `Reply`, which
        carries the client-quota throttle), or NotImplemented if this is not one (server/routes.py
        `Call` names the keywords)."""
        handler = self.routes.get(type(body))
        if handler is None:
            return NotImplemented
        return await handler(body, Call(client_id=client_id, internal=internal, order=order))

    async def _produce(self, body: ProduceRequest, call: Call) -> object:
        return await handle_produce(
            self.replica_manager, body, self.cache.topics, call.client_id, order=call.order
        )

    async def _fetch(self, body: FetchRequest, call: Call) -> object:
        return await handle_fetch(self.replica_manager, body, self.cache.topics, call.client_id)

    async def _list_offsets(self, body: ListOffsetsRequest, call: Call) -> object:
        return await handle_list_offsets(self.replica_manager, body, self.cache.topics)

    async def _delete_records(self, body: DeleteRecordsRequest, call: Call) -> object:
        rm = self.replica_manager
        return await handle_delete_records(
            rm, body, self.cache.topics, alive=lambda: self.cache.brokers, log_config=rm.log_config
        )

    async def _metadata(self, body: MetadataRequest, call: Call) -> object:
        return self.cache.response(body.topics)

    async def _update_metadata(
        self, body: UpdateMetadataRequest, call: Call
    ) -> UpdateMetadataResponse:
        if self._stale_controller(body.controller_epoch):
            return UpdateMetadataResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
        self._accept_controller(body.controller_epoch)
        self.cache.controller_id = body.controller_id
        self.cache.update(
            brokers=body.brokers,
            partitions=body.partitions,
            replace=body.replace,
            deleted_topics=body.deleted_topics,
        )
        self.replica_manager.apply_metadata(body.partitions)
        self._apply_configs(body)
        return UpdateMetadataResponse(error_code=ErrorCode.NONE)

    async def _stop_replica(self, body: StopReplicaRequest, call: Call) -> StopReplicaResponse:
        if code := await self._refused(body.controller_epoch, body.broker_epoch):
            return StopReplicaResponse(error_code=code)
        return StopReplicaResponse(
            error_code=ErrorCode.NONE,
            partitions=await self.replica_manager.apply_stop_replica(body.partitions),
        )

    async def _to_controller(
        self, body: CreateTopicsRequest | DeleteTopicsRequest | CreatePartitionsRequest, call: Call
    ) -> object:
        return await self.link.request(body, timeout_s=forward_timeout_s(body.timeout_ms))

    async def _init_producer_id(self, body: InitProducerIdRequest, call: Call) -> object:
        return await self.producer_ids.handle(body)

    async def _forward(self, body: object, call: Call) -> object:
        """Forward an admin request to the controller; if it cannot be reached, say so with a
        retriable top-level error code instead of dropping the client's connection."""
        response_type = _FORWARDED[type(body)]
        try:
            return await self.link.request(body, timeout_s=30)
        except BrokerError as exc:
            return response_type(error_code=exc.code)
        except MiniKafkaError:
            return response_type(error_code=ErrorCode.NETWORK_EXCEPTION)

    def _apply_configs(self, body: UpdateMetadataRequest) -> None:
        if body.configs_version < 0:
            return  # this UpdateMetadata carries no configs
        if self.dynamic.apply(body.configs, body.configs_version):
            self.events.emit(
                "configs_applied", version=body.configs_version, entities=len(body.configs)
            )

    async def _leader_and_isr(self, body: LeaderAndIsrRequest, call: Call) -> LeaderAndIsrResponse:
        if code := await self._refused(body.controller_epoch, body.broker_epoch):
            return LeaderAndIsrResponse(error_code=code)
        self.cache.controller_id = body.controller_id
        self.cache.update(brokers=None, partitions=body.partitions)
        for b in body.live_leaders:
            self.cache.brokers.setdefault(b.node_id, b)
        errors = await self.replica_manager.apply_leader_and_isr(body.partitions, body.live_leaders)
        return LeaderAndIsrResponse(error_code=ErrorCode.NONE, partitions=errors)


def build_broker(
    *,
    config: NodeConfig,
    store: LogStore,
    events: EventLog,
    metrics: Metrics,
    link: ControllerLink,
    dynamic: DynamicConfigs,
    offline: OfflineReplicas,
    rng: random.Random,
    connect: Callable[..., AbstractAsyncContextManager[Connection]] = open_connection,
    run_sync: RunSync = trio.to_thread.run_sync,
) -> Broker:
    """A broker's parts, wired by construction: the one place that does it, for the real node
    (server/node.py) and the in-memory test node (testing/memory_node.py). Run them with
    `broker.replica_manager.run` (the writer, the fetchers, the ISR tasks) and the link's own task."""
    rm = ReplicaManager(
        config=config,
        store=store,
        events=events,
        metrics=metrics,
        controller=link,
        dynamic=dynamic,
        offline=offline,
        rng=rng,
        connect=connect,
        run_sync=run_sync,
    )
    return Broker(config=config, rm=rm, link=link, cache=MetadataCache(), events=events)
