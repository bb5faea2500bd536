"""What an experiment drives: one cluster, reached, faulted and timed through one async
interface, whether its nodes are processes (`LocalTarget`, over a `LocalCluster`) or tasks of a
simulation in the same Trio run (sim/target.py `SimTarget`).

The runner (experiment/runner.py) and the nemesis (experiment/nemesis.py) see only this, so an
experiment runs the same code for real and in simulation; what differs is behind each method:

- `wall_clock`: the timestamps of the run folder and the history (time.time, or the
  simulation's clock);
- `client`: a ClusterClient on the brokers (over TCP, or the simulated network);
- `kill`, `pause`, `resume`, `restart`, `wipe`: process faults (signals and a restart that
  waits until the node is ready; or the node's task cancelled, its links frozen, a new task on
  the same data dir); `power_loss`, `disk_full`, `fail_write`: a simulation's only;
- `fault_proxy`: the control client of the cluster's fault proxy;
- `tool`: an admin command (`minikafka configs ...`, `minikafka reassign ...`) as an operator
  runs it: a process of the CLI, or the same command in-process (cli/in_process.py); its
  command line, exit code and output kept in the run folder's tool/.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Protocol

import trio

from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.cluster import LocalCluster
from minikafka.cluster.spec import ClusterSpec
from minikafka.errors import ClusterError
from minikafka.faults.control import FaultProxyClient
from minikafka.testing.cli_tools import run_tool
from minikafka.testing.run_folder import RunFolder

RESTART_TIMEOUT_S = 60.0


class Target(Protocol):
    spec: ClusterSpec

    @property
    def simulated(self) -> bool: ...

    def wall_clock(self) -> float: ...

    def client(self, client_id: str) -> AbstractAsyncContextManager[ClusterClient]: ...

    def fault_proxy(self) -> FaultProxyClient: ...

    async def kill(self, node_id: int) -> None: ...

    async def pause(self, node_id: int) -> None: ...

    async def resume(self, node_id: int) -> None: ...

    async def restart(self, node_id: int) -> None: ...

    async def wipe(self, node_id: int) -> None: ...

    async def power_loss(self, node_id: int) -> None: ...

    async def disk_full(self, node_id: int, full: bool) -> None: ...

    async def fail_write(self, node_id: int) -> None: ...

    async def tool(
        self, folder: RunFolder, name: str, args: Sequence[str], *, check: bool = True
    ) -> int: ...


def reassign_args(moves_file: Path, *, throttle: int | None, mode: str) -> list[str]:
    """The `minikafka reassign --execute` arguments of a move (without --dir)."""
    args = ["reassign", "--execute", "--reassignment-json-file", str(moves_file)]
    if throttle is not None:
        args += ["--throttle", str(throttle)]
        args += ["--throttle-mode", "reassignment"] if mode == "kip542" else []
    return args


def wipe_data(data_dir: Path) -> None:
    """What a wipe fault deletes: the node's log store (its LMDB), nothing else of its dir."""
    shutil.rmtree(data_dir / "lmdb", ignore_errors=True)


class LocalTarget:
    """A `LocalCluster` of processes; its blocking calls run in a worker thread."""

    simulated = False

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.spec = cluster.spec

    def wall_clock(self) -> float:
        return time.time()

    def client(self, client_id: str) -> AbstractAsyncContextManager[ClusterClient]:
        return open_client(self.cluster.bootstrap(), client_id=client_id)

    def fault_proxy(self) -> FaultProxyClient:
        return self.cluster.fault_proxy()

    async def kill(self, node_id: int) -> None:
        await trio.to_thread.run_sync(self.cluster.kill, node_id)

    async def pause(self, node_id: int) -> None:
        await trio.to_thread.run_sync(self.cluster.pause, node_id)

    async def resume(self, node_id: int) -> None:
        await trio.to_thread.run_sync(self.cluster.resume, node_id)

    async def restart(self, node_id: int) -> None:
        restart = partial(self.cluster.restart, node_id, ready_timeout_s=RESTART_TIMEOUT_S)
        await trio.to_thread.run_sync(restart)

    async def wipe(self, node_id: int) -> None:
        await trio.to_thread.run_sync(wipe_data, self.spec.node(node_id).data_dir)

    async def power_loss(self, node_id: int) -> None:
        raise ClusterError(
            "a power-loss fault needs simulated time (minikafka sim run): real processes "
            "cannot lose what their disk has not synced"
        )

    async def disk_full(self, node_id: int, full: bool) -> None:
        raise ClusterError(
            "a disk-full fault needs simulated time (minikafka sim run); on real processes "
            "a small lmdb.map.size.bytes fills a node's store for real"
        )

    async def fail_write(self, node_id: int) -> None:
        raise ClusterError("a failed-write fault needs simulated time (minikafka sim run)")

    async def tool(
        self, folder: RunFolder, name: str, args: Sequence[str], *, check: bool = True
    ) -> int:
        return await run_tool(folder, name, args, cluster_dir=self.cluster.base_dir, check=check)
