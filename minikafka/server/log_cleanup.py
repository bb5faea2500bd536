"""Retention on every hosted log (Kafka's LogManager.cleanupLogs, scheduled every
log.retention.check.interval.ms): leaders and followers alike delete their old segments by the
topic's effective log config (core/log_config.py), with Kafka's rules (core/log_retention.py
`delete_old_segments`: the log start offset breach, then retention.bytes, then retention.ms,
never at or past the replica's high watermark).

Each partition's run is one op of the log writer (server/log_writer.py), so it is planned from
the store's segments as the appends before it left them and no append lands in between: the
plan and its deletion are one step of the writer's FIFO, in the writer's worker thread. The
high watermark and log start offset it is given are the replica machine's when the op is
queued; both only grow, so an older value can only delete less. The deletion moves the log
start offset and deletes at most the store's `max_delete_keys` (1,000) batches per
transaction (storage/log_store.py): what is left below the new log start is purged by later
ops, one bounded transaction each, so the writer (and every produce behind it) never waits on a long deletion. Then the replica
machine takes the new log start offset: fetches below it are OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

from typing import Protocol

import trio

from minikafka.clock import RunSync
from minikafka.common import TopicPartition
from minikafka.core.log_config import LogConfig
from minikafka.core.log_retention import LogStartOffsetIncrementReason
from minikafka.server.eventlog import EventLog
from minikafka.server.local_partition import LocalPartition
from minikafka.server.log_writer import LogWriter
from minikafka.server.metrics import Metrics
from minikafka.storage import LogStore, StorageError


class LogTaskHost(Protocol):
    """What the broker's log tasks need of it (server/replica_manager.py `ReplicaManager`):
    retention here, compaction in server/log_cleaner.py."""

    partitions: dict[TopicPartition, LocalPartition]
    writer: LogWriter
    store: LogStore
    events: EventLog
    metrics: Metrics
    run_sync: RunSync

    def log_config(self, topic: str) -> LogConfig: ...

    def on_log_error(self, tp: TopicPartition, exc: BaseException, *, during: str) -> bool: ...


class RetentionHost(LogTaskHost, Protocol):
    """What retention needs besides: telling the replica machine its log start moved."""

    def log_start_moved(self, p: LocalPartition, log_start_offset: int, *, reason: str) -> None: ...


SEGMENT_DELETION = LogStartOffsetIncrementReason.SEGMENT_DELETION


async def run_log_retention(
    rm: RetentionHost,
    *,
    interval_ms: int,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """First what a deletion cut short by a crash left below a log start (the store's
    `leftovers`), then a retention round every `interval_ms`."""
    task_status.started()
    for tp in await rm.run_sync(rm.store.leftovers):
        await _purge(rm, tp)
    while True:
        await trio.sleep(interval_ms / 1000)
        await retention_round(rm)


async def retention_round(rm: RetentionHost) -> int:
    """One round over the hosted, online partitions; -> how many segments it deleted."""
    deleted = 0
    for p in list(rm.partitions.values()):
        if p.offline or rm.partitions.get(p.tp) is not p:
            continue  # gone or replaced while the round ran
        try:
            plan, left = await rm.writer.run_retention(
                p.tp, rm.log_config(p.tp.topic), high_watermark=p.high_watermark
            )
        except (StorageError, KeyError) as exc:  # a deleted partition, or a failing disk
            rm.on_log_error(p.tp, exc, during="retention")
            continue
        if not plan.deletions:
            continue
        for d in plan.deletions:
            rm.events.emit(
                "log_segments_deleted",
                topic=p.tp.topic,
                partition=p.tp.partition,
                reason=d.reason.value,
                segments=len(d.segments),
                bytes=sum(s.size_bytes for s in d.segments),
                log_start_offset=d.log_start_offset,
            )
            deleted += len(d.segments)
            rm.metrics.inc("log_segments_deleted", len(d.segments))
            rm.metrics.inc("log_bytes_deleted", sum(s.size_bytes for s in d.segments))
        rm.log_start_moved(p, plan.log_start_offset, reason=SEGMENT_DELETION.value)
        if left:
            await _purge(rm, p.tp)
    return deleted


async def _purge(rm: RetentionHost, tp: TopicPartition) -> None:
    """The batches left below a log start, one bounded transaction per op, so appends queued
    meanwhile go between them."""
    left = 1
    while left:
        try:
            left = await rm.writer.purge(tp)
        except (StorageError, KeyError):
            return  # deleted, or its disk failed: what is left is unreachable all the same
