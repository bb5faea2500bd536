"""The checker of a compacted topic (Kafka's `cleanup.policy=compact`): what the history, its
final reads and the replicas' own logs say about the log cleaner.

Keys. The experiment's keyed workload (experiment/workload.py, `keys` K > 0) gives value v the
key `k<v % K>`, so each value's key follows from the value alone and the history keeps its
format: here a key is the integer v % K (`Compaction.key`).

What compaction may do, as Kafka's LogCleaner does it: offsets are kept (a removed record leaves
a gap), and a record is removed only when a later record of its key is in the log; after a pass
up to a log's first dirty offset D (the `log_cleaned` event's `first_dirty_offset`), at most one
record of each key remains below D: the last one of that key below D. Whatever the passes
before, the records below D are then a function of the committed log and D alone, so replicas
cleaned to the same point hold the same records.

Inputs (`Compaction`): K; the passes each node reported (`Cleaning`: its `log_cleaned` events,
on the history's clock); the leadership claims (invariants.py); when nodes lost their disks.
Two bounds come from the passes. The *clean point* of a final read, below which it must be
clean, is the largest first dirty offset reported by the partition's leader at the final read's invoke
(the highest leader epoch claimed at or before it), by a pass reported at least `slack_s` before
that invoke. A pass writes its batches and its checkpoint before it reports, and every fetch of
the final read comes after its invoke, so the whole read sees a log clean below that point;
passes during the read may clean more and are left out, which weakens the check and never makes
it wrong. The events are the only source there is: neither Kafka nor the brokers here expose a
log's cleaned point through the protocol (Kafka keeps it in the cleaner-offset-checkpoint file).
A replica's own clean point, for its dump (read after the cluster stopped), is the largest its
node reported since it last lost its disk (a wipe: its log started again). The other bound,
`cleaned_at_most`, is the largest first dirty offset any node reported by the end of the final
read: no pass anywhere cleaned past it, so a record of the final read's log can have been
removed only if a later record of its key lies below it (the last record of a key below that
bound was never removable, so it is in the final read unless lost). `superseded` asks that of a
record: a later record of its key below the bound, seen anywhere in the history (an ack, a
poll, the final read).

Anomalies (`ANOMALIES`):

- `compacted` (informational, the analogue of `deleted`): an acknowledged or polled value absent
  from its partition's final read, at or above that read's log start, `superseded`: the
  cleaner removed it, as it may. anomalies.py's `lost` skips it; a value removed though no
  pass could have (its key's later records all at or above `cleaned_at_most`: a cleaner that
  cleaned its dirty section or its active segment) stays `lost`.
- `compaction_lost_latest`: the latest acknowledged write of a key (value i of an ok send at its
  base offset + i) has no record of that key at or after its offset in the final read: the last
  value of every key must survive. (Below the final read's log start it is `deleted`.)
- `compaction_kept_stale`: a record below the clean point whose key has a later record below
  that point: in the same read (the key appears twice there), or known from an ack or a read of
  the history (that record was in the log when it was cleaned, so the earlier one had to go).
  Checked on each final read below its clean point, and on each replica's dump below its own.
- `replicas_diverge`: two replicas whose committed logs differ once both are brought to the same
  clean point (the larger of their two points, by the rule above); with equal points this is
  "replicas cleaned to the same point hold the same records". The dumps hold records (offset,
  value), not batch bytes, so this compares records, not bytes.

And, in anomalies.py, for a compacted topic: a poll's gap (or its first offset past the one
asked for) is a `skipped_read` only when the final read holds, inside the gap, a record that is
not `superseded` (no pass anywhere could have removed it, by then or before), and a final
read's own gaps are not anomalies (what they hide is `lost` or `compacted`); a replica lacking an offset another replica or the final read has is
`missing_replica_data` only when its own log holds no later record of that key.

Pure: no I/O; everything keyed in dicts, each input walked a fixed number of times.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from minikafka.checker.history import (
    TP,
    VALUE,
    HistoryError,
    Operation,
    Record,
    ReplicaDump,
    field_int,
    field_number,
    field_str,
    require_object,
)
from minikafka.checker.invariants import Anomaly, Found, LeaderClaim


class Facts(Protocol):
    """What these checks read of anomalies.py's `Facts` (which builds `KeyedFacts` for them):
    named here so that this module does not import the one that imports it."""

    acks: list[tuple[Operation, TP, int, tuple[int, ...]]]
    polls: list[Operation]
    final: dict[TP, Operation]
    final_pos: dict[TP, dict[int, int]]
    final_start: dict[TP, int]
    committed_hw: dict[TP, int]
    dumps: list[tuple[ReplicaDump, tuple[Record, ...]]]
    other_acks: list[tuple[Operation, TP, int, tuple[int, ...]]]
    other_reads: list[tuple[TP, dict[str, Any], Sequence[Record]]]

    def found(self, name: str, *, invalid: bool = True) -> Found: ...

    @property
    def keyed(self) -> KeyedFacts: ...


__all__ = [
    "ANOMALIES",
    "Cleaning",
    "Compaction",
    "KeyedFacts",
    "find_compacted",
    "find_kept_stale",
    "find_lost_latest",
    "find_replicas_diverge",
    "parse_cleanings",
]

ANOMALIES = ("compacted", "compaction_lost_latest", "compaction_kept_stale", "replicas_diverge")


@dataclass(**VALUE)
class Cleaning:
    """One cleaning pass a node reported (its `log_cleaned` event), `time` on the history's
    clock: every record of its log of the partition below `first_dirty_offset` was cleaned."""

    node: int
    time: float
    topic: str
    partition: int
    first_dirty_offset: int

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


def parse_cleanings(docs: Iterable[Any], *, source: str = "log cleanings") -> tuple[Cleaning, ...]:
    """`{"node", "time", "topic", "partition", "first_dirty_offset"}` each; HistoryError naming
    the line and the field if malformed."""
    out = []
    for n, doc in enumerate(docs, 1):
        where = f"{source} line {n}"
        doc = require_object(doc, where)
        out.append(
            Cleaning(
                node=field_int(doc, "node", where),
                time=field_number(doc, "time", where),
                topic=field_str(doc, "topic", where),
                partition=field_int(doc, "partition", where),
                first_dirty_offset=field_int(doc, "first_dirty_offset", where),
            )
        )
    return tuple(out)


@dataclass(**VALUE)
class Compaction:
    """What the checker needs to judge a compacted topic (module docstring)."""

    keys: int
    cleanings: tuple[Cleaning, ...] = ()  # every pass every node reported
    claims: tuple[LeaderClaim, ...] = ()
    slack_s: float = 0.0
    # (node, time): the node lost its disk (or its unsynced writes) then; its passes from
    # before no longer describe its log (they still bound what any log may have lost)
    disk_losses: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if type(self.keys) is not int or self.keys < 1:
            raise HistoryError(f"compaction keys {self.keys!r}: expected an int >= 1")

    def key(self, value: int) -> int:
        return value % self.keys

    def final_read_leader(self, tp: TP, at: float) -> int | None:
        """The node that led `tp` at `at`: the highest epoch claimed at or before it."""
        best: LeaderClaim | None = None
        for c in self.claims:
            if (c.topic, c.partition) == tp and c.time <= at:
                if best is None or (c.leader_epoch, c.time) > (best.leader_epoch, best.time):
                    best = c
        return None if best is None else best.node

    def clean_point(self, node: int | None, tp: TP, *, before: float | None = None) -> int:
        """The largest first dirty offset `node` reported for `tp` since it last lost its disk
        (only by passes reported at least `slack_s` before `before`, if given); 0 if none: its
        log is clean below that point."""
        since = max(
            (t for n, t in self.disk_losses if n == node and (before is None or t <= before)),
            default=float("-inf"),
        )
        return max(
            (
                c.first_dirty_offset
                for c in self.cleanings
                if c.node == node
                and c.tp == tp
                and c.time >= since
                and (before is None or c.time + self.slack_s <= before)
            ),
            default=0,
        )

    def cleaned_at_most(self, tp: TP, *, until: float) -> int:
        """The largest first dirty offset any node reported for `tp` by `until` (plus
        `slack_s`): no pass anywhere had cleaned past it, so no log of `tp` can lack a record
        that has no later record of its key below it."""
        return max(
            (
                c.first_dirty_offset
                for c in self.cleanings
                if c.tp == tp and c.time <= until + self.slack_s
            ),
            default=0,
        )


def _latest_by_key(records: Iterable[Record], key: Any) -> dict[int, int]:
    """key -> the largest offset holding a record of it."""
    out: dict[int, int] = {}
    for offset, v in records:
        k = key(v)
        if offset > out.get(k, -1):
            out[k] = offset
    return out


def _compacted_to(records: Sequence[Record], point: int, key: Any) -> list[Record]:
    """`records` as a pass up to `point` leaves them: below it, the last record of each key."""
    last = _latest_by_key((r for r in records if r[0] < point), key)
    return [(o, v) for o, v in records if o >= point or last[key(v)] == o]


def _ex(tp: TP, offset: int | None, value: int | None, **more: Any) -> dict[str, Any]:
    return dict(topic=tp[0], partition=tp[1], offset=offset, value=value, **more)


def _src(o: Any, name: str | None = None) -> dict[str, Any]:
    return {"source": name or o.f, "index": o.index, "process": o.process}


class KeyedFacts:
    """The indexes the compaction checks read, built once per `Facts` (`Facts.keyed`)."""

    def __init__(self, facts: Facts, compaction: Compaction) -> None:
        self.facts = facts
        self.c = compaction
        key = compaction.key
        # tp -> key -> the largest offset of a record of the key in the final read
        self.latest_final = {tp: _latest_by_key(o.records, key) for tp, o in facts.final.items()}
        # tp -> no log of it was cleaned past this by the end of its final read
        self.cleaned_at_most = {
            tp: compaction.cleaned_at_most(tp, until=o.completion.time)  # type: ignore[union-attr]
            for tp, o in facts.final.items()
        }
        # tp -> key -> the largest offset below `cleaned_at_most` that the history saw hold a
        # record of the key (acks, polls, the final read): what makes the records before it
        # removable. A record the history never saw needs no guess: the last record of a key
        # below `cleaned_at_most` was never removable, so it is in the final read (or lost).
        seen: dict[TP, list[Record]] = defaultdict(list)
        for _o, tp, base, values in facts.acks:
            seen[tp].extend(zip(range(base, base + len(values)), values, strict=True))
        for o in facts.polls:
            seen[o.tp].extend(o.records)
        for tp, o in facts.final.items():
            seen[tp].extend(o.records)
        self.seen = seen
        self.later_below: dict[TP, dict[int, int]] = {}
        for tp, upto in self.cleaned_at_most.items():
            self.later_below[tp] = _latest_by_key((r for r in seen[tp] if r[0] < upto), key)
        # tp -> the final read's clean point, and whose log that was
        self.leader: dict[TP, int | None] = {}
        self.clean_point: dict[TP, int] = {}
        for tp, o in facts.final.items():
            node = compaction.final_read_leader(tp, o.invoke.time)
            self.leader[tp] = node
            self.clean_point[tp] = compaction.clean_point(node, tp, before=o.invoke.time)

    def replica_point(self, d: ReplicaDump) -> int:
        return self.c.clean_point(d.node, d.tp)

    def superseded(self, tp: TP, offset: int, value: int) -> int | None:
        """Whether a pass could have removed `value` at `offset`: -> the offset of a later
        record of its key below what any log of `tp` was cleaned to by the end of its final
        read; None if there is none, so no pass could have."""
        later = self.later_below.get(tp, {}).get(self.c.key(value), -1)
        return later if later > offset else None

    @cached_property
    def compacted(self) -> dict[int, dict[str, Any]]:
        """value -> example, for every acknowledged or polled value the cleaner removed
        (module docstring: `compacted`)."""
        facts, out = self.facts, {}
        for o, tp, base, values in facts.other_acks:
            pos, start = facts.final_pos.get(tp), facts.final_start.get(tp, 0)
            for i, v in enumerate(values) if pos is not None else ():
                if v not in pos and base + i >= start and v not in out:
                    later = self.superseded(tp, base + i, v)
                    if later is not None:
                        out[v] = _ex(tp, base + i, v, **_src(o, "ack"), key=self.c.key(v),
                                     superseded_at=later)  # fmt: skip
        for tp, source, records in facts.other_reads:
            pos, start = facts.final_pos.get(tp), facts.final_start.get(tp, 0)
            if source["source"] != "poll" or pos is None:
                continue
            for offset, v in records:
                if v not in pos and offset >= start and v not in out:
                    later = self.superseded(tp, offset, v)
                    if later is not None:
                        out[v] = _ex(tp, offset, v, **source, key=self.c.key(v),
                                     superseded_at=later)  # fmt: skip
        return out

    @cached_property
    def survivors(self) -> dict[TP, list[int]]:
        """tp -> the offsets, in order, of the final read's records that no pass could have
        removed by the end of the final read (`superseded`), so none before it either."""
        return {
            tp: sorted(x for x, v in o.records if self.superseded(tp, x, v) is None)
            for tp, o in self.facts.final.items()
        }

    def gap_skips(self, tp: TP, after: int, before: int) -> bool:
        """Whether a read that went from offset `after` to `before` skipped a record: the final
        read holds one strictly between them that no pass could have removed."""
        offsets = self.survivors.get(tp)
        if not offsets:
            return False
        i = bisect_right(offsets, after)
        return i < len(offsets) and offsets[i] < before

    def not_superseded(
        self, d: ReplicaDump, committed: Sequence[Record], missing: set[int]
    ) -> set[int]:
        """Of the offsets a replica lacks, those whose record its own log does not supersede
        (a later record of the same key): those it lost, rather than cleaned."""
        value_at = dict(self.facts.final[d.tp].records) if d.tp in self.facts.final else {}
        for other, records in self.facts.dumps:
            if other.tp == d.tp:
                value_at.update((o, v) for o, v in records if o in missing and o not in value_at)
        latest = _latest_by_key(committed, self.c.key)
        return {
            x for x in missing if x not in value_at or latest.get(self.c.key(value_at[x]), -1) <= x
        }

    def figures(self) -> dict[str, Any]:
        """Per partition: whose log the final read read, its clean point, the records and keys
        it held; with the values counted as compacted."""
        out: dict[str, Any] = {"keys": self.c.keys, "values_compacted": len(self.compacted)}
        parts = {}
        for tp, o in sorted(self.facts.final.items()):
            parts[f"{tp[0]}/{tp[1]}"] = {
                "leader": self.leader[tp],
                "clean_point": self.clean_point[tp],
                "cleaned_at_most": self.cleaned_at_most[tp],
                "records": len(o.records),
                "keys": len(self.latest_final[tp]),
            }
        out["final_reads"] = parts
        return out


# ------------------------------------------------------------------------------------- checks


def find_compacted(facts: Facts) -> Anomaly:
    found = facts.found("compacted", invalid=False)
    for example in facts.keyed.compacted.values():
        found.add(**example)
    return found.anomaly()


def find_lost_latest(facts: Facts) -> Anomaly:
    found, kf = facts.found("compaction_lost_latest"), facts.keyed
    latest: dict[tuple[TP, int], tuple[int, int, Any]] = {}  # (tp, key) -> (offset, value, op)
    for o, tp, base, values in facts.acks:
        if tp not in facts.final:
            continue  # not read back: `unknown`
        for i, v in enumerate(values):
            k = (tp, kf.c.key(v))
            if base + i > latest.get(k, (-1,))[0]:
                latest[k] = (base + i, v, o)
    for (tp, key), (offset, v, o) in sorted(latest.items(), key=lambda kv: (kv[0], kv[1][0])):
        if offset < facts.final_start.get(tp, 0):
            continue  # below the log start: `deleted`
        survivor = kf.latest_final[tp].get(key)
        if survivor is None or survivor < offset:
            found.add(**_ex(tp, offset, v, **_src(o, "ack"), key=key, final_latest=survivor))
    return found.anomaly()


def find_kept_stale(facts: Facts) -> Anomaly:
    found, kf = facts.found("compaction_kept_stale"), facts.keyed
    key = kf.c.key
    logs: list[tuple[TP, int, dict[str, Any], Sequence[Record]]] = [
        (tp, kf.clean_point[tp], _src(o), o.records) for tp, o in facts.final.items()
    ]
    logs += [
        (d.tp, kf.replica_point(d), {"source": "dump", "node": d.node}, committed)
        for d, committed in facts.dumps
    ]
    known: dict[TP, list[Record]] = defaultdict(list)  # where the history saw each value
    for _o, tp, base, values in facts.acks:
        known[tp].extend(zip(range(base, base + len(values)), values, strict=True))
    for o in facts.polls:
        known[o.tp].extend(o.records)
    for tp, o in facts.final.items():
        known[tp].extend(o.records)
    for tp, point, source, records in logs:
        if point <= 0:
            continue
        later = _latest_by_key(
            (r for r in (*known.get(tp, ()), *records) if r[0] < point), key
        )  # fmt: skip
        for offset, v in records:
            if offset < point and offset < later[key(v)]:
                found.add(**_ex(tp, offset, v, **source, key=key(v), clean_point=point,
                                later_offset=later[key(v)]))  # fmt: skip
    return found.anomaly()


def find_replicas_diverge(facts: Facts) -> Anomaly:
    found, kf = facts.found("replicas_diverge"), facts.keyed
    by_tp: dict[TP, list[tuple[ReplicaDump, Sequence[Record]]]] = defaultdict(list)
    for d, committed in facts.dumps:
        if d.log_end_offset >= facts.committed_hw[d.tp]:  # caught up (else `missing_...`)
            by_tp[d.tp].append((d, committed))
    for tp, replicas in sorted(by_tp.items()):
        if len(replicas) < 2:
            continue
        points = {d.node: kf.replica_point(d) for d, _ in replicas}
        point = max(points.values())
        logs = {d.node: dict(_compacted_to(c, point, kf.c.key)) for d, c in replicas}
        ref = min(n for n, p in points.items() if p == point)
        for node in sorted(logs):
            if node == ref or logs[node] == logs[ref]:
                continue
            a, b = logs[ref], logs[node]
            first = min(x for x in a.keys() | b.keys() if a.get(x) != b.get(x))
            found.add(**_ex(tp, first, None, nodes=[ref, node], values=[a.get(first), b.get(first)],
                            clean_points=[points[ref], points[node]], compared_at=point))  # fmt: skip
    return found.anomaly()


FINDERS = {
    "compacted": find_compacted,
    "compaction_lost_latest": find_lost_latest,
    "compaction_kept_stale": find_kept_stale,
}
