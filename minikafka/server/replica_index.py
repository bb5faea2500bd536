"""What the broker's periodic tasks read instead of scanning every hosted partition.

An idle broker with thousands of partitions must cost next to nothing per second (issue 13:
measured, 5,100 partitions cost ~15 % of a core per broker, every periodic task walking every
partition). So the work follows the changes:

- `PartitionChanges` says which partitions were touched: their replica machine said that what
  it reports (role, epoch, LEO, HW, ISR, a follower's lag) may have changed (its `on_change`,
  core/replica.py), which an idle follower's fetch does not. A first version marked every
  partition the shell reached into; measured at 5,000 partitions, the fetches of an idle
  cluster reach into every one twice a second, so every set held every partition. Each
  consumer (the replicas log, the HW checkpoints, the index below) subscribes its own set and
  drains it on its own schedule.
- `ReplicaIndex` keeps, from those changes, what the gauges and the isr-expiration task read:
  the partitions led here, those under-replicated, the leader side of SumReplicaLag. A led
  partition's lag changes only through its machine (an append committed, a follower's fetch),
  so the sum kept from the changes equals the scan it replaces (tests/test_replica_index.py
  checks it against the scan).
- Bytes in (KIP-73's PartitionBytesInRate) are recorded through `LocalPartition.bytes_in`, which
  marks the partition `rate_active`; the gauge reads only those and forgets one whose windowed
  rate has fallen to 0, which stays 0 until the next record marks it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from minikafka.core.types import TopicPartition

if TYPE_CHECKING:  # local_partition.py takes a PartitionChanges: no import cycle at run time
    from minikafka.server.local_partition import LocalPartition


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


class ReplicaIndex:
    """Led partitions, under-replicated ones and the leader-side replica lag, kept from the
    changes (module docstring). `refresh` first: it folds in what was touched since."""

    def __init__(
        self,
        partitions: Mapping[TopicPartition, LocalPartition],
        changes: PartitionChanges,
        *,
        local_id: int,
    ) -> None:
        self.partitions = partitions  # the replica manager's, live
        self.local_id = local_id
        self._touched = changes.subscribe()
        self.led: dict[TopicPartition, LocalPartition] = {}
        self._under_replicated: set[TopicPartition] = set()
        self._lag: dict[TopicPartition, int] = {}
        self._lag_sum = 0

    def refresh(self) -> None:
        if not self._touched:
            return
        for tp in drain(self._touched):
            self._update(tp, self.partitions.get(tp))

    def _update(self, tp: TopicPartition, p: LocalPartition | None) -> None:
        leader = p.leader if p is not None else None
        self._lag_sum -= self._lag.pop(tp, 0)
        if p is None or leader is None:
            self.led.pop(tp, None)
            self._under_replicated.discard(tp)
            return
        self.led[tp] = p
        if len(leader.isr) < len(leader.replicas):
            self._under_replicated.add(tp)
        else:
            self._under_replicated.discard(tp)
        lag = sum(leader.replica_lag(r) for r in leader.replicas if r != self.local_id)
        if lag:
            self._lag[tp] = lag
            self._lag_sum += lag

    def leader_partitions(self) -> int:
        """Kafka's LeaderCount."""
        self.refresh()
        return len(self.led)

    def under_replicated(self) -> int:
        """Kafka's UnderReplicatedPartitions: led here with an ISR smaller than the replicas."""
        self.refresh()
        return len(self._under_replicated)

    def leader_lag(self) -> int:
        """The leader half of SumReplicaLag (server/replica_gauges.py)."""
        self.refresh()
        return self._lag_sum
