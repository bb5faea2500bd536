"""In-process brokers wired on memory streams, for shell tests under Trio's MockClock.

- `MemoryBroker`: the broker pieces of one node (LogStore in a directory, LogWriter,
  ReplicaFetcherManager, ReplicaManager) with a `FakeControllerLink` in place of the controller,
  and a dispatcher for Produce, Fetch, ListOffsets and InitProducerId (ids from blocks of its
  own, `node_id * 10**9` on, in place of the controller's KIP-730 blocks). Roles come from `apply()` with
  PartitionState values, as a controller's LeaderAndIsr would set them.
- `MemoryNetwork`: a `connect` factory with `open_connection`'s signature that reaches a broker
  by its advertised (host, port) over `trio.testing.memory_stream_pair`, each connection served
  by the real `serve_connection`; so replica fetchers replicate between in-process brokers
  exactly as over TCP. `cut()`/`heal()` make a broker unreachable.
- Cluster membership: a `MemoryNetwork` is one cluster with a generated id and
  secret. Every route is served behind a `ClusterGate` (the broker's own, logging to its event
  log), and a MemoryBroker on the network takes the network's identity when its config has none,
  so its fetchers prove membership as a real node's do. `credential(node_id)` gives a test the
  identity of a node of the cluster; a connection opened without one is a client's.
- Control requests: a MemoryBroker serves LeaderAndIsr, UpdateMetadata and StopReplica through
  the real `Broker` dispatch (server/broker.py) with its FakeControllerLink as the link.
- Dynamic configs: each MemoryBroker holds a `DynamicConfigs` wired as server/node.py wires a
  node's (the replica manager and the fetchers read it; every change re-bounds the replication
  sensors, keeping their samples). `set_configs(...)` plays the controller's UpdateMetadata push:
  the whole snapshot, validated and normalised as the controller would, with a newer version.
- `wait_until`: poll a condition on the (mock) clock; `run_sync_inline`: what a MemoryBroker
  runs its storage calls with (its `run_sync`), so that they take no simulated time.
- `broker_config(node_id, ...)`: broker N's NodeConfig as the shell tests name it;
  `replicating_config(node_id)` adds QUICK_REPLICATION, replication timings of a test's scale.

Nothing here sleeps for real: with the autojump clock, a replication test covering seconds of
long polls runs in milliseconds.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import trio
import trio.testing

from minikafka.client.connection import Connection, open_connection, running
from minikafka.clock import RunSync, now_ms
from minikafka.common import TopicPartition
from minikafka.core.cluster_auth import ClusterCredential
from minikafka.core.dynamic_config import validate_changes
from minikafka.core.producer_ids import BLOCK_SIZE, ProducerIdBlock
from minikafka.errors import BrokerError, ErrorCode
from minikafka.server.broker import build_broker
from minikafka.server.cluster_gate import ClusterGate
from minikafka.server.config import NodeConfig
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.eventlog import EventLog
from minikafka.server.fetch_serve import handle_fetch, handle_list_offsets
from minikafka.server.listener import Dispatcher, serve_connection
from minikafka.server.local_partition import LocalPartition
from minikafka.server.metrics import Metrics
from minikafka.server.offline_replicas import OfflineReplicas
from minikafka.server.produce import handle_produce
from minikafka.server.producer_ids import ProducerIdManager
from minikafka.server.routes import Call, RouteTable
from minikafka.storage import LogStore, ReadSpec, StoreConfig
from minikafka.wire.codec import RequestHeader
from minikafka.wire.framing import DEFAULT_MAX_FRAME_BYTES
from minikafka.wire.messages import (
    AlterPartitionItemResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerInfo,
    ConfigEntity,
    FetchRequest,
    InitProducerIdRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    PartitionState,
    ProduceRequest,
    StopReplicaRequest,
    TopicPartitionError,
    UpdateMetadataRequest,
)

TEST_STORE = StoreConfig(map_size_bytes=1 << 26, sync=False)
MEMORY_EPOCH_MS = 1_700_000_000_000  # the in-memory brokers' wall clock at Trio time 0


class FakeControllerLink:
    """Records every request; accepts AlterPartition proposals (partition epoch + 1) or, with
    `accept=False`, refuses them with INVALID_UPDATE_VERSION."""

    def __init__(self, *, broker_epoch: int = 1, accept: bool = True) -> None:
        self.broker_epoch = broker_epoch
        self.accept = accept
        self.requests: list[object] = []

    async def wait_for_epoch(self, epoch: int, timeout_s: float) -> None:
        await trio.lowlevel.checkpoint()  # the fake's epoch never changes by itself

    @property
    def alter_partitions(self) -> list[AlterPartitionRequest]:
        return [r for r in self.requests if isinstance(r, AlterPartitionRequest)]

    async def request(self, body: object, *, timeout_s: float) -> object:
        self.requests.append(body)
        if not isinstance(body, AlterPartitionRequest):
            raise BrokerError(ErrorCode.NETWORK_EXCEPTION, f"fake link: {type(body).__name__}")
        answers = []
        for item in body.partitions:
            if self.accept:
                answers.append(
                    AlterPartitionItemResponse(
                        topic=item.topic,
                        partition=item.partition,
                        error_code=ErrorCode.NONE,
                        leader=body.broker_id,
                        leader_epoch=item.leader_epoch,
                        isr=list(item.new_isr),
                        partition_epoch=item.partition_epoch + 1,
                    )
                )
            else:
                answers.append(
                    AlterPartitionItemResponse(
                        topic=item.topic,
                        partition=item.partition,
                        error_code=ErrorCode.INVALID_UPDATE_VERSION,
                    )
                )
        return AlterPartitionResponse(error_code=ErrorCode.NONE, partitions=answers)


class MemoryNetwork:
    """Routes `connect(host, port, ...)` to in-process brokers over memory streams."""

    def __init__(self, *, cluster_id: str = "memory-cluster", secret: bytes | None = None) -> None:
        self.routes: dict[tuple[str, int], tuple[Dispatcher, ClusterGate]] = {}
        self.down: set[tuple[str, int]] = set()
        self.events = EventLog(None, node_id=-1)  # the serving side's bad_request etc.
        self.connections = 0
        self.cluster_id = cluster_id
        self.secret = secrets.token_hex(32).encode() if secret is None else secret

    def credential(self, node_id: int) -> ClusterCredential:
        """The identity of node `node_id` of this network's cluster."""
        return ClusterCredential(cluster_id=self.cluster_id, node_id=node_id, secret=self.secret)

    def gate(self, events: EventLog | None = None) -> ClusterGate:
        """A door to this cluster's control plane, logging refusals to `events`."""
        return ClusterGate(
            cluster_id=self.cluster_id, secret=self.secret, events=events or self.events
        )

    def add(
        self, address: tuple[str, int], dispatch: Dispatcher, gate: ClusterGate | None = None
    ) -> None:
        self.routes[address] = (dispatch, gate if gate is not None else self.gate())

    def cut(self, address: tuple[str, int]) -> None:
        """New connections to `address` fail (existing ones are not touched)."""
        self.down.add(address)

    def heal(self, address: tuple[str, int]) -> None:
        self.down.discard(address)

    @asynccontextmanager
    async def connect(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        connect_timeout_s: float = 10.0,
        credential: ClusterCredential | None = None,
    ) -> AsyncIterator[Connection]:
        label = f"{host}:{port}"
        route = self.routes.get((host, port))
        if route is None or (host, port) in self.down:
            await trio.lowlevel.checkpoint()
            raise BrokerError(ErrorCode.NETWORK_EXCEPTION, f"connection to {label} refused")
        dispatch, gate = route
        self.connections += 1
        client_stream, server_stream = trio.testing.memory_stream_pair()
        conn = Connection(
            client_stream, client_id=client_id, max_frame_bytes=max_frame_bytes, label=label
        )
        serve = partial(
            serve_connection,
            server_stream,
            dispatch,
            max_frame_bytes=max_frame_bytes,
            max_in_flight=64,
            events=self.events,
            gate=gate,
        )
        async with running(conn, credential, serve):
            yield conn

    async def hold(
        self,
        address: tuple[str, int],
        client_id: str,
        *,
        credential: ClusterCredential | None = None,
        task_status: trio.TaskStatus[
            tuple[Connection, trio.CancelScope]
        ] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """`hold_connection` over this network (for a ControllerService's broker channels)."""
        with trio.CancelScope() as scope:
            async with self.connect(*address, client_id=client_id, credential=credential) as conn:
                task_status.started((conn, scope))
                await trio.sleep_forever()


class MemoryBroker:
    """One broker's replication pieces, in process. `async with broker.running(): ...`"""

    def __init__(
        self,
        config: NodeConfig,
        data_dir: Path,
        *,
        network: MemoryNetwork | None = None,
        controller: FakeControllerLink | None = None,
        seed: int = 0,
        store_config: StoreConfig = TEST_STORE,
        run_sync: RunSync | None = None,
    ) -> None:
        run_sync = run_sync if run_sync is not None else run_sync_inline
        if network is not None and config.credential is None:
            # One cluster per network: a node without an identity takes the network's.
            config = replace(config, cluster_id=network.cluster_id, cluster_secret=network.secret)
        self.config = config
        self.events = EventLog(None, node_id=config.node_id)
        self.metrics = Metrics()
        # Segments timed by Trio's clock from a fixed epoch: retention.ms under MockClock.
        self.store = LogStore(data_dir, store_config, clock=lambda: MEMORY_EPOCH_MS + now_ms())
        self.controller = controller if controller is not None else FakeControllerLink()
        self.network = network
        self.topics: set[str] = set()
        self.dynamic = DynamicConfigs()
        # Wired as server/node.py wires a node (server/broker.py `build_broker`), with storage
        # calls inline by default (`run_sync_inline`: no worker thread for MockClock to leap over).
        self.broker = build_broker(
            config=config,
            store=self.store,
            events=self.events,
            metrics=self.metrics,
            link=self.controller,  # type: ignore[arg-type]
            dynamic=self.dynamic,
            offline=OfflineReplicas(),
            rng=random.Random(f"{seed}/{config.node_id}"),
            connect=network.connect if network is not None else open_connection,
            run_sync=run_sync,
        )
        self.replica_manager = self.broker.replica_manager
        self.writer = self.replica_manager.writer
        self.fetchers = self.replica_manager.fetchers
        self._blocks = 0
        self.producer_ids = ProducerIdManager(self._next_block)
        # The broker's handlers, over this node's own topic set, producer ids and
        # LeaderAndIsr (which also learns the topics); no admin API (server/routes.py).
        self.routes = RouteTable(
            {
                ProduceRequest: self._produce,
                FetchRequest: self._fetch,
                ListOffsetsRequest: self._list_offsets,
                LeaderAndIsrRequest: self._leader_and_isr,
                InitProducerIdRequest: self._init_producer_id,
            },
            {
                kind: self.broker.routes[kind]
                for kind in (UpdateMetadataRequest, StopReplicaRequest)
            },
        )
        if network is not None:
            network.add(self.address, self.dispatch, network.gate(self.events))

    async def _next_block(self) -> ProducerIdBlock:
        await trio.lowlevel.checkpoint()
        self._blocks += 1
        first = self.config.node_id * 10**9 + (self._blocks - 1) * BLOCK_SIZE
        return ProducerIdBlock(first_id=first, size=BLOCK_SIZE)

    @property
    def address(self) -> tuple[str, int]:
        return (self.config.host, self.config.port)

    @property
    def info(self) -> BrokerInfo:
        return BrokerInfo(node_id=self.config.node_id, host=self.config.host, port=self.config.port)

    @asynccontextmanager
    async def running(
        self, *, isr_expiration: bool = False, log_retention: bool = False
    ) -> AsyncIterator[MemoryBroker]:
        """Run the writer, the fetcher manager and the AlterPartition sender (and, if asked, the
        ISR expiration loop and the log retention task) until the block ends; then stop them
        and close the store."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    partial(
                        self.replica_manager.run,
                        isr_expiration=isr_expiration,
                        hw_checkpoints=False,
                        log_retention=log_retention,
                    )
                )
                yield self
                nursery.cancel_scope.cancel()
        finally:
            self.store.close()

    def set_configs(
        self,
        entities: Mapping[tuple[str, str], Mapping[str, str]] | Iterable[ConfigEntity],
        *,
        version: int | None = None,
    ) -> bool:
        """Push a whole dynamic-config snapshot, as the controller's UpdateMetadata does.

        `entities` is {(entity_type, entity_name): {name: value}} (entity name "" is the
        default broker or client) or ConfigEntity values. Each entity is validated and
        normalised as the controller would (ConfigError on a typo, nothing applied). The
        version defaults to one above the held one; True if the snapshot was taken (an older
        or equal version is ignored, as a broker ignores a stale push).
        """
        if isinstance(entities, Mapping):
            items = [(t, n, dict(cfg)) for (t, n), cfg in entities.items()]
        else:
            items = [(e.entity_type, e.entity_name, dict(e.configs)) for e in entities]
        wire = []
        for entity_type, entity_name, configs in items:
            name, values, _deletes = validate_changes(entity_type, entity_name, configs, ())
            wire.append(ConfigEntity(entity_type=entity_type, entity_name=name, configs=values))
        return self.dynamic.apply(wire, self.dynamic.version + 1 if version is None else version)

    async def dispatch(self, header: RequestHeader, body: object) -> object | None:
        handler = self.routes.handler(body)
        if handler is None:
            raise BrokerError(ErrorCode.INVALID_REQUEST, f"not served here: {type(body).__name__}")
        # As Node.dispatch: client quotas are per client id.
        return await handler(body, Call(client_id=header.client_id or ""))

    async def _produce(self, body: ProduceRequest, call: Call) -> object:
        return await handle_produce(self.replica_manager, body, self.topics, call.client_id)

    async def _fetch(self, body: FetchRequest, call: Call) -> object:
        return await handle_fetch(self.replica_manager, body, self.topics, call.client_id)

    async def _list_offsets(self, body: ListOffsetsRequest, call: Call) -> object:
        return await handle_list_offsets(self.replica_manager, body, self.topics)

    async def _leader_and_isr(self, body: LeaderAndIsrRequest, call: Call) -> object:
        self.topics.update(st.topic for st in body.partitions)
        return await self.broker.routes[LeaderAndIsrRequest](body, call)

    async def _init_producer_id(self, body: InitProducerIdRequest, call: Call) -> object:
        return await self.producer_ids.handle(body)

    async def apply(
        self, states: Sequence[PartitionState], brokers: Sequence[BrokerInfo] = ()
    ) -> list[TopicPartitionError]:
        """What a LeaderAndIsr carrying `states` does (live leaders `brokers`)."""
        self.topics.update(st.topic for st in states)
        return await self.replica_manager.apply_leader_and_isr(states, brokers)

    def partition(self, topic: str, partition: int = 0) -> LocalPartition:
        return self.replica_manager.partitions[TopicPartition(topic, partition)]

    def log_bytes(self, topic: str, partition: int = 0) -> bytes:
        """Every durable batch of the partition from its log start, as stored (for
        byte-for-byte comparisons)."""
        tp = TopicPartition(topic, partition)
        spec = ReadSpec(
            tp=tp,
            fetch_offset=self.store.load_partition(tp).log_start_offset,
            max_offset=1 << 62,
            partition_max_bytes=1 << 30,
        )
        return self.store.read([spec], 1 << 30)[0]


def broker_config(node_id: int, **settings: Any) -> NodeConfig:
    """Broker `node_id` as the shell tests name it on a MemoryNetwork (host `broker-<id>`, port
    9000 + id), with `settings` (NodeConfig's fields) over the defaults."""
    return NodeConfig(node_id=node_id, host=f"broker-{node_id}", port=9000 + node_id, **settings)


# Replication on a test's time scale: a leader holds a follower's fetch 500 ms at most (Kafka's
# default too), a follower fetches again 100 ms after a failed fetch (Kafka: 1 s), and a replica
# 1 s behind leaves the ISR (Kafka: 30 s).
QUICK_REPLICATION: Mapping[str, int] = {
    "replica_lag_time_max_ms": 1000,
    "replica_fetch_wait_max_ms": 500,
    "replica_fetch_backoff_ms": 100,
}


def replicating_config(node_id: int) -> NodeConfig:
    """`broker_config` with QUICK_REPLICATION: a broker of the shell tests that replicate."""
    return broker_config(node_id, **QUICK_REPLICATION)


def with_cluster_identity(config: NodeConfig, *, cluster_id: str = "test-cluster") -> NodeConfig:
    """`config` with a cluster id and a freshly generated secret, for a node run in process
    (a real Node refuses to start without them)."""
    return replace(config, cluster_id=cluster_id, cluster_secret=secrets.token_hex(32).encode())


def partition_state(
    topic: str,
    partition: int = 0,
    *,
    leader: int,
    isr: Sequence[int],
    replicas: Sequence[int] | None = None,
    leader_epoch: int = 1,
    partition_epoch: int = 1,
) -> PartitionState:
    return PartitionState(
        topic=topic,
        partition=partition,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=list(isr),
        partition_epoch=partition_epoch,
        replicas=list(replicas if replicas is not None else isr),
    )


async def run_sync_inline(fn: Callable[..., object], *args: object, **_kwargs: object) -> object:
    """Stand-in for `trio.to_thread.run_sync` in MockClock tests (patch it in with a fixture).

    The autojump clock jumps whenever every task is blocked, and a task waiting for a worker
    thread is blocked: with real threads, simulated time leaps forward by however many timers
    fall due while LMDB works, so timing assertions become flaky. Run inline, each storage call
    takes zero simulated time, deterministically. Like the real one, a call in a cancelled scope
    raises Cancelled before it starts and never once it has started.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    result = fn(*args)
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


async def wait_until(
    condition: Callable[[], bool], *, timeout_s: float = 60.0, poll_s: float = 0.01
) -> None:
    """Poll `condition` every `poll_s` of Trio time; trio.TooSlowError after `timeout_s`."""
    with trio.fail_after(timeout_s):
        while not condition():
            await trio.sleep(poll_s)
