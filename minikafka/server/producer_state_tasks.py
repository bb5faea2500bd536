"""The broker's periodic work on idempotent producers' state: snapshots and expiry.

- Snapshots ride with the HW checkpoint (server/replica_manager.py `run_hw_checkpoints`):
  `ProducerSnapshots.take` trims each moved partition's state to its HW and picks the ones
  whose snapshot is due (core/producer_state.py `snapshot_due`: not an unchanged state, and a
  changed one only once the log grew by as many records as it has producers). On the event loop
  it only copies each due state (a C-speed dict copy); the encoding
  (core/producer_snapshot_codec.py) runs through `run_sync`, a worker thread in a node, so a
  million producers no longer hold the loop for seconds (benchmarks/
  producer_snapshot_bench.py). `written` records what reached the disk, after the writer's
  transaction, so a failed checkpoint writes them again next round.
- Expiry (KIP-854, Kafka's `removeExpiredProducers` task in UnifiedLog, scheduled by the
  LogManager every producer.id.expiration.check.interval.ms): `run_producer_expiration` calls
  each hosted partition's `remove_expired(now_ms, producer.id.expiration.ms)`, leaders and
  followers alike, as Kafka does for every log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import trio

from minikafka.clock import RunSync, now_ms
from minikafka.common import TopicPartition
from minikafka.core.producer_snapshot_codec import encode_entries
from minikafka.core.producer_state import (
    ProducerEntry,
    ProducerStateManager,
    SnapshotMark,
    snapshot_due,
)

Snapshots = dict[TopicPartition, tuple[int, bytes]]
# Producer ids stamped or looked at per step of the expiry task. Measured on the development VM
# with a million producers in one partition: a step takes 0.2 ms (stamping) to 0.6 ms
# (expiring) at the median, 6 ms at the 99th percentile; the whole check 0.6 s and 1.2 s, which
# in one step would hold the event loop that long.
EXPIRY_STEP = 1_000


class ProducerSnapshots:
    def __init__(
        self, lookup: Callable[[TopicPartition], object | None], run_sync: RunSync
    ) -> None:
        self._lookup = lookup  # tp -> LocalPartition (its `producers`) or None
        self._run_sync = run_sync
        self._taken: list[tuple[ProducerStateManager, SnapshotMark]] = []

    async def take(self, high_watermarks: Mapping[TopicPartition, int]) -> Snapshots:
        """The snapshots due at these HWs, encoded off the event loop."""
        jobs: list[tuple[TopicPartition, int, dict[int, ProducerEntry]]] = []
        self._taken = []
        for tp, hw in high_watermarks.items():
            p = self._lookup(tp)
            if p is None:
                continue
            producers: ProducerStateManager = p.producers  # type: ignore[attr-defined]
            producers.trim(hw)
            if producers.can_roll_back_to(hw) and snapshot_due(producers, hw):
                jobs.append((tp, hw, producers.state_at(hw)))
                self._taken.append(
                    (producers, SnapshotMark(offset=hw, removals=producers.removals))
                )
                await trio.lowlevel.checkpoint()  # one state's copy at a time on the loop
        if not jobs:
            return {}
        return await self._run_sync(_encode_all, jobs)

    def written(self) -> None:
        """The snapshots of the last `take` are on disk."""
        for producers, mark in self._taken:
            producers.snapshot_mark = mark
        self._taken = []


def _encode_all(jobs: Iterable[tuple[TopicPartition, int, dict[int, ProducerEntry]]]) -> Snapshots:
    return {tp: (hw, encode_entries(entries.values())) for tp, hw, entries in jobs}


async def run_producer_expiration(
    partitions: Callable[[], Iterable[object]],
    *,
    expiration_ms: int,
    interval_ms: int,
    on_expired: Callable[[int], None] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Every `interval_ms`, forget in each hosted partition the producers idle for
    `expiration_ms` (producer.id.expiration.check.interval.ms / producer.id.expiration.ms).
    `on_expired(n)` hears how many went in a round (a metric)."""
    task_status.started()
    while True:
        await trio.sleep(interval_ms / 1000)
        expired = 0
        for p in list(partitions()):
            producers = p.producers  # type: ignore[attr-defined]
            more = True
            while more:  # EXPIRY_STEP ids at a time on the loop
                gone, more = producers.expire_some(now_ms(), expiration_ms, budget=EXPIRY_STEP)
                expired += len(gone)
                await trio.lowlevel.checkpoint()
        if expired and on_expired is not None:
            on_expired(expired)
