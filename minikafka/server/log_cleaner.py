"""The log cleaner: compaction of every hosted log whose cleanup.policy names `compact`
(Kafka's LogCleaner, its threads replaced by one Trio task; the decisions in
core/compaction.py).

Every `log.cleaner.backoff.ms` the task looks at each hosted, online partition of a compacted
topic, leader or follower alike (every Kafka broker cleans its own replicas), and cleans those
whose dirty ratio is over ``min.cleanable.dirty.ratio`` (or whose KIP-354 deadline passed). A
pass never holds the event loop or the log writer for long:

- the offset map and the cleaned batches are computed in a worker thread, from read snapshots
  of the store (LMDB readers do not wait for the writer), a window of `WINDOW_BATCHES` batches
  at a time, so memory is bounded by the map and one window. Decoding records is Python work
  that holds the GIL: the thread gives it up (`time.sleep(0)`) after the batch that takes it
  past 0.25 ms of work, so the event loop waits for it well under a millisecond, not the
  interpreter's 5 ms switch interval (benchmarks/compaction_bench.py measures the loop's lag
  during a pass: p50 0.47 ms, p99 1.3-2.1 ms);
- each window's changes are written as one op of the log writer (server/log_writer.py), one
  short transaction among the appends, which checks that every batch it rewrites is still the
  one read; the last one writes the cleaner checkpoint (the new first dirty offset).

Everything a pass rewrites lies below the high watermark, where only retention (which the
store skips over) and a truncation (which makes the pass give up) may change the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import trio

from minikafka.common import TopicPartition
from minikafka.core import compaction
from minikafka.core.compaction import Outcome
from minikafka.core.log_config import LogConfig
from minikafka.core.records import peek_header
from minikafka.server.local_partition import LocalPartition
from minikafka.server.log_cleanup import LogTaskHost
from minikafka.storage import LogStore, StorageError

WINDOW_BATCHES = 500  # batches read, cleaned and written per step of a pass
YIELD_EVERY_S = 0.00025  # the worker gives the GIL up at least this often (module docstring)


class _Yielder:
    """Gives the GIL up (`time.sleep(0)`) once `YIELD_EVERY_S` of work has passed: often
    enough that the event loop's thread waits about that long for it, not the interpreter's
    5 ms switch interval; rarely enough that the hand-overs (about 55 us each here) cost
    little, even for batches of one record."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self.last >= YIELD_EVERY_S:
            time.sleep(0)
            self.last = time.perf_counter()


@dataclass(frozen=True, slots=True, kw_only=True)
class PassResult:
    """What one pass did (Kafka's CleanerStats, the figures used here)."""

    first_dirty_offset: int  # the checkpoint after the pass
    records_removed: int
    batches_removed: int
    batches_rewritten: int
    bytes_before: int
    bytes_after: int


async def run_log_cleaner(
    host: LogTaskHost,
    *,
    backoff_ms: int,
    now_ms: Callable[[], int],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A cleaning round every `backoff_ms` (``log.cleaner.backoff.ms``)."""
    task_status.started()
    while True:
        await trio.sleep(backoff_ms / 1000)
        await cleaning_round(host, now_ms())


async def cleaning_round(host: LogTaskHost, now_ms: int) -> list[PassResult]:
    """One look at every hosted, online, compacted log; -> the passes it made."""
    done = []
    for p in list(host.partitions.values()):
        if p.offline or host.partitions.get(p.tp) is not p:
            continue
        config = host.log_config(p.tp.topic)
        if not config.compact_enabled:
            continue
        try:
            result = await clean_log(host, p, config, now_ms)
        except (StorageError, KeyError) as exc:  # a deleted partition, or a failing disk
            host.on_log_error(p.tp, exc, during="log_cleaner")
            continue
        if result is not None:
            done.append(result)
    return done


async def clean_log(
    host: LogTaskHost, p: LocalPartition, config: LogConfig, now_ms: int
) -> PassResult | None:
    """One pass over `p`'s log if it needs one (``Cleaner.clean``); None when it did not, or
    gave up (a truncation under it)."""
    tp, store, cc = p.tp, host.store, config.cleaner
    checkpoint = await host.run_sync(lambda: store.cleaner_checkpoint(tp))
    segments = store.segments(tp)
    todo = compaction.cleanable(
        segments,
        checkpoint=checkpoint,
        log_start_offset=p.log_start_offset,
        high_watermark=p.high_watermark,
        now_ms=now_ms,
        config=cc,
    )
    if not compaction.needs_cleaning(todo, cc):
        return None
    offset_map, clean_end = await host.run_sync(
        lambda: _offset_map(store, tp, todo.first_dirty, todo.clean_end)
    )
    stats = {"records": 0, "removed": 0, "rewritten": 0, "before": 0, "after": 0}
    position = p.log_start_offset
    while position < clean_end:
        records_removed, changes, position = await host.run_sync(
            lambda at=position: _clean_window(store, tp, at, clean_end, offset_map, now_ms, cc)
        )
        if records_removed is None:
            break
        if changes and not await host.writer.call(lambda c=changes: store.apply_cleaning(tp, c)):
            return None
        for before, after in changes:
            stats["before"] += len(before)
            stats["after"] += len(after or b"")
            stats["removed" if after is None else "rewritten"] += 1
        stats["records"] += records_removed
    await host.writer.call(
        lambda: store.apply_cleaning(
            tp, [], checkpoint=clean_end, segment_bytes=config.segment_bytes
        )
    )
    result = PassResult(
        first_dirty_offset=clean_end,
        records_removed=stats["records"],
        batches_removed=stats["removed"],
        batches_rewritten=stats["rewritten"],
        bytes_before=stats["before"],
        bytes_after=stats["after"],
    )
    host.events.emit(
        "log_cleaned",
        topic=tp.topic,
        partition=tp.partition,
        first_dirty_offset=result.first_dirty_offset,
        records_removed=result.records_removed,
        batches_removed=result.batches_removed,
        batches_rewritten=result.batches_rewritten,
        bytes_before=result.bytes_before,
        bytes_after=result.bytes_after,
    )
    host.metrics.inc("log_cleaner_passes")
    host.metrics.inc("log_cleaner_records_removed", result.records_removed)
    host.metrics.inc("log_cleaner_bytes_removed", result.bytes_before - result.bytes_after)
    return result


def _offset_map(
    store: LogStore, tp: TopicPartition, first_dirty: int, clean_end: int
) -> tuple[compaction.OffsetMap, int]:
    """The dirty section's key map, read a window at a time (worker thread)."""

    def batches() -> Iterator[bytes]:
        at, pause = first_dirty, _Yielder()
        while at < clean_end:
            window = store.batches_from(tp, at, end=clean_end, max_batches=WINDOW_BATCHES)
            if not window:
                return
            for raw in window:
                yield raw
                pause()  # let the event loop's thread have the GIL (module docstring)
            base, _epoch, count = peek_header(window[-1])
            at = base + count

    return compaction.build_offset_map(
        batches(),
        first_dirty=first_dirty,
        clean_end=clean_end,
        max_keys=compaction.DEFAULT_MAX_MAP_KEYS,
    )


def _clean_window(
    store: LogStore,
    tp: TopicPartition,
    at: int,
    clean_end: int,
    offset_map: compaction.OffsetMap,
    now_ms: int,
    cc: compaction.CleanerConfig,
) -> tuple[int | None, list[tuple[bytes, bytes | None]], int]:
    """One window of batches from `at` cleaned (worker thread): -> (records removed, None when
    there was no batch left; the changes; where the next window starts)."""
    window = store.batches_from(tp, at, end=clean_end, max_batches=WINDOW_BATCHES)
    if not window:
        return None, [], clean_end
    removed, changes, pause = 0, [], _Yielder()
    for raw in window:
        cleaned = compaction.clean_batch(
            raw, offset_map, now_ms=now_ms, delete_retention_ms=cc.delete_retention_ms
        )
        removed += cleaned.records_removed
        if cleaned.outcome is not Outcome.KEPT:
            changes.append((raw, cleaned.raw))
        pause()  # let the event loop's thread have the GIL (module docstring)
    base, _epoch, count = peek_header(window[-1])
    return removed, changes, base + count
