"""The acknowledged-writes check (kafkatest's produce -> act -> consume -> validate), as a thin
use of the project's one checker, minikafka/checker/anomalies.py.

Input: what producers were told (acknowledged batches: partition, base offset, values in order)
and what was read back (partition, offset, value). Values are any bytes (the system tests pass
16-byte digests); the acknowledged ones must be unique within their partition (every caller's
are). The input becomes a Jepsen history (checker/history.py): one ok send per acknowledged
batch and one final read per partition, each distinct value numbered. The experiment checker's
`lost`, `inconsistent_offsets` and `duplicated` findings are then read as offsets:
- `lost`: an acknowledged offset missing from what was read;
- `corrupted`: an acknowledged offset that holds a different value (logs diverged);
- `duplicated_offsets`: one offset read back with two different values (should be impossible);
- `duplicates`: acknowledged values also at another offset (a producer retry whose first
  attempt had landed; legal without idempotence, reported for information).
`ok` is true when nothing is lost, corrupted or read twice differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from minikafka.checker.anomalies import (
    Facts,
    find_duplicated,
    find_inconsistent_offsets,
    find_lost,
)
from minikafka.checker.history import History, parse_history
from minikafka.common import TopicPartition


@dataclass(slots=True, kw_only=True)
class Verdict:
    acknowledged: int = 0
    read: int = 0
    lost: list[tuple[TopicPartition, int]] = field(default_factory=list)
    corrupted: list[tuple[TopicPartition, int]] = field(default_factory=list)
    duplicated_offsets: list[tuple[TopicPartition, int]] = field(default_factory=list)
    duplicates: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.corrupted or self.duplicated_offsets)

    def summary(self) -> str:
        return (
            f"{'OK' if self.ok else 'FAILED'}: {self.acknowledged} acknowledged, {self.read} read, "
            f"{len(self.lost)} lost, {len(self.corrupted)} corrupted, "
            f"{len(self.duplicated_offsets)} offsets read with two values, {self.duplicates} retry duplicates"
        )


class _Numbered:
    """The input as a history: values numbered per partition, the read log by offset."""

    def __init__(
        self,
        acked: Iterable[tuple[TopicPartition, int, Sequence[bytes]]],
        consumed: Iterable[tuple[TopicPartition, int, bytes]],
    ) -> None:
        self.ids: dict[tuple[TopicPartition, bytes], int] = {}
        self.tps: dict[tuple[str, int], TopicPartition] = {}
        self.log: dict[tuple[TopicPartition, int], int] = {}  # the last value read there
        self.docs: list[dict[str, Any]] = []
        self.acked_ids: set[int] = set()
        self.acknowledged = self.read = 0
        # Every acknowledged partition is read (if nothing came back, its records are lost).
        reads: dict[TopicPartition, list[list[int]]] = {}
        for n, (tp, base, values) in enumerate(acked):
            reads.setdefault(tp, [])
            ids = [self._id(tp, v) for v in values]
            if self.acked_ids.intersection(ids) or len(set(ids)) < len(ids):
                raise ValueError(f"{tp}: a value acknowledged twice (values must be unique)")
            self.acked_ids.update(ids)
            self.acknowledged += len(ids)
            self._op(f"ack-{n}", "invoke", "send", tp, values=ids)
            self._op(f"ack-{n}", "ok", "send", tp, offset=base)
        for tp, offset, value in consumed:
            self.read += 1
            self.log[(tp, offset)] = self._id(tp, value)
            reads.setdefault(tp, []).append([offset, self.log[(tp, offset)]])
        for tp, records in reads.items():
            records.sort(key=lambda r: r[0])  # stable: one offset's reads keep their order
            self._op(f"read-{tp}", "invoke", "final-read", tp)
            self._op(f"read-{tp}", "ok", "final-read", tp, records=records,
                     log_end_offset=records[-1][0] + 1 if records else 0)  # fmt: skip

    def _id(self, tp: TopicPartition, value: bytes) -> int:
        self.tps[(tp.topic, tp.partition)] = tp
        return self.ids.setdefault((tp, bytes(value)), len(self.ids))

    def _op(self, process: str, type_: str, f: str, tp: TopicPartition, **fields: Any) -> None:
        self.docs.append({"index": len(self.docs), "time": 0, "process": process, "type": type_,
                          "f": f, "topic": tp.topic, "partition": tp.partition, **fields})  # fmt: skip

    def history(self) -> History:
        return parse_history(self.docs, source="acknowledged writes")


def check_acknowledged(
    acked: Iterable[tuple[TopicPartition, int, Sequence[bytes]]],
    consumed: Iterable[tuple[TopicPartition, int, bytes]],
) -> Verdict:
    """The verdict on `acked` against `consumed` (module docstring)."""
    n = _Numbered(acked, consumed)
    facts = Facts(n.history(), keep=None)  # every instance, listed below
    v = Verdict(acknowledged=n.acknowledged, read=n.read)
    for e in find_inconsistent_offsets(facts).examples:
        tp, offset = n.tps[(e["topic"], e["partition"])], e["offset"]
        if "sources" in e:  # two values at one offset
            with_ack = any(s.get("source") == "ack" for s in e["sources"])
            (v.corrupted if with_ack else v.duplicated_offsets).append((tp, offset))
        elif (tp, offset) not in n.log:  # the acked value is elsewhere, its offset missing
            v.lost.append((tp, offset))
        elif n.log[(tp, offset)] != e["value"]:
            v.corrupted.append((tp, offset))
        # else: it is at its offset AND an earlier one: a retry duplicate, counted below
    corrupted = set(v.corrupted)
    for e in find_lost(facts).examples:  # the acked value read nowhere in its partition
        where = (n.tps[(e["topic"], e["partition"])], e["offset"])
        if where not in corrupted:
            v.lost.append(where)
    v.lost.sort(key=lambda w: (w[0].topic, w[0].partition, w[1]))
    v.duplicates = sum(e["value"] in n.acked_ids for e in find_duplicated(facts).examples)
    return v
