"""Writing the analysis: report.json, per_second.jsonl, latency_per_second.jsonl, one PNG of
rates against the throttle per case (a panel per broker, the move shaded, the judged windows'
rates against the case's bound) and one of produce latency, report.html showing them, and the
plain-text table the CLI prints.

Plots use matplotlib's object API (`Figure`, rendered by Agg), never pyplot's global state, so
writing reports from threads or a headless test is safe. matplotlib (the `[analysis]` extra) is
imported by the plotting functions only: the table and the HTML need nothing beyond minikafka.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minikafka.tools.analysis.environment import ANALYSIS_EXTRA_HINT, MissingAnalysisExtra
from minikafka.tools.analysis.summary import Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MB = 1e6
TABLE_COLUMNS = (
    ("case", "id"),
    ("verdict", "verdict"),
    ("move_s", "move_duration_s"),
    ("predicted_s", "move_judged_against_s"),
    ("ratio", "move_duration_ratio"),
    ("window_s", "throttle_window_s"),
    ("max_window_B/s", "max_window_bytes_per_s"),
    ("bound_B/s", "throttle_bound_bytes_per_s"),
    ("throttle_B/s", "throttle_bytes_per_s"),
    ("x_throttle", "max_window_throttle_ratio"),
    ("p99_before_ms", ("produce_latency", "before", "p99_ms")),
    ("p99_during_ms", ("produce_latency", "during", "p99_ms")),
    ("p99_after_ms", ("produce_latency", "after", "p99_ms")),
    ("isr_shrinks", ("isr", "shrinks")),
)


def write_report(report: Report, out_dir: Path) -> Report:
    """Everything into `out_dir` (created); returns the report with `out_dir` and `files` set."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_jsonl(out_dir / "per_second.jsonl", report.per_second)
    _write_jsonl(out_dir / "latency_per_second.jsonl", report.latency_per_second)
    for case in report.cases:
        rates = [r for r in report.per_second if r["case_id"] == case["id"]]
        plot_rates(case, rates, out_dir / case["plots"]["rates"])
        if case["plots"]["latency"]:
            lat = [r for r in report.latency_per_second if r["case_id"] == case["id"]]
            plot_latency(case, lat, out_dir / case["plots"]["latency"])
    files = {
        **report.files,
        "json": "report.json",
        "latency_per_second": "latency_per_second.jsonl",
    }
    report = replace(report, out_dir=out_dir, files=files)
    (out_dir / "report.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    (out_dir / "report.html").write_text(render_html(report), encoding="utf-8")
    return report


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")


# ------------------------------------------------------------------------------------ plots


def _x(rows: Sequence[Mapping[str, Any]], t0: float) -> tuple[list[float], str]:
    """Seconds since the move started; without a move, since `t0` (the case's first second)."""
    if rows and rows[0]["t_s"] is not None:
        return [r["t_s"] for r in rows], "seconds since the move started"
    return [r["ts"] - t0 for r in rows], "seconds since the first metrics line"


def _shade(ax: Any, case: Mapping[str, Any]) -> None:
    start, end = case["move_start_ts"], case["move_end_ts"]
    if start is not None and end is not None:
        ax.axvspan(0, end - start, color="tab:green", alpha=0.12, label="move")


def _figure(**kwargs: Any) -> Figure:
    """A new matplotlib Figure (imported here: the `[analysis]` extra)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingAnalysisExtra(
            f"the report's plots need matplotlib: {ANALYSIS_EXTRA_HINT}", name="matplotlib"
        ) from exc
    return Figure(**kwargs)


def _plotted_nodes(case: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[int]:
    nodes = set(case["receiving_brokers"]) | set(case["sending_brokers"])
    for r in rows:
        if r["leader_throttled_bytes_per_s"] or r["follower_throttled_bytes_per_s"]:
            nodes.add(r["node"])
        elif r["replication_bytes_in_per_s"] or r["replication_bytes_out_per_s"]:
            nodes.add(r["node"])
    return sorted(nodes)


def plot_rates(case: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Per broker: leader and follower throttled B/s per second, replication in/out, the
    throttle, the move shaded; and what the verdict judges: each judged window's rate (the
    bytes it counts over its span, drawn at the window's end, so a point reads "the last n s")
    against the case's bound (dashed)."""
    nodes = _plotted_nodes(case, rows) or [None]
    fig = _figure(figsize=(9, 2.4 * len(nodes) + 0.6), layout="constrained")
    axes = fig.subplots(len(nodes), 1, sharex=True, squeeze=False)[:, 0]
    throttle, bound = case["throttle_bytes_per_s"], case["throttle_bound_bytes_per_s"]
    span = case["throttle_window_s"]
    t0 = min((r["ts"] for r in rows), default=0)
    label = ""
    for ax, node in zip(axes, nodes, strict=True):
        mine = [r for r in rows if r["node"] == node]
        x, label = _x(mine, t0)
        _shade(ax, case)
        for key, style, name in (
            ("follower_throttled_bytes_per_s", "-", "follower throttled"),
            ("leader_throttled_bytes_per_s", "-", "leader throttled"),
            ("replication_bytes_in_per_s", ":", "replication in"),
            ("replication_bytes_out_per_s", ":", "replication out"),
        ):
            # Each value is the traffic of second [k, k+1): drawn as a step over that second.
            ys = [r[key] / MB for r in mine]
            ax.plot(x, ys, style, label=name, linewidth=1.2, drawstyle="steps-post")
        for side in ("follower", "leader"):
            judged = [(t + span, r[f"{side}_window_bytes_per_s"] / MB)
                      for t, r in zip(x, mine, strict=True)
                      if r[f"{side}_window_bytes_per_s"] is not None]  # fmt: skip
            if judged:
                ax.plot(*zip(*judged, strict=True), ".-", markersize=3, linewidth=0.8,
                        label=f"{side} {span} s windows")  # fmt: skip
        if throttle:
            ax.axhline(throttle / MB, color="tab:red", linewidth=1, label="throttle")
        if bound:
            ax.axhline(bound / MB, color="tab:red", linestyle="--", linewidth=0.8, label="bound")
        ax.set_ylabel("MB/s")
        ax.set_title(f"node {node}", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(label)
    axes[0].legend(fontsize=7, ncol=3, loc="upper left")
    fig.suptitle(f"{case['id']}: replication rates against the throttle", fontsize=10)
    fig.savefig(path, dpi=80)


def plot_latency(case: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    fig = _figure(figsize=(9, 3), layout="constrained")
    ax = fig.subplots()
    x, label = _x(rows, min((r["ts"] for r in rows), default=0))
    _shade(ax, case)
    ax.plot(x, [r["p50_ms"] for r in rows], label="p50 per second")
    ax.plot(x, [r["p99_ms"] for r in rows], label="p99 per second")
    ax.set_xlabel(label)
    ax.set_ylabel("produce latency (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle(f"{case['id']}: produce latency", fontsize=10)
    fig.savefig(path, dpi=80)


# ------------------------------------------------------------------------------ table, HTML


def _get(case: Mapping[str, Any], key: str | tuple[str, ...]) -> Any:
    value: Any = case
    for k in (key,) if isinstance(key, str) else key:
        value = value.get(k) if isinstance(value, Mapping) else None
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)


def table_rows(report: Report) -> list[list[str]]:
    return [[_cell(_get(c, key)) for _, key in TABLE_COLUMNS] for c in report.cases]


def render_table(report: Report) -> str:
    header = [name.upper() for name, _ in TABLE_COLUMNS]
    body = table_rows(report)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *body]
    ]
    s = report.summary
    lines.append(f"{s['cases']} case(s): {s['passed']} passed, {s['failed']} failed")
    for c in report.cases:
        lines += [f"  {c['id']}: {f}" for f in c["failures"]]
    return "\n".join(lines)


def _html_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _html_case(case: Mapping[str, Any]) -> str:
    e = html.escape
    parts = [f"<h2 id='{e(case['id'])}'>{e(case['id'])}: {e(case['verdict'])}</h2>"]
    parts += [f"<p class='fail'>{e(f)}</p>" for f in case["failures"]]
    facts = [
        (k, case[k])
        for k in (
            "case",
            "run_dir",
            "throttle_bytes_per_s",
            "throttle_mode",
            "receiving_brokers",
            "sending_brokers",
            "bytes_to_move",
            "produce_bytes_per_s",
            "move_source",
            "move_duration_s",
            "predicted_move_s",
            "predicted_move_alternatives_s",
            "move_judged_against_s",
            "move_duration_ratio",
            "moved_bytes",
            "throttle_window_s",
            "throttle_bound_bytes_per_s",
            "throttle_window_past_end",
            "throttle_judged",
            "throttle_exempt_counted",
            "max_window_bytes_per_s",
            "max_window_throttle_ratio",
            "throttle_violated",
        )
    ]
    parts.append(_html_table(["figure", "value"], facts))
    bcols = (
        "node",
        "side",
        "mean_throttled_bytes_per_s_during_move",
        "max_window_bytes_per_s",
        "max_window_throttle_ratio",
        "max_window_start_s",
        "windows",
        "windows_over",
        "configured_throttle_bytes_per_s",
        "bound_bytes_per_s",
        "throttle_violated",
        "wire_bytes_during_move",
        "charged_record_bytes_during_move",
        "max_wire_window_bytes_per_s",
        "wire_violated",
    )
    parts.append(_html_table(bcols, ([b[k] for k in bcols] for b in case["brokers"])))
    lat = case["produce_latency"]
    parts.append(
        _html_table(
            ["phase", "batches", "p50_ms", "p99_ms", "max_ms"],
            ([p, v["batches"], v["p50_ms"], v["p99_ms"], v["max_ms"]] for p, v in lat.items()),
        )
    )
    up = case["catch_up"]
    parts.append(
        f"<p>catch-up: {up['partitions']} partitions caught up in the move, from "
        f"t={up['first_s']} s to t={up['last_s']} s; Spearman's rho of partition index against "
        f"catch-up time {up['rank_correlation']}</p>"
    )
    isr = case["isr"]
    parts.append(
        f"<p>ISR: {isr['shrinks']} shrinks, {isr['expands']} expands "
        f"({isr['shrinks_during_move']} / {isr['expands_during_move']} during the move)</p>"
    )
    for plot in case["plots"].values():
        if plot:
            parts.append(f"<img src='{e(plot)}' alt='{e(plot)}'>")
    return "\n".join(parts)


def render_html(report: Report) -> str:
    s = report.summary
    header = [name for name, _ in TABLE_COLUMNS]
    return (
        "\n".join(
            [
                "<!doctype html><html><head><meta charset='utf-8'><title>minikafka analysis</title>",
                "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
                "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}"
                ".fail{color:#b00}img{display:block;max-width:100%}</style></head><body>",
                "<h1>minikafka analysis</h1>",
                f"<p>{s['cases']} case(s): {s['passed']} passed, {s['failed']} failed "
                f"(verdict: {html.escape(s['verdict'])})</p>",
                _html_table(header, table_rows(report)),
                *(_html_case(c) for c in report.cases),
                "</body></html>",
            ]
        )
        + "\n"
    )
