"""replicas.jsonl: every replica's state on this broker, as a snapshot and then its changes.

It exists for the experiment checker's cross-node invariant "the HW never passes an in-sync
replica's LEO" (minikafka/checker/invariants.py): a leader's row says what it committed and
who it counted as in sync, and each follower's own rows say what it holds.

A row: `[topic, partition, leader_epoch, is_leader, log_end_offset, high_watermark, isr or
null]` (the ISR only where this broker leads). One line per metrics interval, of two kinds:

- a snapshot, `{"ts", "node", "replicas": [every row]}`: the whole state. It is the first line
  the process writes (marked `"start": true`), the first line of every file (a rotated part
  reads on its own: server/jsonl.py `starts_part`), and the line after one that could not be
  written;
- a delta, `{"ts", "node", "delta": true, "replicas": [changed rows], "gone": [[topic,
  partition], ...]}`: only the rows that differ from the previous line's state, and the
  replicas that no longer have a row (stopped, deleted, offline-and-stopped). Either list is
  left out when empty; a delta with neither still says the node was there and nothing moved.

So a row holds from the line that wrote it until the next line that changes it or marks it gone,
a snapshot without it, or a process's first line: a restarted node held nothing while it was
down, even if it comes back with the very row it died with (a wiped follower that has fetched
its log back to the same offsets: seen in a partition-order run). `replay` turns a node's lines
into those intervals (the time of the first line that showed a row, and of the last line before
the one that ended it). When every line was a snapshot, 5,100 partitions cost ~100 KB/s per
node; an idle broker now writes one ~40-byte line per interval. Old files read the same (every
line a snapshot).

A replica the controller has not yet given a state (its LeaderAndIsr is still being applied: a
new partition being created, one loaded from disk after a restart) has no leader epoch yet
(UNDEFINED_EPOCH) and no role, so it has no row: there is nothing the invariant could check of
it, and the checker refuses an epoch below 0 (measured: a 500-partition topic is still being
created on its brokers ~0.2 s after the controller reports every ISR full, so the first sample
of each broker held ~145 such replicas).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from minikafka.common import TopicPartition
from minikafka.server.jsonl import DEFAULT_ROTATION, JsonlFile, Rotation
from minikafka.server.local_partition import LocalPartition
from minikafka.server.metrics import Metrics
from minikafka.server.partition_changes import PartitionChanges, drain

Key = tuple[str, int]  # (topic, partition), as the rows spell it


def replica_row(p: LocalPartition) -> list[Any] | None:
    """`p`'s row, or None while it has no state (module docstring)."""
    if p.state is None:
        return None
    leader = p.leader
    return [
        p.tp.topic,
        p.tp.partition,
        p.leader_epoch,
        leader is not None,
        p.log_end_offset,
        p.high_watermark,
        list(leader.isr) if leader is not None else None,
    ]


def replica_rows(partitions: Iterable[LocalPartition]) -> list[list[Any]]:
    return [row for p in partitions if (row := replica_row(p)) is not None]


class ReplicaStateLines:
    """The lines of one process's replicas.jsonl, pure: the last state written, and the rows
    that differ from it. `line(...)` returns the next line's object; `written(ok)` says whether
    it reached the file (a line that did not makes the next one a snapshot)."""

    def __init__(self) -> None:
        self._rows: dict[Key, list[Any]] = {}
        self._pending: dict[Key, list[Any]] | None = None
        self._need_snapshot = True
        self._started = False  # a line of this process has reached the file

    def snapshot(self, ts: float, node: int, rows: Iterable[list[Any]]) -> dict[str, Any]:
        state = {(r[0], r[1]): r for r in rows}
        self._pending = state
        line: dict[str, Any] = {"ts": ts, "node": node, "replicas": list(state.values())}
        if not self._started:
            line["start"] = True
        return line

    def delta(
        self, ts: float, node: int, looked_at: Mapping[Key, list[Any] | None]
    ) -> dict[str, Any]:
        """The changes among `looked_at` (key -> its row now, None: no row)."""
        state = dict(self._rows)
        changed, gone = [], []
        for key, row in looked_at.items():
            if row is None:
                if state.pop(key, None) is not None:
                    gone.append(list(key))
            elif state.get(key) != row:
                state[key] = row
                changed.append(row)
        self._pending = state
        line: dict[str, Any] = {"ts": ts, "node": node, "delta": True}
        if changed:
            line["replicas"] = changed
        if gone:
            line["gone"] = gone
        return line

    @property
    def need_snapshot(self) -> bool:
        return self._need_snapshot

    def written(self, ok: bool) -> None:
        if ok and self._pending is not None:
            self._rows = self._pending
        self._started = self._started or ok
        self._need_snapshot = not ok
        self._pending = None


async def run_replica_state_log(
    partitions: Mapping[TopicPartition, LocalPartition],
    path: Path,
    *,
    node_id: int,
    interval_ms: int,
    changes: PartitionChanges,
    metrics: Metrics | None = None,
    rotation: Rotation = DEFAULT_ROTATION,
    wall_clock: Callable[[], float] = time.time,
) -> None:
    """Append one line per interval (module docstring); `ts` is `wall_clock()` (injected: the
    tests' lines must differ in time under a MockClock; wall-clock time is never compared with
    now_ms); a delta looks only at the partitions
    touched since the last line (`changes`, the replica manager's: server/partition_changes.py)."""
    # A failed write never stops the node, and the file rolls over at its cap (server/jsonl.py).
    out = JsonlFile(path, metrics=metrics, rotation=rotation)
    touched = changes.subscribe()
    lines = ReplicaStateLines()
    try:
        while True:
            await trio.sleep(interval_ms / 1000)
            ts = round(wall_clock(), 3)
            looked_at = {}
            for tp in drain(touched):
                p = partitions.get(tp)
                looked_at[(tp.topic, tp.partition)] = replica_row(p) if p is not None else None
            text = _dumps(lines.delta(ts, node_id, looked_at))
            if lines.need_snapshot or out.starts_part(len(text) + 1):
                text = _dumps(lines.snapshot(ts, node_id, replica_rows(partitions.values())))
            lines.written(out.write_line(text))
    finally:
        out.close()


def _dumps(line: dict[str, Any]) -> str:
    return json.dumps(line, separators=(",", ":"))


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldRow:
    """One row and the lines it held over: from `since` (the line that wrote it) to `until`
    (the last line before the one that changed it, marked it gone, left it out or began a new
    process; the last line read if none did)."""

    row: list[Any]
    since: float
    until: float


def replay(lines: Iterable[Mapping[str, Any]]) -> Iterator[HeldRow]:
    """The rows of one node's replicas.jsonl lines (in order, across its parts) as the intervals
    they held (module docstring). A line without a number `ts` is skipped."""
    held: dict[Key, tuple[list[Any], float]] = {}
    last_ts: float | None = None
    for line in lines:
        ts = line.get("ts")
        if not isinstance(ts, int | float) or isinstance(ts, bool):
            continue
        rows = {(r[0], r[1]): r for r in line.get("replicas", ()) if _is_row(r)}
        ended: list[Key] = []
        if line.get("delta") is True:
            ended += [k for k, r in rows.items() if k in held and held[k][0] != r]
            ended += [k for g in line.get("gone", ()) if (k := _key(g)) in held]
        elif line.get("start") is True:  # a new process: everything the last one held ended
            ended += list(held)
        else:  # a snapshot: what it leaves out, or shows otherwise, ended
            ended += [k for k, (r, _) in held.items() if rows.get(k) != r]
        for k in dict.fromkeys(ended):
            row, since = held.pop(k)
            yield HeldRow(row=row, since=since, until=last_ts if last_ts is not None else ts)
        for k, r in rows.items():
            if k not in held:
                held[k] = (r, ts)
        last_ts = ts
    for row, since in held.values():
        assert last_ts is not None
        yield HeldRow(row=row, since=since, until=last_ts)


def _is_row(r: object) -> bool:
    return isinstance(r, list) and len(r) == 7


def _key(g: object) -> Key | None:
    return (g[0], g[1]) if isinstance(g, list) and len(g) == 2 else None
