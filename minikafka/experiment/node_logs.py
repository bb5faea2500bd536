"""The checker's inputs that come from the nodes' own logs (copied into the run folder).

- leadership claims: `become_leader` events of events.jsonl;
- replica samples: the rows of replicas.jsonl (server/replica_state_log.py), each with the
  span of lines it held over (the file writes a row again only when it changes);
- ISR rejoins: the leaders' `isr_expand` events that took a given broker back into a
  partition's ISR (server/isr_updates.py), for per-partition catch-up times;
- counter totals of metrics.jsonl, for the expectations, and each node's samples of some
  counters, for the figures of a move (minikafka/experiment/move.py);
- and, not a node log but read alike, the run folder's own timeline.jsonl (the driver's events).

(The throttled bytes are read by the PySpark analysis, which judges the throttle bound.)

Times are made relative to the run's start (`t0`, wall seconds), like the history's. A line that
is not JSON (a node killed mid-write leaves at most one) is skipped. A log that rolled over is
read across its parts, oldest first (`events.jsonl.2`, `.1`, then `events.jsonl`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from minikafka.server.jsonl import jsonl_parts
from minikafka.server.replica_state_log import replay


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a log and of its rotated parts, oldest part first (server/jsonl.py)."""
    for part in jsonl_parts(path):
        try:
            f = open(part, encoding="utf-8")  # noqa: SIM115
        except FileNotFoundError:
            continue  # rolled away since the listing (a live node's log)
        with f:
            for line in f:
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(doc, dict):
                    yield doc


def _node_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    out = []
    for d in sorted((run_dir / "nodes").glob("node-*")):
        try:
            out.append((int(d.name.removeprefix("node-")), d))
        except ValueError:
            continue
    return out


def leadership_claims(run_dir: Path, topic: str, t0: float) -> list[dict[str, Any]]:
    return [
        {
            "node": node,
            "time": round(e["ts"] - t0, 3),
            "topic": e["topic"],
            "partition": e["partition"],
            "leader_epoch": e["leader_epoch"],
        }
        for node, d in _node_dirs(run_dir)
        for e in _lines(d / "events.jsonl")
        if e.get("event") == "become_leader" and e.get("topic") == topic
    ]


def replica_samples(run_dir: Path, topic: str, t0: float) -> list[dict[str, Any]]:
    """Each node's replica rows of `topic` as the intervals they held: `time` (the line that
    wrote the row) and `until` (the last line before the one that changed or dropped it). The
    file writes a row again only when it changes (server/replica_state_log.py `replay`), so a
    follower's state stands until its next row, as it stood in every line of the old format."""
    out = []
    for node, d in _node_dirs(run_dir):
        for held in replay(_lines(d / "replicas.jsonl")):
            tp_topic, partition, epoch, is_leader, leo, hw, isr = held.row
            if tp_topic == topic:
                out.append(
                    {
                        "node": node,
                        "time": round(held.since - t0, 3),
                        "until": round(held.until - t0, 3),
                        "topic": tp_topic,
                        "partition": partition,
                        "leader_epoch": epoch,
                        "is_leader": is_leader,
                        "log_end_offset": leo,
                        "high_watermark": hw,
                        "isr": isr,
                    }
                )
    return out


def isr_rejoins(
    run_dir: Path, topic: str, broker: int, t0: float, *, since_s: float
) -> dict[int, float]:
    """partition -> the first time at or after `since_s` (seconds from t0) that a leader's
    accepted AlterPartition took `broker` back into the partition's ISR: when its replica had
    caught up (Kafka's ISR expansion: the follower reached the leader's HW). Partitions it did
    not rejoin are absent."""
    out: dict[int, float] = {}
    for _node, d in _node_dirs(run_dir):
        for e in _lines(d / "events.jsonl"):
            if e.get("event") != "isr_expand" or e.get("topic") != topic:
                continue
            t = round(e["ts"] - t0, 3)
            back = broker in e.get("isr", ()) and broker not in e.get("old_isr", ())
            if back and t >= since_s and t < out.get(e["partition"], float("inf")):
                out[e["partition"]] = t
    return out


def counter_totals(
    run_dir: Path, names: tuple[str, ...], *, since: float | None = None
) -> dict[str, int]:
    """Each counter's growth summed over nodes and over restarts (a restarted node counts from 0
    again, so a decrease starts a new incarnation rather than subtracting); with `since` (wall
    seconds), only from the first line at or after it (a running cluster's logs hold earlier
    runs too)."""
    totals = dict.fromkeys(names, 0)
    for _node, d in _node_dirs(run_dir):
        prev = dict.fromkeys(names, 0)
        for line in _lines(d / "metrics.jsonl"):
            before = since is not None and line.get("ts", 0) < since  # only sets the baseline
            for name in names:
                value = line.get(name)
                if not isinstance(value, int):
                    continue
                if not before:
                    totals[name] += value - prev[name] if value >= prev[name] else value
                prev[name] = value
    return totals


def counter_samples(
    run_dir: Path, names: tuple[str, ...]
) -> dict[int, list[tuple[float, dict[str, int]]]]:
    """node -> its metrics lines in order, as (ts, {name: value}); a counter a line lacks is 0
    (metrics only carry a counter once it has counted). The values are as logged: a restarted
    node counts from 0 again."""
    return {
        node: [
            (line["ts"], {n: v if isinstance(v := line.get(n, 0), int) else 0 for n in names})
            for line in _lines(d / "metrics.jsonl")
            if isinstance(line.get("ts"), int | float)
        ]
        for node, d in _node_dirs(run_dir)
    }


def timeline_events(run_dir: Path) -> list[dict[str, Any]]:
    """The run folder's timeline.jsonl (minikafka/testing/run_folder.py): `ts` (wall s), `event`
    (configs_set, move_start, move_end, configs_lifted, ...) and its fields, in order."""
    return list(_lines(run_dir / "timeline.jsonl"))
