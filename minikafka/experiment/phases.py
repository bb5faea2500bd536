"""One run, phase by phase: the skeleton an experiment and a system-test case both fill in.

A fault-injection experiment (experiment/runner.py `Drive`) and a KIP-73 system-test case
(systemtests/harness/runner.py `Scenario`) are one run with two fillings, as Jepsen's tests
(the db set up, the generator's ops beside the nemesis, the final read, the checker) and
Kafka's system tests (kafkatest's `ProduceConsumeValidateTest`: produce, act, consume,
validate) share theirs. `run_phases` runs the phases in this order:

1. cluster: the run's cluster is had for the phases 2-5, and left after them (`Cluster`: one
   started here and stopped after, or one already running, `LocalProcesses`; or one simulated
   inside the same Trio run, sim/target.py `Simulated`); each node's logs are then copied into
   the run folder, whether the cluster started or not.
2. prepare: one client on the brokers (`client_id`); the topic and what the run starts from
   (`prepare`, a context: what it opens for the phases after it, it closes after them).
3. load: the load, running for the block (`load`, a context; what it yields is handed to act).
4. act: what the run does to the cluster while the load runs: faults, a move (`act`).
5. read back: with the load stopped, what the cluster holds (`read_back`).
6. check: after the cluster is left, what the run folder says (`check`; its result is
   `run_phases`'s).

Phases 2-5 are one Trio run against the cluster's `Target` (experiment/target.py), so a run is
the same code on processes and in simulated time; the filling owns its concurrency (the load's
tasks, and what of the act runs beside them), the template only the order.

What every run gets from the template, whatever its filling:

- each phase runs once, in order; a failed phase ends the Trio run, so the phases after it do
  not run: a run cut short is not read back (the read-back would wait on a cluster the failure
  may have left without leaders; what it would have found is unknown, and an experiment's
  verdict says so);
- the cluster is left whatever happens (stopped if the run started it), and its nodes' logs
  are kept;
- a failure is handed to the filling: `not_started` for a cluster that did not start, `failed`
  for a failed Trio run (local processes are still running then, so what the filling says of
  it comes before they stop; a simulated cluster stops inside the run). If the filling records
  it, the check still runs and judges the run as far as it got; if not (Ctrl-C), it propagates
  once the cluster is left and its logs are kept, unchecked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.cluster import LocalCluster
from minikafka.cluster.spec import ClusterSpec
from minikafka.experiment.target import LocalTarget, Target
from minikafka.testing.run_folder import RunFolder


class Phases(Protocol):
    """A filling of the template: what a runner does in each phase (module docstring)."""

    folder: RunFolder
    client_id: str  # the client of phases 2-5

    def prepare(self, target: Target, client: ClusterClient) -> AbstractAsyncContextManager[Any]:
        """Phase 2: the cluster the run starts from, kept for the block (phases 3-5)."""
        ...

    def load(self, client: ClusterClient) -> AbstractAsyncContextManager[Any]:
        """Phase 3: the load, running for the block; what it yields goes to `act`."""
        ...

    async def act(self, client: ClusterClient, load: Any) -> None:
        """Phase 4: faults, a move: while the load runs."""

    async def read_back(self, client: ClusterClient) -> None:
        """Phase 5: everything read back, the load stopped."""

    def not_started(self, exc: BaseException) -> bool:
        """The cluster did not start: record `exc` and return True, or return False to raise it."""
        ...

    def failed(self, exc: BaseException) -> bool:
        """The Trio run of phases 2-5 failed: record `exc` and return True (the run is checked
        as far as it got), or return False to raise it."""
        ...

    def left(self) -> None:
        """The cluster the run started is stopped (inside a simulation: at its stop, in the
        run's time)."""

    def check(self) -> Any:
        """Phase 6, after the cluster is left and its nodes' logs are in the folder."""


class Cluster(Protocol):
    """How a run has its cluster: phase 1 of the module docstring."""

    plan: ClusterSpec  # its nodes' data dirs: where their logs are copied from

    def run(self, phases: Callable[[Target], Awaitable[None]], filling: Phases) -> None:
        """Have the cluster for one Trio run of `phases` against its target: a start that fails
        goes to `filling.not_started`, a failed Trio run to `filling.failed` (either raised
        again unless recorded); `filling.left()` once the cluster it started is stopped."""
        ...


def run_phases(filling: Phases, cluster: Cluster) -> Any:
    """Run `filling` on `cluster`, phase by phase (module docstring); -> what `check` returns.
    The run folder is closed at the end, whatever happened."""
    try:
        try:
            cluster.run(partial(_in_trio, filling), filling)
        finally:
            filling.folder.collect_node_logs({n.node_id: n.data_dir for n in cluster.plan.nodes})
        return filling.check()
    finally:
        filling.folder.close()


async def _in_trio(filling: Phases, target: Target) -> None:
    """Phases 2-5: one client for them all; each phase awaited in turn (the filling's own tasks
    run inside its load)."""
    async with target.client(filling.client_id) as client:
        async with filling.prepare(target, client):
            async with filling.load(client) as load:
                await filling.act(client, load)
            await filling.read_back(client)


@dataclass(slots=True, kw_only=True)
class LocalProcesses:
    """A cluster of processes on this machine: started from `plan` for the run and stopped after
    it (`progress` says so), or the `running` one, which the run neither starts nor stops."""

    plan: ClusterSpec
    running: LocalCluster | None = None
    node_command: Sequence[str] | None = None  # LocalCluster.up's: a mutant's (testing/mutants.py)
    ready_timeout_s: float = 30.0  # LocalCluster.up's, for each of its phases
    progress: Callable[[str], None] | None = None

    def run(self, phases: Callable[[Target], Awaitable[None]], filling: Phases) -> None:
        lc = self.running
        if lc is None:
            with handed_to(filling.not_started):
                lc = LocalCluster.up(
                    self.plan,
                    node_command=self.node_command,
                    ready_timeout_s=self.ready_timeout_s,
                    progress=self.progress,
                )
            if lc is None:  # it did not start, and the filling recorded why
                return
        try:
            with handed_to(filling.failed):
                trio.run(phases, LocalTarget(lc))
        finally:
            if self.running is None:
                if self.progress is not None:
                    self.progress("stopping the cluster")
                lc.down()
                filling.left()


@contextmanager
def handed_to(record: Callable[[BaseException], bool]) -> Iterator[None]:
    """The block's failure handed to `record` (a filling's `not_started` or `failed`): kept
    there if it returns True, raised again if not."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - the filling's to record, or raised
        if not record(exc):
            raise
