"""`reassign plan`'s cluster facts as the input of the move model (tools/reassign/model.py,
read by tools/reassign/plan_model.py), pure.

The input (`moving_partitions`), per partition whose replicas change:
- its leader: the metadata's. One whose leader is not among its sources (none elected) is taken
  as led by its first current replica that is a source: it needs one to be copied at all;
- its replicas during the move as Kafka lists them: the target, then the sources leaving
  (`target ++ (original -- target)`, as the controller writes them);
- its destinations (the adding replicas of `moves.move_map`) and its estimated size;
- its inbound rate (`inbound`): its leader's `PartitionBytesInRate` (KIP-73's per-partition
  metric, `partition_bytes_in`; a partition the gauge leaves out is at 0 B/s) where the leader's
  metrics carry the gauge, else the even split of its
  leader's BytesInPerSec over every partition that broker leads, moving or not
  (`inbound_per_partition`, `INBOUND_RULE`). The split is wrong for a skewed load, and for a
  bursty one: a producer writing in bursts makes per-second BytesInPerSec samples alternate
  0 and the burst, and their median takes either, while the partition's windowed Rate (11 x 1 s,
  Kafka's quota windows) averages the bursts. Measured on docs/reassignment.md's
  decommission (2026-11-24): the split gave 253 kB/s per moving partition,
  PartitionBytesInRate 213-217 kB/s.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from minikafka.common import TopicPartition
from minikafka.tools.reassign.model import MovingPartition
from minikafka.tools.reassign.moves import PartitionMove

VALUE = dict(frozen=True, slots=True, kw_only=True)

INBOUND_RULE = "each broker's BytesInPerSec split evenly over the partitions it leads"
PARTITION_BYTES_IN = "PartitionBytesInRate"  # the metrics.jsonl key (replica_manager's gauge)
# Where a partition's inbound rate came from (`Inbound.source`).
MEASURED = "PartitionBytesInRate"
SPLIT = "split"


def partitions_led(leaders: Mapping[TopicPartition, int]) -> dict[int, int]:
    """How many partitions each broker leads, sorted by broker (-1: no leader, not counted)."""
    return dict(sorted(Counter(b for b in leaders.values() if b >= 0).items()))


def inbound_per_partition(
    bytes_in: Mapping[int, float], leaders: Mapping[TopicPartition, int]
) -> dict[TopicPartition, float]:
    """Each partition's share of its leader's BytesInPerSec (`INBOUND_RULE`). A partition
    without a leader takes no writes; a broker missing from `bytes_in` counts as 0 B/s."""
    led = partitions_led(leaders)
    return {tp: bytes_in.get(b, 0.0) / led[b] for tp, b in sorted(leaders.items()) if b in led}


def partition_bytes_in(
    lines: Mapping[int, Sequence[Mapping[str, Any]]], leaders: Mapping[TopicPartition, int]
) -> dict[TopicPartition, float]:
    """Each partition's `PartitionBytesInRate` on its leader: the median of the values the
    leader's metrics lines give it (`lines`: broker -> its recent metrics.jsonl lines, oldest
    first). Only the leader's figure is the produce rate: the metric counts every byte appended
    to a replica (replica_manager's gauge, local_partition.bytes_in), so on a follower it is
    replication, which lags and bursts with the fetches. The median, as for BytesInPerSec
    (progress.median_bytes_in): a burst that is over is not a steady rate.

    A line that carries the gauge names only the partitions with bytes in their rate's window
    (server/replica_gauges.py): one it does not name was at 0 B/s then. A line without
    the gauge, or whose value for the partition is not a number, counts for none. A partition
    without a leader, or whose leader has no line with the gauge, is left out (the caller falls
    back to the split)."""
    out: dict[TopicPartition, float] = {}
    for tp, broker in sorted(leaders.items()):
        values = []
        for line in lines.get(broker, ()) if broker >= 0 else ():
            rates = line.get(PARTITION_BYTES_IN)
            if not isinstance(rates, Mapping):
                continue
            value = rates.get(str(tp), 0.0)
            if isinstance(value, int | float) and not isinstance(value, bool):
                values.append(float(value))
        if values:
            out[tp] = statistics.median(values)
    return out


@dataclass(**VALUE)
class Inbound:
    """Each led partition's inbound rate for the model, and which were measured."""

    rates: Mapping[TopicPartition, float]
    measured: frozenset[TopicPartition]  # from PartitionBytesInRate; the others: the split

    def source(self, tp: TopicPartition) -> str:
        return MEASURED if tp in self.measured else SPLIT


def inbound(
    bytes_in: Mapping[int, float],
    leaders: Mapping[TopicPartition, int],
    *,
    measured: Mapping[TopicPartition, float] | None,
) -> Inbound:
    """The model's inbound rate per led partition (module docstring): `measured`
    (`partition_bytes_in`; None without the cluster's files) where it names the partition, else
    its share of its leader's BytesInPerSec (`inbound_per_partition`). The split's share stays
    BytesInPerSec / partitions led even where a neighbour was measured: the fallback is the
    figure the plan gave before, not a new estimate."""
    split = inbound_per_partition(bytes_in, leaders)
    got = {tp: r for tp, r in (measured or {}).items() if tp in split}
    return Inbound(rates={**split, **got}, measured=frozenset(got))


def _leader(move: PartitionMove, current: Sequence[int], leader: int) -> int:
    if leader in move.sources:
        return leader
    return next((b for b in current if b in move.sources), move.sources[0])


def moving_partitions(
    planned: Mapping[TopicPartition, PartitionMove],
    *,
    assignment: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, int],
    sizes: Mapping[TopicPartition, int],
    inbound: Mapping[TopicPartition, float],
) -> list[MovingPartition]:
    """The model's input (module docstring), one per partition with something to copy, sorted.
    `assignment`: the metadata's replicas; an ongoing move not in `proposed` keeps its target,
    which the metadata lists first."""
    out = []
    for tp, move in sorted(planned.items()):
        if not move.moving:
            continue
        current = tuple(assignment.get(tp, ()))
        target = tuple(proposed.get(tp, current))
        out.append(
            MovingPartition(
                topic=tp.topic,
                partition=tp.partition,
                leader=_leader(move, current, leaders.get(tp, -1)),
                replicas=tuple(dict.fromkeys((*target, *move.sources))),
                destinations=tuple(move.destinations),
                size_bytes=sizes.get(tp, 0),
                inbound_bytes_per_s=inbound.get(tp, 0.0),
                # Kafka elects the target's first replica when the move completes.
                final_leader=target[0] if target else None,
            )
        )
    return out
