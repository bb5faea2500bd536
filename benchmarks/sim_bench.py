"""How fast the simulation runs experiments: simulated seconds per wall second.

For each experiment (default: the catalog), `--seeds` runs in simulated time
(`minikafka.sim.search`, on `--jobs` processes), without the Spark report; per experiment the
simulated seconds (the cluster's time from start to stop, results.json `simulated_s`), the wall
seconds, and their ratio per process and in all. With `--real`, the same experiment also runs
once on real processes in the same session, as the reference a simulated second is worth:
its wall time from start to verdict.

With `--matrix`, the KIP-73 system tests' cases instead, one after another in this process,
each from its calibrated seed with the quick profile's data times `--scale`
(systemtests/harness/sim_replay.py), with the Spark analysis and verdicts: per case the
simulated seconds (its timeline, cluster up to down), the wall seconds, and its verdict (the
matrix's own only at `--scale 1`: the predictions are calibrated for the quick profile's data).

    .venv/bin/python benchmarks/sim_bench.py [--experiments leader-kill,mixed-faults]
        [--seeds 5] [--jobs 2] [--real] [--json]
    .venv/bin/python benchmarks/sim_bench.py --matrix [--scale 1.0] [--json]

Run it with PYTHONHASHSEED=0 for runs that replay across processes (the figures do not
depend on it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from minikafka.cli.tool_runner import run_command
from minikafka.experiment.catalog import CATALOG, variants
from minikafka.experiment.runner import run_experiment
from minikafka.sim.search import search


def bench(name: str, seeds: int, jobs: int, out: Path) -> dict:
    specs = [s for seed in range(1, seeds + 1) for s in variants(name, seed=seed)]
    t0 = time.monotonic()
    results = search(specs, out / "sim", jobs=jobs, report=False, tools=run_command)
    wall = time.monotonic() - t0
    simulated = sum(r.get("simulated_s") or 0.0 for r in results)
    return {
        "experiment": name,
        "runs": len(results),
        "not_valid": sum(r["exit_code"] != 0 for r in results),
        "simulated_s": round(simulated, 1),
        "wall_s": round(wall, 1),
        "jobs": jobs,
        "sim_s_per_wall_s": round(simulated / wall, 2) if wall else None,
        "sim_s_per_cpu_s": round(simulated / (wall * jobs), 2) if wall else None,
    }


def real_reference(name: str, out: Path) -> dict:
    spec = variants(name, seed=1)[0]
    t0 = time.monotonic()
    outcome = run_experiment(spec, out / "real", report=False)
    return {"real_wall_s": round(time.monotonic() - t0, 1), "real_exit": outcome.exit_code}


def bench_matrix(scale: float, out: Path) -> list[dict]:
    """Each simulated case of the matrix, timed; then all judged in one Spark job, as the
    system tests judge a module's cases (its time is not the simulation's, so not counted)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's root
    from systemtests.harness.sim_replay import SIMULATED, run_sim_case, simulated_span_s
    from systemtests.harness.verdicts import judge_runs

    runs, walls = [], []
    for case in SIMULATED:
        t0 = time.monotonic()
        runs.append(run_sim_case(case, out, scale))
        walls.append(time.monotonic() - t0)
    judged = judge_runs(
        runs, master="local[2]", out_dir=out / "analysis", label="matrix", say=lambda _l: None
    )
    rows = []
    for run, wall, res in zip(runs, walls, judged, strict=True):
        simulated = simulated_span_s(run.path)
        rows.append(
            {
                "case": run.spec.name,
                "verdict": res["verdict"],
                "simulated_s": round(simulated, 1),
                "wall_s": round(wall, 1),
                "sim_s_per_wall_s": round(simulated / wall, 2) if wall else None,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", default=",".join(CATALOG))
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--real", action="store_true", help="one real run of each, as reference")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--matrix", action="store_true", help="the KIP-73 matrix's cases instead")
    ap.add_argument("--scale", type=float, default=1.0, help="--matrix: share of the quick data")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sim-bench-") as tmp:
        if args.matrix:
            rows = bench_matrix(args.scale, Path(tmp))
            if not args.json:
                for row in rows:
                    print(
                        f"{row['case']:45s} {row['verdict']}  simulated "
                        f"{row['simulated_s']:6.1f} s  wall {row['wall_s']:6.1f} s  "
                        f"{row['sim_s_per_wall_s']:5.2f} sim s / wall s",
                        flush=True,
                    )
        for name in [] if args.matrix else args.experiments.split(","):
            row = bench(name, args.seeds, args.jobs, Path(tmp))
            if args.real:
                row |= real_reference(name, Path(tmp))
            rows.append(row)
            if not args.json:
                ref = f"  real run {row['real_wall_s']:6.1f} s" if args.real else ""
                print(
                    f"{name:24s} {row['runs']:4d} runs ({row['not_valid']} not valid)  "
                    f"simulated {row['simulated_s']:8.1f} s  wall {row['wall_s']:7.1f} s  "
                    f"{row['sim_s_per_wall_s']:5.2f} sim s / wall s  "
                    f"{row['sim_s_per_cpu_s']:5.2f} per process{ref}",
                    flush=True,
                )
    total_sim = sum(r["simulated_s"] for r in rows)
    total_wall = sum(r["wall_s"] for r in rows)
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "hash_seed": os.environ.get("PYTHONHASHSEED"),
        ("cases" if args.matrix else "experiments"): rows,
        "simulated_s": round(total_sim, 1),
        "wall_s": round(total_wall, 1),
        "sim_s_per_wall_s": round(total_sim / total_wall, 2) if total_wall else None,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"all: simulated {total_sim:.1f} s in {total_wall:.1f} s wall: "
            f"{summary['sim_s_per_wall_s']} sim s / wall s ({summary['machine']})"
        )


if __name__ == "__main__":
    main()
