"""An experiment in simulated time: the catalog's experiments with the whole cluster, its fault
proxy, the workload, the nemesis and the reassignment tool in one Trio run under a virtual clock,
from the spec's seed (`run_sim_experiment`, `minikafka sim run`).

It is `experiment run` with the cluster substituted and nothing else: the same run template
(experiment/phases.py) filled by the same `Drive` (experiment/runner.py), whose nemesis drives a
`SimTarget` (the `Target` of experiment/target.py over a `SimCluster`), on the template's
`Simulated` cluster (sim/target.py); the same run folder, analysis, checker and verdict
(`Drive.check`). What stands in for what is in sim/target.py; beyond it:

- the run folder's name is the simulation's epoch (`EPOCH_S`), so it repeats too;
- blocking calls (LMDB): inline, so no worker thread's timing enters the run;
- randomness: Trio's scheduler pinned to the seed (sim/determinism.py); everything else was
  already drawn from the seed.
"""

from __future__ import annotations

import json
from pathlib import Path

from minikafka.experiment.phases import run_phases
from minikafka.experiment.runner import Drive, Outcome, Progress
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.store import create_run_dir
from minikafka.sim.cluster import EPOCH_S, WRITEBACK_S, plan_sim_cluster, wall_clock
from minikafka.sim.target import Simulated
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
    # The kernel's writeback only matters to a power loss: copies of every node's LMDB every
    # few seconds are not made when no fault can need them.
    power = any(f.kind == "power-loss" for f in spec.faults)
    cluster = Simulated(
        plan=plan,
        seed=spec.seed,
        deadline_s=spec.duration_s + spec.settle_timeout_s + SLACK_S,
        tools=tools,
        writeback_s=WRITEBACK_S if power else None,
        progress=progress,
    )
    drive = Drive(
        spec,
        folder,
        progress,
        plan=plan,
        own_cluster=True,
        keep_data=keep_data,
        report=report,
        # simulated_s: the cluster's time from its start to its stop
        extra=lambda: {"simulated": True, "simulated_s": round(cluster.simulated_s, 3)},
    )
    return run_phases(drive, cluster)
