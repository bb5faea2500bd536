"""The demo's figure: the throttled replication rate against the limit during the move, and the
producer beside it, from the brokers' metrics.jsonl lines and the run's produced.jsonl.

`rates.csv` is always written (the figure's data, one row per broker and metrics line); the PNG
only when matplotlib imports (the `[analysis]` extra, in the dev venv `make demo` installs).
The figure uses matplotlib's object API (`Figure`, rendered by Agg), never pyplot's global
state, as tools/analysis/report.py does.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from minikafka.tools.demo_move import COPIED_COUNTER, SENSOR

LEADER_SENSOR = "LeaderReplicationThrottledRate"
CSV_COLUMNS = (
    "t_s",
    "broker",
    SENSOR,
    LEADER_SENSOR,
    COPIED_COUNTER,
    f"{COPIED_COUNTER}_per_s",
    "follower_replication_throttled_bytes_per_s",
    "leader_replication_throttled_bytes_per_s",
    "replication_bytes_out_per_s",
)
PLOT_FILE = "rates.png"
CSV_FILE = "rates.csv"


def series(
    lines: Mapping[int, Sequence[Mapping[str, Any]]], move_start: float
) -> list[dict[str, Any]]:
    """One row per broker and metrics line: `CSV_COLUMNS`, t_s in seconds since the move
    started (a missing value, e.g. a sensor with nothing in its window, is None)."""
    rows = []
    for broker, docs in sorted(lines.items()):
        for doc in docs:
            row: dict[str, Any] = {
                "t_s": round(float(doc["ts"]) - move_start, 3),
                "broker": broker,
            }
            for name in CSV_COLUMNS[2:]:
                value = doc.get(name)
                row[name] = float(value) if isinstance(value, int | float) else None
            rows.append(row)
    return rows


def produce_series(
    produced: Sequence[Mapping[str, Any]], move_start: float
) -> list[tuple[int, int, float]]:
    """(whole second since the move started, records acknowledged in it, p99 latency ms)."""
    by_second: dict[int, list[tuple[int, float]]] = {}
    for r in produced:
        k = math.floor(float(r["ts"]) - move_start)
        by_second.setdefault(k, []).append((int(r["count"]), float(r["latency_ms"])))
    out = []
    for k in sorted(by_second):
        batches = by_second[k]
        latencies = sorted(lat for _, lat in batches)
        p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
        out.append((k, sum(n for n, _ in batches), p99))
    return out


def write_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in CSV_COLUMNS})
    return path


def copied_since_start(rows: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(t_s, bytes) the destination copied since the move started (COPIED_COUNTER, from its
    last line at or before t = 0), from one broker's rows; a counter that went back (a restarted
    node) counts from 0 again."""
    # A node's counter appears in its metrics lines at its first byte: absent is 0.
    known = [(r["t_s"], r[COPIED_COUNTER] or 0.0) for r in rows]
    before = [v for t, v in known if t <= 0]
    if not before:
        return []
    out, total, prev = [], 0.0, before[-1]
    for t, v in known:
        if t <= 0:
            continue
        total += v - prev if v >= prev else v
        prev = v
        out.append((t, total))
    return [(0.0, 0.0), *out]


def plot(
    rows: Sequence[Mapping[str, Any]],
    produced: Sequence[tuple[int, int, float]],
    path: Path,
    *,
    throttle: int,
    destination: int,
    sources: Sequence[int],
    move_s: float | None,
) -> Path | None:
    """The PNG at `path`; None (nothing written) when matplotlib does not import. Three panels:
    the sensors against the limit; what the destination copied against limit x time (the
    throttle's promise); the producer's acknowledged records and latency."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(9, 8), layout="constrained")
    rate_ax, copy_ax, prod_ax = fig.subplots(
        3, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2, 2]}
    )
    mine = [r for r in rows if r["broker"] == destination]
    for ax in (rate_ax, copy_ax, prod_ax):
        if move_s is not None:
            label = "the move" if ax is rate_ax else None
            ax.axvspan(0, move_s, color="tab:green", alpha=0.1, label=label)
        ax.grid(alpha=0.3)
    limit = throttle / 1e6
    rate_ax.plot([r["t_s"] for r in mine], [_mb(r[SENSOR]) for r in mine], color="tab:blue",
                 linewidth=2, label=f"broker {destination} (new replicas): {SENSOR}")  # fmt: skip
    for b in sources:
        theirs = [r for r in rows if r["broker"] == b]
        rate_ax.plot([r["t_s"] for r in theirs], [_mb(r[LEADER_SENSOR]) for r in theirs],
                     linestyle="--", linewidth=1,
                     label=f"broker {b} (leader): {LEADER_SENSOR}")  # fmt: skip
    rate_ax.axhline(limit, color="tab:red", linewidth=1.2,
                    label=f"limit {limit:g} MB/s (*.replication.throttled.rate)")  # fmt: skip
    rate_ax.set_ylabel("MB/s (KIP-73 sensors)")
    rate_ax.set_ylim(bottom=0)
    rate_ax.legend(fontsize=7, loc="upper right")
    rate_ax.set_title(
        f"replicas moving onto broker {destination} under a KIP-73 replication throttle",
        fontsize=10,
    )
    # Cumulative bytes: each step is fetch responses that got through whole, spaced out by the
    # quota; the line under it is what the limit allows.
    copied = copied_since_start(mine)
    if copied:
        copy_ax.plot([t for t, _ in copied], [b / 1e6 for _, b in copied], color="tab:blue",
                     drawstyle="steps-post",
                     label=f"copied to broker {destination} (its replication bytes in)")  # fmt: skip
        end = move_s if move_s is not None else copied[-1][0]
        copy_ax.plot([0, end], [0, limit * end], color="tab:red", linewidth=1,
                     linestyle="--", label=f"{limit:g} MB/s x time")  # fmt: skip
    copy_ax.set_ylabel("MB since the move started")
    copy_ax.set_ylim(bottom=0)
    copy_ax.legend(fontsize=7, loc="upper left")
    counts = [n for _, n, _ in produced]
    prod_ax.plot([k for k, _, _ in produced], counts, color="tab:gray", drawstyle="steps-post",
                 label="records acknowledged per second (acks=all)")  # fmt: skip
    prod_ax.set_ylabel("records/s")
    prod_ax.set_ylim(0, 1.6 * max(counts, default=1))
    twin = prod_ax.twinx()
    latencies = [p for _, _, p in produced]
    twin.plot([k for k, _, _ in produced], latencies, ".", color="tab:orange", markersize=4,
              label="p99 produce latency in that second (ms)")  # fmt: skip
    twin.set_ylabel("ms")
    twin.set_ylim(0, 1.6 * max(latencies, default=1))
    handles, labels = prod_ax.get_legend_handles_labels()
    more_handles, more_labels = twin.get_legend_handles_labels()
    prod_ax.legend(handles + more_handles, labels + more_labels, fontsize=7, loc="upper left",
                   ncol=2)  # fmt: skip
    prod_ax.set_xlabel("seconds since the move started")
    fig.savefig(path, dpi=80)
    return path


def _mb(value: float | None) -> float:
    return math.nan if value is None else value / 1e6
