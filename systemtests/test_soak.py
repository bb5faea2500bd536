"""The soak: many seeded fault runs, each a fresh cluster under acks=all load.

    [MINIKAFKA_SOAK_RUNS=50] [MINIKAFKA_SEED=1] .venv/bin/pytest systemtests -m soak [--run-dir runs]

Run i (seed `$MINIKAFKA_SEED` + i, else a fresh random base + i, printed) is the
`mixed-faults` experiment (minikafka/experiment/catalog.py): every 3 s a kill, a pause or a network partition of a
leader, a follower, a random broker or the controller, drawn from the seed, for 24 s of load
by 4 acks=all producers that retry, idempotent (KIP-98), then heal, settle and read everything
back. Each run must be valid
(nothing acknowledged lost, nothing stored twice, no inconsistent or skipped read, the
cluster's own invariants intact). At the end the totals (runs, values acknowledged, lost,
duplicated) go to `<run-dir>/soak-<time>/soak.json` and the terminal. Not in `make test`: 50
runs take about 40 minutes on a 2-core machine.

With `--sim` the same runs are simulated (minikafka/sim): all of them first, on one process
per core (`minikafka.sim.search`, as `minikafka sim run mixed-faults --test-count N`), then each
test judges its own; a failing run's folder is kept and replays from its seed
(`minikafka sim run mixed-faults --seed S`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from minikafka.cli.tool_runner import run_command
from minikafka.experiment.catalog import variants
from minikafka.experiment.runner import run_experiment
from minikafka.sim.determinism import HASH_SEED_ENV
from minikafka.sim.search import search
from minikafka.testing.seeds import resolve_seed, seed_line

pytestmark = pytest.mark.soak

RUNS = int(os.environ.get("MINIKAFKA_SOAK_RUNS", "50"))
# A fresh base each session unless MINIKAFKA_SEED names one (minikafka/testing/seeds.py): every
# soak explores new schedules; the test ids and soak.json carry the seeds to replay.
SEED_BASE = resolve_seed()


class Totals:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs: list[dict[str, Any]] = []

    def add(self, seed: int, results: dict[str, Any]) -> None:
        checker = results.get("checker", {})
        anomalies = checker.get("anomalies", {})
        self.runs.append(
            {
                "seed": seed,
                "valid": results.get("valid"),
                "faults": [
                    f"{f['kind']}:{f['target']}@node{f.get('node')}"
                    for f in results.get("faults") or []
                    if f.get("event") == "start"
                ],
                "acknowledged": checker.get("counts", {}).get("values_acknowledged", 0),
                **{name: anomalies.get(name, {}).get("count", 0) for name in ANOMALIES},
            }
        )
        self.write()

    def doc(self) -> dict[str, Any]:
        return {
            "runs": len(self.runs),
            "valid": sum(1 for r in self.runs if r["valid"] is True),
            "acknowledged": sum(r["acknowledged"] for r in self.runs),
            **{name: sum(r[name] for r in self.runs) for name in ANOMALIES},
            "per_run": self.runs,
        }

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.doc(), indent=2) + "\n")


ANOMALIES = ("lost", "duplicated", "inconsistent_offsets", "skipped_reads")


@pytest.fixture(scope="module")
def totals(pytestconfig: pytest.Config):
    base = Path(pytestconfig.rootpath) / pytestconfig.getoption("--run-dir")
    t = Totals(base / f"soak-{time.strftime('%Y%m%d-%H%M%S')}" / "soak.json")
    yield t
    doc = t.doc()
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        line = ", ".join(f"{k} {doc[k]}" for k in ("runs", "valid", "acknowledged", *ANOMALIES))
        reporter.write_line(f"\nsoak: {line} ({t.path}); base {seed_line(SEED_BASE)}")


@pytest.fixture(scope="module")
def simulated(pytestconfig: pytest.Config, totals: Totals) -> dict[int, dict[str, Any]] | None:
    """With --sim: every run's results.json by seed, the runs made in parallel processes."""
    if not pytestconfig.getoption("--sim"):
        return None
    specs = [s for i in range(RUNS) for s in variants("mixed-faults", seed=SEED_BASE + i)]
    with pytest.MonkeyPatch.context() as mp:
        # The workers' string hashes unsalted, as `minikafka sim` runs them: a failing run
        # replays from its seed there (sim/determinism.py).
        mp.setenv(HASH_SEED_ENV, "0")
        results = search(
            specs, totals.path.parent, jobs=os.cpu_count() or 1, report=False, tools=run_command
        )
    return {r["seed"]: r for r in results}


@pytest.mark.parametrize("index", range(RUNS), ids=[f"seed-{SEED_BASE + i}" for i in range(RUNS)])
def test_soak_run_is_valid(index: int, totals: Totals, simulated) -> None:
    seed = SEED_BASE + index
    if simulated is not None:
        results = simulated[seed]
        where = results.get("path") or results.get("crash")
    else:
        (spec,) = variants("mixed-faults", seed=seed)
        outcome = run_experiment(spec, totals.path.parent, report=False)
        results, where = outcome.results, outcome.path
    totals.add(seed, results)
    assert results["exit_code"] == 0, f"{where}: {results['summary']}"
