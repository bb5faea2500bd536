"""Log compaction (``cleanup.policy=compact``): Kafka's LogCleaner, its decisions, pure.

A compacted log keeps, for every key, at least the last record written with it. Kafka's cleaner
(``LogCleaner.Cleaner.doClean``) works on the part of a log that is *cleanable*:

- the **clean** section, ``[log start, first dirty)``, already cleaned (the cleaner's
  checkpoint, ``cleaner-offset-checkpoint``, holds the first dirty offset);
- the **dirty** section, ``[first dirty, clean end)``, written since;
- ``clean end`` is the first uncleanable offset (``LogCleanerManager.cleanableOffsets``): the
  active segment's base, the high watermark (the last stable offset: minikafka has no
  transactions), and, with ``min.compaction.lag.ms``, the base of the first segment holding a
  record younger than that lag.

A pass builds a map key -> last offset over the dirty section (``buildOffsetMap``), then
rewrites every batch below the clean end keeping a record only when its key's last offset in
the map is not after it (``shouldRetainRecord``); a record without a key is dropped (Kafka
counts it as invalid). A batch keeps its base offset and its last offset delta (offsets and
producer sequence numbers keep their meaning; removed records leave gaps); one left with no
record disappears. The new first dirty offset is the clean end. A log is cleaned when its dirty
bytes are more than ``min.cleanable.dirty.ratio`` of its cleanable bytes, or when a dirty record
is older than ``max.compaction.lag.ms`` (KIP-354).

Deletes: a record with a null value (a *tombstone*) is kept like any other latest record for
``delete.retention.ms``, so that a consumer reading from the start sees the delete, then
removed. Kafka measures that from the wall clock of the broker that cleans (the segment's
modification time, or since KIP-534 a horizon stamped in the batch by the first pass); here it
is measured from the tombstone's own timestamp (record time, as ``retention.ms`` and
``segment.ms`` are). That choice is what makes replication byte for byte:

**Replicas.** Every replica compacts its own log, as every Kafka broker's cleaner does, but
nothing here depends on the replica: the kept records are a function of the log's records, the
clean end and ``now_ms`` against record timestamps. Cleaning up to A and then up to B keeps
exactly what one pass up to B keeps (a record survives iff no later record of its key lies
below the clean end, and an old enough tombstone goes either way), and a rebuilt batch's bytes
depend only on the records kept (core/record_batch_v2.py `rebuilt`, gzip without a time).
So two replicas cleaned to the same point hold the same bytes, and a follower copies a leader's
cleaned batches verbatim. A native batch (core/records.py, which has no per-record offsets) is
rewritten as a RecordBatch v2 with the same offsets, so that its gaps can be expressed.

Left out: transactions (no aborted-transaction removal, control batches kept as they are), the
empty batch Kafka keeps for an idempotent producer's last batch (an emptied batch goes; the
producers' state survives in the snapshots, storage/producer_snapshots.py), and the KIP-534
delete horizon stamped into batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import msgpack

from minikafka.core import record_batch_v2 as v2
from minikafka.core.log_retention import Segment
from minikafka.core.records import HEADER, HEADER_SIZE
from minikafka.errors import CorruptRecordError

DEFAULT_DELETE_RETENTION_MS = 86_400_000  # log.cleaner.delete.retention.ms (1 day)
DEFAULT_MIN_CLEANABLE_RATIO = 0.5  # log.cleaner.min.cleanable.ratio
DEFAULT_MAX_COMPACTION_LAG_MS = (1 << 63) - 1  # log.cleaner.max.compaction.lag.ms (never)
DEFAULT_MAX_MAP_KEYS = 1_000_000  # what log.cleaner.dedupe.buffer.size holds, in keys


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanerConfig:
    """The settings a pass follows (Kafka's LogConfig fields of the same names)."""

    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = DEFAULT_MAX_COMPACTION_LAG_MS
    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO


# ---------------------------------------------------------------------------- what to clean


@dataclass(frozen=True, slots=True, kw_only=True)
class Cleanable:
    """``LogToClean``: the offsets of one log's pass and its sizes."""

    first_dirty: int
    clean_end: int
    clean_bytes: int
    dirty_bytes: int
    forced: bool  # a dirty record older than max.compaction.lag.ms (KIP-354)

    @property
    def ratio(self) -> float:
        """``cleanableRatio``: dirty bytes over all the bytes below the clean end."""
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def first_dirty_offset(checkpoint: int | None, log_start_offset: int, log_end_offset: int) -> int:
    """The checkpoint, or the log start when there is none or it lies outside the log
    (``LogCleanerManager.cleanableOffsets``: a checkpoint below the log start or past the log
    end is reset; a truncation below it does the same)."""
    if checkpoint is None or not log_start_offset <= checkpoint <= log_end_offset:
        return log_start_offset
    return checkpoint


def cleanable(
    segments: Sequence[Segment],
    *,
    checkpoint: int | None,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int,
    config: CleanerConfig,
) -> Cleanable:
    """Where a pass over this log would start and end, and what it would weigh.

    The clean end is the smallest of the active (last) segment's base, the high watermark and,
    with ``min.compaction.lag.ms`` > 0, the base of the first dirty segment whose largest
    timestamp is younger than the lag; never below the first dirty offset."""
    log_end = segments[-1].next_offset if segments else log_start_offset
    first_dirty = first_dirty_offset(checkpoint, log_start_offset, log_end)
    end = min(high_watermark, segments[-1].base_offset if segments else log_start_offset)
    dirty = [s for s in segments[:-1] if s.next_offset > first_dirty]
    if config.min_compaction_lag_ms > 0:
        for s in dirty:
            if s.largest_timestamp_ms > now_ms - config.min_compaction_lag_ms:
                end = min(end, s.base_offset)
                break
    end = max(end, first_dirty)
    clean_bytes = sum(s.size_bytes for s in segments if s.next_offset <= first_dirty)
    dirty_bytes = sum(s.size_bytes for s in dirty if s.next_offset <= end)
    forced = any(
        s.next_offset <= end and _first_timestamp(s) < now_ms - config.max_compaction_lag_ms
        for s in dirty
        if config.max_compaction_lag_ms < DEFAULT_MAX_COMPACTION_LAG_MS
    )
    return Cleanable(
        first_dirty=first_dirty,
        clean_end=end,
        clean_bytes=clean_bytes,
        dirty_bytes=dirty_bytes,
        forced=forced,
    )


def _first_timestamp(segment: Segment) -> int:
    """When a segment's first batch was written, by record time if it has one."""
    ts = segment.first_batch_timestamp_ms
    return ts if ts >= 0 else segment.created_ms


def needs_cleaning(c: Cleanable, config: CleanerConfig) -> bool:
    """``LogCleanerManager.grabFilthiestCompactedLog``'s test: something dirty below the clean
    end, and a ratio over ``min.cleanable.dirty.ratio`` or a KIP-354 deadline passed."""
    if c.clean_end <= c.first_dirty:
        return False
    return c.forced or c.ratio > config.min_cleanable_ratio


# ---------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class _Batch:
    header: v2.V2Header
    records: list[v2.RawRecord]
    native: bool


def _read(raw: bytes) -> _Batch:
    """A stored batch as the cleaner reads it; a native one as the RecordBatch v2 it becomes."""
    if v2.is_v2(raw):
        header, records = v2.raw_records(raw)
        return _Batch(header, records, native=False)
    base, epoch, count, pid, p_epoch, seq, _length, _crc = HEADER.unpack_from(raw, 0)
    try:
        items = msgpack.unpackb(raw[HEADER_SIZE:], raw=False, use_list=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CorruptRecordError(f"batch at offset {base}: bad payload ({exc})") from exc
    base_ts = items[0][0] if items else 0
    records = [
        v2.RawRecord(i, ts, key, value is None, v2.record_bytes(ts - base_ts, i, key, value))
        for i, (ts, key, value) in enumerate(items)
    ]
    header = v2.V2Header(
        base_offset=base,
        batch_length=0,  # not read: `rebuilt` computes it
        leader_epoch=epoch,
        crc=0,
        attributes=0,  # no compression, CreateTime
        last_offset_delta=count - 1,
        base_timestamp=base_ts,
        max_timestamp=max((ts for ts, _k, _v in items), default=-1),
        producer_id=pid,
        producer_epoch=p_epoch,
        base_sequence=seq,
        record_count=count,
    )
    return _Batch(header, records, native=True)


def _is_control(batch: _Batch) -> bool:
    return not batch.native and bool(batch.header.attributes & v2.CONTROL)


class OffsetMap:
    """``SkimpyOffsetMap``: key -> the last offset it was written at, up to `max_keys` keys."""

    def __init__(self, max_keys: int = DEFAULT_MAX_MAP_KEYS) -> None:
        self.max_keys = max_keys
        self.offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.offsets)


def build_offset_map(
    batches: Iterable[bytes], *, first_dirty: int, clean_end: int, max_keys: int
) -> tuple[OffsetMap, int]:
    """The map over the dirty batches (``Cleaner.buildOffsetMap``) and the offset the pass may
    clean up to: `clean_end`, or the base of a batch that holds it (a pass cleans whole batches;
    the high watermark and segment bases fall between batches anyway), or the base of the
    first batch whose new keys would not fit (Kafka stops at the segment that overflows the
    dedupe buffer; here at the batch)."""
    m = OffsetMap(max_keys)
    for raw in batches:
        batch = _read(raw)
        base = batch.header.base_offset
        if base >= clean_end:
            break
        if base + batch.header.last_offset_delta >= clean_end:
            return m, max(base, first_dirty)
        if base + batch.header.last_offset_delta < first_dirty or _is_control(batch):
            continue
        offsets = m.offsets
        keyed = [(r.key, base + r.offset_delta) for r in batch.records if r.key is not None]
        new_keys = sum(1 for key in {k for k, _o in keyed} if key not in offsets)
        if len(offsets) + new_keys > max_keys:
            return m, max(base, first_dirty)
        for key, offset in keyed:
            if offset >= first_dirty:
                offsets[key] = offset
    return m, clean_end


class Outcome(Enum):
    KEPT = "kept"  # unchanged
    REWRITTEN = "rewritten"
    REMOVED = "removed"  # no record left


@dataclass(frozen=True, slots=True)
class CleanedBatch:
    outcome: Outcome
    raw: bytes | None  # the new bytes when REWRITTEN
    records_removed: int


def clean_batch(
    raw: bytes, offset_map: OffsetMap, *, now_ms: int, delete_retention_ms: int
) -> CleanedBatch:
    """One batch below the clean end after the pass (``Cleaner.cleanInto`` /
    ``shouldRetainRecord``): a record stays when it has a key, no later record of its key is
    in the map, and it is not a tombstone older than ``delete.retention.ms`` by the batch's max
    timestamp. Control batches stay as they are."""
    batch = _read(raw)
    if _is_control(batch):
        return CleanedBatch(Outcome.KEPT, None, 0)
    append_time = bool(batch.header.attributes & v2.LOG_APPEND_TIME)
    base, latest = batch.header.base_offset, offset_map.offsets
    kept = []
    for r in batch.records:
        if r.key is None:
            continue  # Kafka: "invalid message", a record without a key in a compacted log
        last = latest.get(r.key)
        if last is not None and last > base + r.offset_delta:
            continue  # a later record of the same key
        if r.null_value:
            # The tombstone's own time, never the batch's max (which a pass may lower): the
            # verdict must not depend on what earlier passes removed around it.
            written = batch.header.max_timestamp if append_time else r.timestamp_ms
            if written + delete_retention_ms <= now_ms:
                continue
        kept.append(r)
    removed = len(batch.records) - len(kept)
    if not kept:
        return CleanedBatch(Outcome.REMOVED, None, removed)
    if not removed:  # a native batch too keeps its format while nothing of it goes
        return CleanedBatch(Outcome.KEPT, None, 0)
    return CleanedBatch(Outcome.REWRITTEN, v2.rebuilt(raw, batch.header, kept), removed)


# ---------------------------------------------------------------------------- segments after


def group_segments(segments: Sequence[Segment], *, segment_bytes: int) -> tuple[Segment, ...]:
    """Cleaned segments merged while their total stays within ``segment.bytes``
    (``Cleaner.groupSegmentsBySize``), so that cleaning leaves no runs of tiny or empty
    segments. Each group spans its members' offsets; its timestamps are theirs combined."""
    out: list[Segment] = []
    for s in segments:
        if out and out[-1].size_bytes + s.size_bytes <= segment_bytes:
            g = out[-1]
            out[-1] = Segment(
                base_offset=g.base_offset,
                next_offset=s.next_offset,
                size_bytes=g.size_bytes + s.size_bytes,
                max_timestamp_ms=max(g.max_timestamp_ms, s.max_timestamp_ms),
                first_batch_timestamp_ms=(
                    g.first_batch_timestamp_ms if g.size_bytes else s.first_batch_timestamp_ms
                ),
                created_ms=g.created_ms,
                last_modified_ms=max(g.last_modified_ms, s.last_modified_ms),
            )
        else:
            out.append(s)
    return tuple(out)
