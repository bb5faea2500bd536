"""What the broker's periodic tasks read instead of scanning every hosted partition.

An idle broker with thousands of partitions must cost next to nothing per second (once
measured, 5,100 partitions cost ~15 % of a core per broker, every periodic task walking every
partition). So the work follows the changes:

- `PartitionChanges` (server/partition_changes.py) says which partitions were touched; each
  consumer subscribes its own set and drains it on its own schedule.
- `ReplicaIndex` keeps, from those changes, what the gauges and the isr-expiration task read:
  the partitions led here, those under-replicated, the leader side of SumReplicaLag. A led
  partition's lag changes only through its machine (an append committed, a follower's fetch),
  so the sum kept from the changes equals the scan it replaces (tests/server/test_replica_index.py
  checks it against the scan).
"""

from __future__ import annotations

from collections.abc import Mapping

from minikafka.common import TopicPartition
from minikafka.server.local_partition import LocalPartition
from minikafka.server.partition_changes import PartitionChanges, drain


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
