"""From the Spark job's small result rows to the report: one object per case, the verdicts and
a summary. Pure (no Spark, no files), so every rule here is a plain unit test.

Verdict of a case (issue text): it fails when any judged broker side has a window above its
bound (the largest rate over sliding windows of the case's span, 1 s slide, as
frames.judged_windows computes it; span and bound from case.json, the sensor's own bound
`throttle_bounds_bytes_per_s` "<node> <side>" first, else `Params.window_s` and
`violation_factor` x the throttle: `ThrottleCheck`), when the case judges the wire
(`throttle_wire_judged`) and a window of the side's wire bytes is above that bound, or when a
prediction exists and the move took less than `duration_ratio_min` or more than
`duration_ratio_max` of it (or was not found at all); a case.json with alternatives across a
step of the quota algorithm is judged against the first prediction whose accepted ratios hold
the move (`judged_prediction`). Each case reports the window span, bounds, prediction and
rules it was judged with, each broker side the bound it was judged against.

Figures beside the verdict: per judged side, the record bytes on the wire (leader side
`replication_bytes_out`, follower side `replication_bytes_in`) and those the quota charged
(throttled less overhead bytes) during the move, and the largest wire window; per case, the
order partitions caught up in (`catch_up`: Spearman's rho of partition index against catch-up
time, near 0 under KIP-73's random partition order, near +1 for a fetcher that always asks in
partition order) and the produce latency of partitions not caught up yet during the move
(`produce_latency.in_sync_during_move`, KAFKA-4313).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minikafka.tools.analysis.runs import Params, RunCase, ThrottleCheck, slugs

SCHEMA = "minikafka-analysis/1"
PHASES = ("all", "before", "during", "after", "in_sync_during_move")
Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Collected:
    """What the Spark job brings back to the driver, as plain dicts (see spark_job)."""

    moves: list[dict[str, Any]]
    windows: list[dict[str, Any]]
    window_series: list[dict[str, Any]]
    seconds: list[dict[str, Any]]
    isr_counts: list[dict[str, Any]]
    last_isr: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    latency_seconds: list[dict[str, Any]]
    catch_up: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """report.json as Python (`cases`, `summary`, `params`, `files`), plus the per-second series
    behind the plots (also written as per_second.jsonl and latency_per_second.jsonl)."""

    cases: list[dict[str, Any]]
    summary: dict[str, Any]
    params: dict[str, Any]
    files: dict[str, Any] = field(default_factory=dict)
    per_second: list[dict[str, Any]] = field(default_factory=list)
    latency_per_second: list[dict[str, Any]] = field(default_factory=list)
    out_dir: Path | None = None

    @property
    def ok(self) -> bool:
        return self.summary["verdict"] == "pass"

    def case(self, name: str) -> dict[str, Any]:
        """The case whose id or case name is `name` (the first, for a repeated name)."""
        for c in self.cases:
            if name in (c["id"], c["case"]):
                return c
        raise KeyError(f"no case {name!r} in the report (have {[c['id'] for c in self.cases]})")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "params": self.params,
            "files": self.files,
            "cases": self.cases,
            "summary": self.summary,
        }


def build_report(runs: Sequence[RunCase], data: Collected, params: Params) -> Report:
    ids = slugs(runs)
    cases = [build_case(r, ids[r.key], data, params) for r in runs]
    starts = {c["run_dir"]: c["move_start_ts"] for c in cases}
    rates = {(w["run_key"], w["node"], w["side"], w["sec"]): w["rate"] for w in data.window_series}
    per_second = [
        _second_row(row, ids[row["run_key"]], starts[row["run_key"]], rates)
        for row in sorted(data.seconds, key=lambda r: (r["run_key"], r["node"], r["sec"]))
    ]
    latency_per_second = [
        {
            "case_id": ids[row["run_key"]],
            "ts": row["sec"],
            "t_s": _rel(row["sec"], starts[row["run_key"]]),
            **_latency(row),
        }
        for row in sorted(data.latency_seconds, key=lambda r: (r["run_key"], r["sec"]))
    ]
    return Report(
        cases=cases,
        summary=summarize(cases),
        params=asdict(params),
        files={"html": "report.html", "per_second": "per_second.jsonl"},
        per_second=per_second,
        latency_per_second=latency_per_second,
    )


def build_case(run: RunCase, case_id: str, data: Collected, params: Params) -> dict[str, Any]:
    mine = [m for m in data.moves if m["run_key"] == run.key]
    check = run.throttle_check(params)
    start, end, source = case_move(check, mine[0] if mine else {})
    duration = end - start if start is not None and end is not None else None
    predicted = judged_prediction(
        duration, (run.predicted_move_s, *run.predicted_move_alternatives_s), params
    )
    ratio = duration / predicted if duration is not None and predicted else None
    brokers = [
        broker_figures(
            w, run.throttle_bytes_per_s, check.bound_for(w["node"], w["side"]), duration,
            wire_judged=check.wire_judged,
        )
        for w in sorted(data.windows, key=lambda w: (w["node"], w["side"]))
        if w["run_key"] == run.key
    ]  # fmt: skip
    judged = [b for b in brokers if b["max_window_throttle_ratio"] is not None]
    top = max(judged, key=lambda b: b["max_window_throttle_ratio"], default=None)
    moved = sum(b["throttled_bytes_during_move"] or 0 for b in brokers if b["side"] == "follower")
    has_produce = any(r["run_key"] == run.key for r in data.latency)
    case = {
        "id": case_id,
        **run.describe(),
        **check.describe(),
        "move_source": source,
        "move_start_ts": _round(start, 3),
        "move_end_ts": _round(end, 3),
        "move_duration_s": _round(duration, 3),
        "move_judged_against_s": predicted,
        "move_duration_ratio": _round(ratio, 4),
        "moved_bytes": _round(moved, 0),
        "max_window_bytes_per_s": top["max_window_bytes_per_s"] if top else None,
        "max_window_throttle_ratio": top["max_window_throttle_ratio"] if top else None,
        "max_window_node": top["node"] if top else None,
        "max_window_side": top["side"] if top else None,
        "throttle_violated": any(b["throttle_violated"] for b in brokers),
        "wire_violated": any(b["wire_violated"] for b in brokers) if check.wire_judged else None,
        "brokers": brokers,
        "catch_up": catch_up_figures(data.catch_up, run.key),
        "produce_latency": latency_by_phase(data.latency, run.key),
        "isr": isr_figures(data.isr_counts, data.last_isr, run.key),
        "plots": {
            "rates": f"{case_id}-rates.png",
            "latency": f"{case_id}-latency.png" if has_produce else None,
        },
    }
    failures = verdict_failures(case, params)
    case["verdict"] = "fail" if failures else "pass"
    case["failures"] = failures
    return case


def move_bounds(row: Row) -> tuple[float | None, float | None, str | None]:
    """Timeline bounds where logged, inferred ones otherwise; the source says which."""
    tl_start, tl_end = row.get("tl_start"), row.get("tl_end")
    start = tl_start if tl_start is not None else row.get("inf_start")
    end = tl_end if tl_end is not None else row.get("inf_end")
    if start is not None and end is not None and end < start:
        end = None  # a move_end before the start belongs to no move we can see
    if start is None and end is None:
        return None, None, None
    from_tl = (tl_start is not None, tl_end is not None and end is not None)
    source = "timeline" if all(from_tl) else "inferred" if not any(from_tl) else "mixed"
    return start, end, source


def case_move(check: ThrottleCheck, row: Row) -> tuple[float | None, float | None, str | None]:
    """`move_bounds`; but a case judged over the whole "run" has a move only where its timeline
    logs one: its brokers receive throttled bytes all along, so an inferred move would be the
    run itself."""
    if check.judged == "run":
        row = {k: v for k, v in row.items() if k not in ("inf_start", "inf_end")}
    return move_bounds(row)


def judged_bounds(check: ThrottleCheck, row: Row) -> tuple[float | None, float | None]:
    """(start, end) of what a case's throttle is judged over: the move (`move_bounds`), or for
    "run" from the timeline's first throttle_set (None: each node's first second) on, open."""
    if check.judged == "run":
        return row.get("throttle_set"), None
    return move_bounds(row)[:2]


def broker_figures(
    w: Row,
    throttle: int | None,
    bound: float | None,
    duration: float | None,
    *,
    wire_judged: bool = False,
) -> dict[str, Any]:
    """One judged broker side (a `frames.broker_windows` row): violated when its largest
    window's rate is above `bound` (the side's own: `ThrottleCheck.bound_for`); its start in
    seconds after the judged interval's start. Its wire is violated (only when `wire_judged`,
    else None) when its largest window of wire bytes is above `bound` too."""
    max_window, max_wire = w.get("max_window"), w.get("max_wire_window")
    ratio = max_window / throttle if max_window is not None and throttle else None
    during = w.get("bytes_during_move")
    at, start = w.get("max_window_sec"), w.get("judged_from")
    wire_at = w.get("max_wire_window_sec")
    wire_over = max_wire is not None and bound is not None and max_wire > bound
    return {
        "node": w["node"],
        "side": w["side"],
        "role": w["role"],
        "throttled_bytes_during_move": _round(during, 0),
        "mean_throttled_bytes_per_s_during_move": _round(
            during / duration if during is not None and duration else None, 1
        ),
        "max_window_bytes_per_s": _round(max_window, 1),
        "max_window_throttle_ratio": _round(ratio, 4),
        "max_window_start_ts": at,
        "max_window_start_s": _round(
            at - start if at is not None and start is not None else None, 3
        ),
        "windows": w.get("windows") or 0,
        "windows_over": w.get("windows_over") or 0,
        "configured_throttle_bytes_per_s": w.get("cfg"),
        "bound_bytes_per_s": _round(bound, 1),
        "throttle_violated": max_window is not None and bound is not None and max_window > bound,
        # The record bytes on the wire beside those the quota was charged (less its headers).
        "wire_bytes_during_move": _round(w.get("wire_during_move"), 0),
        "charged_record_bytes_during_move": _round(w.get("charged_during_move"), 0),
        "max_wire_window_bytes_per_s": _round(max_wire, 1),
        "max_wire_window_start_s": _round(
            wire_at - start if wire_at is not None and start is not None else None, 3
        ),
        "wire_windows_over": w.get("wire_windows_over") or 0,
        "wire_violated": wire_over if wire_judged else None,
    }


def latency_by_phase(rows: Sequence[Row], key: str) -> dict[str, dict[str, Any]]:
    """{phase: {batches, records, p50_ms, p99_ms, max_ms}} for all, before, during, after."""
    found = {r["phase"]: _latency(r) for r in rows if r["run_key"] == key}
    empty = {"batches": 0, "records": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {p: found.get(p, dict(empty)) for p in PHASES}


def catch_up_figures(rows: Sequence[Row], key: str) -> dict[str, Any]:
    """{partitions, rank_correlation, first_s, last_s} of a case (`frames.catch_up_order`); no
    partition caught up in the move: 0 and nulls. rho is null where it is undefined (fewer than
    two partitions, or all caught up in the same instant)."""
    r = next((r for r in rows if r["run_key"] == key), None)
    if r is None:
        return {"partitions": 0, "rank_correlation": None, "first_s": None, "last_s": None}
    rho = r.get("rho")
    finite = isinstance(rho, int | float) and math.isfinite(rho)  # NaN: no variance
    return {
        "partitions": r["partitions"],
        "rank_correlation": _round(rho, 4) if finite else None,
        "first_s": _round(r.get("first_s"), 3),
        "last_s": _round(r.get("last_s"), 3),
    }


def _latency(r: Row) -> dict[str, Any]:
    pct = r.get("pct") or [None, None]
    return {
        "batches": r["batches"],
        "records": r["records"],
        "p50_ms": _round(pct[0], 3),
        "p99_ms": _round(pct[1], 3),
        "max_ms": _round(r.get("max"), 3),
    }


def isr_figures(counts: Sequence[Row], last: Sequence[Row], key: str) -> dict[str, Any]:
    names = ("shrinks", "expands", "shrinks_during_move", "expands_during_move")
    by_node = {
        str(r["node"]): {n: r[n] for n in names}
        for r in sorted(counts, key=lambda r: r["node"])
        if r["run_key"] == key
    }
    totals = {n: sum(v[n] for v in by_node.values()) for n in names}
    states = sorted(
        (r for r in last if r["run_key"] == key), key=lambda r: (r["topic"], r["partition"])
    )
    return {
        **totals,
        "by_node": by_node,
        "last_isr": {f"{r['topic']}-{r['partition']}": list(r["isr"]) for r in states},
    }


def verdict_failures(case: Mapping[str, Any], params: Params) -> list[str]:
    failures = []
    for b in case["brokers"]:
        if b["throttle_violated"]:
            ratio = b["max_window_throttle_ratio"]
            failures.append(
                f"throttle violated: node {b['node']} {b['side']} averaged "
                f"{b['max_window_bytes_per_s']:.0f} B/s over {case['throttle_window_s']} s from "
                f"t={b['max_window_start_s']} s"
                + (
                    f", {ratio:.2f}x the throttle {case['throttle_bytes_per_s']} B/s"
                    if ratio
                    else ""
                )
                + f" (bound {b['bound_bytes_per_s']:.0f} B/s; "
                f"{b['windows_over']} of {b['windows']} windows above it)"
            )
        if b.get("wire_violated"):
            failures.append(
                f"wire above the bound: node {b['node']} {b['side']} sent or fetched "
                f"{b['max_wire_window_bytes_per_s']:.0f} B/s of records over "
                f"{case['throttle_window_s']} s from t={b['max_wire_window_start_s']} s (bound "
                f"{b['bound_bytes_per_s']:.0f} B/s; {b['wire_windows_over']} of {b['windows']} "
                "windows above it)"
            )
    predicted = case["predicted_move_s"]
    if predicted:
        ratio = case["move_duration_ratio"]
        lo, hi = params.duration_ratio_min, params.duration_ratio_max
        others = case.get("predicted_move_alternatives_s") or []
        across = (
            f" of it or of {', '.join(f'{a} s' for a in others)} across a step" if others else ""
        )
        accepted = format_ranges(accepted_ranges((predicted, *others), lo, hi))
        if ratio is None:
            failures.append(f"no move found, {predicted} s predicted")
        elif not lo <= ratio <= hi:
            failures.append(
                f"move took {case['move_duration_s']} s, {ratio:.2f}x the predicted "
                f"{predicted} s (accepted {lo}-{hi}x{across}: {accepted} s)"
            )
    return failures


def accepted_ranges(
    predictions: Sequence[float | None], lo: float, hi: float
) -> list[tuple[float, float]]:
    """The move durations a case accepts: `lo`-`hi` x each prediction (case.json's and its
    alternatives across a step), overlapping ranges merged, in order."""
    spans = sorted((lo * p, hi * p) for p in predictions if p)
    out: list[tuple[float, float]] = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def format_ranges(ranges: Sequence[tuple[float, float]]) -> str:
    """"15.5-20.7, 20.9-28.5" (seconds, one decimal); "-" for none."""
    return ", ".join(f"{a:.1f}-{b:.1f}" for a, b in ranges) or "-"


def judged_prediction(
    duration: float | None, predictions: Sequence[float | None], params: Params
) -> float | None:
    """The prediction a move is judged against: the first of `predictions` (case.json's, then
    its alternatives across a step of the quota algorithm) whose accepted ratios hold
    `duration`, else the first (so a failure names case.json's own prediction)."""
    lo, hi = params.duration_ratio_min, params.duration_ratio_max
    for p in predictions:
        if p and duration is not None and lo <= duration / p <= hi:
            return p
    return predictions[0] if predictions else None


def summarize(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    failed = [c["id"] for c in cases if c["verdict"] == "fail"]
    ratios = [c["max_window_throttle_ratio"] for c in cases if c["max_window_throttle_ratio"]]
    return {
        "cases": len(cases),
        "passed": len(cases) - len(failed),
        "failed": len(failed),
        "failed_cases": failed,
        "throttle_violated_cases": [c["id"] for c in cases if c["throttle_violated"]],
        "max_window_throttle_ratio": max(ratios, default=None),
        "verdict": "fail" if failed else "pass",
    }


def _second_row(
    row: Row, case_id: str, start: float | None, rates: Mapping[tuple[Any, ...], float]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "case_id": case_id,
        "node": row["node"],
        "ts": row["sec"],
        "t_s": _rel(row["sec"], start),
    }
    for name in (
        "leader_throttled_bytes",
        "follower_throttled_bytes",
        "replication_bytes_in",
        "replication_bytes_out",
        "bytes_in",
        "bytes_out",
        "leader_replication_throttled_bytes",
        "follower_replication_throttled_bytes",
        "leader_reassignment_throttled_bytes",
        "follower_reassignment_throttled_bytes",
        "leader_exempt_bytes",
        "follower_exempt_bytes",
    ):
        out[f"{name}_per_s"] = _round(row[name], 1)
    for side in ("leader", "follower"):
        # the judged window starting at this second, if one does: [ts, ts + window_s)
        rate = rates.get((row["run_key"], row["node"], side, row["sec"]))
        out[f"{side}_window_bytes_per_s"] = _round(rate, 1)
    out["leader_throttle_bytes_per_s"] = row["leader_throttle"]
    out["follower_throttle_bytes_per_s"] = row["follower_throttle"]
    out["sum_replica_lag"] = row["lag"]
    return out


def _rel(sec: float, start: float | None) -> float | None:
    return round(sec - start, 3) if start is not None else None


def _round(value: float | None, digits: int) -> Any:
    if value is None:
        return None
    return int(round(value)) if digits == 0 else round(float(value), digits)
