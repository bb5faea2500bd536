"""Cluster invariants read from the nodes' own logs, and the throttle bound; the anomaly record.

`Anomaly` (and `Found`, its collector) live here because every check returns one: these and
those of checker.py, which imports this module.

Inputs (each parsed into frozen dataclasses; malformed input raises `HistoryError`):

- leadership claims: `{"node", "time", "topic", "partition", "leader_epoch"}`, a node's
  `become_leader` event;
- replica samples: `{"node", "time", "topic", "partition", "leader_epoch", "is_leader",
  "log_end_offset", "high_watermark", "isr"}`, a replica's state sampled periodically (the ISR
  only on the leader, else null);
- throttle: one object `{"rate_bytes_per_s": T, "window_s", "tolerance" (1.15), "warmup_s" (2),
  "set_at_s" (0), "nodes": {"<node>": [[time, cumulative throttled bytes], ...]}}`.

All times are seconds on one clock shared by every node and the history (the runner's).

Checks:

- `multiple_leaders_per_epoch`: two nodes claim one (partition, leader epoch). Kafka's controller
  hands each epoch to one leader; two claimants is split brain.
- `hw_past_isr_leo`: a leader sample (t, HW H, ISR S) and a later (t' >= t) sample of a member m
  of S, m not the leader, of the same leader epoch, with log end offset < H. Why this is sound:
  the leader advances its HW to the minimum LEO it knows for the ISR, and a follower's LEO is
  known to the leader only from fetches the follower sent, so when the leader reports H, every
  member of S has held offsets below H at some moment before t. A follower's LEO shrinks only by
  truncation; within one leader epoch a follower truncates only its divergent, uncommitted tail
  (KIP-101/KIP-279), which lies above H. So an in-sync member below H later in the same epoch
  truncated committed data: the bug. Across an epoch change truncation is legitimate (the new
  epoch's divergence point), hence the same-epoch rule. `slack_s` (t' >= t + slack) absorbs
  timestamps that are rounded or taken in different processes.
- `throttle_exceeded`: over each node's cumulative throttled-bytes series after the warm-up,
  sliding windows from every sample to the first sample at least `window_s` later; a window whose
  rate exceeds tolerance x T is a violation. A decrease of the counter is a restart (it counts
  from 0 again): the interval's bytes are the new value, never negative. That undercounts by the
  bytes between the last sample and the crash, which can only hide a violation, never invent one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.experiment.history import (
    TP,
    VALUE,
    HistoryError,
    field_bool,
    field_int,
    field_ints,
    field_number,
    field_str,
    require_object,
)

MAX_EXAMPLES = 20


@dataclass(**VALUE)
class Anomaly:
    """One kind of anomaly: how many instances, and the first few as JSON-ready dicts."""

    name: str
    invalid: bool  # False: informational, does not make the run invalid
    count: int
    examples: tuple[dict[str, Any], ...]

    def to_doc(self) -> dict[str, Any]:
        return {"count": self.count, "invalid": self.invalid, "examples": list(self.examples)}


class Found:
    """Collects one anomaly: counts every instance, keeps the first MAX_EXAMPLES as examples."""

    def __init__(self, name: str, *, invalid: bool = True) -> None:
        self.name, self.invalid = name, invalid
        self.count = 0
        self.examples: list[dict[str, Any]] = []

    def add(self, **example: Any) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def anomaly(self) -> Anomaly:
        return Anomaly(
            name=self.name, invalid=self.invalid, count=self.count, examples=tuple(self.examples)
        )


# ------------------------------------------------------------------------------------- inputs


@dataclass(**VALUE)
class LeaderClaim:
    node: int
    time: float
    topic: str
    partition: int
    leader_epoch: int


@dataclass(**VALUE)
class ReplicaSample:
    node: int
    time: float
    topic: str
    partition: int
    leader_epoch: int
    is_leader: bool
    log_end_offset: int
    high_watermark: int
    isr: tuple[int, ...] | None  # the leader's ISR; None on followers


@dataclass(**VALUE)
class ThrottleSeries:
    rate_bytes_per_s: float
    window_s: float
    tolerance: float
    warmup_s: float
    set_at_s: float  # when the throttle was set: the warm-up runs from here
    points: Mapping[int, tuple[tuple[float, int], ...]]  # node -> (time, cumulative bytes)


def _place(doc: Any, where: str) -> tuple[Mapping[str, Any], dict[str, Any]]:
    doc = require_object(doc, where)
    return doc, {
        "node": field_int(doc, "node", where),
        "time": field_number(doc, "time", where),
        "topic": field_str(doc, "topic", where),
        "partition": field_int(doc, "partition", where),
        "leader_epoch": field_int(doc, "leader_epoch", where),
    }


def parse_claims(
    docs: Iterable[Any], *, source: str = "leadership claims"
) -> tuple[LeaderClaim, ...]:
    return tuple(LeaderClaim(**_place(d, f"{source} line {n}")[1]) for n, d in enumerate(docs, 1))


def parse_samples(
    docs: Iterable[Any], *, source: str = "replica samples"
) -> tuple[ReplicaSample, ...]:
    out = []
    for n, d in enumerate(docs, 1):
        where = f"{source} line {n}"
        doc, kw = _place(d, where)
        leader = field_bool(doc, "is_leader", where)
        out.append(
            ReplicaSample(
                **kw,
                is_leader=leader,
                log_end_offset=field_int(doc, "log_end_offset", where),
                high_watermark=field_int(doc, "high_watermark", where),
                # a follower's ISR is not its to know: whatever it carries is ignored
                isr=field_ints(doc, "isr", where) if leader else None,
            )
        )
    return tuple(out)


def parse_throttle(doc: Any, *, source: str = "throttle") -> ThrottleSeries:
    doc = require_object(doc, source)
    nodes = doc.get("nodes")
    if not isinstance(nodes, Mapping):
        raise HistoryError(
            f"{source}: field 'nodes' must be an object of node -> [[time, bytes], ...]"
        )
    points: dict[int, tuple[tuple[float, int], ...]] = {}
    for key, series in nodes.items():
        where = f"{source}: field 'nodes' node {key!r}"
        try:
            node = int(key)
        except (TypeError, ValueError):
            raise HistoryError(f"{where}: the key must be a node id (an int)") from None
        if not isinstance(series, list):
            raise HistoryError(f"{where}: must be a list of [time, bytes], got {repr(series)[:60]}")
        pts: list[tuple[float, int]] = []
        for k, p in enumerate(series):
            at = f"{where} point {k}"
            if not (isinstance(p, list) and len(p) == 2):
                raise HistoryError(f"{at}: must be [time, bytes], got {repr(p)[:60]}")
            pt = (field_number({"time": p[0]}, "time", at), field_int({"bytes": p[1]}, "bytes", at))
            if pts and pt[0] < pts[-1][0]:
                raise HistoryError(
                    f"{where} point {k}: time {pt[0]} before the previous {pts[-1][0]}"
                )
            pts.append(pt)
        points[node] = tuple(pts)
    return ThrottleSeries(
        rate_bytes_per_s=field_number(doc, "rate_bytes_per_s", source, positive=True),
        window_s=field_number(doc, "window_s", source, positive=True),
        tolerance=field_number({"tolerance": 1.15} | dict(doc), "tolerance", source, positive=True),
        warmup_s=field_number({"warmup_s": 2.0} | dict(doc), "warmup_s", source),
        set_at_s=field_number({"set_at_s": 0.0} | dict(doc), "set_at_s", source),
        points=points,
    )


# ------------------------------------------------------------------------------------- checks


def find_multiple_leaders(claims: Iterable[LeaderClaim]) -> Anomaly:
    found = Found("multiple_leaders_per_epoch")
    by_epoch: dict[tuple[str, int, int], dict[int, float]] = defaultdict(dict)
    for c in claims:
        by_epoch[(c.topic, c.partition, c.leader_epoch)].setdefault(c.node, c.time)
    for (topic, partition, epoch), nodes in by_epoch.items():
        if len(nodes) > 1:
            ordered = sorted(nodes.items(), key=lambda nt: (nt[1], nt[0]))
            found.add(topic=topic, partition=partition, leader_epoch=epoch,
                      nodes=[n for n, _ in ordered], times=[t for _, t in ordered])  # fmt: skip
    return found.anomaly()


def find_hw_past_isr_leo(samples: Iterable[ReplicaSample], *, slack_s: float = 0.0) -> Anomaly:
    """Sort and sweep per (partition, epoch, member): each member sample is compared with the
    highest HW a leader sample at least `slack_s` earlier bound it to, since the member last
    (re)entered the ISR. A leader sample without the member ends its earlier bounds: a replica
    out of the ISR cannot be elected, so what it then holds (say, a wiped disk) risks nothing,
    and it must catch up past the HW to get back in. O(n log n)."""
    found = Found("hw_past_isr_leo")
    leaders: dict[tuple[TP, int], list[ReplicaSample]] = defaultdict(list)
    seen: dict[tuple[TP, int, int], list[tuple[float, int]]] = defaultdict(list)
    for s in samples:
        tp = (s.topic, s.partition)
        seen[(tp, s.leader_epoch, s.node)].append((s.time, s.log_end_offset))
        if s.isr is not None:
            leaders[(tp, s.leader_epoch)].append(s)
    for (tp, epoch), rules in sorted(leaders.items(), key=repr):
        rules.sort(key=lambda r: r.time)
        members = {m for r in rules for m in r.isr or () if m != r.node}
        for m in sorted(members):
            j, best = 0, None  # best: the leader sample with the highest HW binding m now
            for t, leo in sorted(seen.get((tp, epoch, m), ())):
                while j < len(rules) and rules[j].time + slack_s <= t:
                    r = rules[j]
                    if m not in (r.isr or ()):
                        best = None  # m left the ISR: earlier bounds no longer apply
                    elif best is None or r.high_watermark > best.high_watermark:
                        best = r
                    j += 1
                if best is not None and leo < best.high_watermark:
                    found.add(topic=tp[0], partition=tp[1], leader_epoch=epoch, leader=best.node,
                              leader_time=best.time, high_watermark=best.high_watermark, node=m,
                              time=t, log_end_offset=leo)  # fmt: skip
    return found.anomaly()


def find_throttle_exceeded(throttle: ThrottleSeries) -> tuple[Anomaly, dict[int, float]]:
    """-> (violations: one example per node, its worst window; count = violating windows),
    node -> worst ratio of a window's rate to T (nodes with at least one full window)."""
    found = Found("throttle_exceeded")
    worst: dict[int, float] = {}
    limit = throttle.tolerance
    for node in sorted(throttle.points):
        times, totals = _running_totals(
            throttle.points[node], throttle.set_at_s + throttle.warmup_s
        )
        j, top, bad = 0, None, 0
        for i, t in enumerate(times):
            j = max(j, i + 1)
            while j < len(times) and times[j] - t < throttle.window_s:
                j += 1
            if j == len(times):
                break  # no full window starts here or later
            rate = (totals[j] - totals[i]) / (times[j] - t)
            ratio = rate / throttle.rate_bytes_per_s
            bad += ratio > limit
            if top is None or ratio > top[0]:
                top = (ratio, t, times[j], totals[j] - totals[i], rate)
        if top is None:
            continue
        worst[node] = top[0]
        if bad:
            found.count += bad - 1  # add() counts one
            found.add(node=node, start=top[1], end=top[2], bytes=top[3], rate_bytes_per_s=top[4],
                      ratio=top[0], violating_windows=bad)  # fmt: skip
    return found.anomaly(), worst


def _running_totals(
    points: Iterable[tuple[float, int]], after: float
) -> tuple[list[float], list[int]]:
    """(times, bytes since the first kept sample) of the samples at or after `after`."""
    times: list[float] = []
    totals: list[int] = []
    prev = None
    for t, cumulative in points:
        if t < after:
            continue
        if prev is None:
            totals.append(0)
        else:
            # a decrease is a restart: the counter counts from 0 again since then
            totals.append(totals[-1] + (cumulative - prev if cumulative >= prev else cumulative))
        times.append(t)
        prev = cumulative
    return times, totals
