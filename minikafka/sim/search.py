"""Many seeds of one experiment in simulated time, in parallel processes: the search that finds
what a few real runs do not (`minikafka sim run NAME --test-count N --jobs J`).

Each run is `run_sim_experiment` in a worker process (spawned, so no Trio state or LMDB handle
is inherited; PYTHONHASHSEED comes from the parent, which `minikafka sim` pins to 0), in its own
folder under OUT. A run that is not valid keeps its folder, so that its seed can be looked at
and replayed (`minikafka sim run NAME --seed S` writes the same folder); a valid run's folder is
removed unless `keep_passing`, so a search of thousands of seeds keeps only what matters. The
results come back as each run ends, in the order they end; the summary is in seed order.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from minikafka.experiment.runner import HarnessCrash
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.store import LATEST
from minikafka.testing.cli_tools import InProcessTool

CRASHED = 255


def run_one(
    spec: ExperimentSpec,
    out: Path,
    report: bool,
    keep_passing: bool,
    tools: InProcessTool | None = None,
) -> dict[str, Any]:
    """One simulated run in this process -> its results.json, with `path` and `exit_code`
    (255 for a crash of the harness); a valid run's folder removed unless `keep_passing`."""
    from minikafka.sim.experiment import run_sim_experiment

    try:
        outcome = run_sim_experiment(spec, out, report=report, tools=tools)
    except HarnessCrash as exc:
        return {
            "experiment": spec.name,
            "seed": spec.seed,
            "valid": "crashed",
            "exit_code": CRASHED,
            "crash": str(exc.crash_file),
            "summary": f"CRASHED (exit 255): {exc}",
        }
    code = CRASHED if outcome.crash is not None else outcome.exit_code
    kept = code != 0 or keep_passing
    if not kept:
        shutil.rmtree(outcome.path, ignore_errors=True)
        _unlink_if_at(outcome.path.parent / LATEST, outcome.path.name)
        _unlink_if_at(outcome.path.parent.parent / LATEST, f"{spec.name}/{outcome.path.name}")
    return {**outcome.results, "path": str(outcome.path) if kept else None, "exit_code": code}


def _unlink_if_at(link: Path, target: str) -> None:
    """Remove the `latest` link `link` if it still names the folder just removed."""
    try:
        if os.readlink(link) == target:
            link.unlink()
    except OSError:
        pass  # not a link, or another run re-pointed or removed it meanwhile


def search(
    specs: Sequence[ExperimentSpec],
    out: Path,
    *,
    jobs: int,
    report: bool = False,
    keep_passing: bool = False,
    on_result: Callable[[dict[str, Any]], None] = lambda _r: None,
    tools: InProcessTool | None = None,
) -> list[dict[str, Any]]:
    """Run every spec (module docstring) on `jobs` worker processes (1: in this process);
    `on_result` hears each as it ends. -> the results in the order of `specs`. `tools`: the
    in-process admin commands (a module-level function, so a worker imports it by name)."""
    results: dict[int, dict[str, Any]] = {}
    runs = _results(specs, out, jobs=jobs, report=report, keep_passing=keep_passing, tools=tools)
    for i, result in runs:
        results[i] = result
        on_result(result)
    return [results[i] for i in range(len(specs))]


def _results(
    specs: Sequence[ExperimentSpec],
    out: Path,
    *,
    jobs: int,
    report: bool,
    keep_passing: bool,
    tools: InProcessTool | None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    if jobs <= 1:
        for i, spec in enumerate(specs):
            yield i, run_one(spec, out, report, keep_passing, tools)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {
            pool.submit(run_one, spec, out, report, keep_passing, tools): i
            for i, spec in enumerate(specs)
        }
        for future in as_completed(futures):
            yield futures[future], future.result()
