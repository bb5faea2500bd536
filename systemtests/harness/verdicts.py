"""A case's verdicts: the Spark analysis' figures, the acknowledged-writes checker, the ISRs.

The numbers the assertions use come from the analysis report (tools/analysis, reading only the
run folder), never from a calculation in this process: the move's duration over the prediction,
and the largest throttled rate over sliding windows (one starting on every whole second) of the
case's span, starting 2 s or more after the move start and ending by its end (past it,
counting nothing after it, if case.json says `throttle_window_past_end`), per broker and side.
The span and the bound are each case's (case.json `throttle_window_s`,
`throttle_bound_bytes_per_s`; by default 5 s and 1.15 x the throttle, `PARAMS`), as the report
says. What the analysis cannot see (the values read back, the final Metadata) comes from the
run itself. All of it goes to results.json; `failures()` lists what is wrong.

The thresholds (KIP-73 test plan, "replicas should move at the quota dictated rate"):
- the move completes within 0.9-1.2 x the predicted time;
- no window (5 s unless the case says otherwise) after the first 2 s exceeds the case's bound
  (1.15 x the throttle unless it says otherwise), on any broker (the follower side of
  receiving brokers, the leader side of sending ones), and at least one such window was judged
  on the binding side (a case too short to have one proves nothing);
- every acknowledged record is read back at its offset;
- every replica ended in the ISR, with the target replicas (Metadata after the move).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minikafka.testing.checker import Verdict
from minikafka.tools.analysis import Params, Report, analyze, spark_session
from systemtests.harness.quota_modes import DURATION_RATIO
from systemtests.harness.runner import CaseRun

PARAMS = Params(
    window_s=5,
    window_skip_s=2,
    violation_factor=1.15,
    duration_ratio_min=DURATION_RATIO[0],
    duration_ratio_max=DURATION_RATIO[1],
)
ANALYSIS_TIMEOUT_S = 600.0
BROKER_FIELDS = (
    "node",
    "side",
    "role",
    "max_window_throttle_ratio",
    "max_window_bytes_per_s",
    "max_window_start_s",
    "windows",
    "windows_over",
    "throttle_violated",
    "mean_throttled_bytes_per_s_during_move",
    "throttled_bytes_during_move",
    "configured_throttle_bytes_per_s",
)


def run_analysis(
    runs: Sequence[CaseRun], *, master: str, out_dir: Path, timeout_s: float = ANALYSIS_TIMEOUT_S
) -> Report:
    """minikafka.tools.analysis.analyze on these folders, in one Spark job; report in `out_dir`.

    Bounded: after `timeout_s` a watchdog cancels the session's jobs, and analyze raises."""
    spark = spark_session(master)
    # interruptAll, not sparkContext.cancelAllJobs: Spark Connect sessions have no sparkContext
    # (issue 15); since Spark 4 it cancels a classic session's jobs too.
    watchdog = threading.Timer(timeout_s, spark.interruptAll)
    watchdog.daemon = True
    watchdog.start()
    try:
        return analyze([r.path for r in runs], spark=spark, params=PARAMS, out_dir=out_dir)
    finally:
        watchdog.cancel()


def case_of(report: Report, run: CaseRun) -> dict[str, Any] | None:
    """The report's case for `run`'s folder."""
    return next((c for c in report.cases if c["run_dir"] == str(run.path)), None)


def checker_json(v: Verdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "ok": v.ok,
        "acknowledged": v.acknowledged,
        "read": v.read,
        "lost": len(v.lost),
        "corrupted": len(v.corrupted),
        "duplicated_offsets": len(v.duplicated_offsets),
        "retry_duplicates": v.duplicates,
        "first_lost": [f"{tp}@{o}" for tp, o in v.lost[:10]],
        "summary": v.summary(),
    }


def results(
    run: CaseRun,
    case: dict[str, Any] | None,
    *,
    report_path: Path | None = None,
    analysis_error: str | None = None,
) -> dict:
    """results.json: every figure and verdict of the case (module docstring); `case` is the
    analysis report's case of this run."""
    out: dict[str, Any] = {
        "case": run.spec.name,
        "run_dir": str(run.path),
        "wall_s": round(run.wall_s, 1),
        "error": run.error,
        "analysis_error": analysis_error,
        "thresholds": {
            "duration_ratio": [PARAMS.duration_ratio_min, PARAMS.duration_ratio_max],
            # the case's own (from the report), else the defaults
            "window_s": case["throttle_window_s"] if case else PARAMS.window_s,
            "window_skip_s": PARAMS.window_skip_s,
            "max_window_bytes_per_s": case["throttle_bound_bytes_per_s"] if case else None,
        },
        "analysis": None,
        "checker": checker_json(run.verdict),
        "isr": {"ok": run.final_isr_ok, "problems": run.final_isr_problems[:20]},
    }
    if case is not None:
        out["analysis"] = {
            "report": None if report_path is None else str(report_path),
            "verdict": case["verdict"],
            "failures": case["failures"],
            "predicted_move_s": case["predicted_move_s"],
            "predicted_move_alternatives_s": case["predicted_move_alternatives_s"],
            "move_judged_against_s": case["move_judged_against_s"],
            "move_duration_s": case["move_duration_s"],
            "move_duration_ratio": case["move_duration_ratio"],
            "move_source": case["move_source"],
            "window_s": case["throttle_window_s"],
            "bound_bytes_per_s": case["throttle_bound_bytes_per_s"],
            "max_window_throttle_ratio": case["max_window_throttle_ratio"],
            "max_window_node": case["max_window_node"],
            "max_window_side": case["max_window_side"],
            "moved_bytes": case["moved_bytes"],
            "brokers": [{k: b.get(k) for k in BROKER_FIELDS} for b in case["brokers"]],
            "isr_shrinks_during_move": case["isr"]["shrinks_during_move"],
            "produce_latency_during_move": case["produce_latency"]["during"],
        }
    out["failures"] = failures(out, run)
    out["verdict"] = "fail" if out["failures"] else "pass"
    return out


def failures(res: dict[str, Any], run: CaseRun) -> list[str]:
    out = []
    if res["error"]:
        out.append(f"the case did not run to the end: {res['error']}")
    if res["analysis_error"]:
        out.append(f"the analysis failed: {res['analysis_error']}")
    a = res["analysis"]
    if a is not None:
        out += [f"analysis: {f}" for f in a["failures"]]
        ratio = a["move_duration_ratio"]
        lo, hi = PARAMS.duration_ratio_min, PARAMS.duration_ratio_max
        if ratio is None or not lo <= ratio <= hi:
            out.append(f"move duration / predicted = {ratio}, expected within {lo}-{hi}")
        for b in a["brokers"]:
            if b["throttle_violated"]:  # its largest window above the case's bound
                r = b["max_window_throttle_ratio"]
                out.append(
                    f"node {b['node']} {b['side']}: a {a['window_s']} s window at "
                    f"{b['max_window_bytes_per_s']:.0f} B/s"
                    + ("" if r is None else f", {r:.3f} x the throttle")
                    + f" (bound {a['bound_bytes_per_s']:.0f} B/s)"
                )
        binding = _binding_side(run)
        judged = [b for b in a["brokers"] if (b["node"], b["side"]) in binding and b["windows"]]
        if binding and not judged:
            out.append(
                f"no {a['window_s']} s window after the first {PARAMS.window_skip_s} s on the "
                f"binding side {sorted(binding)}: the move was too short to judge the throttle"
            )
    elif not res["error"] and not res["analysis_error"]:
        out.append("the analysis report has no case")
    c = res["checker"]
    if c is None:
        if not res["error"]:
            out.append("nothing was read back")
    elif not c["ok"]:
        out.append(f"acknowledged writes: {c['summary']}")
    if res["isr"]["ok"] is False:
        out.append(f"final ISR: {'; '.join(res['isr']['problems'][:5])}")
    elif res["isr"]["ok"] is None and not res["error"]:
        out.append("final ISR state unknown")
    return out


def _binding_side(run: CaseRun) -> set[tuple[int, str]]:
    """The sensors the prediction says limit the move (all of them when tied within 2 %)."""
    p = run.prediction
    if p is None or p.seconds is None:
        return set()
    return {
        (s.broker, s.side)
        for s in p.sensors
        if s.seconds is not None and s.seconds >= 0.98 * p.seconds
    }


STEP_LEGEND = (
    "*: judged against the prediction across a step of Kafka's algorithm "
    "(case.json predicted_move_alternatives_s)"
)


def across_step(res: dict[str, Any]) -> bool:
    """Whether the move was judged against an alternative across a step (`*` in its line)."""
    a = res.get("analysis") or {}
    return a.get("move_judged_against_s") != a.get("predicted_move_s")


def summary_line(res: dict[str, Any]) -> str:
    a = res.get("analysis") or {}

    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    against = a.get("move_judged_against_s")
    step = "*" if across_step(res) else " "
    return (
        f"{res['case']:<36} {res['verdict']:<4} predicted {f(against, '6.2f')} s{step}"
        f" actual {f(a.get('move_duration_s'), '6.2f')} s"
        f"  ratio {f(a.get('move_duration_ratio'), '5.3f')}"
        f"  max {a.get('window_s', '-')} s window / T {f(a.get('max_window_throttle_ratio'), '5.3f')}"
        f" (node {a.get('max_window_node', '-')} {a.get('max_window_side') or '-'})"
    )
