"""Progress of a running reassignment per destination broker (`reassign --verify --watch`), and
the figures the planner reads from a local cluster's files.

No API tells how far a new replica has got (a follower answers no ListOffsets), and this tool
adds nothing to the server, so progress comes from what the nodes write (docs/node-files.md),
for a cluster whose directory is at hand (each log read across its rotated parts,
minikafka/server/jsonl.py):

- the controller's events.jsonl: each partition's latest `reassignment_started` with the file's
  target gives its destinations (`adding`) and the time its copy started;
- each destination's metrics.jsonl: the counters `follower_replication_throttled_bytes` +
  `follower_reassignment_throttled_bytes` (every byte it fetched for a throttled replica:
  exactly the new replicas, under either throttle mode) or, when no throttle applies,
  `replication_bytes_in`, read at the line just before the copy started and at the latest line.

bytes left on a destination = estimated size of the partitions it is adding (move_size.LogSize)
- bytes it fetched since its first copy started; 0 once none of them is still moving. The rate
is the follower throttle's own measure (`FollowerReplicationThrottledRate` +
`FollowerReassignmentThrottledRate`), or `replication_bytes_in_per_s` without a throttle; ETA =
left / rate. Without the files (a remote `--bootstrap`), only partitions and sizes are shown.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient
from minikafka.common import TopicPartition
from minikafka.server.jsonl import jsonl_parts
from minikafka.tools.reassign.move_size import estimate_log_sizes, sizes_in_bytes
from minikafka.tools.reassign.moves import OngoingReassignment
from minikafka.tools.reassign.runner import (
    IN_PROGRESS,
    ClusterView,
    PartitionStatus,
    read_cluster,
    statuses,
)

VALUE = dict(frozen=True, slots=True, kw_only=True)

THROTTLED_COUNTERS = (
    "follower_replication_throttled_bytes",
    "follower_reassignment_throttled_bytes",
)
THROTTLED_RATES = ("FollowerReplicationThrottledRate", "FollowerReassignmentThrottledRate")
CHUNK = 1 << 16


@dataclass(**VALUE)
class LocalFiles:
    """Where a local cluster's nodes write (from its cluster.json)."""

    metrics: Mapping[int, Path]  # broker id -> metrics.jsonl
    controller_events: Path | None
    node_configs: Mapping[str, str]


# ---------------------------------------------------------------------------- reading files


def reverse_lines(path: Path) -> Iterator[bytes]:
    """The lines of a node log, last first, across its rotated parts (newest part first;
    minikafka/server/jsonl.py), reading each backwards in chunks (metrics logs grow long)."""
    for part in reversed(jsonl_parts(path)):
        try:
            f = open(part, "rb")  # noqa: SIM115
        except FileNotFoundError:
            continue  # rolled away since the listing
        with f:
            f.seek(0, 2)
            pos = f.tell()
            tail = b""
            while pos > 0:
                step = min(CHUNK, pos)
                pos -= step
                f.seek(pos)
                lines = (f.read(step) + tail).split(b"\n")
                tail = lines[0]
                yield from (line for line in reversed(lines[1:]) if line)
            if tail:
                yield tail


def _parse(line: bytes) -> dict | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None  # a line being written
    return doc if isinstance(doc, dict) else None


def snapshot_at(path: Path, ts: float | None = None) -> dict | None:
    """The last complete metrics line with `ts` <= the given wall-clock time (None: the last)."""
    for line in reverse_lines(path):
        doc = _parse(line)
        if doc is not None and (ts is None or float(doc.get("ts", 0.0)) <= ts):
            return doc
    return None


def recent_snapshots(path: Path, seconds: float) -> list[dict]:
    """The metrics lines of the last `seconds` seconds of the file (by its own last `ts`)."""
    out: list[dict] = []
    for line in reverse_lines(path):
        doc = _parse(line)
        if doc is None:
            continue
        if out and float(doc.get("ts", 0.0)) < float(out[0].get("ts", 0.0)) - seconds:
            break
        out.append(doc)
    return out[::-1]


def median_bytes_in(files: LocalFiles, seconds: float = 10.0) -> dict[int, float]:
    """KIP-73's BytesInPerSec per broker: the median of `bytes_in_per_s` (bytes produced by
    clients) over the last `seconds` of each broker's metrics.jsonl. The median, not the mean:
    a burst that is over (the load that filled the topic) is not a steady inbound rate.
    Brokers without lines are left out."""
    out: dict[int, float] = {}
    for broker, path in sorted(files.metrics.items()):
        rates = [float(s.get("bytes_in_per_s", 0.0)) for s in recent_snapshots(path, seconds)]
        if rates:
            out[broker] = statistics.median(rates)
    return out


@dataclass(**VALUE)
class MoveEvent:
    ts: float
    adding: tuple[int, ...]


def _events(path: Path | None, *names: str) -> Iterator[dict]:
    if path is None:
        return
    needles = [name.encode() for name in names]
    for part in jsonl_parts(path):  # oldest first: the latest event of a kind is read last
        try:
            f = open(part, "rb")  # noqa: SIM115
        except FileNotFoundError:
            continue  # rolled away since the listing
        with f:
            for line in f:
                if any(n in line for n in needles):  # cheap filter before parsing
                    doc = _parse(line)
                    if doc is not None and doc.get("event") in names:
                        yield doc


def _tp(event: Mapping[str, object]) -> TopicPartition:
    return TopicPartition(str(event.get("topic")), int(event.get("partition", -1)))  # type: ignore[call-overload]


@dataclass(**VALUE)
class FileMove:
    """The moves of a reassignment file, as the controller logged them."""

    starts: Mapping[TopicPartition, MoveEvent]
    completed: Mapping[TopicPartition, float]  # ts of each completion after its start

    @property
    def duration_s(self) -> float | None:
        """First start to last completion; None unless every move has completed."""
        if not self.starts or set(self.completed) != set(self.starts):
            return None
        return max(self.completed.values()) - min(s.ts for s in self.starts.values())


def file_moves(path: Path | None, proposed: Mapping[TopicPartition, Sequence[int]]) -> FileMove:
    """The partitions of the file whose latest start or cancel is a start towards the file's
    target, and which were still moving when the latest of those started: the move the file
    made last. A partition whose last move went elsewhere or was cancelled is not part of it,
    nor one an older run of the file had already moved (the file may repeat its target)."""
    latest: dict[TopicPartition, dict] = {}
    completed: dict[TopicPartition, float] = {}
    for e in _events(
        path, "reassignment_started", "reassignment_cancelled", "reassignment_completed"
    ):
        tp = _tp(e)
        if tp not in proposed:
            continue
        if e["event"] == "reassignment_completed":
            completed[tp] = float(e["ts"])
        else:
            latest[tp] = e
            completed.pop(tp, None)
    starts = {
        tp: MoveEvent(ts=float(e["ts"]), adding=tuple(e.get("adding", ())))
        for tp, e in sorted(latest.items())
        if e["event"] == "reassignment_started" and list(e.get("target", ())) == list(proposed[tp])
    }
    newest = max((s.ts for s in starts.values()), default=0.0)
    starts = {tp: s for tp, s in starts.items() if completed.get(tp, newest) >= newest}
    return FileMove(
        starts=starts, completed={tp: completed[tp] for tp in starts if tp in completed}
    )


# ---------------------------------------------------------------------------- the model


@dataclass(**VALUE)
class BrokerProgress:
    broker: int
    moving: int  # partitions still being copied to it
    planned_bytes: int  # estimated size of everything it is adding in this move
    copied_bytes: int | None  # fetched since its copy started (None: no local files)
    left_bytes: int
    rate: float | None  # B/s (None: unknown)

    @property
    def eta_s(self) -> float | None:
        if self.left_bytes == 0:
            return 0.0
        if not self.rate:
            return None
        return self.left_bytes / self.rate

    def to_json(self) -> dict[str, object]:
        return {
            "broker": self.broker,
            "moving_partitions": self.moving,
            "planned_bytes": self.planned_bytes,
            "copied_bytes": self.copied_bytes,
            "left_bytes": self.left_bytes,
            "rate": self.rate,
            "eta_s": self.eta_s,
        }


def _counters(snap: Mapping[str, object] | None) -> tuple[int, int]:
    if snap is None:
        return 0, 0
    throttled = sum(int(snap.get(k, 0) or 0) for k in THROTTLED_COUNTERS)  # type: ignore[call-overload]
    return throttled, int(snap.get("replication_bytes_in", 0) or 0)  # type: ignore[call-overload]


def copied_since(base: Mapping[str, object] | None, now: Mapping[str, object]) -> int:
    """Bytes fetched for throttled replicas between two snapshots, or all replication bytes in
    when none were throttled; a counter that went back (the node restarted) counts from 0."""
    (t0, r0), (t1, r1) = _counters(base), _counters(now)
    if t1 < t0 or r1 < r0:
        t0, r0 = 0, 0
    return t1 - t0 if t1 > t0 else r1 - r0


def current_rate(snap: Mapping[str, object]) -> float:
    throttled = sum(float(snap.get(k, 0.0) or 0.0) for k in THROTTLED_RATES)  # type: ignore[arg-type]
    return throttled if throttled > 0 else float(snap.get("replication_bytes_in_per_s", 0.0) or 0.0)  # type: ignore[arg-type]


class MoveProgress:
    """Per destination: what it adds, how big that is, and its counters when the copy started.

    Build it once (`start`), then call `rows` with the moves still in progress and each
    destination's latest snapshot (None when the files are not at hand).
    """

    def __init__(
        self,
        *,
        destinations: Mapping[int, Sequence[TopicPartition]],
        sizes: Mapping[TopicPartition, int],
        baselines: Mapping[int, Mapping[str, object] | None],
    ) -> None:
        self.destinations = {b: tuple(sorted(t)) for b, t in sorted(destinations.items())}
        self.sizes = dict(sizes)
        self.baselines = dict(baselines)

    @classmethod
    def start(
        cls,
        *,
        proposed: Mapping[TopicPartition, Sequence[int]],
        ongoing: Mapping[TopicPartition, OngoingReassignment],
        sizes: Mapping[TopicPartition, int],
        files: LocalFiles | None,
        now_ts: float,
    ) -> MoveProgress:
        """Destinations from the controller's start events (falling back to the `adding`
        replicas of the moves in progress), baselines at each destination's first start."""
        moved = file_moves(files.controller_events if files else None, proposed)
        starts = moved.starts
        per_broker: dict[int, list[TopicPartition]] = {}
        first: dict[int, float] = {}
        for tp in sorted(proposed):
            if tp in starts:
                adding, ts = starts[tp].adding, starts[tp].ts
            elif tp in ongoing:
                adding, ts = ongoing[tp].adding, now_ts
            else:
                continue
            for b in adding:
                per_broker.setdefault(b, []).append(tp)
                first[b] = min(first.get(b, ts), ts)
        baselines: dict[int, Mapping[str, object] | None] = {}
        for b in per_broker:
            path = files.metrics.get(b) if files else None
            baselines[b] = snapshot_at(path, first[b]) if path is not None else None
        return cls(destinations=per_broker, sizes=sizes, baselines=baselines)

    def rows(
        self,
        ongoing: Mapping[TopicPartition, OngoingReassignment],
        snapshots: Mapping[int, Mapping[str, object] | None],
    ) -> list[BrokerProgress]:
        out = []
        for b, tps in self.destinations.items():
            moving = [tp for tp in tps if tp in ongoing and b in ongoing[tp].adding]
            planned = sum(self.sizes.get(tp, 0) for tp in tps)
            snap = snapshots.get(b)
            if snap is None:
                copied, rate = None, None
                left = sum(self.sizes.get(tp, 0) for tp in moving)
            else:
                copied = copied_since(self.baselines.get(b), snap)
                rate = current_rate(snap)
                left = max(0, planned - copied) if moving else 0
            out.append(
                BrokerProgress(
                    broker=b,
                    moving=len(moving),
                    planned_bytes=planned,
                    copied_bytes=copied,
                    left_bytes=left,
                    rate=rate,
                )
            )
        return out


# ---------------------------------------------------------------------------- the loop


@dataclass(**VALUE)
class WatchFrame:
    """One refresh of `--verify --watch`."""

    elapsed_s: float
    statuses: Sequence[PartitionStatus]
    rows: Sequence[BrokerProgress]

    @property
    def moving(self) -> int:
        return sum(s.status == IN_PROGRESS for s in self.statuses)


@dataclass(**VALUE)
class WatchResult:
    view: ClusterView
    done: bool  # False: --timeout passed with partitions still moving
    elapsed_s: float
    move_s: float | None  # first start to last completion, from the controller's events


async def watch(
    admin: Admin,
    client: ClusterClient,
    proposed: Mapping[TopicPartition, Sequence[int]],
    *,
    files: LocalFiles | None,
    timeout_s: float,
    interval_s: float,
    show: Callable[[WatchFrame], None],
) -> WatchResult:
    """Refresh the progress every `interval_s` until no partition of the file is moving, at
    most `timeout_s`. Time here is the tool's own (trio's clock), metrics lines carry `ts`."""
    began = trio.current_time()
    view = await read_cluster(admin)
    statuses(view, proposed)  # unknown partitions: ConfigError before anything else
    sizes = sizes_in_bytes(await estimate_log_sizes(client, proposed))
    progress = MoveProgress.start(
        proposed=proposed, ongoing=view.ongoing, sizes=sizes, files=files, now_ts=time.time()
    )
    done = False
    with trio.move_on_after(timeout_s):
        while True:
            current = statuses(view, proposed)
            if not any(s.status == IN_PROGRESS for s in current):
                done = True
                break
            snaps = {
                b: snapshot_at(files.metrics[b]) if files and b in files.metrics else None
                for b in progress.destinations
            }
            rows = progress.rows(view.ongoing, snaps)
            show(WatchFrame(elapsed_s=trio.current_time() - began, statuses=current, rows=rows))
            await trio.sleep(interval_s)
            view = await read_cluster(admin)
    if not done:
        view = await read_cluster(admin)
    move_s = file_moves(files.controller_events if files else None, proposed).duration_s
    return WatchResult(
        view=view, done=done, elapsed_s=trio.current_time() - began, move_s=move_s if done else None
    )
