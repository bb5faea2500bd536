"""A cluster of real `Node`s, and its fault proxy, in one Trio run on a `SimNetwork`.

The layout is a `ClusterSpec`, planned as `minikafka cluster up` plans one (`plan_sim_cluster`:
`plan_cluster` with ports counted from `SPEC_FIRST_PORT` instead of the machine's free ones),
and each node starts with the settings and routes a local cluster's node gets
(cluster/processes.py `node_settings`, cluster/spec.py `node_routes`). Each node is
`server/node.py`'s `Node`, with the simulation's `Edges` in place of the machine's:

- connections and listeners: the SimNetwork (sim/network.py);
- blocking LMDB calls: run at once in the caller's task (`run_sync_now`), so they take no
  simulated time and no worker thread's timing enters the run;
- the wall clock of its logs: `EPOCH_S` plus Trio's clock, the same in every run;
- incarnation ids, the cluster's id and secret: bytes drawn from the seed.

With `fault_proxy`, the spec's proxy is the real `FaultProxy` (faults/proxy.py) on the same
network, and every node's connections to its peers go to its link ports as in a local cluster;
there the network joins them to their targets under the links' faults without the proxy's pump
tasks (`SimNetwork.splice`). `fault_proxy()` is the client of its control port
(faults/control.py), as `LocalCluster.fault_proxy()` is over TCP.

The disk is real: LMDB in `base_dir/node-N`, without fsync (`SIM_NODE_CONFIGS`). `kill(n)`
cancels the node's task (its memory is gone; what LMDB committed stays) and `restart(n)` builds
a new Node on the same data dir. `power_loss(n)` is a crash of the node's machine: killed, and
its LMDB set back to what its disk had made durable; `disk_full(n)` makes every write to its
LMDB fail with ENOSPC, `fail_write(n)` the next one with EIO. With `writeback_s`, every node
that does not sync on commit (`log.sync=false`) has its LMDB copied that often, as the
kernel's flusher writes dirty pages back (`dirty_writeback_centisecs`, 5 s by default); that
copy is what a power loss leaves. A node that syncs on commit loses nothing committed.

For the run to repeat from its seed it must be under
`trio.run(..., clock=MockClock(autojump_threshold=0))` and `pinned_scheduler(seed)`
(sim/determinism.py).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import trio

from minikafka.cluster.processes import node_settings
from minikafka.cluster.spec import ClusterSpec, NodeSpec, node_routes, plan_cluster, proxy_config
from minikafka.errors import ClusterError
from minikafka.faults.control import FaultProxyClient
from minikafka.faults.proxy import FaultProxy
from minikafka.server.config import NodeConfig
from minikafka.server.edges import Edges
from minikafka.server.node import Node
from minikafka.sim.network import SimNetwork
from minikafka.storage.env import EnvLease

T = TypeVar("T")

EPOCH_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where the simulated wall clock starts
SPEC_FIRST_PORT = 40000  # the spec's ports; port-0 binds get SimNetwork's own range
# What a simulated node runs with unless its spec says otherwise. log.sync=false: LMDB commits
# without fsync. A simulated kill is a process crash, whose committed writes the OS keeps with
# or without it, so fsync buys nothing here and cost a fifth of the wall time of a mixed-faults
# run (20.7 s against 16.3 s for 27.3 simulated s). A spec with power-loss faults sets log.sync
# itself (experiment/spec.py), since then it decides what survives.
SIM_NODE_CONFIGS = {"log.sync": "false"}
WRITEBACK_S = 5.0  # Linux's flusher period (dirty_writeback_centisecs = 500)
DURABLE_DIR = "lmdb.durable"  # in a node's data dir: its LMDB as of the last writeback


def sim_ports(n: int, _host: str) -> list[int]:
    return list(range(SPEC_FIRST_PORT, SPEC_FIRST_PORT + n))


def plan_sim_cluster(
    base_dir: Path,
    *,
    brokers: int,
    seed: int,
    node_configs: Mapping[str, str] | None = None,
    fault_proxy: bool = False,
) -> ClusterSpec:
    """A controller and `brokers` brokers laid out as `cluster up` would, on the simulation's
    ports, with `SIM_NODE_CONFIGS` under `node_configs`."""
    return plan_cluster(
        base_dir=base_dir,
        brokers=brokers,
        seed=seed,
        node_configs={**SIM_NODE_CONFIGS, **(node_configs or {})},
        fault_proxy=fault_proxy,
        ports=sim_ports,
    )


def wall_clock() -> float:
    """The simulation's wall clock: `EPOCH_S` plus Trio's clock (`EPOCH_S` outside a run)."""
    try:
        return EPOCH_S + trio.current_time()
    except RuntimeError:
        return EPOCH_S


async def run_sync_now(fn: Callable[..., T], *args: object, **_kwargs: object) -> T:
    """A node's blocking call (LMDB), run at once in its task: no simulated time passes and
    no other task runs meanwhile, as if the disk answered instantly. Unlike a worker thread (or
    the MockClock tests' `run_sync_inline`) it does not yield: a fetch that reads its partitions
    goes on to answer in the same step, which takes a quarter of the simulation's scheduling
    away. A call in a cancelled scope still raises Cancelled before it starts."""
    await trio.lowlevel.checkpoint_if_cancelled()
    return fn(*args)


@dataclass(slots=True)
class SimNode:
    spec: NodeSpec
    config: NodeConfig
    edges: Edges
    node: Node | None = None
    scope: trio.CancelScope | None = None
    stopped: trio.Event | None = None


class SimCluster:
    """`spec`'s nodes on `network`. Start them with `await start(nursery)`."""

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        network: SimNetwork | None = None,
        writeback_s: float | None = None,
    ) -> None:
        self.spec = spec
        self.writeback_s = writeback_s
        self.network = network or SimNetwork()
        identity = random.Random(f"{spec.seed}/cluster-identity")
        cluster_id = f"sim-{identity.getrandbits(64):016x}"
        secret = identity.randbytes(32).hex().encode()
        controller = spec.controller
        self.nodes: dict[int, SimNode] = {}
        for node in spec.nodes:
            config = NodeConfig(
                node_id=node.node_id,
                roles=node.roles,
                host=node.host,
                port=node.port,
                controller_host=controller.host,
                controller_port=controller.port,
                data_dir=node.data_dir,
                seed=spec.seed,
                routes=node_routes(spec, node),
            ).with_settings(node_settings(spec, node))
            config = replace(config, cluster_id=cluster_id, cluster_secret=secret)
            tokens = random.Random(f"{spec.seed}/tokens/{node.node_id}")
            connect, listen = self.network.edges_of(node.node_id)
            edges = Edges(
                connect=connect,
                listen=listen,
                run_sync=run_sync_now,
                wall_clock=wall_clock,
                token_bytes=tokens.randbytes,
            )
            self.nodes[node.node_id] = SimNode(spec=node, config=config, edges=edges)
        self.proxy = (
            FaultProxy(
                proxy_config(spec), dial=self.network.open_stream, listen=self.network.listen
            )
            if spec.fault_proxy is not None
            else None
        )
        if self.proxy is not None:
            self.network.splice(self.proxy)
        self._nursery: trio.Nursery | None = None

    def fault_proxy(self) -> FaultProxyClient:
        """The client of the proxy's control port, over the simulated network (as
        `LocalCluster.fault_proxy()` over TCP)."""
        proxy = self.spec.fault_proxy
        if proxy is None:
            raise ClusterError(f"the simulated cluster {self.spec.name} has no fault proxy")
        return FaultProxyClient(
            proxy.host, proxy.control_port, open_stream=self.network.open_stream
        )

    def bootstrap(self) -> list[tuple[str, int]]:
        return [(n.host, n.port) for n in self.spec.brokers]

    async def start(self, nursery: trio.Nursery) -> None:
        """Start the proxy, then every node, controller first, each once it is ready."""
        self._nursery = nursery
        if self.proxy is not None:
            await nursery.start(self.proxy.run)
        for node in [self.spec.controller, *self.spec.brokers]:
            await self.restart(node.node_id)
        if self.writeback_s is not None:
            nursery.start_soon(self._writeback, self.writeback_s)

    async def _writeback(self, period_s: float) -> None:
        while True:
            await trio.sleep(period_s)
            for sim in self.nodes.values():
                if sim.scope is not None and not sim.config.log_sync:
                    _make_durable(sim.spec.data_dir)

    async def restart(self, node_id: int) -> None:
        """Stop node `node_id` if it runs, start it again on its data dir and wait until it is
        ready (a paused node is thawed first)."""
        assert self._nursery is not None, "start() the cluster first"
        sim = self._node(node_id)
        if sim.scope is not None:
            await self.kill(node_id)
        self.network.thaw(node_id)
        await self._nursery.start(self._run, sim)

    async def _run(self, sim: SimNode, *, task_status: trio.TaskStatus[None]) -> None:
        sim.stopped = trio.Event()
        try:
            with trio.CancelScope() as scope:
                sim.scope = scope
                sim.node = Node(sim.config, edges=sim.edges)
                await sim.node.run(task_status=task_status)
        finally:
            sim.scope = None
            sim.node = None
            sim.stopped.set()

    def _node(self, node_id: int) -> SimNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ClusterError(f"the simulated cluster has no node {node_id}") from None

    def is_running(self, node_id: int) -> bool:
        return self._node(node_id).scope is not None

    def _running(self, node_id: int) -> SimNode:
        sim = self._node(node_id)
        if sim.scope is None:
            raise ClusterError(f"node {node_id} is not running")
        return sim

    async def kill(self, node_id: int) -> None:
        """Stop node `node_id` at once (its task cancelled, its data dir kept)."""
        sim = self._running(node_id)
        assert sim.scope is not None and sim.stopped is not None
        sim.scope.cancel()
        await sim.stopped.wait()
        self.network.thaw(node_id)

    async def power_loss(self, node_id: int) -> None:
        """Node `node_id`'s machine loses power: the node is killed (if it runs) and its LMDB is
        what its disk had made durable: all of it if it syncs on commit (log.sync=true), else
        the last writeback's copy (before the first one: nothing). Restart it to bring it
        back."""
        sim = self._node(node_id)
        if not sim.config.log_sync and self.writeback_s is None:
            raise ClusterError(
                f"node {node_id} does not sync on commit and the cluster has no writeback: "
                "what a power loss leaves is unknown (SimCluster(writeback_s=...))"
            )
        if sim.scope is not None:
            await self.kill(node_id)
        if sim.config.log_sync:
            return
        data = sim.spec.data_dir
        shutil.rmtree(data / "lmdb", ignore_errors=True)
        if (data / DURABLE_DIR).is_dir():
            shutil.copytree(data / DURABLE_DIR, data / "lmdb")

    def disk_full(self, node_id: int, full: bool = True) -> None:
        """Node `node_id`'s disk fills (or has room again): every write transaction on its LMDB
        fails with ENOSPC, so the replicas it writes go offline (server/offline_replicas.py)
        until the node restarts, as Kafka's log dirs do."""
        EnvLease.set_full(self._node(node_id).spec.data_dir / "lmdb", full)

    def fail_write(self, node_id: int) -> None:
        """Node `node_id`'s next write to its LMDB fails with EIO (once): the replica it was for
        goes offline until the node restarts (Kafka takes a log dir offline at any IOException)."""
        EnvLease.fail_next_write(self._node(node_id).spec.data_dir / "lmdb")

    def pause(self, node_id: int) -> None:
        """SIGSTOP's stand-in: the node's connections freeze (sim/network.py)."""
        self._running(node_id)
        self.network.freeze(node_id)

    def resume(self, node_id: int) -> None:
        self._running(node_id)
        self.network.thaw(node_id)

    async def stop(self) -> None:
        """Stop every node, brokers first."""
        for node in [*reversed(self.spec.brokers), self.spec.controller]:
            if self.is_running(node.node_id):
                await self.kill(node.node_id)
        for sim in self.nodes.values():  # the registry is the process's: leave no disk full
            EnvLease.set_full(sim.spec.data_dir / "lmdb", False)


def _make_durable(data_dir: Path) -> None:
    """Copy the node's open LMDB to `DURABLE_DIR` (replacing the last copy), as one snapshot."""
    fresh = data_dir / (DURABLE_DIR + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    if EnvLease.copy_open(data_dir / "lmdb", fresh):
        shutil.rmtree(data_dir / DURABLE_DIR, ignore_errors=True)
        fresh.rename(data_dir / DURABLE_DIR)
