"""The virtual segments of every partition log, in one LMDB database beside the logs.

Kafka deletes a log by whole segments (``LogSegment``); the store keeps one key per batch, and
over those keys it records *segments* (core/log_retention.py ``Segment``: ranges of whole
batches) so that retention decides exactly as Kafka would (docs/log-life.md). One named
database, `log-segments`, holds the segments of every partition (a database per partition
would double the environment's named databases, which `max.broker.partitions` bounds, as for
the time index). Key = the partition's prefix as storage/time_index.py builds it (2-byte length
+ `log/<topic>/<partition>`), then the segment's 8-byte big-endian base offset; value = the
segment's other fields, msgpack. A partition's segments are one key range in offset order.

storage/log_store.py calls these inside its own transactions: segments change in the
transaction that appends, truncates or deletes the batches they describe. A data dir from
before segments has none for a partition: the store builds them from the log's batches when it
opens it (`build`, one pass, rolling by `segment.bytes`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import lmdb
import msgpack

from minikafka.core import time_index as ti
from minikafka.core.log_retention import NO_TIMESTAMP, Segment, roll
from minikafka.core.records import peek_header

DB_NAME = b"log-segments"
_BASE = struct.Struct(">Q")
KAFKA_SEGMENT_BYTES = 1073741824  # log.segment.bytes, Kafka's default (1 GiB)
KAFKA_SEGMENT_MS = 604800000  # log.roll.ms / log.roll.hours = 168, Kafka's default (7 days)


def key(pre: bytes, base_offset: int) -> bytes:
    return pre + _BASE.pack(base_offset)


def encode(segment: Segment) -> bytes:
    """The value of a segment's key: its fields but the base offset (which is in the key)."""
    return msgpack.packb(
        [
            segment.next_offset,
            segment.size_bytes,
            segment.max_timestamp_ms,
            segment.first_batch_timestamp_ms,
            segment.created_ms,
            segment.last_modified_ms,
        ]
    )


def decode(key_bytes: Any, value: Any, pre: bytes) -> Segment:
    (base,) = _BASE.unpack_from(bytes(key_bytes), len(pre))
    nxt, size, max_ts, first_ts, created, modified = msgpack.unpackb(bytes(value))
    return Segment(
        base_offset=base,
        next_offset=nxt,
        size_bytes=size,
        max_timestamp_ms=max_ts,
        first_batch_timestamp_ms=first_ts,
        created_ms=created,
        last_modified_ms=modified,
    )


def _mine(key_bytes: Any, pre: bytes) -> bool:
    key_bytes = bytes(key_bytes)
    return len(key_bytes) == len(pre) + _BASE.size and key_bytes.startswith(pre)


def _walk(cur: lmdb.Cursor, pre: bytes) -> Iterator[tuple[Any, Any]]:
    found = cur.set_range(pre)
    while found and _mine(cur.key(), pre):
        yield cur.key(), cur.value()
        found = cur.next()


def read(txn: lmdb.Transaction, db: Any, pre: bytes) -> tuple[Segment, ...]:
    """The partition's segments in offset order (one cursor over its key range)."""
    with txn.cursor(db=db) as cur:
        return tuple(decode(k, v, pre) for k, v in _walk(cur, pre))


def put(txn: lmdb.Transaction, db: Any, pre: bytes, segments: Iterable[Segment]) -> None:
    for segment in segments:
        txn.put(key(pre, segment.base_offset), encode(segment), db=db)


def delete(txn: lmdb.Transaction, db: Any, pre: bytes, base_offsets: Iterable[int]) -> None:
    for base in base_offsets:
        txn.delete(key(pre, base), db=db)


def drop(txn: lmdb.Transaction, db: Any, pre: bytes) -> None:
    """Remove every segment of the partition."""
    with txn.cursor(db=db) as cur:
        if cur.set_range(pre):
            while _mine(cur.key(), pre):
                if not cur.delete() or not cur.key():
                    return


def replace(
    txn: lmdb.Transaction, db: Any, pre: bytes, old: Sequence[Segment], new: Sequence[Segment]
) -> None:
    """Write the difference between `old` and `new` (the partition's segments before and after):
    keys of segments gone deleted, changed or added segments put, unchanged ones untouched."""
    before = {s.base_offset: s for s in old}
    after = {s.base_offset: s for s in new}
    delete(txn, db, pre, (b for b in before if b not in after))
    put(txn, db, pre, (s for b, s in after.items() if before.get(b) != s))


def append(
    segments: list[Segment],
    batches: Iterable[tuple[int, int, int, int]],
    *,
    now_ms: int,
    segment_bytes: int,
    segment_ms: int,
) -> None:
    """Append batches ``(base_offset, next_offset, size_bytes, max_timestamp_ms)`` to `segments`
    in place: what ``log_retention.append_batch`` (``UnifiedLog.maybeRoll`` + ``LogSegment
    .append``) does batch by batch, on the active segment alone, as its docstring says the store
    does (tests/storage/test_segments.py checks the two agree).

    The append path's cost: a ``Segment`` is immutable and each ``Segment.append`` builds a new
    one, so the batches that go to the same segment are applied as one run (the first batch of
    an empty segment alone: it sets the rolling timestamp), and the roll test is
    ``should_roll``'s, on the active segment plus the run so far."""
    run: list[tuple[int, int, int, int]] = []
    run_bytes = 0
    for batch in batches:
        _base, _nxt, size, max_ts = batch
        active = segments[-1] if segments else None
        if active is None:
            rolls = True
        else:
            held = active.size_bytes + run_bytes
            if not active.is_empty:
                first_ts = active.first_batch_timestamp_ms
            else:
                first_ts = run[0][3] if run else NO_TIMESTAMP
            waited = max_ts - first_ts if first_ts >= 0 else now_ms - active.created_ms
            rolls = held > segment_bytes - size or (held > 0 and waited > segment_ms)
        if rolls:
            _apply_run(segments, run, now_ms)
            run, run_bytes = [], 0
            segments[-1:] = roll(segments[-1:], now_ms=now_ms, expected_next_offset=batch[0])
        run.append(batch)
        run_bytes += size
    _apply_run(segments, run, now_ms)


def _apply_run(segments: list[Segment], run: list[tuple[int, int, int, int]], now_ms: int) -> None:
    if not run:
        return
    if segments[-1].is_empty:
        base, nxt, size, max_ts = run[0]
        segments[-1] = segments[-1].append(
            base_offset=base,
            next_offset=nxt,
            size_bytes=size,
            max_timestamp_ms=max_ts,
            now_ms=now_ms,
        )
        run = run[1:]
        if not run:
            return
    segments[-1] = segments[-1].append(
        base_offset=run[0][0],
        next_offset=run[-1][1],
        size_bytes=sum(b[2] for b in run),
        max_timestamp_ms=max(b[3] for b in run),
        now_ms=now_ms,
    )


def shape(raw: Any) -> tuple[int, int, int, int]:
    """(base offset, next offset, size, max timestamp) of a stored batch, for `append`."""
    raw = bytes(raw)
    base, _epoch, count = peek_header(raw)
    return base, base + count, len(raw), ti.safe_max_timestamp(raw)


def build(
    raws: Iterable[Any],
    *,
    start_offset: int,
    now_ms: int,
    segment_bytes: int = KAFKA_SEGMENT_BYTES,
    segment_ms: int = KAFKA_SEGMENT_MS,
) -> list[Segment]:
    """The segments of a log that has none (a data dir from before segments): one pass over its
    batches `raws` (offset order), rolling by `segment.bytes` and by `segment.ms` of record
    time; times not in the records are `now_ms` (Kafka would read the files' mtimes). An empty
    log gets one empty segment at `start_offset` (a log always has one)."""
    segments = [Segment.new(base_offset=start_offset, now_ms=now_ms)]
    append(
        segments,
        map(shape, raws),
        now_ms=now_ms,
        segment_bytes=segment_bytes,
        segment_ms=segment_ms,
    )
    return segments


def recompute(
    segment: Segment, raws: Iterable[Any], end_offset: int, removed_bytes: int, now_ms: int
) -> Segment:
    """`segment` cut at `end_offset` (``LogSegment.truncateTo``), the truncation having removed
    `removed_bytes` of its batches; `raws` are its batches still stored (from its base on, those
    past `end_offset` ignored). Emptied, it is as if new (Kafka resets its creation time and
    rolling timestamp). Otherwise it keeps its first batch's timestamp and its times, and its
    largest timestamp is recomputed from its stored batches: a segment holding the log start
    offset may have lost its head to a deletion, whose bytes it still counts, as Kafka's file
    does, but whose timestamps it no longer knows."""
    size = segment.size_bytes - removed_bytes
    if size <= 0 or end_offset <= segment.base_offset:
        return Segment.new(base_offset=segment.base_offset, now_ms=now_ms)
    top = ti.NO_TIMESTAMP
    for raw in raws:
        _base, nxt, _size, max_ts = shape(raw)
        if nxt > end_offset:
            break
        top = max(top, max_ts)
    return Segment(
        base_offset=segment.base_offset,
        next_offset=end_offset,
        size_bytes=size,
        max_timestamp_ms=top,
        first_batch_timestamp_ms=segment.first_batch_timestamp_ms,
        created_ms=segment.created_ms,
        last_modified_ms=segment.last_modified_ms,
    )


def tiles(segments: Sequence[Segment], log_start_offset: int, log_end_offset: int) -> bool:
    """The store's invariant: segments in order, each ending at or before the next one's base
    (a gap between them is a compacted leader's, copied by a follower: Kafka's files leave the
    same gap), the last ending at the log end offset, the first starting at or below the log
    start offset. Segments wholly below the log start offset
    may precede the one holding it (rolled past it since it moved: Kafka keeps them too until the
    next retention run, ``deleteLogStartOffsetBreachedSegments``); their batches may be gone."""
    if not segments or segments[-1].next_offset != log_end_offset:
        return False
    if any(a.next_offset > b.base_offset for a, b in zip(segments, segments[1:], strict=False)):
        return False
    return segments[0].base_offset <= log_start_offset
