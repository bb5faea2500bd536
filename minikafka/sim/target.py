"""A simulated cluster as what experiments and system tests drive: `SimTarget` (the `Target` of
experiment/target.py over a `SimCluster`), `simulated_cluster` (one started for a block, stopped
after it), `run_simulated` (trio.run under the virtual clock, Trio's scheduler pinned to the
seed) and `Simulated` (all three as the run template's cluster, experiment/phases.py).

What stands in for what, behind the Target's methods:

- processes: each node a task of the run (sim/cluster.py); kill cancels it, its LMDB kept;
  pause freezes its connections (sim/network.py says how that differs from SIGSTOP); a power
  loss also sets its LMDB back to the last writeback's copy unless it syncs on commit;
- the network: memory streams, through the real fault proxy when the plan has one;
- the wall clock: `EPOCH_S` plus Trio's MockClock, so every timestamp repeats;
- the admin tools (`configs`, `reassign`): the CLI's own commands in-process
  (cli/tool_runner.py `run_command`, handed in as `tools` by the caller: the CLI is above the
  simulation it runs), bounded in simulated time, kept in tool/ as a process's output is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import trio
import trio.testing

from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.client.connection import sole_exception
from minikafka.cluster.spec import ClusterSpec
from minikafka.experiment.phases import Phases, handed_to
from minikafka.experiment.target import Target, wipe_data
from minikafka.faults.control import FaultProxyClient
from minikafka.sim.cluster import SimCluster, wall_clock
from minikafka.sim.determinism import pinned_scheduler
from minikafka.testing.cli_tools import (
    TOOL_TIMEOUT_S,
    Env,
    InProcessTool,
    ToolError,
    record_tool,
)
from minikafka.testing.run_folder import RunFolder

T = TypeVar("T")


class SimTarget:
    """A `SimCluster` as an experiment's `Target` (experiment/target.py)."""

    simulated = True

    def __init__(self, cluster: SimCluster, tools: InProcessTool | None = None) -> None:
        self.sim = cluster
        self.spec = cluster.spec
        self.tools = tools  # cli/tool_runner.py run_command, from whoever composes the run

    def wall_clock(self) -> float:
        return wall_clock()

    def client(self, client_id: str) -> AbstractAsyncContextManager[ClusterClient]:
        return open_client(
            self.sim.bootstrap(), client_id=client_id, connect=self.sim.network.connect
        )

    def fault_proxy(self) -> FaultProxyClient:
        return self.sim.fault_proxy()

    async def kill(self, node_id: int) -> None:
        await self.sim.kill(node_id)

    async def pause(self, node_id: int) -> None:
        self.sim.pause(node_id)
        await trio.lowlevel.checkpoint()

    async def resume(self, node_id: int) -> None:
        self.sim.resume(node_id)
        await trio.lowlevel.checkpoint()

    async def restart(self, node_id: int) -> None:
        await self.sim.restart(node_id)

    async def power_loss(self, node_id: int) -> None:
        await self.sim.power_loss(node_id)

    async def disk_full(self, node_id: int, full: bool) -> None:
        self.sim.disk_full(node_id, full)
        await trio.lowlevel.checkpoint()

    async def fail_write(self, node_id: int) -> None:
        self.sim.fail_write(node_id)
        await trio.lowlevel.checkpoint()

    async def wipe(self, node_id: int) -> None:
        wipe_data(self.spec.node(node_id).data_dir)
        await trio.lowlevel.checkpoint()

    async def tool(
        self, folder: RunFolder, name: str, args: Sequence[str], *, check: bool = True
    ) -> int:
        """The admin command in this task (cli/in_process.py) on the simulated network, bounded
        in simulated time as run_tool bounds the process; kept in tool/ as the CLI's is, its
        command line marked as run in-process."""
        shown = ["minikafka", *args, "# in-process: simulation"]
        if self.tools is None:
            raise ToolError(
                f"`minikafka {' '.join(args[:2])} ...`: this simulation was given no in-process "
                "tools (tools=minikafka.cli.tool_runner.run_command)"
            )
        env = Env(spec=self.spec, connect=self.sim.network.connect)
        with trio.move_on_after(TOOL_TIMEOUT_S):
            done = await self.tools(args, env)
            return record_tool(
                folder,
                name,
                shown,
                returncode=done.returncode,
                stdout=done.stdout,
                stderr=done.stderr,
                check=check,
            )
        record_tool(
            folder,
            name,
            shown,
            returncode=-9,
            stdout="",
            stderr=f"cut off after {TOOL_TIMEOUT_S} s",
        )
        raise ToolError(f"`minikafka {' '.join(args[:2])} ...` took over {TOOL_TIMEOUT_S} s")


@asynccontextmanager
async def simulated_cluster(
    plan: ClusterSpec,
    progress: Callable[[str], None] = lambda _m: None,
    *,
    writeback_s: float | None = None,
    tools: InProcessTool | None = None,
) -> AsyncIterator[SimTarget]:
    """The plan's cluster started (controller first, each node once ready) for the block, then
    stopped, shielded from the block's cancellation; a node's error if it does not start.
    `writeback_s`: what a power loss leaves (SimCluster); `tools`: how the target runs admin
    commands (cli/tool_runner.py run_command; the CLI sits above the simulation)."""
    async with trio.open_nursery() as nursery:
        cluster = SimCluster(plan, writeback_s=writeback_s)
        await cluster.start(nursery)
        try:
            yield SimTarget(cluster, tools)
        finally:
            progress("stopping the cluster")
            with trio.CancelScope(shield=True):
                await cluster.stop()
            nursery.cancel_scope.cancel()  # the fault proxy


def run_simulated(main: Callable[[], Awaitable[T]], seed: int) -> T:
    """trio.run(main) in simulated time: Trio's MockClock, jumping whenever every task waits,
    and its scheduler's choices drawn from `seed` (sim/determinism.py)."""
    with pinned_scheduler(seed):
        return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@dataclass(slots=True, kw_only=True)
class Simulated:
    """The run template's cluster (experiment/phases.py `Cluster`) in simulated time: the plan's
    cluster started and stopped inside the run's one Trio run (`simulated_cluster`), under the
    virtual clock and Trio's scheduler pinned to `seed` (`run_simulated`). A run that fails
    before every node is ready goes to `Phases.not_started`, as a local cluster's start does."""

    plan: ClusterSpec
    seed: int
    # A wait on nothing would hang in wall time: past this many simulated seconds the clock
    # jumps to the deadline and the run is cut short, judged as far as it got.
    deadline_s: float
    tools: InProcessTool | None = None  # SimTarget's: cli/tool_runner.py run_command
    writeback_s: float | None = None  # SimCluster's: what a power loss leaves
    progress: Callable[[str], None] = lambda _m: None
    simulated_s: float = 0.0  # once run: the cluster's time from its start to its stop

    def run(self, phases: Callable[[Target], Awaitable[None]], filling: Phases) -> None:
        started = left = False

        async def main() -> None:
            nonlocal started, left
            try:
                async with simulated_cluster(
                    self.plan, self.progress, writeback_s=self.writeback_s, tools=self.tools
                ) as target:
                    started = True
                    with trio.fail_after(self.deadline_s):
                        await phases(target)
            finally:
                self.simulated_s = trio.current_time()
                left = True
                filling.left()  # while the simulated clock still runs: its stamps repeat

        def failed(exc: BaseException) -> bool:
            if started:
                return filling.failed(exc)
            alone = sole_exception(exc) if isinstance(exc, BaseExceptionGroup) else exc
            return filling.not_started(alone)

        try:
            with handed_to(failed):
                run_simulated(main, self.seed)
        finally:
            if not left:  # the run ended before its first step
                filling.left()
