"""The shell's handle on one partition replica it hosts: the core machine, its waiters, its rate.

Every offset, the high watermark, the epochs and the role live in the core machine
(core/replica.py `LocalReplica`, the `replica` field); this handle reads them through and never
sets them. Readers (fetches) only ever see up to `log_end_offset` (durable), consumers only up to
`high_watermark`; `next_offset` runs ahead of the LEO while appends wait in the writer's queue.

`watch`/`notify` is the purgatory of this shell: delayed produces (acks=all) and delayed fetches
register an event and are woken whenever the machine returns WakeWaiters (the log end offset, the
high watermark or the role changed), then re-check their own condition (Kafka's
DelayedOperationPurgatory keyed by partition).

The machine tells the broker's `PartitionChanges` (server/partition_changes.py) when what it reports
changed (its `on_change`), and recording into `bytes_in` marks the rate active, so the periodic
tasks visit only partitions that moved.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import trio

from minikafka.common import EpochEntry, TopicPartition
from minikafka.core.partition import PartitionLeaderState
from minikafka.core.producer_state import ProducerStateManager
from minikafka.core.quota.stats import MetricConfig, Rate
from minikafka.core.replica import LocalReplica
from minikafka.errors import ErrorCode
from minikafka.server.partition_changes import PartitionChanges
from minikafka.storage import LoadedPartition
from minikafka.wire.messages import PartitionState


class LocalPartition:
    def __init__(
        self,
        loaded: LoadedPartition,
        *,
        local_id: int,
        lag_max_ms: int,
        changes: PartitionChanges | None = None,
        on_notify: Callable[[TopicPartition], None] | None = None,
    ) -> None:
        self.tp: TopicPartition = loaded.tp
        self._changes = changes if changes is not None else PartitionChanges()
        self._replica = LocalReplica(
            tp=loaded.tp,
            local_id=local_id,
            lag_max_ms=lag_max_ms,
            log_start_offset=loaded.log_start_offset,
            log_end_offset=loaded.log_end_offset,
            high_watermark=loaded.high_watermark,
            epochs=loaded.epochs,
            producers=loaded.producers,
            on_change=partial(self._changes.touched, loaded.tp),
        )
        self._watchers: set[trio.Event] = set()
        # Also told of every change: the fetch sessions holding this partition (KIP-227,
        # server/fetch_sessions.py), which wake their long polls without a watcher each.
        self._on_notify = on_notify
        # KIP-73's PartitionBytesInRate: every byte appended here, produced or replicated.
        self._bytes_in = Rate(MetricConfig())

    @property
    def replica(self) -> LocalReplica:
        """The machine, to feed it (core/replica.py)."""
        return self._replica

    @property
    def bytes_in(self) -> Rate:
        """The rate, to record bytes appended: marks it active for PartitionBytesInRate (one
        looked at, not recorded into, costs the gauge one read before it is dropped again)."""
        self._changes.recorded(self.tp)
        return self._bytes_in

    def bytes_in_rate(self, now_ms: int) -> float:
        """PartitionBytesInRate now, without marking anything (the gauge's read)."""
        return self._bytes_in.measure(now_ms)

    def next_deadline_ms(self) -> int | None:
        """The machine's next ISR deadline, without marking anything (the expiration's read)."""
        return self._replica.next_deadline_ms()

    # Read-through views of the machine (there are no setters: only core/replica.py moves them).

    @property
    def log_start_offset(self) -> int:
        return self._replica.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._replica.log_end_offset

    @property
    def next_offset(self) -> int:
        return self._replica.next_offset

    @property
    def high_watermark(self) -> int:
        return self._replica.high_watermark

    @property
    def epochs(self) -> list[EpochEntry]:
        return self._replica.epochs

    @property
    def producers(self) -> ProducerStateManager:
        return self._replica.producers

    @property
    def state(self) -> PartitionState | None:
        return self._replica.state

    @property
    def leader(self) -> PartitionLeaderState | None:
        return self._replica.leader

    @property
    def offline(self) -> bool:
        return self._replica.offline

    @property
    def is_leader(self) -> bool:
        return self._replica.is_leader

    @property
    def leader_id(self) -> int:
        return self._replica.leader_id

    @property
    def leader_epoch(self) -> int:
        return self._replica.leader_epoch

    def watch(self, event: trio.Event) -> None:
        self._watchers.add(event)

    def unwatch(self, event: trio.Event) -> None:
        self._watchers.discard(event)

    def notify(self) -> None:
        for event in self._watchers:
            event.set()
        self._watchers.clear()
        if self._on_notify is not None:
            self._on_notify(self.tp)

    def describe(self) -> dict[str, object]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "role": "leader" if self.is_leader else "follower",
            "leader": self.leader_id,
            "leader_epoch": self.leader_epoch,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "high_watermark": self.high_watermark,
            "idempotent_producers": len(self.producers.entries),
        }


def leader_error(
    p: LocalPartition | None, topic: str, known_topic: frozenset[str] | set[str]
) -> ErrorCode:
    """Why this broker cannot serve `p` as its leader (produce, fetch, ListOffsets), or NONE:
    an offline replica is KAFKA_STORAGE_ERROR (Kafka's answer for HostedPartition.Offline)."""
    if p is None:
        return (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if topic in known_topic
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
    if p.offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE if p.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER


async def wait_for_change(partitions: list[LocalPartition], deadline: float) -> None:
    """Sleep until any of the partitions changes, or until the (Trio-clock) deadline."""
    event = trio.Event()
    for p in partitions:
        p.watch(event)
    try:
        with trio.move_on_at(deadline):
            await event.wait()
    finally:
        for p in partitions:
            p.unwatch(event)
