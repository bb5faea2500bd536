"""ListOffsets by timestamp (KIP-79) and MAX_TIMESTAMP (KIP-734): the decisions, pure.

Kafka answers "the earliest offset whose record timestamp is >= T" with a time index per
segment (`TimeIndex`): entries (the largest timestamp seen so far, its offset), appended only
when that largest timestamp grows, so the entries are sorted by timestamp AND by offset even when
record timestamps are not monotonic. `LogSegment.findOffsetByTimestamp` looks the target up in
it, then `FileRecords.searchForTimestamp` scans forward for the first batch whose max timestamp
is >= T and, in it, the first record whose timestamp is >= T and whose offset is >= the log
start offset. `UnifiedLog.fetchOffsetByTimestamp` answers MAX_TIMESTAMP (-3) with the record
holding the largest timestamp (the first such record: the index only grows on a strictly larger
one), and `Partition.fetchOffsetForTimestamp` drops an answer at or past the last fetchable
offset (a consumer's high watermark), which the client sees as offset -1, timestamp -1.

Here the index has one entry per batch that raises the log's largest timestamp, keyed
(timestamp, base offset) (storage/time_index.py keeps it in LMDB). So the first entry whose
timestamp is >= T names exactly the first batch whose own max timestamp is >= T: every batch
before it has a max at most the previous entry's timestamp, which is < T. Kafka indexes only
every `index.interval.bytes` and scans from there; one entry per growing batch keeps a lookup
to one B-tree descent and one batch, whatever the log's size.

Timestamps: a RecordBatch v2 carries its max timestamp in its header (and, with the
LogAppendTime bit, that timestamp is every record's: Kafka's DefaultRecordBatch); a native
batch (core/records.py) carries one per record, so its max is read from its payload.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgpack

from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import HEADER, HEADER_SIZE, peek_header
from minikafka.errors import CorruptRecordError

NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP: below every indexed timestamp
LOG_APPEND_TIME = 0x08  # DefaultRecordBatch.TIMESTAMP_TYPE_MASK: every record has max_timestamp
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TimestampAndOffset:
    """Kafka's FileRecords.TimestampAndOffset: a record's timestamp and offset, and the leader
    epoch of the batch holding it."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class IndexEntry:
    timestamp: int  # the log's largest record timestamp up to and including this batch
    base_offset: int  # the batch where that largest timestamp first appeared


def _int64(ts: int) -> int:
    """A native record may hold any msgpack int; Kafka's timestamps are int64."""
    return min(max(int(ts), _INT64_MIN), _INT64_MAX)


def _native_timestamps(raw: bytes) -> list[int]:
    """The record timestamps of a native batch, as they are (ints: core/records.py)."""
    try:
        items = msgpack.unpackb(raw[HEADER_SIZE:], raw=False, use_list=False)
        return [item[0] for item in items]
    except (ValueError, TypeError, IndexError, msgpack.UnpackException) as exc:
        raise CorruptRecordError(f"batch payload is not a list of records ({exc})") from exc


def batch_max_timestamp(raw: bytes) -> int:
    """The largest record timestamp of a batch (a v2 batch's header says it; Kafka's
    RecordBatch.maxTimestamp). CorruptRecordError if a native payload does not decode."""
    if v2.is_v2(raw):
        return v2.read_header(raw).max_timestamp
    try:  # one decode per appended batch on every replica: no per-record work beyond max()
        return _int64(max(_native_timestamps(raw), default=NO_TIMESTAMP))
    except TypeError as exc:
        raise CorruptRecordError(f"a record timestamp is not an integer ({exc})") from exc


def batch_records(raw: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of a batch, in offset order."""
    if v2.is_v2(raw):
        h = v2.read_header(raw)
        append_time = bool(h.attributes & LOG_APPEND_TIME)
        return [
            (h.base_offset + r.offset_delta, h.max_timestamp if append_time else r.timestamp_ms)
            for r in v2.decode_records(raw)
        ]
    base = HEADER.unpack_from(raw, 0)[0]
    return [(base + i, _int64(ts)) for i, ts in enumerate(_native_timestamps(raw))]


def _epoch(raw: bytes) -> int:
    return v2.read_header(raw).leader_epoch if v2.is_v2(raw) else HEADER.unpack_from(raw, 0)[1]


def first_at_or_after(raw: bytes, target: int, start_offset: int) -> TimestampAndOffset | None:
    """The batch's first record with timestamp >= target and offset >= start_offset, or None
    (Kafka's FileRecords.searchForTimestamp, inside one batch)."""
    for offset, ts in batch_records(raw):
        if ts >= target and offset >= start_offset:
            return TimestampAndOffset(timestamp=ts, offset=offset, leader_epoch=_epoch(raw))
    return None


def search_batches(
    raws: Iterable[bytes], target: int, start_offset: int
) -> TimestampAndOffset | None:
    """FileRecords.searchForTimestamp: the first record with timestamp >= target and offset >=
    start_offset among `raws` (batches in offset order), looking only into the batches whose
    max timestamp is >= target. Stops at the first hit: reads as few batches as it can."""
    for raw in raws:
        if batch_max_timestamp(raw) >= target:
            found = first_at_or_after(raw, target, start_offset)
            if found is not None:
                return found
    return None


def max_timestamp_record(raw: bytes) -> TimestampAndOffset | None:
    """The first record of the batch holding its max timestamp (RecordBatch.offsetOfMaxTimestamp,
    as Kafka's MAX_TIMESTAMP answer reads it), or None for a batch with no timestamp."""
    records = batch_records(raw)
    if not records:
        return None
    top = max(ts for _o, ts in records)
    if top <= NO_TIMESTAMP:
        return None
    offset = next(o for o, ts in records if ts == top)
    return TimestampAndOffset(timestamp=top, offset=offset, leader_epoch=_epoch(raw))


def new_entries(batches: Iterable[tuple[int, int]], largest: int) -> list[IndexEntry]:
    """The index entries that appending `batches` ((base offset, max timestamp) in offset order)
    adds to a log whose largest timestamp so far is `largest` (NO_TIMESTAMP when none): one for
    each batch that raises it (Kafka's TimeIndex.maybeAppend appends only a larger timestamp)."""
    out = []
    for base, max_ts in batches:
        if max_ts > largest:
            out.append(IndexEntry(timestamp=max_ts, base_offset=base))
            largest = max_ts
    return out


def entries_of(raws: Iterable[bytes]) -> list[IndexEntry]:
    """The whole index of a log (a rebuild): `new_entries` over every batch."""
    return new_entries(((peek_header(r)[0], safe_max_timestamp(r)) for r in raws), NO_TIMESTAMP)


def safe_max_timestamp(raw: bytes) -> int:
    """`batch_max_timestamp`, NO_TIMESTAMP (never indexed) for a payload that does not decode:
    a replica stores what its leader checked, and the index must never refuse an append."""
    try:
        return batch_max_timestamp(raw)
    except CorruptRecordError:
        return NO_TIMESTAMP


def pick(entries: Sequence[IndexEntry], target: int) -> IndexEntry | None:
    """The first entry whose timestamp is >= target (entries sorted as the index keeps them):
    its batch is the first whose max timestamp is >= target. None: no record reaches target."""
    i = bisect.bisect_left(entries, IndexEntry(timestamp=target, base_offset=-1))
    return entries[i] if i < len(entries) else None


def truncated(entries: Sequence[IndexEntry], log_end_offset: int) -> list[IndexEntry]:
    """The entries left once the batches from `log_end_offset` on are gone (TimeIndex.truncateTo):
    an entry's timestamp depends only on the batches up to its own."""
    return [e for e in entries if e.base_offset < log_end_offset]


def fetchable(found: TimestampAndOffset | None, end_offset: int) -> TimestampAndOffset | None:
    """Partition.fetchOffsetForTimestamp: an answer at or past the last offset the asker may
    read (a consumer's high watermark, a replica's log end) is no answer."""
    return found if found is not None and found.offset < end_offset else None
