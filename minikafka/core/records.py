"""Record batches: the unit that is produced, stored, fetched and replicated byte for byte.

A batch is a fixed big-endian header followed by a msgpack payload:

    base_offset  int64   offset of the first record (set by the leader on append)
    leader_epoch int32   epoch of the leader that appended it (set by the leader on append)
    count        int32   number of records, >= 1
    producer_id  int64   idempotent producer id, -1 if none (KIP-98; set by the leader on append)
    producer_epoch int16 that producer's epoch, -1 if none
    base_sequence int32  sequence number of the first record, -1 if none
    payload_len  uint32  length of the payload in bytes
    crc          uint32  zlib.crc32 of the payload
    payload      msgpack list of records, each [timestamp_ms, key (bytes|None), value (bytes|None)]
                 (a None value is Kafka's null value: a tombstone, which compaction deletes by)

Like Kafka's RecordBatch, the leader rewrites only base offset and epoch (and the producer
fields a Produce entry carries, core/producer_state.py); followers store the batch bytes
unchanged, so replicas stay identical and every log end offset and every epoch
boundary falls on a batch boundary. Brokers check the header and CRC of every batch
(`iter_batches`); the leader also decodes a produced payload once (`check_payload`, as Kafka's
LogValidator does) so that a header whose count disagrees with its records is refused at produce:
offsets are assigned from the count, and a consumer decoding such a batch would fail forever.

Kafka's own clients produce RecordBatch v2 (core/record_batch_v2.py), and the log keeps those
byte for byte too: every function here takes either format and tells them apart as Kafka tells
its message formats apart, by the magic byte at offset 16. A native batch has the first byte of
its producer id there, 0x00 or 0xFF, since producer ids stay below 2**56 (core/producer_ids.py
allocates them from 0); a forged native batch with a larger id is read as v2 and fails the v2
CRC-32C, so it is refused, never misread.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgpack

from minikafka.core import record_batch_v2 as v2
from minikafka.errors import CorruptRecordError

HEADER = struct.Struct(">qiiqhiII")
HEADER_SIZE = HEADER.size  # 38
_BASE_AND_EPOCH = struct.Struct(">qi")
_PRODUCER = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence
_PRODUCER_AT = 16  # after base_offset, leader_epoch, count
NO_PRODUCER_ID = -1  # Kafka's RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1


class UnsupportedCompression(CorruptRecordError):
    """A RecordBatch v2 compressed with a codec this broker does not have (Kafka's
    UNSUPPORTED_COMPRESSION_TYPE, 76); named in the message."""

    def __init__(self, codec: object) -> None:
        super().__init__(
            f"records compressed with {codec}: not one of Kafka's codecs "
            "(none, gzip, snappy, lz4, zstd)"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes  # b"" for a Kafka client's null value (a tombstone); `null_value` says which
    headers: tuple[tuple[str, bytes | None], ...] = ()  # Kafka records' headers (KIP-82)
    null_value: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchView:
    """A checked batch inside a larger buffer; `raw` is the whole batch (header included)."""

    base_offset: int
    leader_epoch: int
    count: int
    raw: bytes
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def encode_payload(
    records: Iterable[tuple[int, bytes | None, bytes | None]],
) -> tuple[bytes, int]:
    """Pack (timestamp_ms, key, value) tuples into a payload; returns (payload, count)."""
    items = [[ts, key, value] for ts, key, value in records]
    return msgpack.packb(items, use_bin_type=True), len(items)


def make_batch(
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    payload, count = encode_payload(records)
    if count == 0:
        raise ValueError("a record batch holds at least one record")
    return (
        HEADER.pack(
            base_offset,
            leader_epoch,
            count,
            producer_id,
            producer_epoch,
            base_sequence,
            len(payload),
            zlib.crc32(payload),
        )
        + payload
    )


def restamp(
    batch: bytes,
    *,
    base_offset: int,
    leader_epoch: int,
    producer: tuple[int, int, int] | None = None,
) -> bytes:
    """The same batch with the leader's base offset and epoch (what a leader stores), and with
    `producer` = (producer_id, producer_epoch, base_sequence) when given (else unchanged)."""
    head = _BASE_AND_EPOCH.pack(base_offset, leader_epoch)
    if v2.is_v2(batch):
        # A v2 batch carries its producer fields inside its CRC, as its client wrote them.
        if producer is not None and producer != v2.peek_producer(batch):
            raise ValueError("a RecordBatch v2's producer fields are its client's")
        return v2.restamp(batch, base_offset=base_offset, leader_epoch=leader_epoch)
    if producer is None:
        return head + batch[_BASE_AND_EPOCH.size :]
    return (
        head
        + batch[_BASE_AND_EPOCH.size : _PRODUCER_AT]
        + _PRODUCER.pack(*producer)
        + batch[_PRODUCER_AT + _PRODUCER.size :]
    )


def peek_producer(raw: bytes) -> tuple[int, int, int]:
    """(producer_id, producer_epoch, base_sequence) of a batch known to be valid."""
    if v2.is_v2(raw):
        return v2.peek_producer(raw)
    return _PRODUCER.unpack_from(raw, _PRODUCER_AT)


def peek_header(raw: bytes) -> tuple[int, int, int]:
    """(base_offset, leader_epoch, count) of a batch known to be valid, e.g. one read from disk.
    The count of a v2 batch is its offset span, lastOffsetDelta + 1 (Kafka's
    RecordBatch.nextOffset), which is its record count as produced."""
    if v2.is_v2(raw):
        h = v2.read_header(raw)
        return h.base_offset, h.leader_epoch, h.last_offset_delta + 1
    base_offset, leader_epoch, count, _pid, _pe, _seq, _len, _crc = HEADER.unpack_from(raw, 0)
    return base_offset, leader_epoch, count


def peek_shape(raw: bytes) -> tuple[int, int]:
    """(base_offset, count) of one whole batch of either format, its header checked against its
    length (not its CRC): CorruptRecordError. What a store checks before it writes a batch."""
    if v2.is_v2(raw):
        h = v2.read_header(raw)
        if h.size != len(raw):
            raise CorruptRecordError(f"RecordBatch v2 of {len(raw)} bytes claims {h.size}")
        return h.base_offset, h.last_offset_delta + 1
    if len(raw) < HEADER_SIZE:
        raise CorruptRecordError(f"a batch of {len(raw)} bytes is shorter than its header")
    base, _epoch, count, _pid, _pe, _seq, length, _crc = HEADER.unpack_from(raw, 0)
    if count < 1 or length != len(raw) - HEADER_SIZE:
        raise CorruptRecordError(f"malformed batch header at offset {base}")
    return base, count


def only_record_batch_v2(blob: bytes) -> bool:
    """Whether every batch of `blob` (batches known to be valid, e.g. read from disk) is a
    RecordBatch v2: headers only, nothing copied (a Kafka fetch asks this of every response)."""
    view = memoryview(blob)
    pos, end = 0, len(blob)
    while pos < end:
        if not v2.is_v2(view, pos):
            return False
        pos += v2.read_header(view, pos).size
    return True


def iter_batches(blob: bytes, *, check_crc: bool = True) -> Iterator[BatchView]:
    """Split a concatenation of batches, checking each header (and CRC): CorruptRecordError."""
    view = memoryview(blob)
    pos, end = 0, len(blob)
    while pos < end:
        if v2.is_v2(view, pos):
            h = v2.read_header(view, pos)
            stop = pos + h.size
            if stop > end:
                raise CorruptRecordError(f"RecordBatch v2 at byte {pos} runs past the end")
            if check_crc:
                v2.check_crc(view, pos, h)
            yield BatchView(
                base_offset=h.base_offset,
                leader_epoch=h.leader_epoch,
                count=h.last_offset_delta + 1,
                raw=bytes(view[pos:stop]),
                producer_id=h.producer_id,
                producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence,
            )
            pos = stop
            continue
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError(f"truncated batch header at byte {pos}")
        base_offset, epoch, count, pid, p_epoch, seq, length, crc = HEADER.unpack_from(view, pos)
        if count < 1:
            raise CorruptRecordError(f"batch at byte {pos} claims {count} records")
        stop = pos + HEADER_SIZE + length
        if stop > end:
            raise CorruptRecordError(
                f"batch at byte {pos} claims {length} payload bytes past the end"
            )
        if check_crc and zlib.crc32(view[pos + HEADER_SIZE : stop]) != crc:
            raise CorruptRecordError(f"batch at byte {pos} fails its CRC")
        yield BatchView(
            base_offset=base_offset,
            leader_epoch=epoch,
            count=count,
            raw=bytes(view[pos:stop]),
            producer_id=pid,
            producer_epoch=p_epoch,
            base_sequence=seq,
        )
        pos = stop


def check_payload(batch: BatchView) -> None:
    """CorruptRecordError unless the payload is exactly `count` records of
    [timestamp_ms (int), key (bytes or None), value (bytes or None)], as `decode_records` reads
    them.

    Decoded as tuples (msgpack's use_list=False: arrays are tuples, about half the decoding
    cost of lists) and checked with exact types, bool counting as an int as isinstance would:
    msgpack yields no other subclass. This runs on every produced batch on the leader.

    A RecordBatch v2 is decoded whole, as Kafka's LogValidator validates every record of a
    produced batch (decompressing it if need be): its records must be exactly its offsets
    0..lastOffsetDelta, one each."""
    if v2.is_v2(batch.raw):
        h = v2.read_header(batch.raw)
        if h.compression not in v2.SUPPORTED_COMPRESSION:
            raise UnsupportedCompression(v2.COMPRESSION_NAMES.get(h.compression, h.compression))
        v2.validate_records(batch.raw, h)
        return
    try:
        items = msgpack.unpackb(batch.raw[HEADER_SIZE:], raw=False, use_list=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CorruptRecordError(f"batch payload is not msgpack ({exc})") from exc
    if type(items) is not tuple:
        raise CorruptRecordError("batch payload is not a list of records")
    if len(items) != batch.count:
        raise CorruptRecordError(
            f"batch header says {batch.count} records, its payload holds {len(items)}"
        )
    for i, item in enumerate(items):
        if type(item) is tuple and len(item) == 3:
            ts, key, value = item
            if (
                (type(ts) is int or type(ts) is bool)
                and (key is None or type(key) is bytes)
                and (value is None or type(value) is bytes)
            ):
                continue
        raise CorruptRecordError(
            f"record {i} of the batch: expected [timestamp_ms, key or None, value or None]"
        )


def decode_records(batch: BatchView) -> list[Record]:
    """The records of one batch, with their offsets (consumers only; brokers never decode)."""
    if v2.is_v2(batch.raw):
        return [
            Record(
                offset=batch.base_offset + r.offset_delta,
                timestamp_ms=r.timestamp_ms,
                key=r.key,
                value=b"" if r.value is None else r.value,
                headers=r.headers,
                null_value=r.value is None,
            )
            for r in v2.decode_records(batch.raw)
        ]
    try:
        items = msgpack.unpackb(batch.raw[HEADER_SIZE:], raw=False)
        records = [
            Record(
                offset=batch.base_offset + i,
                timestamp_ms=ts,
                key=key,
                value=b"" if value is None else value,
                null_value=value is None,
            )
            for i, (ts, key, value) in enumerate(items)
        ]
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CorruptRecordError(
            f"batch at offset {batch.base_offset}: bad payload ({exc})"
        ) from exc
    if len(records) != batch.count:
        raise CorruptRecordError(
            f"batch at offset {batch.base_offset} holds {len(records)} records, header says {batch.count}"
        )
    return records
