"""Kafka's RecordBatch v2 (core/record_batch_v2.py), checked against kafka-python's own
implementation (kafka.record.default_records) in both directions."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.core import record_batch_v2 as v2
from minikafka.errors import CorruptRecordError

RECORDS = [(1_700_000_000_000 + i, None if i % 3 else b"k%d" % i, b"v" * i) for i in range(1, 40)]


def kafka_python_batch(compression: int = 0, *, pid: int = -1, seq: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, batch_size=1 << 30,
    )  # fmt: skip
    for i, (ts, key, value) in enumerate(RECORDS):
        builder.append(i, ts, key, value, [("h", b"x")] if i == 0 else [])
    return bytes(builder.build())


ALL_CODECS = [v2.NONE, v2.GZIP, v2.SNAPPY, v2.LZ4, v2.ZSTD]


@pytest.mark.parametrize("compression", ALL_CODECS)
def test_we_read_what_kafka_python_writes(compression):
    raw = kafka_python_batch(compression, pid=7, seq=40)
    assert v2.is_v2(raw)
    header = v2.read_header(raw)
    v2.check_crc(raw, 0, header)
    assert header.size == len(raw)
    assert (header.record_count, header.last_offset_delta) == (len(RECORDS), len(RECORDS) - 1)
    assert header.compression == compression
    assert v2.peek_producer(raw) == (7, 0, 40)
    records = v2.decode_records(raw)
    assert [(r.offset_delta, r.timestamp_ms, r.key, r.value) for r in records] == [
        (i, ts, key, value) for i, (ts, key, value) in enumerate(RECORDS)
    ]
    assert records[0].headers == (("h", b"x"),)


@pytest.mark.parametrize("compression", ALL_CODECS)
def test_kafka_python_reads_what_we_write(compression):
    raw = v2.build(RECORDS, base_offset=100, leader_epoch=3, compression=compression)
    batch = DefaultRecordBatch(raw)
    assert batch.validate_crc()
    assert batch.base_offset == 100 and batch.magic == 2
    got = [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    assert got == [(100 + i, ts, k, v) for i, (ts, k, v) in enumerate(RECORDS)]


def test_restamping_keeps_the_crc_valid():
    raw = v2.build(RECORDS)
    stamped = v2.restamp(raw, base_offset=5_000_000_000, leader_epoch=9)
    header = v2.read_header(stamped)
    assert (header.base_offset, header.leader_epoch) == (5_000_000_000, 9)
    v2.check_crc(stamped, 0, header)  # base offset and epoch are outside the CRC
    assert stamped[v2.MAGIC_OFFSET :] == raw[v2.MAGIC_OFFSET :]


def test_a_flipped_byte_fails_the_crc():
    raw = bytearray(v2.build(RECORDS))
    raw[-5] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        v2.check_crc(bytes(raw), 0, v2.read_header(bytes(raw)))


@pytest.mark.parametrize(
    ("cut", "match"),
    [(30, "truncated RecordBatch v2 header"), (-3, "past its|ends inside|holds")],
)
def test_truncated_batches_are_refused(cut, match):
    raw = v2.build(RECORDS)[:cut]
    with pytest.raises(CorruptRecordError, match=match):
        header = v2.read_header(raw)
        v2.decode_records(raw[: header.size])


def test_a_codec_kafka_lacks_is_named():
    raw = bytearray(v2.build(RECORDS))
    raw[22] = 5  # attributes' low byte: CompressionType has ids 0-4
    with pytest.raises(CorruptRecordError, match="unknown compression type 5"):
        v2.decode_records(bytes(raw))


def test_a_native_batch_is_not_v2():
    from minikafka.core.records import make_batch

    assert not v2.is_v2(make_batch([(1, None, b"x")]))
    assert not v2.is_v2(make_batch([(1, None, b"x")], producer_id=5))


def _offset_delta_at(raw: bytes, index: int) -> int:
    """Where record `index`'s offset delta starts in `raw` (uncompressed, walked as Kafka's
    DefaultRecord.readFrom reads it)."""
    body, pos = raw[v2.HEADER_SIZE :], 0
    for i in range(index + 1):
        length, start = v2._varint(body, pos)
        _ts, at = v2._varint(body, start + 1)
        if i == index:
            return v2.HEADER_SIZE + at
        pos = start + length
    raise AssertionError


@pytest.mark.parametrize("index", [0, 5, 63, 64, 100, 127, 199, 8191, 8192, 8300])
def test_validate_records_catches_a_wrong_offset_delta_at_any_width(index):
    """Offset deltas of 64 and up take two varint bytes, of 8192 and up three; the fast paths
    for short deltas must not accept a longer one that starts with the same bytes."""
    raw = v2.build([(1_700_000_000_000 + i, None, b"v%d" % i) for i in range(8400)])
    v2.validate_records(raw, v2.read_header(raw))
    at = _offset_delta_at(raw, index)
    bad = bytearray(raw)
    if index < 64:
        bad[at] = 2 * (index + 1)  # a one-byte delta, off by one
    elif index < 8192:
        bad[at + 1] += 1  # the second byte: the delta grows by 64
    else:
        bad[at + 2] += 1  # the third byte: the delta grows by 8192
    with pytest.raises(CorruptRecordError, match="offset delta"):
        v2.validate_records(bytes(bad), v2.read_header(bytes(bad)))


@pytest.mark.parametrize("size", [10, 100, 10_000])  # record lengths of 1, 2 and 3 varint bytes
def test_validate_records_reads_every_record_length_width(size):
    raw = v2.build([(1_700_000_000_000, None, b"x" * size) for _ in range(3)])
    v2.validate_records(raw, v2.read_header(raw))
    bad = bytearray(raw)
    bad[v2.HEADER_SIZE] ^= 0x02  # the first record's length, changed by one (zigzag)
    with pytest.raises(CorruptRecordError):
        v2.validate_records(bytes(bad), v2.read_header(bytes(bad)))


# --- each record's fields, not only its length ------------------------------------------------


def _zz(value: int) -> bytes:
    out = bytearray()
    v2._put_varint(out, value)
    return bytes(out)


KEY, VALUE, NO_HEADERS = b"\x02k", b"\x02v", b"\x00"  # zigzag varint lengths, then bytes


def _record(*, key: bytes = KEY, value: bytes = VALUE, headers: bytes = NO_HEADERS) -> bytes:
    """A record's bytes after its length: attributes, timestamp and offset delta 0, then the
    key, value and headers sections as given (so that they may lie)."""
    return b"\x00" + _zz(0) + _zz(0) + key + value + headers


def _batch_of(record: bytes, compression: int) -> bytes:
    """A one-record RecordBatch v2 around `record` (its length prefix made true), CRC valid."""
    good = v2.build([(1000, b"k", b"v")], compression=compression)
    body = v2.codecs.compress(compression, _zz(len(record)) + record)
    return _reframe(good, body)


def _reframe(good: bytes, body: bytes) -> bytes:
    head = bytearray(good[: v2.HEADER_SIZE])
    struct.pack_into(">i", head, 8, v2.HEADER_SIZE - 12 + len(body))
    after_crc = bytes(head[21:]) + body
    struct.pack_into(">I", head, 17, crc32c.crc32c(after_crc))
    return bytes(head) + body


LYING_RECORDS = {
    "key past the record": _record(key=_zz(50) + b"k"),
    "negative key length": _record(key=_zz(-2)),
    "value past the record": _record(value=_zz(9) + b"v"),
    "headers claimed, none there": _record(headers=_zz(5)),
    "null header key": _record(headers=_zz(1) + _zz(-1) + _zz(0)),
    "fields end before the record": _record(headers=_zz(0) + b"\x00\x00"),
}


@pytest.mark.parametrize("compression", [v2.NONE, v2.GZIP, v2.ZSTD])
@pytest.mark.parametrize("lie", sorted(LYING_RECORDS))
def test_a_record_whose_fields_do_not_add_up_is_refused(lie, compression):
    """Kafka's LogValidator reads every record (DefaultRecord.readFrom): one whose key, value or
    headers do not fit its length is refused at produce, not stored for every consumer's
    decode to fail on (a junk record in __consumer_offsets ended each coordinator's load)."""
    raw = _batch_of(LYING_RECORDS[lie], compression)
    with pytest.raises(CorruptRecordError):
        v2.validate_records(raw, v2.read_header(raw))


@pytest.mark.parametrize("compression", [v2.NONE, v2.GZIP, v2.ZSTD])
def test_the_same_record_with_true_fields_is_accepted(compression):
    headers = _zz(1) + _zz(1) + b"h" + _zz(-1)
    raw = _batch_of(_record(key=_zz(-1), headers=headers), compression)
    v2.validate_records(raw, v2.read_header(raw))
    (record,) = v2.decode_records(raw)
    assert (record.key, record.value, record.headers) == (None, b"v", (("h", None),))
