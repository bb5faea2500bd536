"""Every case of the matrix in simulated time, small: what the replay test compares.

    PYTHONHASHSEED=0 python -m systemtests.harness.sim_replay OUT_DIR [--scale 0.1]

Runs each case of the matrix that can be simulated (not librdkafka's: its own sockets) with
the quick profile's data scaled by `--scale`, one after another, each from the seed the
matrix gives it, and prints one JSON line per case: its name, error, the digest of its run
folder (minikafka/sim/digest.py) and the move's simulated duration. Two processes given the
same arguments print the same lines (systemtests/test_sim_replay.py). Determinism needs the
hash seed pinned, as `minikafka sim` pins it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from minikafka.sim.digest import folder_digest
from systemtests.harness.case import CaseRun, CaseSpec
from systemtests.harness.matrix import CALIBRATED_SEED, MATRIX, seed_offset
from systemtests.harness.profiles import get_profile
from systemtests.harness.runner import run_case

SIMULATED = [c for c in MATRIX if c.load_client == "native"]


def run_sim_case(case: CaseSpec, out: Path, scale: float) -> CaseRun:
    """`case` in simulated time, from the seed the matrix gives it, with the quick profile's
    data scaled by `scale`; its folder under `out/runs`."""
    quick = get_profile("quick", case.quota)
    profile = replace(quick, data_bytes=int(quick.data_bytes * scale))
    return run_case(
        case,
        profile,
        runs_dir=out / "runs",
        cluster_dir=out / "clusters" / case.name,
        seed=CALIBRATED_SEED + seed_offset(case),
        simulated=True,
    )


def simulated_span_s(folder: Path) -> float:
    """The simulated seconds a case's run took: its timeline, cluster_up to cluster_down."""
    stamps = [json.loads(line)["ts"] for line in (folder / "timeline.jsonl").open()]
    return max(stamps) - min(stamps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--scale", type=float, default=0.1, help="share of the quick data")
    args = parser.parse_args()
    for case in SIMULATED:
        run = run_sim_case(case, args.out, args.scale)
        move = None if run.info is None else run.info.extra.get("move_observed_s")
        line = {"case": case.name, "error": run.error, "digest": folder_digest(run.path)}
        print(json.dumps(line | {"move_s": move}), flush=True)


if __name__ == "__main__":
    main()
