"""One node process: the broker role, the controller role, or both, over one LMDB environment.

Start-up order: lock the data dir (a second node on it exits with one line), open the
environment, start the controller role (if any), listen, start the broker role (load partitions,
fetchers, the ISR loop, register with the controller), and only then write `node.json` in the
data dir, which is how `minikafka cluster up` knows the node is ready. SIGTERM and SIGINT stop
the node cleanly (exit code 0).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from functools import partial
from pathlib import Path

import trio

from minikafka.client.connection import hold_connection
from minikafka.core.connection_quotas import KAFKA as KAFKA_LISTENER
from minikafka.core.connection_quotas import NATIVE as NATIVE_LISTENER
from minikafka.core.connection_quotas import ConnectionQuotas
from minikafka.errors import ErrorCode
from minikafka.kafka.codec import preload_schemas
from minikafka.server.broker import Broker, ControllerLink, build_broker
from minikafka.server.cluster_gate import ClusterGate
from minikafka.server.config import NodeConfig
from minikafka.server.controller_service import ControllerService
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.edges import MACHINE, Edges
from minikafka.server.eventlog import EventLog
from minikafka.server.group_offsets_api import GroupOffsetsApi
from minikafka.server.groups import GroupService
from minikafka.server.jsonl import Rotation
from minikafka.server.kafka_apis import KAFKA_CODEC, KafkaApis, topic_config_defaults
from minikafka.server.listener import Door, Ordering, bound_port, run_listener
from minikafka.server.metrics import Metrics, run_metrics_log
from minikafka.server.offline_replicas import OfflineReplicas
from minikafka.server.offset_for_leader_epoch import handle_offset_for_leader_epoch
from minikafka.server.prometheus import serve_metrics
from minikafka.server.replica_state_log import run_replica_state_log
from minikafka.server.request_memory import RequestMemory
from minikafka.server.routes import Call, RouteTable
from minikafka.storage import LogStore, MetadataStore, StoreConfig, lock_data_dir
from minikafka.wire.codec import RequestHeader
from minikafka.wire.messages import (
    SUPPORTED_VERSIONS,
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)


class Node:
    def __init__(self, config: NodeConfig, *, edges: Edges = MACHINE) -> None:
        # A node answers the control plane only from its cluster's own nodes: without
        # the cluster's id and secret it refuses to start, before touching its data dir.
        config.require_cluster_identity()
        self.config = config
        self.edges = edges  # what it reaches outside itself for (server/edges.py)
        # Before anything else in the data dir: one node per data dir (DataDirInUse otherwise),
        # held until `run` ends or the process dies (minikafka/storage/dir_lock.py).
        self.dir_lock = lock_data_dir(config.data_dir)
        self.metrics = Metrics()
        # Every JSON-lines log of the node rolls over at the same caps (server/jsonl.py).
        self.log_rotation = Rotation(
            max_bytes=config.log_jsonl_max_bytes, max_files=config.log_jsonl_max_files
        )
        self.events = EventLog(
            config.data_dir / "events.jsonl",
            node_id=config.node_id,
            metrics=self.metrics,
            rotation=self.log_rotation,
            wall_clock=edges.wall_clock,
        )
        self.rng = random.Random(f"{config.seed}/{config.node_id}")
        self.gate = ClusterGate(
            cluster_id=config.cluster_id, secret=config.cluster_secret, events=self.events
        )
        store_config = StoreConfig(
            map_size_bytes=config.lmdb_map_size_bytes,
            sync=config.log_sync,
            max_partitions=config.max_broker_partitions,
        )
        # Segments are timed by the node's wall clock (the simulation's in simulated time).
        store_clock = lambda: int(edges.wall_clock() * 1000)  # noqa: E731
        self.store = (
            LogStore(config.data_dir / "lmdb", store_config, clock=store_clock)
            if config.is_broker
            else None
        )
        self.meta_store = (
            MetadataStore(config.data_dir / "lmdb", store_config) if config.is_controller else None
        )
        self.controller: ControllerService | None = None
        self.broker: Broker | None = None
        # Dynamic configs pushed by the controller (fed by the broker role's UpdateMetadata).
        self.dynamic = DynamicConfigs()
        self.port = config.port
        self.metrics_port = -1
        self.groups: GroupService | None = None  # the group coordinator (with a Kafka listener)
        self.group_offsets = GroupOffsetsApi()  # its native APIs, served once it runs
        # The native listener's handlers (server/routes.py): each component's are registered
        # as it starts, the controller's first (it answers the admin APIs on a combined node).
        self.routes = RouteTable({ApiVersionsRequest: _api_versions}, self.group_offsets.routes)
        self.kafka_port = -1  # the Kafka-protocol listener's, once bound (kafka.listen)
        # Both listeners' door: client connection counts and the request memory they share.
        self.quotas = ConnectionQuotas(
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            listener_max_connections={
                name: limit
                for name, limit in (
                    (NATIVE_LISTENER, config.native_max_connections),
                    (KAFKA_LISTENER, config.kafka_max_connections),
                )
                if limit is not None
            },
        )
        self.request_memory = RequestMemory(config.queued_max_request_bytes)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        c = self.config
        self.events.emit("node_starting", roles=list(c.roles), settings=c.settings())
        try:
            async with trio.open_nursery() as nursery:
                if c.is_controller:
                    assert self.meta_store is not None
                    self.controller = ControllerService(
                        config=c,
                        store=self.meta_store,
                        events=self.events,
                        rng=self.rng,
                        hold=partial(hold_connection, connect=self.edges.connect),
                        run_sync=self.edges.run_sync,
                    )
                    await nursery.start(self.controller.run)
                    self.routes.register(self.controller.routes)
                self.port = await nursery.start(self._listen)
                if c.is_broker:
                    await self._start_broker(nursery)
                nursery.start_soon(
                    partial(
                        run_metrics_log,
                        self.metrics,
                        c.data_dir / "metrics.jsonl",
                        node_id=c.node_id,
                        interval_ms=c.metrics_interval_ms,
                        rotation=self.log_rotation,
                        wall_clock=self.edges.wall_clock,
                    )
                )
                if c.metrics_port >= 0:
                    self.metrics_port = await nursery.start(
                        partial(
                            serve_metrics,
                            c.host,
                            c.metrics_port,
                            self.metrics,
                            c.node_id,
                            listen=self.edges.listen,
                        )
                    )
                self._write_node_file()
                self.events.emit(
                    "node_ready", host=c.host, port=self.port, kafka_port=self.kafka_port
                )
                task_status.started(self.port)
        finally:
            self.events.emit("node_stopped")
            if self.store is not None:
                self.store.close()
            if self.meta_store is not None:
                self.meta_store.close()
            self.events.close()
            self.dir_lock.close()  # last: everything in the data dir is closed

    async def _listen(self, *, task_status: trio.TaskStatus[int]) -> None:
        c = self.config
        listeners = await self.edges.listen(c.host, c.port)
        await run_listener(
            c.host,
            c.port,
            self.dispatch,
            max_frame_bytes=c.socket_max_frame_bytes,
            max_in_flight=c.request_max_in_flight,
            events=self.events,
            idle_ms=c.connections_max_idle_ms,
            door=Door(quotas=self.quotas, listener=NATIVE_LISTENER, memory=self.request_memory),
            gate=self.gate,
            listeners=listeners,
            task_status=task_status,
        )

    async def _start_broker(self, nursery: trio.Nursery) -> None:
        c = self.config
        assert self.store is not None
        offline = OfflineReplicas()  # the replicas' registry, reported by the link's heartbeats
        # The Kafka listener is bound first: its port is part of the broker's registration.
        kafka_sockets = None
        if c.kafka_listen is not None:
            kafka_sockets = await self.edges.listen(*c.kafka_listen)
            self.kafka_port = bound_port(kafka_sockets)
        kafka_endpoint = None if kafka_sockets is None else (c.kafka_listen[0], self.kafka_port)
        link = ControllerLink(
            c,
            self.events,
            port=self.port,
            offline=offline,
            kafka_endpoint=kafka_endpoint,
            connect=self.edges.connect,
            incarnation_id=self.edges.token_bytes(16).hex(),
        )
        self.broker = build_broker(
            config=c,
            store=self.store,
            events=self.events,
            metrics=self.metrics,
            link=link,
            dynamic=self.dynamic,
            offline=offline,
            rng=self.rng,
            connect=self.edges.connect,
            run_sync=self.edges.run_sync,
        )
        self.routes.register(self.broker.routes)
        # OffsetForLeaderEpoch (KIP-320) from this broker's replicas, on both listeners.
        self.routes.register({OffsetForLeaderEpochRequest: self._offset_for_leader_epoch})
        rm = self.broker.replica_manager
        await nursery.start(rm.run)
        nursery.start_soon(
            partial(
                run_replica_state_log,
                rm.partitions,
                c.data_dir / "replicas.jsonl",
                node_id=c.node_id,
                interval_ms=c.metrics_interval_ms,
                changes=rm.changes,
                metrics=self.metrics,
                rotation=self.log_rotation,
                wall_clock=self.edges.wall_clock,
            )
        )
        if kafka_sockets is not None:
            # Kafka's clients coordinate their groups here (server/groups.py); minikafka's own
            # clients have no group protocol, so there is no coordinator without this listener.
            group_service = GroupService(
                config=c,
                rm=rm,
                cache=self.broker.cache,
                events=self.events,
                forward=partial(self.broker.dispatch, internal=True),
                member_ids=self.edges.uuid4,
            )
            await nursery.start(group_service.run)
            self.groups = self.group_offsets.svc = group_service
            kafka = KafkaApis(
                cache=self.broker.cache,
                cluster_id=c.cluster_id,
                broker=self._kafka_dispatch,
                groups=group_service,
                topic_defaults=topic_config_defaults(c),
                run_sync=self.edges.run_sync,
            )
            await nursery.start(
                partial(
                    run_listener,
                    c.kafka_listen[0],
                    self.kafka_port,
                    kafka.dispatch,
                    max_frame_bytes=c.socket_max_frame_bytes,
                    # Requests start in order, one at a time, and are answered in order
                    # (KAFKA_CODEC.ordered); a produce lets the next start once it is queued.
                    max_in_flight=c.request_max_in_flight,
                    events=self.events,
                    idle_ms=c.connections_max_idle_ms,
                    door=Door(
                        quotas=self.quotas, listener=KAFKA_LISTENER, memory=self.request_memory
                    ),
                    gate=None,  # nothing of the control plane is served there
                    codec=KAFKA_CODEC,
                    listeners=kafka_sockets,
                )
            )
            # kio's schemas load on first use (minikafka/kafka/codec.py); those of what every
            # client sends first are imported now in a worker thread, not on the event loop
            # by a client's first requests (about 60 ms in all).
            nursery.start_soon(self.edges.run_sync, preload_schemas)
        nursery.start_soon(link.run)
        await link.registered.wait()

    async def _offset_for_leader_epoch(
        self, body: OffsetForLeaderEpochRequest, call: Call
    ) -> OffsetForLeaderEpochResponse:
        assert self.broker is not None
        rm, cache = self.broker.replica_manager, self.broker.cache
        return handle_offset_for_leader_epoch(rm.partitions, body, cache.topics)

    async def _kafka_dispatch(
        self, body: object, *, client_id: str = "", order: Ordering | None = None
    ) -> object:
        """The Kafka listener's native dispatch: the broker's, and OffsetForLeaderEpoch."""
        if isinstance(body, OffsetForLeaderEpochRequest):
            return await self._offset_for_leader_epoch(body, Call(client_id=client_id))
        assert self.broker is not None
        return await self.broker.dispatch(body, client_id=client_id, order=order)

    async def dispatch(self, header: RequestHeader, body: object) -> object | None:
        handler = self.routes.handler(body)
        if handler is None:
            return refusal(body)
        return await handler(body, Call(client_id=header.client_id or ""))

    def _write_node_file(self) -> None:
        c = self.config
        doc = {
            "node_id": c.node_id,
            "roles": list(c.roles),
            "host": c.host,
            "port": self.port,
            "metrics_port": self.metrics_port,
            "kafka_port": self.kafka_port,
            "pid": os.getpid(),
            "started_at": time.strftime(
                "%Y-%m-%dT%H:%M:%S%z", time.localtime(self.edges.wall_clock())
            ),
        }
        tmp = c.data_dir / "node.json.tmp"
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, c.data_dir / "node.json")


async def _api_versions(body: ApiVersionsRequest, call: Call) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        api_keys=[
            ApiVersionRange(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in SUPPORTED_VERSIONS.items()
        ]
    )


def refusal(body: object) -> object:
    """The answer of a node that does not serve this API (e.g. Produce at a controller-only node)."""
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    match body:
        case ProduceRequest():
            return ProduceResponse(
                partitions=[
                    ProducePartitionResponse(topic=p.topic, partition=p.partition, error_code=code)
                    for p in body.partitions
                ]
            )
        case FetchRequest():
            return FetchResponse(
                partitions=[
                    FetchPartitionResponse(topic=p.topic, partition=p.partition, error_code=code)
                    for p in body.partitions
                ]
            )
        case OffsetForLeaderEpochRequest():
            return OffsetForLeaderEpochResponse(
                partitions=[
                    OffsetForLeaderEpochPartitionResponse(
                        topic=p.topic, partition=p.partition, error_code=code
                    )
                    for p in body.partitions
                ]
            )
        case ListOffsetsRequest():
            return ListOffsetsResponse(
                partitions=[
                    ListOffsetsPartitionResponse(
                        topic=p.topic, partition=p.partition, error_code=code
                    )
                    for p in body.partitions
                ]
            )
    from minikafka.wire.messages import API, API_KEY_OF

    response_type = API[API_KEY_OF[type(body)]][1]
    return response_type(error_code=ErrorCode.NOT_CONTROLLER)


SWITCH_INTERVAL_S = 0.0005


async def serve_until_signalled(config: NodeConfig) -> None:
    """Run a node until SIGTERM or SIGINT."""
    # The node's worker threads run Python too (LMDB calls, large Kafka requests' translation,
    # compressed batches' validation), and the event loop needs the GIL for every step it takes:
    # with CPython's default 5 ms switch interval each step may wait 5 ms behind such a thread
    # (the convoy effect). benchmarks/front_door_bench.py, an acks=all producer beside bombs,
    # 2026-11-27: p50 122.8 ms, max 1,757 ms at 5 ms; p50 5.4-10.6 ms, max 415 ms at 0.5 ms.
    # Produce throughput (cluster_bench, 2M records) was the same within noise (71.4 vs 65.9 MB/s).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    node = Node(config)
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            # start_soon, not start: a broker still waiting to register (controller down, or
            # refused as another cluster's) must stop on SIGTERM too, not only once it is ready.
            nursery.start_soon(node.run)
            async for signum in signals:
                node.events.emit("signal", signal=signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def node_data_dir(path: str) -> Path:
    return Path(path).expanduser().resolve()
