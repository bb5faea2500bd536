"""Kafka's RecordBatch v2 (magic 2, KIP-98): the batches Kafka's own clients produce and fetch.

Layout (org.apache.kafka.common.record.DefaultRecordBatch), big-endian:

    baseOffset           int64  \\
    batchLength          int32   | set or read by the broker; outside the CRC, so a leader
    partitionLeaderEpoch int32   | restamps them without recomputing it
    magic                int8    |  (2)
    crc                  uint32 /  CRC-32C of everything after it
    attributes           int16     bits 0-2 compression, 3 timestamp type, 4 transactional,
                                   5 control, 6 delete horizon
    lastOffsetDelta      int32
    baseTimestamp        int64
    maxTimestamp         int64
    producerId           int64
    producerEpoch        int16
    baseSequence         int32
    recordCount          int32
    records              recordCount x DefaultRecord, compressed as a whole if attributes say so

    DefaultRecord: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
                   key (varint length, -1 null), value (varint length, -1 null),
                   headers (varint count, each key varint length + bytes, value likewise)

minikafka's log holds these batches byte for byte beside its own (core/records.py): the magic
byte at offset 16 tells them apart, as it tells Kafka's message formats apart. Brokers read the
header only (and the CRC); records are decoded by consumers and tools, and by the Kafka listener
when it converts a native batch for a Kafka consumer.

Compressed records (core/compression.py: gzip, snappy, lz4, zstd) are validated at produce as
Kafka's LogValidator does, from a stream of bounded chunks (`validate_records`, Kafka's
DefaultRecordBatch.compressedIterator): refused at the first bad record, in memory of a few
chunks whatever the batch decompresses to, and never past `compression.decompressed_limit`.
Consumers decompress within the same bound (`records_bytes`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import crc32c

from minikafka.core import compression as codecs
from minikafka.errors import CorruptRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
MAGIC = 2
MAGIC_OFFSET = 16
CRC_START = 21  # attributes: the CRC covers attributes .. end
LENGTH_START = 12  # batchLength counts the bytes after itself
_BASE_AND_EPOCH = struct.Struct(">q")  # baseOffset at 0; partitionLeaderEpoch at 12
_EPOCH = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhi")
_PRODUCER_AT = 43

COMPRESSION_MASK = 0x07
NONE, GZIP, SNAPPY, LZ4, ZSTD = codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD
COMPRESSION_NAMES = codecs.NAMES
SUPPORTED_COMPRESSION = codecs.CODECS  # Kafka's CompressionType, all of it
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40  # KIP-534: baseTimestamp holds the delete horizon


@dataclass(frozen=True, slots=True, kw_only=True)
class V2Header:
    base_offset: int
    batch_length: int
    leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LENGTH_START + self.batch_length

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK


@dataclass(frozen=True, slots=True, kw_only=True)
class V2Record:
    offset_delta: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def is_v2(buf: bytes | memoryview, pos: int = 0) -> bool:
    """Whether the batch at `pos` is a RecordBatch v2. A native batch has the first byte of its
    producer id there, 0x00 or 0xFF (core/records.py keeps producer ids below 2**56)."""
    return len(buf) > pos + MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] == MAGIC


def read_header(buf: bytes | memoryview, pos: int = 0) -> V2Header:
    """The header at `pos`, checked for shape (not the CRC): CorruptRecordError."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"truncated RecordBatch v2 header at byte {pos}")
    (base, length, epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, p_epoch, seq,
     count) = HEADER.unpack_from(buf, pos)  # fmt: skip
    if magic != MAGIC:
        raise CorruptRecordError(f"batch at byte {pos} has magic {magic}, expected {MAGIC}")
    if length < HEADER_SIZE - LENGTH_START:
        raise CorruptRecordError(f"batch at byte {pos} claims a length of {length} bytes")
    if count < 1 or last_delta < 0:
        raise CorruptRecordError(
            f"batch at byte {pos} claims {count} records, last offset delta {last_delta}"
        )
    return V2Header(
        base_offset=base,
        batch_length=length,
        leader_epoch=epoch,
        crc=crc,
        attributes=attributes,
        last_offset_delta=last_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=pid,
        producer_epoch=p_epoch,
        base_sequence=seq,
        record_count=count,
    )


def check_crc(buf: bytes | memoryview, pos: int, header: V2Header) -> None:
    stop = pos + header.size
    if crc32c.crc32c(buf[pos + CRC_START : stop]) != header.crc:
        raise CorruptRecordError(f"RecordBatch v2 at byte {pos} fails its CRC-32C")


def restamp(batch: bytes, *, base_offset: int, leader_epoch: int) -> bytes:
    """The batch with the leader's base offset and epoch, both outside the CRC (Kafka's
    LogValidator assigns offsets in place the same way)."""
    return (
        _BASE_AND_EPOCH.pack(base_offset)
        + batch[8:LENGTH_START]
        + _EPOCH.pack(leader_epoch)
        + batch[MAGIC_OFFSET:]
    )


def peek_producer(raw: bytes) -> tuple[int, int, int]:
    """(producer_id, producer_epoch, base_sequence) of a batch known to be valid."""
    return _PRODUCER.unpack_from(raw, _PRODUCER_AT)


# ---------------------------------------------------------------------------- records


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's ByteUtils.readVarint/readVarlong) at pos -> (value, new pos)."""
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("record ends inside a varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def _bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptRecordError(f"a {n}-byte field runs past its record")
    return buf[pos : pos + n], pos + n


def records_bytes(raw: bytes, header: V2Header) -> bytes:
    """The records section, decompressed within compression.decompressed_limit:
    CorruptRecordError (DecompressedTooLarge past the bound)."""
    body = memoryview(raw)[HEADER_SIZE : header.size]
    if header.compression == NONE:
        return bytes(body)
    return codecs.decompress(header.compression, body)


def decode_records(raw: bytes) -> list[V2Record]:
    """Every record of the batch `raw` (header checked, CRC not: see check_crc)."""
    header = read_header(raw)
    body = records_bytes(raw, header)
    out: list[V2Record] = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = _varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise CorruptRecordError(f"record of {length} bytes runs past its batch")
        pos += 1  # record attributes (unused, as in Kafka)
        ts_delta, pos = _varint(body, pos)
        offset_delta, pos = _varint(body, pos)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        n_headers, pos = _varint(body, pos)
        headers = []
        for _h in range(max(n_headers, 0)):
            hkey, pos = _bytes(body, pos)
            hvalue, pos = _bytes(body, pos)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hvalue))
        if pos != end:
            raise CorruptRecordError(f"record of {length} bytes holds {length + pos - end}")
        out.append(
            V2Record(
                offset_delta=offset_delta,
                timestamp_ms=header.base_timestamp + ts_delta,
                key=key,
                value=value,
                headers=tuple(headers),
            )
        )
    if pos != len(body):
        raise CorruptRecordError(f"{len(body) - pos} bytes after the batch's last record")
    return out


def validate_records(raw: bytes, header: V2Header) -> None:
    """What Kafka's LogValidator checks of each record of a produced batch, without building
    them (this runs on every batch a Kafka client produces; `decode_records` is 4-5 x slower):
    exactly `record_count` records, each as long as it says, with offset deltas 0, 1, 2, ...
    up to lastOffsetDelta, and nothing after the last. Key, value and headers are only
    skipped (their lengths bounded by the record's). CorruptRecordError otherwise.

    Compressed records are walked from a stream of chunks (`_validate_stream`)."""
    if header.compression != NONE:
        body = memoryview(raw)[HEADER_SIZE : header.size]
        _validate_stream(_Stream(codecs.chunks(header.compression, body)), header)
        return
    body = raw[HEADER_SIZE : header.size]
    end, pos, expected = len(body), 0, 0
    varint = _varint
    for expected in range(header.record_count):
        # The record's length: one or two varint bytes inline (records under 8 KiB), else
        # _varint. (pos < end here: a batch cut short fails on its own below.)
        first = body[pos] if pos < end else 0x80
        if first < 0x80:
            length, pos = (first >> 1) ^ -(first & 1), pos + 1
        elif pos + 1 < end and body[pos + 1] < 0x80:
            raw = (first & 0x7F) | (body[pos + 1] << 7)
            length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            length, pos = varint(body, pos)
        stop = pos + length
        if length < 3 or stop > end:
            raise CorruptRecordError(f"record {expected} of {length} bytes runs past its batch")
        # The timestamp delta is skipped by its bytes (the last has the high bit clear); then
        # the offset delta is compared in its encoded form (zigzag 2 x delta: one byte below
        # 64, two below 8192). Inline fast paths: this walk is most of the broker's CPU for a
        # Kafka produce (1000 records: 0.97 ms with _varint calls, 0.6 ms so).
        at = pos + 1  # after the record's attributes
        while at < stop and body[at] & 0x80:
            at += 1
        at += 1
        z = 2 * expected
        if z < 0x80 and at < stop and body[at] == z:
            after = at + 1
        elif 0x80 <= z < 0x4000 and at + 1 < stop and body[at] == (z & 0x7F) | 0x80:
            after = at + 2 if body[at + 1] == z >> 7 else -1
        else:
            after = -1
        if after < 0:
            delta, after = varint(body, at)
            if delta != expected:
                raise CorruptRecordError(f"record {expected} has offset delta {delta}")
        _check_fields(body, after, stop, expected)
        pos = stop
    if pos != end or expected != header.last_offset_delta:
        raise CorruptRecordError(
            f"RecordBatch v2 of {header.record_count} records: last offset delta "
            f"{header.last_offset_delta}, {end - pos} bytes after the last record"
        )


def _check_fields(body: bytes, pos: int, stop: int, index: int) -> None:
    """Record `index`'s key, value and headers, from `pos` (after its offset delta): every
    length in bounds and the record ending exactly at `stop` (DefaultRecord.readFrom's checks,
    which Kafka's LogValidator runs on each record). Once, only the record's own
    length was checked: a record whose fields did not add up was stored, and every consumer's
    decode of it failed, the group coordinator's load of `__consumer_offsets` included.
    Lengths under 8 KiB are read inline: this runs for every produced record."""
    for what in ("key", "value"):
        first = body[pos] if pos < stop else 0x80
        if first < 0x80:
            n, pos = (first >> 1) ^ -(first & 1), pos + 1
        elif pos + 1 < stop and body[pos + 1] < 0x80:
            z = (first & 0x7F) | (body[pos + 1] << 7)
            n, pos = (z >> 1) ^ -(z & 1), pos + 2
        else:
            n, pos = _varint(body, pos)
        if n < -1:
            raise CorruptRecordError(f"record {index} has a {what} of {n} bytes")
        if n > 0:
            pos += n
        if pos > stop:
            raise CorruptRecordError(f"record {index}'s {what} runs past the record")
    if pos + 1 == stop and body[pos] == 0:  # no headers, the common case
        return
    count, pos = _varint(body, pos)
    if not 0 <= count <= stop - pos:
        raise CorruptRecordError(f"record {index} claims {count} headers")
    for _ in range(count):
        n, pos = _varint(body, pos)
        if n < 0:
            raise CorruptRecordError(f"record {index} has a header key of {n} bytes")
        pos += n
        n, pos = _varint(body, pos)
        if n < -1:
            raise CorruptRecordError(f"record {index} has a header value of {n} bytes")
        pos += max(n, 0)
        if pos > stop:
            raise CorruptRecordError(f"record {index}'s headers run past the record")
    if pos != stop:
        raise CorruptRecordError(f"record {index}'s fields end {stop - pos} bytes before it")


def _put_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zigzag
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _put_varint(out, -1)
        return
    _put_varint(out, len(data))
    out += data


def record_bytes(
    timestamp_delta: int, offset_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One DefaultRecord without headers, its length varint first."""
    rec = bytearray(b"\x00")  # record attributes
    _put_varint(rec, timestamp_delta)
    _put_varint(rec, offset_delta)
    _put_bytes(rec, key)
    _put_bytes(rec, value)
    _put_varint(rec, 0)  # no headers
    out = bytearray()
    _put_varint(out, len(rec))
    return bytes(out + rec)


def build(
    records: Sequence[tuple[int, bytes | None, bytes | None]]
    | Iterable[tuple[int, bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = NONE,
) -> bytes:
    """A RecordBatch v2 of (timestamp_ms, key, value) records, offsets 0.. (DefaultRecordBatch's
    writer): for down-converting native batches and for tests."""
    codec = compression
    items = list(records)
    if not items:
        raise ValueError("a record batch holds at least one record")
    base_ts = items[0][0]
    body = bytearray()
    for delta, (ts, key, value) in enumerate(items):
        body += record_bytes(ts - base_ts, delta, key, value)
    body = codecs.compress(codec, bytes(body))  # ValueError for an unknown one
    after_crc = struct.pack(
        ">hiqqqhii",
        codec,
        len(items) - 1,
        base_ts,
        max(ts for ts, _k, _v in items),
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    ) + bytes(body)
    head = struct.pack(
        ">qiibI",
        base_offset,
        HEADER_SIZE - LENGTH_START + len(body),
        leader_epoch,
        MAGIC,
        crc32c.crc32c(after_crc),
    )
    return head + after_crc


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record of a batch as the cleaner sees it: its fields and its bytes (length varint
    included), copied verbatim into a rebuilt batch."""

    offset_delta: int
    timestamp_ms: int
    key: bytes | None
    null_value: bool
    data: bytes


_ZIGZAG = [(b >> 1) ^ -(b & 1) for b in range(0x80)]  # one-byte varints, decoded


def raw_records(raw: bytes) -> tuple[V2Header, list[RawRecord]]:
    """The header and every record of the batch `raw`, each with its own bytes. The cleaner
    reads every record of a log with this, twice a pass: one-byte varints (most offset
    deltas, key and value lengths) are decoded inline, without `_varint`'s call."""
    header = read_header(raw)
    body = records_bytes(raw, header)
    out: list[RawRecord] = []
    pos, size, base_ts = 0, len(body), header.base_timestamp
    for _ in range(header.record_count):
        start = pos
        length, pos = _varint(body, pos)
        end = pos + length
        if length < 0 or end > size:
            raise CorruptRecordError(f"record of {length} bytes runs past its batch")
        pos += 1  # record attributes
        if (b := body[pos]) < 0x80:
            ts_delta, pos = _ZIGZAG[b], pos + 1
        else:
            ts_delta, pos = _varint(body, pos)
        if (b := body[pos]) < 0x80:
            offset_delta, pos = _ZIGZAG[b], pos + 1
        else:
            offset_delta, pos = _varint(body, pos)
        if (b := body[pos]) < 0x80:
            key_len, pos = _ZIGZAG[b], pos + 1
        else:
            key_len, pos = _varint(body, pos)
        key = None if key_len < 0 else body[pos : pos + key_len]
        pos += max(key_len, 0)
        if pos >= end:
            raise CorruptRecordError(f"record of {length} bytes ends inside its key")
        null_value = body[pos] == 0x01  # the varint -1 (a null value) is the byte 0x01
        out.append(RawRecord(offset_delta, base_ts + ts_delta, key, null_value, body[start:end]))
        pos = end
    return header, out


def rebuilt(raw: bytes, header: V2Header, kept: Sequence[RawRecord]) -> bytes:
    """The batch `raw` holding only `kept` (some of its records, in order), as Kafka's
    MemoryRecords.filterTo writes a cleaned batch: same base offset, leader epoch, producer
    fields, attributes (the delete-horizon bit cleared) and last offset delta, so offsets and
    sequence numbers keep their meaning; the records' bytes are copied verbatim (their deltas
    stay relative to the unchanged base timestamp) and compressed again with the same codec;
    the max timestamp is the kept records' largest (unchanged under LogAppendTime)."""
    if not kept:
        raise ValueError("a cleaned batch keeps at least one record")
    body = codecs.compress(header.compression, b"".join(r.data for r in kept))
    attributes = header.attributes & ~DELETE_HORIZON
    max_ts = (
        header.max_timestamp
        if header.attributes & LOG_APPEND_TIME
        else max(r.timestamp_ms for r in kept)
    )
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            header.last_offset_delta,
            header.base_timestamp,
            max_ts,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            len(kept),
        )
        + body
    )
    head = struct.pack(
        ">qiibI",
        header.base_offset,
        HEADER_SIZE - LENGTH_START + len(body),
        header.leader_epoch,
        MAGIC,
        crc32c.crc32c(after_crc),
    )
    return head + after_crc


# ---------------------------------------------------------------------------- streamed records


class _Stream:
    """Decompressed bytes read from an iterator of chunks, holding at most the unread rest of
    one chunk and the next (Kafka's ChunkedBytesStream); skipped bytes are never held."""

    __slots__ = ("_pieces", "base", "buf", "pos")

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self.buf = b""
        self.pos = 0
        self.base = 0  # the stream offset of buf[0]

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def fill(self, n: int) -> bool:
        """At least `n` unread bytes in buf (False when the stream ends first)."""
        while len(self.buf) - self.pos < n:
            piece = next(self._pieces, None)
            if piece is None:
                return False
            self.buf = self.buf[self.pos :] + piece
            self.base += self.pos
            self.pos = 0
        return True

    def varint(self) -> int:
        self.fill(10)  # a varint's most; fewer at the stream's end
        value, self.pos = _varint(self.buf, self.pos)
        return value

    def skip(self, n: int) -> bool:
        """Pass `n` bytes (False when the stream ends first)."""
        left = len(self.buf) - self.pos
        while n > left:
            n -= left
            piece = next(self._pieces, None)
            if piece is None:
                return False
            self.base += len(self.buf)
            self.buf, self.pos, left = piece, 0, len(piece)
        self.pos += n
        return True

    def at_end(self) -> bool:
        return not self.fill(1)


def _check_stream_fields(stream: _Stream, stop: int, index: int) -> None:
    """`_check_fields` on a stream: key, value and headers skipped by their lengths, never
    held, and the record ending exactly at stream offset `stop`."""

    def skip(n: int, what: str) -> None:
        if stream.offset + n > stop or not stream.skip(n):
            raise CorruptRecordError(f"record {index}'s {what} runs past the record")

    for what in ("key", "value"):
        n = stream.varint()
        if n < -1:
            raise CorruptRecordError(f"record {index} has a {what} of {n} bytes")
        skip(max(n, 0), what)
    count = stream.varint()
    if not 0 <= count <= stop - stream.offset:
        raise CorruptRecordError(f"record {index} claims {count} headers")
    for _ in range(count):
        n = stream.varint()
        if n < 0:
            raise CorruptRecordError(f"record {index} has a header key of {n} bytes")
        skip(n, "header key")
        n = stream.varint()
        if n < -1:
            raise CorruptRecordError(f"record {index} has a header value of {n} bytes")
        skip(max(n, 0), "header value")
    if stream.offset != stop:
        raise CorruptRecordError(f"record {index}'s fields do not end where it does")


def _validate_stream(stream: _Stream, header: V2Header) -> None:
    """validate_records' checks, record by record as the chunks come: refused at the first bad
    record (Kafka's LogValidator over DefaultRecordBatch.compressedIterator)."""
    for expected in range(header.record_count):
        if not stream.fill(1):
            raise CorruptRecordError(
                f"the batch claims {header.record_count} records and holds {expected}"
            )
        length = stream.varint()
        if length < 3:
            raise CorruptRecordError(f"record {expected} of {length} bytes is too short")
        start = stream.offset
        if not stream.fill(min(length, 21)):  # attributes and two varints, at most
            raise CorruptRecordError(f"record {expected} of {length} bytes runs past its batch")
        stream.pos += 1  # record attributes
        stream.varint()  # timestamp delta
        delta = stream.varint()
        used = stream.offset - start
        if used > length:
            raise CorruptRecordError(f"record {expected} of {length} bytes holds more")
        if delta != expected:
            raise CorruptRecordError(f"record {expected} has offset delta {delta}")
        _check_stream_fields(stream, start + length, expected)
    if header.record_count - 1 != header.last_offset_delta or not stream.at_end():
        raise CorruptRecordError(
            f"RecordBatch v2 of {header.record_count} records: last offset delta "
            f"{header.last_offset_delta}, or bytes after the last record"
        )
