"""What a reassignment did under its throttle: results.json's `move` (verdict.py), the figures
an experiment about a move's progress states its expectations on (spec.Expectation `figure`).

The throttled phase runs from the move's start (the timeline's `move_start`, from its
`requested`: when the runner launched `reassign --execute`, since the moves may begin before the
tool exits) to the throttle's lift (`configs_lifted`, spec.lift_broker_configs), else to the
move's end (`move_end`: the controller then removes the tool's throttles), else to the end of
the node logs. Over it:

- `completed`: whether the move ended (`move_end`) within it, `completed_after_s` when (after
  its start), and `moving_at_lift`: the partitions the controller still listed as moving when
  the throttle was lifted;
- `partitions_done`: the moved partitions all of whose adding replicas joined the ISR within it
  (the leaders' `isr_expand` events: a move completes a partition once its adding replicas are
  in sync);
- `copied_bytes`, `copy_steps`, `copy_times_s`, `copy_gap_min_s`, `copy_gap_max_s`: the growth of
  `replication_bytes_in` on the adding brokers, and the metrics samples (metrics.interval.ms
  apart) in which it grew, in seconds after the move's start, with the least and the most time
  between two of them. Under a throttle far below one fetch response, each step is one response
  that got through. (The counter counts all those brokers replicate: with clients producing,
  the new records of partitions they already hold count too.)
- `leader_charged_bytes_per_s`, `leader_overhead_bytes_per_s`,
  `leader_record_bytes_after_first_copy`: what the leaders charged their replication quotas
  (`leader_*_throttled_bytes` of every broker, both throttle classes), the Kafka headers of it
  (`leader_*_overhead_bytes`, core/quota/charge.py) and the rest, the record bytes; from 1 s
  after the first copy (by then the first response's charge is logged) to the phase's end. A
  rate is each node's growth over the time between its first and last sample there, summed.

Times are seconds after the run's start (t0) unless said otherwise; what cannot be told (no
move_start: the tool failed) is None. Counters that fall (a restarted node counts from 0) start
a new incarnation, as in node_logs.counter_totals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from minikafka.experiment import node_logs
from minikafka.experiment.spec import ExperimentSpec

REPLICATION_IN = "replication_bytes_in"
LEADER_CHARGED = ("leader_replication_throttled_bytes", "leader_reassignment_throttled_bytes")
LEADER_OVERHEAD = ("leader_replication_overhead_bytes", "leader_reassignment_overhead_bytes")
AFTER_FIRST_COPY_S = 1.0

Samples = Sequence[tuple[float, Mapping[str, int]]]


def move_figures(spec: ExperimentSpec, run_dir: Path, t0: float) -> dict[str, Any] | None:
    """results.json `move` of an experiment with a reassignment (module docstring); None
    without one."""
    r = spec.reassign
    if r is None:
        return None
    events = node_logs.timeline_events(run_dir)
    start, end, lift = (_first(events, e) for e in ("move_start", "move_end", "configs_lifted"))
    doc: dict[str, Any] = {"partitions": len(r.moves), "start_s": None}
    if start is None:
        return doc
    t_start = start.get("requested", start["ts"])
    until = lift["ts"] if lift else end["ts"] if end else None
    completed = end is not None and (until is None or end["ts"] <= until)
    adding = _adding(spec)
    brokers = sorted({b for bs in adding.values() for b in bs})
    samples = node_logs.counter_samples(
        run_dir, (REPLICATION_IN, *LEADER_CHARGED, *LEADER_OVERHEAD)
    )
    steps = sorted(
        step for b in brokers for step in _steps(samples.get(b, []), REPLICATION_IN, t_start, until)
    )
    times = [round(ts - t_start, 3) for ts, _ in steps]
    gaps = [round(b - a, 3) for a, b in zip(times, times[1:], strict=False)]
    since = (steps[0][0] if steps else t_start) + AFTER_FIRST_COPY_S
    charged = _rates(samples, LEADER_CHARGED, since, until)
    overhead = _rates(samples, LEADER_OVERHEAD, since, until)
    doc.update(
        start_s=round(t_start - t0, 3),
        throttled_until_s=round(until - t0, 3) if until is not None else None,
        lifted=lift is not None,
        completed=completed,
        completed_after_s=round(end["ts"] - t_start, 3) if completed else None,
        moving_at_lift=lift.get("moving") if lift else None,
        adding_brokers=brokers,
        partitions_done=_done(spec, run_dir, t0, adding, t_start, until),
        copied_bytes=sum(growth for _, growth in steps),
        copy_steps=len(steps),
        copy_times_s=times,
        copy_gap_min_s=min(gaps, default=None),
        copy_gap_max_s=max(gaps, default=None),
        leader_charged_bytes_per_s=round(charged[1], 1),
        leader_overhead_bytes_per_s=round(overhead[1], 1),
        leader_record_bytes_after_first_copy=charged[0] - overhead[0],
    )
    return doc


def _first(events: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((e for e in events if e.get("event") == name and "ts" in e), None)


def _adding(spec: ExperimentSpec) -> dict[int, list[int]]:
    """partition -> the brokers its move adds (all its targets when the experiment did not say
    where it was: the controller placed it)."""
    assert spec.reassign is not None
    old = spec.assignment
    return {
        p: [b for b in target if old is None or b not in old[p]]
        for p, target in spec.reassign.moves.items()
    }


def _done(
    spec: ExperimentSpec,
    run_dir: Path,
    t0: float,
    adding: Mapping[int, list[int]],
    t_start: float,
    until: float | None,
) -> int:
    by_broker = {
        b: node_logs.isr_rejoins(run_dir, spec.topic, b, t0, since_s=t_start - t0)
        for b in {b for bs in adding.values() for b in bs}
    }
    limit = float("inf") if until is None else until - t0
    return sum(
        all(by_broker[b].get(p, float("inf")) <= limit for b in bs) for p, bs in adding.items()
    )


def _steps(
    samples: Samples, name: str, since: float, until: float | None
) -> list[tuple[float, int]]:
    """(ts, growth) of the samples after `since` (up to `until`) in which `name` grew."""
    out = []
    prev: int | None = None
    for ts, values in samples:
        v = values[name]
        if ts > since and (until is None or ts <= until) and prev is not None:
            growth = v - prev if v >= prev else v
            if growth > 0:
                out.append((ts, growth))
        prev = v
    return out


def _rates(
    samples: Mapping[int, Samples], names: tuple[str, ...], since: float, until: float | None
) -> tuple[int, float]:
    """(growth, growth per second) of the sum of `names` from `since` to `until`, summed over
    the nodes, each over the time between its first and last sample in that span."""
    total, rate = 0, 0.0
    for node_samples in samples.values():
        inside = [
            (ts, sum(values[n] for n in names))
            for ts, values in node_samples
            if ts >= since and (until is None or ts <= until)
        ]
        if len(inside) < 2:
            continue
        growth = sum(
            b - a if b >= a else b for (_, a), (_, b) in zip(inside, inside[1:], strict=False)
        )
        total += growth
        rate += growth / (inside[-1][0] - inside[0][0])
    return total, rate


def describe(move: Mapping[str, Any]) -> str:
    """One summary line (verdict.summary)."""
    n = move["partitions"]
    if move.get("start_s") is None:
        return f"  move of {n} partitions: never started"
    if move["completed"]:
        how = f"completed {move['completed_after_s']:.1f} s after its start"
    else:
        until = move["throttled_until_s"]
        how = "not completed" + (f" by {until:g} s" if until is not None else "")
        how += f" ({move['partitions_done']} of {n} partitions done)"
    steps, gaps = move["copy_steps"], ""
    if move["copy_gap_min_s"] is not None:
        gaps = f", {move['copy_gap_min_s']:.1f}-{move['copy_gap_max_s']:.1f} s apart"
    return (
        f"  move of {n} partitions from {move['start_s']:g} s, throttled: {how}; "
        f"{move['copied_bytes']} B copied in {steps} step{'' if steps == 1 else 's'}{gaps}; "
        "from 1 s after "
        f"the first, the leaders charged {move['leader_charged_bytes_per_s']:.0f} B/s, "
        f"{move['leader_overhead_bytes_per_s']:.0f} B/s of it headers"
    )
