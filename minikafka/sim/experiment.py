"""An experiment in simulated time: the catalog's experiments with the whole cluster, its fault
proxy, the workload, the nemesis and the reassignment tool in one Trio run under a virtual clock,
from the spec's seed (`run_sim_experiment`, `minikafka sim run`).

It is `experiment run` with the edges substituted and nothing else: the same `Drive` and
`Nemesis` (experiment/runner.py, nemesis.py) against a `SimTarget` (the `Target` of
experiment/target.py over a `SimCluster`), the same run folder, analysis, checker and verdict
(`finish_run`). What stands in for what:

- processes: each node a task of the run (sim/cluster.py); kill cancels it, its LMDB kept;
  pause freezes its connections (sim/network.py says how that differs from SIGSTOP);
- the network: memory streams, through the real fault proxy when the spec asks for one;
- time: Trio's MockClock, jumping whenever every task waits; the run folder's and the nodes'
  wall clock is `EPOCH_S` plus that clock, so the folder's name and every timestamp repeat;
- blocking calls (LMDB): inline, so no worker thread's timing enters the run;
- `reassign --execute`: the tool's own steps (tools/reassign/runner.py) in-process, its output
  kept in tool/ as the CLI's is;
- randomness: Trio's scheduler pinned to the seed (sim/determinism.py); everything else was
  already drawn from the seed.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import trio
import trio.testing

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.errors import MiniKafkaError, describe
from minikafka.experiment.runner import Drive, Outcome, Progress, finish_run
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.store import create_run_dir
from minikafka.experiment.target import reassign_args, wipe_data
from minikafka.faults.control import FaultProxyClient
from minikafka.sim.cluster import EPOCH_S, SimCluster, plan_sim_cluster, wall_clock
from minikafka.sim.determinism import pinned_scheduler
from minikafka.testing.cli_tools import ToolError
from minikafka.testing.run_folder import RunFolder
from minikafka.tools.reassign import assignment_files, moves
from minikafka.tools.reassign import runner as reassign

# Simulated seconds a run may take beyond its workload and settling (topic creation, restarts at
# heal, the final read: the runner's own bounds add up to less), before it is cut short.
SLACK_S = 600.0
# experiment spec mode -> the tool's --throttle-mode (experiment/target.py `reassign_args`)
TOOL_MODES = {"lists": moves.MODE_REPLICATION, "kip542": moves.MODE_REASSIGNMENT}


class SimTarget:
    """A `SimCluster` as an experiment's `Target` (experiment/target.py)."""

    simulated = True

    def __init__(self, cluster: SimCluster) -> None:
        self.sim = cluster
        self.spec = cluster.spec

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

    async def wipe(self, node_id: int) -> None:
        wipe_data(self.spec.node(node_id).data_dir)
        await trio.lowlevel.checkpoint()

    async def reassign_execute(
        self, folder: RunFolder, moves_file: Path, *, throttle: int | None, mode: str
    ) -> None:
        """`reassign --execute` as the CLI does it (cli/reassign.py `_execute`), in-process;
        tool/NN-reassign-execute.txt holds the command it stands for and what it did."""
        argv = ["minikafka", *reassign_args(moves_file, throttle=throttle, mode=mode)]
        argv.append("# in-process: simulation")
        try:
            proposed = assignment_files.parse_reassignment_json(moves_file.read_text())
            async with self.client("reassign") as client:
                admin = Admin(client)
                view = await reassign.read_cluster(admin)
                todo = reassign.plan_execute(
                    view, proposed, throttle=throttle, mode=TOOL_MODES[mode], additional=False
                )
                result = await reassign.execute(admin, todo)
        except MiniKafkaError as exc:
            path = folder.tool_output(
                "reassign-execute", argv=argv, returncode=1, stdout="", stderr=describe(exc)
            )
            raise ToolError(
                f"`minikafka reassign --execute` failed: {describe(exc)} ({path})"
            ) from exc
        doc = {
            "current": json.loads(todo.rollback_json),
            "throttle": todo.throttle,
            "started": [str(tp) for tp in result.started],
            "errors": {str(tp): m for tp, m in result.errors.items()},
        }
        path = folder.tool_output(
            "reassign-execute",
            argv=argv,
            returncode=1 if result.errors else 0,
            stdout=json.dumps(doc, indent=2),
            stderr="",
        )
        if result.errors:
            raise ToolError(f"`minikafka reassign --execute` refused some moves ({path})")


def run_sim_experiment(
    spec: ExperimentSpec,
    out_base: Path,
    *,
    keep_data: bool = False,
    report: bool = True,
    progress: Progress = lambda _m: None,
) -> Outcome:
    """Run `spec` in simulated time in a new folder `out_base/NAME/TIMESTAMP/` (the timestamp
    is the simulation's epoch): the run folder, verdict and exit code of `run_experiment`,
    case.json and results.json saying `simulated`. The same spec (so the same seed) writes the
    same folder."""
    folder = RunFolder(create_run_dir(out_base, spec.name, now=EPOCH_S), clock=wall_clock)
    progress(f"run folder {folder.path} (simulated, seed {spec.seed})")
    (folder.path / "experiment.json").write_text(json.dumps(spec.to_json(), indent=2) + "\n")
    plan = plan_sim_cluster(
        folder.path / "cluster",
        brokers=spec.brokers,
        seed=spec.seed,
        node_configs=spec.all_node_configs(),
        fault_proxy=spec.fault_proxy,
    )
    drive = Drive(spec, folder, progress)
    simulated_s = 0.0

    async def main() -> None:
        nonlocal simulated_s
        try:
            await run_cluster()
        finally:
            simulated_s = trio.current_time()

    async def run_cluster() -> None:
        async with trio.open_nursery() as nursery:
            cluster = SimCluster(plan)
            try:
                await cluster.start(nursery)
            except MiniKafkaError as exc:  # no run: unknown, as for a local cluster
                drive.errors.append(f"the cluster did not start: {describe(exc)}")
                progress(drive.errors[-1])
            else:
                try:
                    # A deadlock would wait forever in wall time: with this deadline the clock
                    # jumps to it, and the run is judged as far as it got.
                    with trio.fail_after(spec.duration_s + spec.settle_timeout_s + SLACK_S):
                        await drive.main(SimTarget(cluster))
                finally:
                    progress("stopping the cluster")
                    with trio.CancelScope(shield=True):
                        await cluster.stop()
            nursery.cancel_scope.cancel()  # the fault proxy

    try:
        with pinned_scheduler(spec.seed):
            drive.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        folder.collect_node_logs({n.node_id: n.data_dir for n in plan.nodes})
        folder.close()
    return finish_run(
        folder,
        spec,
        plan,
        drive,
        own_cluster=True,
        keep_data=keep_data,
        report=report,
        progress=progress,
        # simulated_s: the cluster's time from its start to its stop
        extra={"simulated": True, "simulated_s": round(simulated_s, 3)},
    )
