"""An experiment in simulated time: the catalog's experiments with the whole cluster, its fault
proxy, the workload, the nemesis and the reassignment tool in one Trio run under a virtual clock,
from the spec's seed (`run_sim_experiment`, `minikafka sim run`).

It is `experiment run` with the edges substituted and nothing else: the same `Drive` and
`Nemesis` (experiment/runner.py, nemesis.py) against a `SimTarget` (the `Target` of
experiment/target.py over a `SimCluster`), the same run folder, analysis, checker and verdict
(`finish_run`). What stands in for what is in sim/target.py; beyond it:

- the run folder's name is the simulation's epoch (`EPOCH_S`), so it repeats too;
- blocking calls (LMDB): inline, so no worker thread's timing enters the run;
- randomness: Trio's scheduler pinned to the seed (sim/determinism.py); everything else was
  already drawn from the seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from minikafka.experiment.runner import Drive, Outcome, Progress, finish_run
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.store import create_run_dir
from minikafka.sim.cluster import EPOCH_S, WRITEBACK_S, plan_sim_cluster, wall_clock
from minikafka.sim.determinism import pinned_scheduler
from minikafka.sim.target import ClusterStartError, simulated_cluster
from minikafka.testing.cli_tools import InProcessTool
from minikafka.testing.run_folder import RunFolder

# Simulated seconds a run may take beyond its workload and settling (topic creation, restarts at
# heal, the final read: the runner's own bounds add up to less), before it is cut short.
SLACK_S = 600.0


def run_sim_experiment(
    spec: ExperimentSpec,
    out_base: Path,
    *,
    keep_data: bool = False,
    report: bool = True,
    progress: Progress = lambda _m: None,
    tools: InProcessTool | None = None,
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
        try:
            # The kernel's writeback only matters to a power loss: copies of every node's
            # LMDB every few seconds are not made when no fault can need them.
            power = any(f.kind == "power-loss" for f in spec.faults)
            writeback = WRITEBACK_S if power else None
            async with simulated_cluster(
                plan, progress, writeback_s=writeback, tools=tools
            ) as target:
                # A deadlock would wait forever in wall time: with this deadline the clock
                # jumps to it, and the run is judged as far as it got.
                with trio.fail_after(spec.duration_s + spec.settle_timeout_s + SLACK_S):
                    await drive.main(target)
        except ClusterStartError as exc:  # no run: unknown, as for a local cluster
            drive.errors.append(str(exc))
            progress(drive.errors[-1])

    try:
        with pinned_scheduler(spec.seed):  # drive.run: trio.run, with the run's errors kept
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
