"""The acknowledged-writes checker (kafkatest's produce -> act -> consume -> validate).

Input: what producers were told (acknowledged batches: partition, base offset, values in order)
and what consumers read back (partition, offset, value). The verdict:
- `lost`: an acknowledged record whose offset is missing from the log;
- `corrupted`: an acknowledged offset that holds a different value (logs diverged);
- `duplicated_offsets`: one offset read back with two different values (should be impossible);
- `duplicates`: an acknowledged value that also appears at another offset (a producer retry
  whose first attempt had landed; legal without idempotence, reported for information).
`ok` is true when nothing is lost, corrupted or read twice differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from minikafka.core.types import TopicPartition


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


def check_acknowledged(
    acked: Iterable[tuple[TopicPartition, int, Sequence[bytes]]],
    consumed: Iterable[tuple[TopicPartition, int, bytes]],
) -> Verdict:
    v = Verdict()
    log: dict[tuple[TopicPartition, int], bytes] = {}
    offsets_of: dict[tuple[TopicPartition, bytes], int] = {}
    for tp, offset, value in consumed:
        v.read += 1
        prev = log.get((tp, offset))
        if prev is not None and prev != value:
            v.duplicated_offsets.append((tp, offset))
        log[(tp, offset)] = value
        offsets_of[(tp, value)] = offsets_of.get((tp, value), 0) + 1
    for tp, base, values in acked:
        for i, value in enumerate(values):
            v.acknowledged += 1
            found = log.get((tp, base + i))
            if found is None:
                v.lost.append((tp, base + i))
            elif found != value:
                v.corrupted.append((tp, base + i))
            elif offsets_of.get((tp, value), 0) > 1:
                v.duplicates += 1
    return v
