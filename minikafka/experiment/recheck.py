"""`minikafka experiment check FOLDER`: a stored run judged again, without any cluster.

Jepsen's `analyze`: the checker re-runs on what the run folder stores (minikafka/experiment/
store.py lists it), through the same `verdict.judge` the run used, so a checker that changed
since, or a history edited by hand, gets a fresh verdict. Its inputs, and where each comes from:

- the spec: experiment.json (`ExperimentSpec.from_json`; the expectations' reasons from
  results.json, which keeps them);
- the history: history.jsonl; the time it counts from, which places the node logs' events on
  the history's clock: the `started_at` of its first op (runs from before it was stored: the
  timeline's load_start, a millisecond or two later, and a note says so);
- the cluster's own invariants and counters: nodes/ (the node logs the run copied);
- the replicas' logs: replica_dumps.jsonl (absent: a run on a running cluster, one that did not
  settle, or one from before they were stored; then the replicas are not compared, a note says so);
- the throttle bound and the report: report/report.json (the PySpark analysis is not re-run);
- whether the cluster settled, and what went wrong in the run itself (a fault not undone, the
  run stopped early): results.json (`settled`, `harness_problems`), else the timeline; a run
  that left no results.json (it crashed, crash.txt, or is still running) is at best unknown.

Nothing in the folder is changed unless asked (`write`: results.json replaced, atomically).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.checker.history import load_jsonl
from minikafka.experiment import store
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.verdict import judge

# problems judge() derives itself (not the run's own): left out when reading them back
_DERIVED = ("the cluster did not settle", "the throttle bound was not judged")


@dataclass(slots=True, kw_only=True)
class Recheck:
    """The fresh verdict (`results`, results.json's form), the one the folder stores (None if
    none), and what could not be judged as the run itself judged it (`notes`)."""

    path: Path
    results: dict[str, Any]
    stored: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return int(self.results["exit_code"])

    @property
    def same_verdict(self) -> bool | None:
        return None if self.stored is None else self.stored.get("valid") == self.results["valid"]


def recheck(folder: Path | str) -> Recheck:
    """Judge the run in `folder` again (module docstring). NotARunError (a ConfigError) if it
    is not a run folder; HistoryError if its history does not parse."""
    path = store.run_dir(folder)
    stored = _json(path / "results.json") if (path / "results.json").is_file() else None
    why = {e.get("expect"): e.get("why", "") for e in (stored or {}).get("expectations", [])}
    spec = ExperimentSpec.from_json(_json(path / "experiment.json"), why)
    timeline = _timeline(path)
    notes: list[str] = []
    t0 = _start(path, stored, timeline, notes)
    if stored is not None and "settled" in stored:
        settled = bool(stored["settled"])
    else:
        settled = "settled" in {e.get("event") for e in timeline}
    dumps = None
    if (path / "replica_dumps.jsonl").is_file():
        dumps = load_jsonl(path / "replica_dumps.jsonl")
    else:
        notes.append("no replica_dumps.jsonl: the replicas' own logs are not compared")
    analysis, analysis_error = _analysis(path, stored)
    problems = _run_problems(path, stored, timeline)
    results = judge(
        spec, path, t0=t0, dumps=dumps, driver_errors=problems, settled=settled,
        analysis=analysis, analysis_error=analysis_error,
    )  # fmt: skip
    results["started_at"] = t0
    results["harness_problems"] = problems
    for key in ("move_s", "report"):
        if stored is not None and key in stored:
            results[key] = stored[key]
    return Recheck(path=path, results=results, stored=stored, notes=notes)


def write(check: Recheck) -> Path:
    """Replace the folder's results.json by the fresh verdict (atomically)."""
    out = check.path / "results.json"
    tmp = out.with_name(".results.json.tmp")
    tmp.write_text(json.dumps(check.results, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise store.NotARunError(f"{path}: not JSON ({exc})") from None


def _timeline(path: Path) -> list[dict[str, Any]]:
    from minikafka.testing.run_folder import read_jsonl

    return [e for e in read_jsonl(path / "timeline.jsonl") if isinstance(e, dict)]


def _start(
    path: Path, stored: Mapping[str, Any] | None, timeline: list[dict[str, Any]], notes: list[str]
) -> float:
    with (path / "history.jsonl").open(encoding="utf-8") as fh:
        first = fh.readline()
    try:
        started = json.loads(first).get("started_at")
    except (ValueError, AttributeError):
        started = None  # load_history names the bad line
    if started is None and stored is not None:
        started = stored.get("started_at")
    if isinstance(started, int | float):
        return float(started)
    for e in timeline:
        if e.get("event") == "load_start" and isinstance(e.get("ts"), int | float):
            notes.append(
                "the history does not store its start: taken from the timeline's load_start, "
                "a few ms late (node-log events move that much on the history's clock)"
            )
            return float(e["ts"])
    raise store.NotARunError(
        f"{path}: no start time (neither history.jsonl's first op nor the timeline's load_start)"
    )


def _analysis(
    path: Path, stored: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, str | None]:
    report = path / "report" / "report.json"
    if not report.is_file():
        error = ((stored or {}).get("report") or {}).get("error")
        return None, error or "skipped (--no-report)"
    doc = _json(report)
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list) or len(cases) != 1:
        return None, f"report/report.json: expected one case, found {len(cases or [])}"
    return cases[0], None


def _run_problems(
    path: Path, stored: Mapping[str, Any] | None, timeline: list[dict[str, Any]]
) -> list[str]:
    """What went wrong in the run itself, as it recorded it."""
    if stored is not None:
        if "harness_problems" in stored:
            return list(stored["harness_problems"])
        return [p for p in stored.get("problems", []) if not p.startswith(_DERIVED)]
    crash = path / "crash.txt"
    if crash.is_file():
        lines = crash.read_text(encoding="utf-8").strip().splitlines()
        return [f"the harness crashed ({crash.name}: {lines[-1] if lines else '?'})"]
    if "final_read_end" not in {e.get("event") for e in timeline}:
        return ["the run did not finish: no results.json, no final read in the timeline"]
    return ["the run left no results.json"]
