"""Simulated against real: the KIP-73 matrix's figures from two sessions side by side.

    python -m systemtests.harness.compare REAL_SESSION SIM_SESSION [--json]

Each session is a folder `pytest systemtests` left (`runs/<YYYYmmdd-HHMMSS>-<profile>/`), one
run on real processes and one under `--sim`. Per case present in both: the prediction the case
was judged against, the move's duration in each and their ratio, the largest quota window over
the throttle (the window the case's quota mode judges), the p99 acks=all latency of in-sync
partitions during the move, and each verdict. A markdown table on stdout, or one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def load(session: Path) -> dict[str, dict[str, Any]]:
    """case -> results.json of every case folder in the session."""
    out = {}
    for path in sorted(session.glob("*/results.json")):
        res = json.loads(path.read_text())
        out[res["case"]] = res
    return out


def row(real: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    ra, sa = real.get("analysis") or {}, sim.get("analysis") or {}
    rm, sm = ra.get("move_duration_s"), sa.get("move_duration_s")

    def p99(a: dict[str, Any]) -> float | None:
        return (a.get("produce_latency_in_sync") or {}).get("p99_ms")

    return {
        "case": real["case"],
        "predicted_s": ra.get("predicted_move_s"),
        "real_move_s": rm,
        "sim_move_s": sm,
        "sim_over_real": round(sm / rm, 3) if rm and sm else None,
        "real_max_window_over_t": ra.get("max_window_throttle_ratio"),
        "sim_max_window_over_t": sa.get("max_window_throttle_ratio"),
        "real_in_sync_p99_ms": p99(ra),
        "sim_in_sync_p99_ms": p99(sa),
        "real_verdict": real.get("verdict"),
        "sim_verdict": sim.get("verdict"),
    }


def compare(real_session: Path, sim_session: Path) -> list[dict[str, Any]]:
    real, sim = load(real_session), load(sim_session)
    return [row(real[c], sim[c]) for c in sorted(real.keys() & sim.keys())]


def table(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    lines = [
        "| case | predicted s | real s | sim s | sim/real | real max window/T | sim max "
        "window/T | real in-sync p99 ms | sim in-sync p99 ms | verdicts (real, sim) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {f(r['predicted_s'], '.1f')} | {f(r['real_move_s'], '.1f')} "
            f"| {f(r['sim_move_s'], '.1f')} | {f(r['sim_over_real'], '.2f')} "
            f"| {f(r['real_max_window_over_t'], '.3f')} | {f(r['sim_max_window_over_t'], '.3f')} "
            f"| {f(r['real_in_sync_p99_ms'], '.0f')} | {f(r['sim_in_sync_p99_ms'], '.0f')} "
            f"| {r['real_verdict']}, {r['sim_verdict']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("real", type=Path, help="a session folder of real runs")
    parser.add_argument("sim", type=Path, help="a session folder of --sim runs")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    rows = compare(args.real, args.sim)
    print(json.dumps({"cases": rows}, indent=1) if args.json else table(rows))


if __name__ == "__main__":
    main()
