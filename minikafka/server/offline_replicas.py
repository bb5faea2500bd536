"""The replicas this broker can no longer write: Kafka's log-dir failure handling, per replica.

Kafka takes a whole log directory offline at its first IOException (LogDirFailureChannel); the
broker keeps serving the partitions of its other directories and tells the controller, which
moves leadership to healthy replicas (KafkaController.onReplicasBecomeOffline; in KRaft the
heartbeat's OfflineLogDirs, KIP-858). A node here has one LMDB environment, and a failure is
reported per write, so the grain is the replica: the one whose write failed with a `LogDirError`
(MDB_MAP_FULL, ENOSPC, EIO), or whose log could not be created at all, goes offline:
- it stops leading and following at once (produce and fetch answer KAFKA_STORAGE_ERROR, as
  Kafka's ReplicaManager answers for an offline partition), and a LeaderAndIsr for it is
  answered KAFKA_STORAGE_ERROR for that partition alone;
- the controller link reports the whole offline list in every heartbeat, and heartbeats at once
  when it grows, so the controller elects a new leader without waiting for a session timeout.
It stays offline until the node restarts (Kafka also brings a failed directory back only on
restart), when the store is opened afresh.

This module is the registry (what is offline, and a wake-up for the heartbeat when it grows);
taking a replica offline is the replica manager's (`ReplicaManager.on_log_error`), which stops
its fetcher and the replica machine (core/replica.py `go_offline`). The registry exists before
both the replica manager and the controller link, so each gets it at construction.
"""

from __future__ import annotations

import trio

from minikafka.common import TopicPartition


class OfflineReplicas:
    def __init__(self) -> None:
        self.tps: set[TopicPartition] = set()
        self._grew = trio.Event()

    def __contains__(self, tp: object) -> bool:
        return tp in self.tps

    def __len__(self) -> int:
        return len(self.tps)

    def add(self, tp: TopicPartition) -> bool:
        """Record `tp` as offline; True if it was not already."""
        if tp in self.tps:
            return False
        self.tps.add(tp)
        self._grew.set()
        self._grew = trio.Event()
        return True

    async def wait_beyond(self, count: int) -> None:
        """Return once more than `count` replicas are offline."""
        while len(self.tps) <= count:
            await self._grew.wait()
