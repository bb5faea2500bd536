"""The scale benchmark's report: the table, the growth of each figure with the partition count, and
the scale goals (an idle broker costs next to nothing per partition), from the result dict
scale_bench.py builds (and prints with --json). Pure: no I/O, so it is tested on hand-made results.

A failed phase's cells read `failed[n]`, with note n under the table giving the phase and why; a
phase not run because an earlier one failed (no topic, no cluster) reads `-`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

BROKER_ROLE_IDS_FROM = 1  # plan_cluster: node 0 is the controller, brokers are 1..N

# (key, header, phase, how to get it from the phase's dict, format)
Getter = Callable[[Any], float | None]


def _brokers(idle: dict[Any, Any], field: str) -> float | None:
    values = [v[field] for k, v in idle.items() if int(k) >= BROKER_ROLE_IDS_FROM]
    return max(values) if values else None


def _node(idle: dict[Any, Any], node_id: int, field: str) -> float | None:
    for k, v in idle.items():
        if int(k) == node_id:
            return v[field]
    return None


COLUMNS: list[tuple[str, str, str, Getter, str]] = [
    ("create_s", "create s", "create", lambda c: c["create_s"], "{:.2f}"),
    ("idle_cpu_pct", "idle CPU %", "idle", lambda c: _brokers(c, "cpu_pct"), "{:.1f}"),
    ("controller_cpu_pct", "ctrl CPU %", "idle", lambda c: _node(c, 0, "cpu_pct"), "{:.1f}"),
    ("rss_mb", "RSS MB", "idle", lambda c: _brokers(c, "rss_mb"), "{:.0f}"),
    (
        "log_bytes_per_s",
        "logs B/s",
        "idle",
        lambda c: max(v["log_bytes_per_s"] for v in c.values()),
        "{:.0f}",
    ),
    ("p50_ms", "acks=all p50", "latency", lambda c: c["p50_ms"], "{:.1f}"),
    ("p99_ms", "p99 ms", "latency", lambda c: c["p99_ms"], "{:.1f}"),
    ("produce_mb_per_s", "MB/s", "produce", lambda c: c["mb_per_s"], "{:.1f}"),
    ("produce_ratio", "ratio", "produce", lambda c: c.get("ratio_to_min_reference"), "{:.2f}"),
    ("batch_p99_ms", "batch p99", "produce", lambda c: c["batch_p99_ms"], "{:.0f}"),
    ("catchup_s", "catch-up s", "catchup", lambda c: c["catchup_s"], "{:.1f}"),
]

# The scale goals at 5,000 partitions: (figure, bound, what it says).
GOALS_AT = 5000
GOALS = [
    ("idle_cpu_pct", 3.0, "idle CPU under 3 % per broker"),
    ("p99_ms", 10.0, "acks=all p99 under 10 ms at 100 records/s"),
    ("rss_mb", 150.0, "RSS under 150 MB per broker"),
    ("log_bytes_per_s", 10_000.0, "node logs under 10 KB/s per node idle"),
    ("create_s", 1.0, "5,000 partitions created in under 1 s"),
]


def figures(row: dict[str, Any]) -> dict[str, float | None]:
    """Each column's figure of a row; None where its phase failed or did not run."""
    out: dict[str, float | None] = {}
    for key, _header, phase, get, _fmt in COLUMNS:
        cell = row.get(phase)
        out[key] = None if not isinstance(cell, dict) or "failed" in cell else get(cell)
    return out


def growth(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per figure, from the smallest to the largest count where it was measured (and positive):
    the factor it grew by and the exponent k of count**k that gives that factor."""
    out = {}
    for key, *_rest in COLUMNS:
        have = [(r["partitions"], figures(r)[key]) for r in rows]
        have = sorted((n, v) for n, v in have if v is not None and v > 0)
        if len(have) < 2 or have[0][0] == have[-1][0]:
            continue
        (n0, v0), (n1, v1) = have[0], have[-1]
        out[key] = {
            "from": n0,
            "to": n1,
            "factor": round(v1 / v0, 2),
            "exponent": round(math.log(v1 / v0) / math.log(n1 / n0), 2),
        }
    return out


def goals(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for row in rows:
        if row["partitions"] == GOALS_AT:
            f = figures(row)
            for key, bound, what in GOALS:
                value = f[key]
                verdict = (
                    "not measured" if value is None else ("met" if value < bound else "NOT met")
                )
                lines.append(f"  {what}: {verdict}" + ("" if value is None else f" ({value})"))
        if row["partitions"] >= 20000:  # "the cluster starts, elects and replicates"
            said = [f"starts {'NO' if 'start' in row else 'yes'}"]
            steps = (("elects", "create"), ("replicates", "produce"), ("catches up", "catchup"))
            for word, phase in steps:
                done = "failed" not in row.get(phase, {"failed": "not run"})
                said.append(f"{word} {'yes' if done else 'NO'}")
            lines.append(f"  at {row['partitions']}: " + ", ".join(said))
    return lines


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The table's lines and its notes (the failures)."""
    headers = ["partitions", *[c[1] for c in COLUMNS], "load"]
    notes: list[str] = []
    body = []
    for row in rows:
        cells = [str(row["partitions"])]
        noted: dict[str, int] = {}
        for _key, _header, phase, get, fmt in COLUMNS:
            cell = row.get(phase)
            if "start" in row:  # only a failed start stays in the row
                cell = row["start"]  # the cluster did not start: every cell is that failure
                phase = "start"
            if not isinstance(cell, dict):
                cells.append("-")
            elif "failed" in cell:
                if phase not in noted:
                    notes.append(
                        f"[{len(notes) + 1}] {row['partitions']} {phase}: {cell['failed']}"
                    )
                    noted[phase] = len(notes)
                cells.append(f"failed[{noted[phase]}]")
            else:
                value = get(cell)
                cells.append("-" if value is None else fmt.format(value))
        cells.append(f"{row['load_avg_before'][0]:.2f}")
        body.append(cells)
    widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return [line(headers), *map(line, body)], notes


def render(r: dict[str, Any]) -> str:
    m, c, refs, rows = r["machine"], r["config"], r["references"], r["rows"]
    lines, notes = table(rows)
    out = [
        f"minikafka scale benchmark  {m['date']}  commit {m['commit']}  seed {c['seed']}",
        f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}, {m['platform']}",
        f"load average at start {m['load_avg_at_start']}; per row before its cluster (load)",
        f"cluster: {c['brokers']} brokers + 1 controller process, one topic, "
        f"r={c['replication_factor']}; node configs: defaults"
        + "".join(f", {k}={v}" for k, v in c["node_configs"].items()),
        f"references (this run): trio loopback {refs['trio_loopback_mb_per_s']} MB/s, "
        f"lmdb synced append {refs['lmdb_append_sync_mb_per_s']} MB/s (min "
        f"{refs['min_mb_per_s']}); one synced lmdb commit p50 {refs['lmdb_commit_p50_ms']} ms, "
        f"p99 {refs['lmdb_commit_p99_ms']} ms",
        "",
        *lines,
        *notes,
        "",
        f"idle: over {c['idle_s']} s after the brokers settled (CPU % of one core, the busiest "
        "broker; ctrl = the controller; RSS of the largest broker; logs = *.jsonl growth of the "
        "busiest node)",
        f"acks=all p50/p99: {c['latency_records']} single-record requests at "
        f"{c['latency_rate']:g}/s; MB/s: 100 kB batches, acks=all, at most {c['produce_mb']:g} MB "
        f"or {c['produce_s']:g} s, ratio to min reference, batch p99 ms; catch-up: a wiped broker "
        "back in all its ISRs, s from restart",
    ]
    for row in rows:
        extra = [f"{k}={v}" for k, v in row["node_configs"].items()]
        settle = row.get("settle", {})
        if settle.get("settled") is False:
            extra.append(f"brokers NOT settled after {settle['settle_s']} s")
        latency = row.get("latency", {})
        if latency.get("achieved_per_s", math.inf) < 0.9 * latency.get("rate_per_s", 0):
            # 32 sends in flight cannot hold the pace once each takes over ~0.3 s.
            extra.append(f"latency sends reached only {latency['achieved_per_s']}/s")
        if extra:
            out.append(f"  {row['partitions']}: " + ", ".join(extra))
    grown = growth(rows)
    if grown:
        out += ["", "growth from the smallest to the largest count measured (factor, ~count^k):"]
        for key, g in grown.items():
            out.append(
                f"  {key:<20} x{g['factor']:<8g} from {g['from']} to {g['to']} partitions"
                f"  (k = {g['exponent']})"
            )
    said = goals(rows)
    if said:
        out += ["", "scale goals:", *said]
    return "\n".join(out)
