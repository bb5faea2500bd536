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
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from minikafka.core.replica_effects import Effect
from minikafka.core.types import TopicPartition
from minikafka.server.eventlog import EventLog
from minikafka.server.local_partition import LocalPartition
from minikafka.storage import LogDirError


class OfflineReplicas:
    def __init__(
        self,
        *,
        events: EventLog,
        lookup: Callable[[TopicPartition], LocalPartition | None],
        stop_fetching: Callable[[list[TopicPartition]], None],
        execute: Callable[[LocalPartition, list[Effect]], None],
    ) -> None:
        self._events = events
        self._lookup = lookup
        self._stop_fetching = stop_fetching
        self._execute = execute
        self.tps: set[TopicPartition] = set()
        self._grew = trio.Event()

    def __contains__(self, tp: object) -> bool:
        return tp in self.tps

    def __len__(self) -> int:
        return len(self.tps)

    def on_error(self, tp: TopicPartition, exc: BaseException, *, during: str) -> bool:
        """A write of `tp` failed: if the disk or LMDB did it, take the replica offline.
        Returns whether it is offline now."""
        if isinstance(exc, LogDirError):
            self.mark(tp, str(exc), during=during)
        return tp in self.tps

    def mark(self, tp: TopicPartition, error: str, *, during: str) -> None:
        if tp in self.tps:
            return
        self.tps.add(tp)
        self._stop_fetching([tp])
        p = self._lookup(tp)
        if p is not None:  # waiting produces and fetches learn it is no longer served here
            self._execute(p, p.replica.go_offline())
        self._events.emit(
            "replica_offline", topic=tp.topic, partition=tp.partition, error=error, during=during
        )
        self._grew.set()
        self._grew = trio.Event()

    async def wait_beyond(self, count: int) -> None:
        """Return once more than `count` replicas are offline."""
        while len(self.tps) <= count:
            await self._grew.wait()
