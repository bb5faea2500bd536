"""Which hosted partitions changed: what the broker's periodic tasks read instead of scanning
every partition (an idle broker with thousands of partitions must cost next to nothing
per second; server/replica_index.py keeps its index from these).

`PartitionChanges` says which partitions were touched: their replica machine said that what
it reports (role, epoch, LEO, HW, ISR, a follower's lag) may have changed (its `on_change`,
core/replica.py), which an idle follower's fetch does not. A first version marked every
partition the shell reached into; measured at 5,000 partitions, the fetches of an idle
cluster reach into every one twice a second, so every set held every partition. Each
consumer (the replicas log, the HW checkpoints, the replica index) subscribes its own set and
drains it on its own schedule.

Bytes in (KIP-73's PartitionBytesInRate) are recorded through `LocalPartition.bytes_in`, which
marks the partition `rate_active`; the gauge reads only those and forgets one whose windowed
rate has fallen to 0, which stays 0 until the next record marks it again.
"""

from __future__ import annotations

from minikafka.common import TopicPartition


class PartitionChanges:
    """The partitions touched since each subscriber last drained its set (module docstring)."""

    def __init__(self) -> None:
        self._subscribers: list[set[TopicPartition]] = []
        self.rate_active: set[TopicPartition] = set()  # bytes recorded since the rate was 0

    def subscribe(self) -> set[TopicPartition]:
        """A set that every later touch adds to; its owner drains it (`drain`)."""
        touched: set[TopicPartition] = set()
        self._subscribers.append(touched)
        return touched

    def touched(self, tp: TopicPartition) -> None:
        for s in self._subscribers:
            s.add(tp)

    def recorded(self, tp: TopicPartition) -> None:
        self.rate_active.add(tp)


def drain(touched: set[TopicPartition]) -> list[TopicPartition]:
    """Empty a subscriber's set; what it held, sorted (a stable order for logs and tests)."""
    out = sorted(touched)
    touched.clear()
    return out
