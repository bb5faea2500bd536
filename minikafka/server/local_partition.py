"""The broker's in-memory view of one partition replica it hosts.

Offsets: `log_end_offset` is what is durable in LMDB (updated only by the log writer's commit
hook, so it never runs ahead of the disk); `next_offset` is where the leader's next append will
start, ahead of `log_end_offset` while appends wait in the writer queue. Readers (fetches) only
ever see up to `log_end_offset`, consumers only up to `high_watermark`.

`watch`/`notify` is the purgatory of this shell: delayed produces (acks=all) and delayed fetches
register an event and are woken whenever the log end offset, the high watermark or the role
changes, then re-check their own condition (Kafka's DelayedOperationPurgatory keyed by partition).
"""

from __future__ import annotations

import trio

from minikafka.core.partition import PartitionLeaderState
from minikafka.core.producer_state import ProducerStateManager
from minikafka.core.stats import MetricConfig, Rate
from minikafka.core.types import EpochEntry, TopicPartition
from minikafka.errors import ErrorCode
from minikafka.storage import LoadedPartition
from minikafka.wire.messages import NO_EPOCH, NO_LEADER, PartitionState


class LocalPartition:
    def __init__(self, loaded: LoadedPartition) -> None:
        self.tp: TopicPartition = loaded.tp
        self.log_start_offset = loaded.log_start_offset
        self.log_end_offset = loaded.log_end_offset
        self.next_offset = loaded.log_end_offset
        self.high_watermark = loaded.high_watermark
        self.epochs: list[EpochEntry] = list(loaded.epochs)
        # Idempotent producers (KIP-98, core/producer_state.py): changed when an append is queued
        # (a leader's stamp, a follower's fetched batch), undone if its write fails.
        self.producers: ProducerStateManager = loaded.producers
        self.state: PartitionState | None = None  # the controller's last word on it
        self.leader: PartitionLeaderState | None = None  # set while this broker leads it
        self.offline = False  # its log failed (server/offline_replicas.py): served no more
        self._watchers: set[trio.Event] = set()
        # KIP-73's PartitionBytesInRate: every byte appended here, produced or replicated.
        self.bytes_in = Rate(MetricConfig())

    @property
    def is_leader(self) -> bool:
        return self.leader is not None

    @property
    def leader_id(self) -> int:
        return self.state.leader if self.state is not None else NO_LEADER

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state is not None else NO_EPOCH

    def watch(self, event: trio.Event) -> None:
        self._watchers.add(event)

    def unwatch(self, event: trio.Event) -> None:
        self._watchers.discard(event)

    def notify(self) -> None:
        for event in self._watchers:
            event.set()
        self._watchers.clear()

    def on_committed(self, new_log_end_offset: int) -> None:
        """The writer committed an append: the data is durable and visible."""
        self.log_end_offset = max(self.log_end_offset, new_log_end_offset)
        self.next_offset = max(self.next_offset, self.log_end_offset)
        if self.leader is not None and self.leader.on_leader_append(self.log_end_offset):
            self.high_watermark = self.leader.high_watermark
        self.producers.trim(self.high_watermark)  # below the HW no rollback is ever asked
        self.notify()

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
