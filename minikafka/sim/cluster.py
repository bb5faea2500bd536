"""A controller and N brokers, their real `Node` code, in one Trio run on a `SimNetwork`.

Each node is `server/node.py`'s `Node`, built from a `NodeConfig` as `minikafka node` builds
it, with the simulation's `Edges` in place of the machine's:

- connections and listeners: the SimNetwork (sim/network.py);
- blocking LMDB calls: run inline (`run_sync_inline`), so they take no simulated time and no
  worker thread's timing enters the run;
- the wall clock of its logs: `EPOCH_S` plus Trio's clock, the same in every run;
- incarnation ids: bytes from the node's own stream of the seed.

The disk is real: LMDB in `base_dir/node-N`, as a real cluster's. `kill(n)` cancels the node's
task (its memory is gone; what LMDB committed stays) and `restart(n)` builds a new Node on the
same data dir. The run must be under `trio.run(..., clock=MockClock(autojump_threshold=0))`
and `pinned_scheduler(seed)` (sim/determinism.py) for it to repeat from its seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trio

from minikafka.server.config import NodeConfig
from minikafka.server.edges import Edges
from minikafka.server.node import Node
from minikafka.sim.network import SimNetwork
from minikafka.testing.memory_node import run_sync_inline

EPOCH_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where the simulated wall clock starts
NATIVE_PORT = 9091
CONTROLLER_ID = 0


def node_host(node_id: int) -> str:
    """Each node its own loopback address, so per-IP rules see nodes as separate hosts."""
    return f"127.0.1.{node_id + 1}"


def wall_clock() -> float:
    return EPOCH_S + trio.current_time()


@dataclass(slots=True)
class SimNode:
    config: NodeConfig
    edges: Edges
    node: Node | None = None
    scope: trio.CancelScope | None = None
    stopped: trio.Event | None = None

    @property
    def address(self) -> tuple[str, int]:
        return (self.config.host, self.config.port)


class SimCluster:
    """Node 0 is the controller, 1..brokers the brokers. Start it with `await start(nursery)`."""

    def __init__(
        self,
        base_dir: Path,
        *,
        brokers: int,
        seed: int,
        node_configs: Mapping[str, str] | None = None,
        network: SimNetwork | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.seed = seed
        self.network = network or SimNetwork()
        identity = random.Random(f"{seed}/cluster-identity")
        cluster_id = f"sim-{identity.getrandbits(64):016x}"
        secret = identity.randbytes(32).hex().encode()
        controller = (node_host(CONTROLLER_ID), NATIVE_PORT)
        self.nodes: dict[int, SimNode] = {}
        for node_id in range(brokers + 1):
            config = NodeConfig(
                node_id=node_id,
                roles=("controller",) if node_id == CONTROLLER_ID else ("broker",),
                host=node_host(node_id),
                port=NATIVE_PORT,
                controller_host=controller[0],
                controller_port=controller[1],
                data_dir=base_dir / f"node-{node_id}",
                seed=seed,
                metrics_port=-1,
                cluster_id=cluster_id,
                cluster_secret=secret,
            ).with_settings(dict(node_configs or {}))
            tokens = random.Random(f"{seed}/tokens/{node_id}")
            edges = Edges(
                connect=self.network.connect,
                listen=self.network.listen,
                run_sync=run_sync_inline,
                wall_clock=wall_clock,
                token_bytes=tokens.randbytes,
            )
            self.nodes[node_id] = SimNode(config=config, edges=edges)
        self._nursery: trio.Nursery | None = None

    @property
    def broker_ids(self) -> list[int]:
        return [n for n in self.nodes if n != CONTROLLER_ID]

    def bootstrap(self) -> list[tuple[str, int]]:
        return [self.nodes[n].address for n in self.broker_ids]

    async def start(self, nursery: trio.Nursery) -> None:
        """Start every node, controller first, each once it is ready (registered)."""
        self._nursery = nursery
        for node_id in self.nodes:
            await self.restart(node_id)

    async def restart(self, node_id: int) -> None:
        """Start node `node_id` (again) on its data dir and wait until it is ready."""
        assert self._nursery is not None, "start() the cluster first"
        sim = self.nodes[node_id]
        if sim.scope is not None:
            raise RuntimeError(f"node {node_id} is running")
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

    async def kill(self, node_id: int) -> None:
        """Stop node `node_id` at once (its task cancelled, its data dir kept)."""
        sim = self.nodes[node_id]
        if sim.scope is None or sim.stopped is None:
            raise RuntimeError(f"node {node_id} is not running")
        sim.scope.cancel()
        await sim.stopped.wait()

    async def stop(self) -> None:
        """Stop every node, brokers first."""
        for node_id in reversed(list(self.nodes)):
            if self.nodes[node_id].scope is not None:
                await self.kill(node_id)
