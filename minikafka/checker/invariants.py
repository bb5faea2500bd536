"""Cluster invariants read from the nodes' own logs; the anomaly record.

`Anomaly` (and `Found`, its collector) live here because every check returns one: these and
those of anomalies.py, which imports this module.

Inputs (each parsed into frozen dataclasses; malformed input raises `HistoryError`):

- leadership claims: `{"node", "time", "topic", "partition", "leader_epoch"}`, a node's
  `become_leader` event;
- replica samples: `{"node", "time", "topic", "partition", "leader_epoch", "is_leader",
  "log_end_offset", "high_watermark", "isr"}` and optionally `"until"`, a replica's state as
  the node logged it (the ISR only on the leader, else null), observed from `time` to `until`
  (>= time; without it, at `time` only). replicas.jsonl writes a row again only when it changes
  (server/replica_state_log.py), so a state stands until the node's next row says otherwise.

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
  timestamps that are rounded or taken in different processes. A member's state is checked at
  every moment it held (`time` to `until`) against the bounds in force then: exactly the checks
  the old one-snapshot-per-second format made at each of its lines, and those in between.

The throttle bound is not checked here: the PySpark analysis judges it, for the system tests
and the experiments alike (minikafka/experiment/verdict.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.checker.history import (
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
    """Collects one anomaly: counts every instance, keeps the first `keep` as examples."""

    def __init__(self, name: str, *, invalid: bool = True, keep: int | None = MAX_EXAMPLES) -> None:
        self.name, self.invalid = name, invalid
        self.keep = keep  # examples kept (None: every instance, for a caller that lists them)
        self.count = 0
        self.examples: list[dict[str, Any]] = []

    def add(self, **example: Any) -> None:
        self.count += 1
        if self.keep is None or len(self.examples) < self.keep:
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
    until: float  # the state held from `time` to here (module docstring)


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
        until = field_number(doc, "until", where) if "until" in doc else kw["time"]
        if until < kw["time"]:
            raise HistoryError(f"{where}: until {until} is before time {kw['time']}")
        out.append(
            ReplicaSample(
                **kw,
                is_leader=leader,
                log_end_offset=field_int(doc, "log_end_offset", where),
                high_watermark=field_int(doc, "high_watermark", where),
                # a follower's ISR is not its to know: whatever it carries is ignored
                isr=field_ints(doc, "isr", where) if leader else None,
                until=until,
            )
        )
    return tuple(out)


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
    """Sort and sweep per (partition, epoch, member): each state a member held is compared with
    the highest HW a leader sample at least `slack_s` earlier bound it to, since the member last
    (re)entered the ISR, at its start and at every bound that came into force while it held. A
    leader sample without the member ends its earlier bounds: a replica out of the ISR cannot be
    elected, so what it then holds (say, a wiped disk) risks nothing, and it must catch up past
    the HW to get back in. One instance per state at most. O(n log n)."""
    found = Found("hw_past_isr_leo")
    leaders: dict[tuple[TP, int], list[ReplicaSample]] = defaultdict(list)
    seen: dict[tuple[TP, int, int], list[tuple[float, float, int]]] = defaultdict(list)
    for s in samples:
        tp = (s.topic, s.partition)
        seen[(tp, s.leader_epoch, s.node)].append((s.time, s.until, s.log_end_offset))
        if s.isr is not None:
            leaders[(tp, s.leader_epoch)].append(s)
    for (tp, epoch), rules in sorted(leaders.items(), key=repr):
        rules.sort(key=lambda r: r.time)
        members = {m for r in rules for m in r.isr or () if m != r.node}
        for m in sorted(members):
            bounds = _Bounds(rules, m, slack_s)
            for t, until, leo in sorted(seen.get((tp, epoch, m), ())):
                hit = bounds.violated_between(t, until, leo)
                if hit is not None:
                    best, when = hit
                    found.add(topic=tp[0], partition=tp[1], leader_epoch=epoch, leader=best.node,
                              leader_time=best.time, high_watermark=best.high_watermark, node=m,
                              time=when, log_end_offset=leo)  # fmt: skip
    return found.anomaly()


class _Bounds:
    """The leader samples of one (partition, epoch) in time order, as the HW bound on one
    member: the sample with the highest HW since the member last (re)entered the ISR."""

    def __init__(self, rules: list[ReplicaSample], member: int, slack_s: float) -> None:
        self.rules, self.member, self.slack_s = rules, member, slack_s
        self.j = 0
        self.best: ReplicaSample | None = None

    def _apply_next(self) -> float:
        r = self.rules[self.j]
        self.j += 1
        if self.member not in (r.isr or ()):
            self.best = None  # the member left the ISR: earlier bounds no longer apply
        elif self.best is None or r.high_watermark > self.best.high_watermark:
            self.best = r
        return r.time + self.slack_s

    def _due(self, t: float) -> bool:
        return self.j < len(self.rules) and self.rules[self.j].time + self.slack_s <= t

    def violated_between(
        self, since: float, until: float, leo: int
    ) -> tuple[ReplicaSample, float] | None:
        """The first bound above `leo` in force at a moment in [since, until], and that moment;
        moves on past `until` either way (the member's states come in time order)."""
        hit = None
        while self._due(since):
            self._apply_next()
        if self.best is not None and leo < self.best.high_watermark:
            hit = (self.best, since)
        while self._due(until):
            when = self._apply_next()
            if hit is None and self.best is not None and leo < self.best.high_watermark:
                hit = (self.best, when)
        return hit
