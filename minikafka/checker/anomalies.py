"""The checker of a history: did anything go wrong, in Jepsen's words (its Kafka workload's).

Input: the history (history.py), optionally the replica dumps, leadership claims and replica
samples (invariants.py). A check whose input is not given is listed as not checked. (The throttle
bound is the PySpark analysis' to judge; verdict.py adds it.)

Anomalies that make a run invalid (each its own `find_*` function, returning an `Anomaly`):

- `lost`: a value acknowledged (send ok) or returned by a poll (consumers read below the HW, so
  it was committed) that is absent from the final read of its partition.
- `duplicated`: a value at two offsets of its partition: twice in the final read, or one offset
  in the final read (or a committed dump record, or a poll) and another elsewhere.
- `inconsistent_offsets`: one (partition, offset) with two values across the final reads,
  committed dump records, polls and acks (values[i] at offset + i); or an ack whose offset is
  not where the final read has the value.
- `nonmonotonic_reads` / `skipped_reads`: per consumer process and partition, since its last seek,
  a poll returning an offset at or below one already returned / leaving a gap (logs are dense),
  or, first after a seek or at the start, not beginning at the offset asked for. Final reads
  with a hole, or ending short of their log_end_offset, are skipped reads too.
- `failed_but_present`: a value of a failed send (definitely not written) in the final read or a
  poll.
- `unexpected`: a value read in a partition no send ever sent it to (or never sent at all).
- `missing_replica_data`: a replica dump with log_end_offset >= the partition's committed HW
  (the max HW among its dumps) lacking an offset below that HW that another replica or the final
  read has. Dump records count as committed only below that HW: divergent uncommitted tails
  are legal until the replica truncates.
- the invariants of invariants.py.

Informational: `unseen` (acknowledged, in the final read, never polled, in a partition some poll
read), `unknown` (acknowledged values whose partition has no successful final read), `deleted`
(acknowledged, or polled, at an offset below the log start offset its partition's final read
began at: retention or DeleteRecords removed it before it could be checked; neither lost nor
checked).

A compacted topic (`check(compaction=...)`) is judged by compaction.py as well: its anomalies
`compacted` (informational: removed by the cleaner, superseded by a later record of its key; not
`lost`), `compaction_lost_latest`, `compaction_kept_stale` and `replicas_diverge`. Its logs
have gaps where records were removed, so its reads' gaps and its replicas' missing offsets count
only as compaction.py says.

`valid` is False if any invalid anomaly was found, else "unknown" if acknowledged values could
not be checked or nothing was acknowledged at all, else True. Exit codes: 0, 1, 2.

Speed: everything is keyed by value or by offset in dicts, and each input is walked a fixed
number of times, so 1e6 values check in seconds.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from typing import Any

from minikafka.checker import compaction as compaction_checks
from minikafka.checker.compaction import Compaction, KeyedFacts
from minikafka.checker.history import TP, VALUE, History, Operation, Record, ReplicaDump
from minikafka.checker.invariants import (
    MAX_EXAMPLES,
    Anomaly,
    Found,
    LeaderClaim,
    ReplicaSample,
    find_hw_past_isr_leo,
    find_multiple_leaders,
)

ANOMALIES = (
    "lost", "duplicated", "inconsistent_offsets", "nonmonotonic_reads", "skipped_reads",
    "failed_but_present", "unexpected", "unseen", "unknown", "deleted", "missing_replica_data",
    "multiple_leaders_per_epoch", "hw_past_isr_leo",
)  # fmt: skip


_OFFSET, _VALUE = itemgetter(0), itemgetter(1)


def _consecutive(records: Sequence[Record]) -> bool:
    """Offsets first, first + 1, ...: compared in C, not in a Python loop."""
    if not records:
        return True
    first = records[0][0]
    return list(map(_OFFSET, records)) == list(range(first, first + len(records)))


def _first_offsets(records: tuple[Record, ...]) -> dict[int, int]:
    """value -> the first offset holding it (dict() keeps the last, so it is fed reversed)."""
    backwards = records[::-1]
    return dict(zip(map(_VALUE, backwards), map(_OFFSET, backwards), strict=True))


def _below(records: tuple[Record, ...], hw: int) -> tuple[Record, ...]:
    if _consecutive(records):
        return records[: max(0, hw - records[0][0])] if records else records
    return tuple(r for r in records if r[0] < hw)


def _acked_records(base: int, values: tuple[int, ...]) -> tuple[Record, ...]:
    return tuple(zip(range(base, base + len(values)), values, strict=True))


def _source(o: Operation, name: str | None = None) -> dict[str, Any]:
    return {"source": name or o.f, "index": o.index, "process": o.process}


def _ex(
    tp: TP, offset: int | None, value: int | None, source: dict[str, Any], **more: Any
) -> dict[str, Any]:
    return dict(topic=tp[0], partition=tp[1], offset=offset, value=value, **source, **more)


class Facts:
    """The indexes every check reads, built once from the inputs.

    A poll, committed dump slice or ack *agrees* with the final read when each of its (offset,
    value) pairs is in the final read of its partition, found by one slice comparison. Such a
    source can add nothing to any check (no new offset, no other value, no value elsewhere), so
    the checks walk only the final reads and `other_reads` / `other_acks`: a clean run of 1e6
    values costs a few passes done in C.
    """

    def __init__(
        self,
        history: History,
        dumps: Sequence[ReplicaDump] = (),
        *,
        keep: int | None = MAX_EXAMPLES,
        compaction: Compaction | None = None,
    ) -> None:
        self.keep = keep  # examples per anomaly (None: all, testing/checker.py lists them)
        self.compaction = compaction  # a compacted topic's keys and cleaner passes
        ops = history.operations
        self.history = history
        self.sends = [o for o in ops if o.f == "send"]
        self.acks = [(o, o.tp, o.base_offset or 0, o.values) for o in self.sends if o.type == "ok"]
        self.polls = [o for o in ops if o.f == "poll" and o.type == "ok"]
        self.final: dict[TP, Operation] = {}  # the last successful final read of each partition
        for o in ops:
            if o.f == "final-read" and o.type == "ok":
                self.final[o.tp] = o
        self.final_pos = {tp: _first_offsets(o.records) for tp, o in self.final.items()}
        # Where each final read's log started: below it, nothing can be checked (`deleted`).
        self.final_start = {
            tp: (o.completion.log_start_offset or 0)  # type: ignore[union-attr]
            for tp, o in self.final.items()
        }
        self.sent: dict[int, Operation] = {}
        self.sent_to: dict[TP, set[int]] = defaultdict(set)
        for o in self.sends:
            self.sent.update(dict.fromkeys(o.values, o))
            self.sent_to[o.tp].update(o.values)
        self.polled: set[int] = set()
        for o in self.polls:
            self.polled.update(map(_VALUE, o.records))
        self.polled_tps = {o.tp for o in self.polls}
        self.committed_hw: dict[TP, int] = {}
        for d in dumps:
            self.committed_hw[d.tp] = max(self.committed_hw.get(d.tp, 0), d.high_watermark)
        self.dumps = [(d, _below(d.records, self.committed_hw[d.tp])) for d in dumps]
        others = [(d.tp, {"source": "dump", "node": d.node}, c) for d, c in self.dumps]
        others += [(o.tp, _source(o), o.records) for o in self.polls]
        self.other_reads = [(tp, src, rs) for tp, src, rs in others if not self.agrees(tp, rs)]
        self.other_acks = [a for a in self.acks if not self.agrees(a[1], _acked_records(*a[2:]))]

    def found(self, name: str, *, invalid: bool = True) -> Found:
        return Found(name, invalid=invalid, keep=self.keep)

    def agrees(self, tp: TP, records: tuple[Record, ...]) -> bool:
        final = self.final[tp].records if tp in self.final else ()
        if not records or not final:
            return not records
        k = records[0][0] - final[0][0]
        return k >= 0 and final[k : k + len(records)] == records

    def reads(self) -> Iterator[tuple[TP, dict[str, Any], Sequence[Record]]]:
        """(partition, source, records): the final reads, then the reads not agreeing with them."""
        for tp, o in self.final.items():
            yield tp, _source(o), o.records
        yield from self.other_reads

    @cached_property
    def order(self) -> list[tuple[str, dict[str, Any]]]:
        return list(_read_order(self))

    @cached_property
    def keyed(self) -> KeyedFacts:
        """The compaction checks' indexes (only for a compacted topic)."""
        assert self.compaction is not None
        return KeyedFacts(self, self.compaction)


def find_lost(facts: Facts) -> Anomaly:
    found, lost = facts.found("lost"), set()
    # a compacted topic's values the cleaner removed are `compacted` instead (compaction.py)
    compacted = facts.keyed.compacted if facts.compaction is not None else {}
    for o, tp, base, values in facts.other_acks:
        pos = facts.final_pos.get(tp)
        start = facts.final_start.get(tp, 0)
        for i, v in enumerate(values) if pos is not None else ():
            if v not in pos and base + i >= start and v not in compacted:  # type: ignore[operator]
                lost.add(v)
                found.add(**_ex(tp, base + i, v, _source(o, "ack")))
    for tp, source, records in facts.other_reads:
        pos = facts.final_pos.get(tp)
        if source["source"] == "poll" and pos is not None:
            start = facts.final_start.get(tp, 0)
            for offset, v in records:
                if v not in pos and v not in lost and offset >= start and v not in compacted:
                    lost.add(v)
                    found.add(**_ex(tp, offset, v, source))
    return found.anomaly()


def find_deleted(facts: Facts) -> Anomaly:
    """Acknowledged or polled values below the log start offset of their partition's final
    read, absent from it: retention or DeleteRecords took them (module docstring)."""
    found, seen = facts.found("deleted", invalid=False), set()
    for o, tp, base, values in facts.acks:
        start = facts.final_start.get(tp)
        pos = facts.final_pos.get(tp)
        for i, v in enumerate(values) if start else ():
            if base + i < start and v not in pos and v not in seen:  # type: ignore[operator]
                seen.add(v)
                found.add(**_ex(tp, base + i, v, _source(o, "ack"), log_start_offset=start))
    return found.anomaly()


def find_duplicated(facts: Facts) -> Anomaly:
    found, flagged = facts.found("duplicated"), set()
    elsewhere: dict[TP, dict[int, int]] = defaultdict(dict)  # values not in the final read
    for tp, source, records in facts.reads():
        pos = facts.final_pos.get(tp, {})
        final = source["source"] == "final-read"
        if final and len(pos) == len(records):
            continue  # every value once
        first_of = pos if final else elsewhere[tp]
        for offset, v in records:
            first = pos.get(v)
            if first is None:
                first = first_of.setdefault(v, offset)
            if first != offset and v not in flagged:
                flagged.add(v)
                found.add(**_ex(tp, None, v, source, offsets=[first, offset]))
    return found.anomaly()


def find_inconsistent_offsets(facts: Facts) -> Anomaly:
    found = facts.found("inconsistent_offsets")
    value_at: dict[TP, dict[int, int]] = defaultdict(dict)
    source_at: dict[TP, dict[int, dict[str, Any]]] = defaultdict(dict)
    flagged: set[tuple[TP, int]] = set()

    def see(tp: TP, source: dict[str, Any], offset: int, v: int) -> None:
        known = value_at[tp].setdefault(offset, v)
        if known == v:
            source_at[tp].setdefault(offset, source)
        elif (tp, offset) not in flagged:
            flagged.add((tp, offset))
            found.add(
                **_ex(
                    tp, offset, None, {}, values=[known, v], sources=[source_at[tp][offset], source]
                )
            )

    for tp, source, records in facts.reads():
        if source["source"] == "final-read" and len(fast := dict(records)) == len(records):
            value_at[tp] = fast  # one value per offset: nothing to compare within it
            source_at[tp] = dict.fromkeys(fast, source)
            continue
        for offset, v in records:
            see(tp, source, offset, v)
    for o, tp, base, values in facts.other_acks:
        for i, v in enumerate(values):
            see(tp, _source(o, "ack"), base + i, v)
    for o, tp, base, values in facts.other_acks:
        pos = facts.final_pos.get(tp, {})
        for i, v in enumerate(values):
            final_offset = pos.get(v, base + i)
            if final_offset != base + i and (tp, base + i) not in flagged:
                flagged.add((tp, base + i))
                found.add(**_ex(tp, base + i, v, _source(o, "ack"), final_offset=final_offset))
    return found.anomaly()


def _read_order(facts: Facts) -> Iterator[tuple[str, dict[str, Any]]]:
    """("nonmonotonic" | "skipped", example) for every order anomaly of every read. A compacted
    topic's log has gaps: a read's gap is skipped only where compaction.py `gap_skips` says."""
    for kind, example in _read_order_dense(facts):
        if kind == "skipped" and facts.compaction is not None:
            kf, tp = facts.keyed, (example["topic"], example["partition"])
            if example["kind"] == "final_read_gap":
                continue  # the cleaner's gaps; what they hide is `lost` or `compacted`
            if example["kind"] in ("gap", "start"):
                after = example["previous"] if example["kind"] == "gap" else example["asked"] - 1
                if not kf.gap_skips(tp, after, example["offset"]):
                    continue
        yield kind, example


def _read_order_dense(facts: Facts) -> Iterator[tuple[str, dict[str, Any]]]:
    """`_read_order` for a log without gaps (every topic but a compacted one)."""
    last: dict[tuple[str, TP], int] = {}  # (process, partition) -> last offset returned
    for e in sorted([*facts.polls, *facts.history.seeks], key=lambda e: e.index):
        if not isinstance(e, Operation):  # a seek: the order checks restart from there
            last.pop((e.process, (e.topic, e.partition)), None)  # type: ignore[arg-type]
            continue
        if not (recs := e.records):
            continue
        key, (first, v), src = (e.process, e.tp), recs[0], _source(e)
        prev = last.get(key)
        if prev is None and first != e.fetch_offset:
            yield "skipped", _ex(e.tp, first, v, src, kind="start", asked=e.fetch_offset)
        elif prev is not None and first <= prev:
            yield "nonmonotonic", _ex(e.tp, first, v, src, previous=prev)
        elif prev is not None and first > prev + 1:
            yield "skipped", _ex(e.tp, first, v, src, kind="gap", previous=prev)
        for (a, _), (b, v) in zip(recs, recs[1:], strict=False) if not _consecutive(recs) else ():
            if b <= a:
                yield "nonmonotonic", _ex(e.tp, b, v, src, previous=a)
            elif b > a + 1:
                yield "skipped", _ex(e.tp, b, v, src, kind="gap", previous=a)
        last[key] = recs[-1][0]
    for tp, o in facts.final.items():
        recs, src = o.records, _source(o)
        for (a, _), (b, v) in zip(recs, recs[1:], strict=False) if not _consecutive(recs) else ():
            if b != a + 1:
                yield "skipped", _ex(tp, b, v, src, kind="final_read_gap", previous=a)
        end = o.completion.log_end_offset  # type: ignore[union-attr]
        if (recs[-1][0] + 1 if recs else 0) < end:  # type: ignore[operator]
            yield "skipped", _ex(tp, None, None, src, kind="final_read_short", log_end_offset=end)


def _order_anomaly(facts: Facts, kind: str) -> Anomaly:
    found = facts.found(f"{kind}_reads")
    for k, example in facts.order:
        if k == kind:
            found.add(**example)
    return found.anomaly()


def find_nonmonotonic_reads(facts: Facts) -> Anomaly:
    return _order_anomaly(facts, "nonmonotonic")


def find_skipped_reads(facts: Facts) -> Anomaly:
    return _order_anomaly(facts, "skipped")


def find_failed_but_present(facts: Facts) -> Anomaly:
    found = facts.found("failed_but_present")
    for o in facts.sends:
        if o.type == "fail":
            pos = facts.final_pos.get(o.tp, {})
            for v in o.values:
                if v in pos or v in facts.polled:
                    where = "final-read" if v in pos else "poll"
                    found.add(**_ex(o.tp, pos.get(v), v, _source(o), error=o.error, found_in=where))
    return found.anomaly()


def find_unexpected(facts: Facts) -> Anomaly:
    found, flagged = facts.found("unexpected"), set()
    for tp, source, records in facts.reads():
        if strangers := set(map(_VALUE, records)) - facts.sent_to.get(tp, set()):
            for offset, v in records:
                if v in strangers and (tp, v) not in flagged:
                    flagged.add((tp, v))
                    sender = facts.sent.get(v)
                    found.add(
                        **_ex(tp, offset, v, source, sent_to=list(sender.tp) if sender else None)
                    )
    return found.anomaly()


def find_unseen(facts: Facts) -> Anomaly:
    found = facts.found("unseen", invalid=False)
    for o, tp, base, values in facts.acks:
        if tp in facts.polled_tps and not facts.polled.issuperset(values):
            pos = facts.final_pos.get(tp, {})
            for i, v in enumerate(values):
                if v in pos and v not in facts.polled:
                    found.add(**_ex(tp, base + i, v, _source(o, "ack")))
    return found.anomaly()


def find_unknown(facts: Facts) -> Anomaly:
    found = facts.found("unknown", invalid=False)
    for o, tp, base, values in facts.acks:
        if tp not in facts.final_pos:
            for i, v in enumerate(values):
                found.add(**_ex(tp, base + i, v, _source(o, "ack")))
    return found.anomaly()


def find_missing_replica_data(facts: Facts) -> Anomaly:
    found = facts.found("missing_replica_data")
    expected: dict[TP, set[int]] = defaultdict(set)
    for tp, o in facts.final.items():
        if tp in facts.committed_hw:
            expected[tp].update(map(_OFFSET, _below(o.records, facts.committed_hw[tp])))
    for d, committed in facts.dumps:
        expected[d.tp].update(map(_OFFSET, committed))
    for d, committed in facts.dumps:
        hw = facts.committed_hw[d.tp]
        if d.log_end_offset >= hw and (
            missing := expected[d.tp].difference(map(_OFFSET, committed))
        ):
            if facts.compaction is not None:  # what its own log supersedes was cleaned
                missing = facts.keyed.not_superseded(d, committed, missing)
                if not missing:
                    continue
            found.add(node=d.node, topic=d.topic, partition=d.partition, high_watermark=hw,
                      log_end_offset=d.log_end_offset, missing=len(missing),
                      first_missing=min(missing))  # fmt: skip
    return found.anomaly()


# ------------------------------------------------------------------------------------ verdict

FINDERS = {
    "lost": find_lost, "duplicated": find_duplicated,
    "inconsistent_offsets": find_inconsistent_offsets, "nonmonotonic_reads": find_nonmonotonic_reads,
    "skipped_reads": find_skipped_reads, "failed_but_present": find_failed_but_present,
    "unexpected": find_unexpected, "unseen": find_unseen, "unknown": find_unknown,
    "deleted": find_deleted,
}  # fmt: skip


@dataclass(**VALUE)
class Verdict:
    valid: bool | str  # True | False | "unknown"
    counts: dict[str, int]
    anomalies: dict[str, Anomaly]  # every anomaly checked, found or not
    not_checked: tuple[str, ...]  # anomalies whose input was not given
    unknown_reasons: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return {True: 0, False: 1}.get(self.valid, 2)  # type: ignore[arg-type]

    def to_doc(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "exit_code": self.exit_code,
            "counts": dict(self.counts),
            "anomalies": {name: a.to_doc() for name, a in self.anomalies.items()},
            "not_checked": list(self.not_checked),
            "unknown_reasons": list(self.unknown_reasons),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_doc(), indent=2)

    def summary(self) -> str:
        c = self.counts
        word = {True: "VALID", False: "INVALID"}.get(self.valid, "UNKNOWN")  # type: ignore[arg-type]
        lines = [
            f"{word}: {c['values_acknowledged']} values acknowledged in {c['sends_ok']} sends "
            f"({c['sends_fail']} failed, {c['sends_info']} indeterminate); {c['polls_ok']} polls; "
            f"{c['final_records']} records in {c['final_reads_ok']} final reads"
        ]
        for name, a in self.anomalies.items():
            if a.count:
                example = json.dumps(a.examples[0], separators=(",", ":"))
                note = "" if a.invalid else " (informational)"
                lines.append(f"  {name}: {a.count}{note}, e.g. {example[:160]}")
        lines += [f"  unknown because: {reason}" for reason in self.unknown_reasons]
        if self.not_checked:
            lines.append(f"  not checked (no input): {', '.join(self.not_checked)}")
        return "\n".join(lines)


def count(facts: Facts) -> dict[str, int]:
    c = dict.fromkeys(("sends_ok", "sends_fail", "sends_info", "sends_unfinished",
                       "values_acknowledged", "values_failed", "values_indeterminate",
                       "indeterminate_present", "indeterminate_absent", "indeterminate_unknown",
                       "polls_ok", "polls_failed", "poll_records", "final_reads_ok",
                       "final_reads_failed", "final_records"), 0)  # fmt: skip
    kind = {"ok": "values_acknowledged", "fail": "values_failed", "info": "values_indeterminate"}
    for o in facts.sends:
        c[f"sends_{o.type}"] += 1
        c["sends_unfinished"] += o.completion is None
        c[kind[o.type]] += len(o.values)
        if o.type == "info":  # did it land?
            pos = facts.final_pos.get(o.tp)
            landed = 0 if pos is None else sum(v in pos for v in o.values)
            c["indeterminate_present"] += landed
            c["indeterminate_absent" if pos is not None else "indeterminate_unknown"] += (
                len(o.values) - landed
            )
    for o in facts.history.operations:
        if o.f in ("poll", "final-read"):
            key = o.f.replace("-", "_") + ("s_ok" if o.type == "ok" else "s_failed")
            c[key] += 1
    c["poll_records"] = sum(len(o.records) for o in facts.polls)
    c["final_records"] = sum(len(o.records) for o in facts.final.values())
    return c


def check(
    history: History,
    *,
    dumps: Sequence[ReplicaDump] | None = None,
    claims: Sequence[LeaderClaim] | None = None,
    samples: Sequence[ReplicaSample] | None = None,
    hw_slack_s: float = 0.0,
    compaction: Compaction | None = None,
) -> Verdict:
    """Every check whose input is given; see the module docstring for the rules. With
    `compaction`, the topic is compacted and compaction.py's checks run too."""
    facts = Facts(history, dumps or (), compaction=compaction)
    anomalies = {name: find(facts) for name, find in FINDERS.items()}
    names = ANOMALIES
    if compaction is not None:
        names += compaction_checks.ANOMALIES
        anomalies.update((name, find(facts)) for name, find in compaction_checks.FINDERS.items())
        if dumps is not None:
            anomalies["replicas_diverge"] = compaction_checks.find_replicas_diverge(facts)
    if dumps is not None:
        anomalies["missing_replica_data"] = find_missing_replica_data(facts)
    if claims is not None:
        anomalies["multiple_leaders_per_epoch"] = find_multiple_leaders(claims)
    if samples is not None:
        anomalies["hw_past_isr_leo"] = find_hw_past_isr_leo(samples, slack_s=hw_slack_s)
    counts = count(facts)
    counts.update(replica_dumps=len(dumps or ()), leadership_claims=len(claims or ()),
                  replica_samples=len(samples or ()))  # fmt: skip
    reasons = []
    if counts["values_acknowledged"] == 0:
        reasons.append("no acknowledged sends")
    if anomalies["unknown"].count:
        reasons.append(f"{anomalies['unknown'].count} acknowledged values are in partitions "
                       "without a successful final read")  # fmt: skip
    invalid = any(a.invalid and a.count for a in anomalies.values())
    return Verdict(
        valid=False if invalid else "unknown" if reasons else True,
        counts=counts,
        anomalies={name: anomalies[name] for name in names if name in anomalies},
        not_checked=tuple(name for name in names if name not in anomalies),
        unknown_reasons=tuple(reasons),
    )
