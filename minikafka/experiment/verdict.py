"""An experiment's verdict: the checker over its run folder, the throttle bound on both sides,
the experiment's expectations, and whatever kept the run from going as planned.

Valid (exit 0) needs all of: no invalid anomaly in the history, the replica dumps or the node
logs (minikafka/checker/anomalies.py, invariants.py); when the experiment sets a throttle, no
window above the bound on either side of any broker; every expectation holds. Invalid (1) is any
of those failing. Unknown (2) is nothing invalid, but something unchecked: a partition not read
back, a fault that could not be applied or undone, a cluster that did not settle, a throttle
bound that could not be judged (no PySpark report: `--no-report`, or the analysis failed).

The throttle bound is the PySpark analysis' (tools/analysis), the one definition the system
tests read too, judged as the run's case.json says (runner.py writes it, analysis.py `case_info`): the
largest rate over sliding windows of `ExperimentSpec.throttle_window_s` (12 s: the quota's own
span, spec.py says why), one starting every whole second, from 2 s after the throttle was set
(the timeline's throttle_set) to the end of the node logs, on the follower and leader side of
every broker, counting only the bytes the throttle could hold back (in-sync replicas' bytes are
counted by the quota, KAFKA-4313, but never held back: each broker logs them apart as
`*_exempt_bytes`), against `throttle_tolerance` x T. `throttle_check` reads it from the
report's case.

When the experiment names a `catch_up_broker`, results.json also carries `catch_up`: for each
partition, the seconds from that broker's return (the end of the last fault on it, from the
nemesis log) to its rejoining the partition's ISR (the leader's `isr_expand` event), with the
min, median, max and their spread. An experiment with a reassignment gets `move`: what the move
did under its throttle (minikafka/experiment/move.py). These describe the run; they judge it
only where an expectation names one of their figures (`move.copy_steps`, `catch_up.spread_s`).

A compacted topic (the spec's `keys` > 0 and `compact` in its `log.cleanup.policy`) is judged
by minikafka/checker/compaction.py as well, from the brokers' `log_cleaned` events
(`log_cleanings`), and results.json gets `compaction`: the keys, each final read's leader and
clean point, the values compacted, and the cleaner's counters.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from minikafka.checker.anomalies import Facts, check
from minikafka.checker.compaction import Compaction, KeyedFacts, parse_cleanings
from minikafka.checker.history import History, load_history, parse_dumps
from minikafka.checker.invariants import MAX_EXAMPLES, LeaderClaim, parse_claims, parse_samples
from minikafka.experiment import node_logs
from minikafka.experiment.move import describe as describe_move
from minikafka.experiment.move import move_figures
from minikafka.experiment.spec import ExperimentSpec

# Summed over the brokers into results.json, with every counter an expectation names.
COUNTERS = (
    "isr_shrinks",
    "isr_expands",
    "fetch_errors",
    "fetch_offset_out_of_range",
    "log_segments_deleted",
)
# And for a compacted topic (results.json's `compaction`), beside those its expectations name.
CLEANER_COUNTERS = (
    "log_cleaner_passes",
    "log_cleaner_records_removed",
    "log_cleaner_bytes_removed",
)
# History times are rounded to 0.1 ms and node log times to 1 ms: samples this close are
# treated as simultaneous by the HW check (and by the compaction check's clean points).
HW_SLACK_S = 0.002
# Faults after which a node's log starts again (its disk lost, or its unsynced writes): its
# passes from before no longer say its log is clean (checker/compaction.py).
DISK_LOSSES = ("wipe", "power-loss")


def judge(
    spec: ExperimentSpec,
    run_dir: Path,
    *,
    t0: float,
    dumps: Sequence[Any] | None,
    driver_errors: list[str],
    settled: bool,
    analysis: Mapping[str, Any] | None,
    analysis_error: str | None = None,
) -> dict[str, Any]:
    """results.json of one run (`dumps`: each replica's log read from disk, replica_dump.py's
    documents, None if there are none; `analysis`: the PySpark report's case of the run, None
    with `analysis_error` saying why). Reads the history and node logs from `run_dir`."""
    history = load_history(run_dir / "history.jsonl")
    replicas = None
    if dumps is not None and settled:
        # Only a settled cluster's replicas have all truncated their uncommitted tails; before
        # that, a cut-off old leader's tail below the new HW is legal, not inconsistent.
        replicas = parse_dumps(dumps, source="replica_dumps.jsonl")
    claims = parse_claims(node_logs.leadership_claims(run_dir, spec.topic, t0))
    faults = _nemesis_log(run_dir)
    compaction = compaction_of(spec, run_dir, t0, claims, faults)
    verdict = check(
        history,
        dumps=replicas,
        claims=claims,
        samples=parse_samples(node_logs.replica_samples(run_dir, spec.topic, t0)),
        hw_slack_s=HW_SLACK_S,
        compaction=compaction,
    )
    doc = verdict.to_doc()
    # An expectation on a counter not collected would read 0 and judge nothing: collect it too.
    more = CLEANER_COUNTERS if compaction is not None else ()
    wanted = tuple(
        dict.fromkeys([*COUNTERS, *more, *(e.counter for e in spec.expect if e.counter)])
    )
    counters = node_logs.counter_totals(run_dir, wanted, since=t0)
    figures: dict[str, Any] = {}
    if compaction is not None:
        figures["compaction"] = compaction_figures(history, compaction, counters)
    if spec.reassign is not None:
        figures["move"] = move_figures(spec, run_dir, t0)
    if spec.catch_up_broker is not None:
        figures["catch_up"] = catch_up(spec, run_dir, t0, faults)
    expectations = []
    for e in spec.expect:
        seen = counters.get(e.counter, 0) if e.counter else figure(figures, e.figure)
        expectations.append({"expect": str(e), "observed": seen, "holds": e.holds(seen),
                             "why": e.why})  # fmt: skip
    problems = list(driver_errors)
    if not settled and not any("settle" in p for p in problems):
        problems.append("the cluster did not settle")
    throttle: dict[str, Any] = {}
    if spec.throttle_bytes_per_s is not None:
        if analysis is None:
            why = analysis_error or "no PySpark report"
            problems.append(f"the throttle bound was not judged: {why}")
        else:
            throttle = throttle_check(analysis, t0)
    invalid = (
        verdict.valid is False
        or any(side["windows_over"] for side in throttle.values())
        or not all(e["holds"] for e in expectations)
    )
    valid: bool | str = "unknown"
    if invalid:
        valid = False
    elif verdict.valid is True and not problems:
        valid = True
    results = {
        "experiment": spec.name,
        "seed": spec.seed,
        "valid": valid,
        "exit_code": {True: 0, False: 1}.get(valid, 2),  # type: ignore[arg-type]
        "checker": doc,
        "throttle": throttle,
        "expectations": expectations,
        "counters": counters,
        "problems": problems,
        "settled": settled,
        "faults": faults,
        **figures,
    }
    results["summary"] = summary(results, verdict.summary())
    return results


def compacted(spec: ExperimentSpec) -> bool:
    """Whether the spec's topic is compacted and keyed, so the compaction checks apply."""
    policy = spec.all_node_configs().get("log.cleanup.policy", "delete")
    return spec.keys > 0 and "compact" in policy.replace(" ", "").split(",")


def log_cleanings(run_dir: Path, topic: str, t0: float) -> list[dict[str, Any]]:
    """Every cleaning pass of `topic` the nodes reported (their events.jsonl's `log_cleaned`),
    times relative to `t0` (node_logs.py reads the logs)."""
    return [
        {"node": node, "time": round(e["ts"] - t0, 3), "topic": topic,
         "partition": e["partition"], "first_dirty_offset": e["first_dirty_offset"]}
        for node, d in node_logs._node_dirs(run_dir)
        for e in node_logs._lines(d / "events.jsonl")
        if e.get("event") == "log_cleaned" and e.get("topic") == topic
    ]  # fmt: skip


def disk_losses(faults: Sequence[Mapping[str, Any]]) -> tuple[tuple[int, float], ...]:
    """(node, time) of every fault of the nemesis log that lost a node's disk or its unsynced
    writes (`DISK_LOSSES`), at its start: the node's log starts again from there."""
    return tuple(
        (f["node"], f["time"])
        for f in faults
        if f.get("event") == "start" and f.get("kind") in DISK_LOSSES and "node" in f
    )


def compaction_of(
    spec: ExperimentSpec,
    run_dir: Path,
    t0: float,
    claims: Sequence[LeaderClaim],
    faults: Sequence[Mapping[str, Any]],
) -> Compaction | None:
    """The compaction checker's input for a compacted topic (module docstring), else None."""
    if not compacted(spec):
        return None
    cleanings = parse_cleanings(log_cleanings(run_dir, spec.topic, t0))
    return Compaction(keys=spec.keys, cleanings=cleanings, claims=tuple(claims),
                      slack_s=HW_SLACK_S, disk_losses=disk_losses(faults))  # fmt: skip


def compaction_figures(
    history: History, compaction: Compaction, counters: Mapping[str, int]
) -> dict[str, Any]:
    """results.json's `compaction`: per final read, whose log it read and its clean point; the
    values the cleaner removed; the cleaner's counters summed over the brokers."""
    doc = KeyedFacts(Facts(history, compaction=compaction), compaction).figures()
    doc["passes_reported"] = len(compaction.cleanings)
    doc.update({name: counters.get(name, 0) for name in CLEANER_COUNTERS})
    return doc


def figure(figures: Mapping[str, Any], path: str) -> Any:
    """The figure at a dotted path (`move.copy_steps`), None where there is none."""
    node: Any = figures
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def catch_up(
    spec: ExperimentSpec, run_dir: Path, t0: float, faults: list[dict[str, Any]]
) -> dict[str, Any]:
    """Per-partition catch-up times of `spec.catch_up_broker` (module docstring)."""
    broker = spec.catch_up_broker
    assert broker is not None
    mine = [f for f in faults if f.get("node") == broker]
    since = min((f["time"] for f in mine if f.get("event") == "start"), default=0.0)
    back = max((f["time"] for f in mine if f.get("event") == "end"), default=since)
    rejoined = node_logs.isr_rejoins(run_dir, spec.topic, broker, t0, since_s=since)
    times = {p: round(t - back, 3) for p, t in sorted(rejoined.items())}
    doc: dict[str, Any] = {
        "broker": broker,
        "back_at_s": back,
        "partitions": {str(p): t for p, t in times.items()},
        "rejoined": len(times),
        "of": spec.partitions,
        "missing": [p for p in range(spec.partitions) if p not in times],
    }
    if times:
        values = sorted(times.values())
        doc.update(
            min_s=values[0],
            median_s=round(statistics.median(values), 3),
            max_s=values[-1],
            spread_s=round(values[-1] - values[0], 3),
        )
    return doc


def throttle_check(case: Mapping[str, Any], t0: float) -> dict[str, Any]:
    """Per side (leader, follower), from the analysis report's `case`: the window span and
    bound, how many windows were judged and how many exceeded the bound, each broker's largest
    window over the throttle, and each violating broker's largest window (times relative to
    `t0`, the run's start, like the history's)."""
    out = {}
    for side in ("leader", "follower"):
        mine = [b for b in case["brokers"] if b["side"] == side]
        out[side] = {
            "rate_bytes_per_s": case["throttle_bytes_per_s"],
            "window_s": case["throttle_window_s"],
            "bound_bytes_per_s": case["throttle_bound_bytes_per_s"],
            "windows": sum(b["windows"] for b in mine),
            "windows_over": sum(b["windows_over"] for b in mine),
            "worst_ratio": {
                str(b["node"]): b["max_window_throttle_ratio"]
                for b in mine
                if b["max_window_throttle_ratio"] is not None
            },
            "examples": [
                {
                    "node": b["node"],
                    "start": round(b["max_window_start_ts"] - t0, 3),
                    "end": round(b["max_window_start_ts"] + case["throttle_window_s"] - t0, 3),
                    "rate_bytes_per_s": b["max_window_bytes_per_s"],
                    "ratio": b["max_window_throttle_ratio"],
                    "violating_windows": b["windows_over"],
                }
                for b in mine
                if b["throttle_violated"]
            ][:MAX_EXAMPLES],
        }
    return out


def _nemesis_log(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "nemesis.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary(results: Mapping[str, Any], checker_summary: str) -> str:
    """A few lines for people: the verdict, the anomalies, the throttle, the expectations."""
    word = {True: "VALID", False: "INVALID"}.get(results["valid"], "UNKNOWN")
    lines = [f"{word} (exit {results['exit_code']})", checker_summary]
    starts = [f for f in results["faults"] if f.get("event") == "start"]
    if starts:
        done = ", ".join(
            f"{f['kind']} {f['target']} (node {f['node']}) {f['start_s']:g}-{f['end_s']:g} s"
            for f in starts
        )
        lines.append(f"  faults: {done}")
    c = results["checker"]["counts"]
    lines.append(
        f"  leaderships taken: {c['leadership_claims']}; ISR shrinks "
        f"{results['counters']['isr_shrinks']}, expands {results['counters']['isr_expands']}"
    )
    for side, t in results["throttle"].items():
        worst = max(t["worst_ratio"].values(), default=0.0)
        lines.append(
            f"  {side} throttle {t['rate_bytes_per_s']} B/s: worst {t['window_s']} s window "
            f"{worst:.2f}x, {t['windows_over']} of {t['windows']} windows over the bound "
            f"{t['bound_bytes_per_s']:.0f} B/s"
        )
    up = results.get("catch_up")
    if up is not None:
        line = (
            f"  catch-up of broker {up['broker']} (back at {up['back_at_s']:g} s): "
            f"{up['rejoined']}/{up['of']} partitions rejoined the ISR"
        )
        if up["rejoined"]:
            line += (
                f" after min {up['min_s']:.2f} s, median {up['median_s']:.2f} s, "
                f"max {up['max_s']:.2f} s; spread {up['spread_s']:.2f} s"
            )
        lines.append(line)
    if results.get("move") is not None:
        lines.append(describe_move(results["move"]))
    if results.get("compaction") is not None:
        lines.append(describe_compaction(results["compaction"]))
    for e in results["expectations"]:
        mark = "holds" if e["holds"] else "DOES NOT HOLD"
        lines.append(f"  expectation {e['expect']}: observed {e['observed']}, {mark}")
    lines += [f"  problem: {p}" for p in results["problems"]]
    return "\n".join(lines)


def describe_compaction(doc: Mapping[str, Any]) -> str:
    """One line for people: what the cleaner did, and the final reads' clean points."""
    points = ", ".join(
        f"{tp.rsplit('/', 1)[1]}: {p['clean_point']} (node {p['leader']}, {p['records']} records)"
        for tp, p in doc["final_reads"].items()
    )
    return (
        f"  compaction: {doc['keys']} keys; {doc['log_cleaner_passes']} cleaner passes removed "
        f"{doc['log_cleaner_records_removed']} records; {doc['values_compacted']} acknowledged "
        f"or polled values compacted; final reads clean below (partition: offset): {points}"
    )
