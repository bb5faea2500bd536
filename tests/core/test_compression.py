"""RecordBatch v2's codecs (core/compression.py) and the bounded, streamed validation of
compressed batches (core/record_batch_v2.py `validate_records`): Kafka's four codecs in their
wire framings, refused when cut short, and decompression bombs refused in bounded memory."""

from __future__ import annotations

import gzip
import struct
import time
import tracemalloc

import cramjam
import lz4.frame
import pytest
import zstandard
from kafka.codec import snappy_encode

from minikafka.core import compression as codecs
from minikafka.core import record_batch_v2 as v2
from minikafka.errors import CorruptRecordError

DATA = b"".join(b"record %d of a batch; " % i for i in range(20_000))
CODECS = [codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_round_trips_in_chunks(codec):
    packed = codecs.compress(codec, DATA)
    assert len(packed) < len(DATA) // 4
    pieces = list(codecs.chunks(codec, packed, chunk=4096))
    assert b"".join(pieces) == DATA
    assert max(map(len, pieces)) <= 4096


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("cut", [3, 0.5, -1])
def test_records_cut_short_are_refused(codec, cut):
    packed = codecs.compress(codec, DATA)
    end = int(len(packed) * cut) if isinstance(cut, float) else cut % len(packed)
    with pytest.raises(CorruptRecordError, match=codecs.NAMES[codec]):
        codecs.decompress(codec, packed[:end])


def test_other_producers_framings_are_read():
    # snappy-java's xerial framing (kafka-python, the Java client) and plain raw snappy
    # (librdkafka), as SnappyInputStream reads both.
    assert codecs.decompress(codecs.SNAPPY, snappy_encode(DATA)) == DATA
    assert codecs.decompress(codecs.SNAPPY, bytes(cramjam.snappy.compress_raw(DATA))) == DATA
    assert codecs.compress(codecs.SNAPPY, DATA).startswith(codecs.XERIAL_MAGIC)
    # Members and frames back to back: GZIPInputStream and the frame formats read them all.
    two = [DATA[:1000], DATA[1000:]]
    assert codecs.decompress(codecs.GZIP, b"".join(map(gzip.compress, two))) == DATA
    assert codecs.decompress(codecs.LZ4, b"".join(map(lz4.frame.compress, two))) == DATA
    z = zstandard.ZstdCompressor()
    assert codecs.decompress(codecs.ZSTD, b"".join(map(z.compress, two))) == DATA


def test_an_xerial_block_claiming_more_than_it_holds_is_refused():
    packed = codecs.compress(codecs.SNAPPY, DATA)
    lying = packed[:16] + struct.pack(">i", 1 << 30) + packed[20:]
    with pytest.raises(CorruptRecordError, match="runs past its records"):
        codecs.decompress(codecs.SNAPPY, lying)


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_stops_at_the_bound(codec):
    packed = codecs.compress(codec, bytes(200_000))
    with pytest.raises(codecs.DecompressedTooLarge, match="more than 100000 bytes"):
        codecs.decompress(codec, packed, limit=100_000)
    assert codecs.decompressed_limit(10) == codecs.MIN_LIMIT
    assert codecs.decompressed_limit(2 << 20) == 128 << 20


# ---------------------------------------------------------------------------- bombs

GIB = 1 << 30


def gzip_zeros(total: int, *, prefix: bytes = b"") -> bytes:
    """`prefix` then zeros up to `total` bytes, gzip: one 1 MiB member of zeros (about 1 KiB)
    repeated, so a 1 GiB bomb costs the test 1 MB and no time to build."""
    member = gzip.compress(bytes(1 << 20), 9)
    head = gzip.compress(prefix + bytes((1 << 20) - len(prefix)), 9)
    return head + member * (total // (1 << 20) - 1)


def v2_with_body(body: bytes, *, count: int = 1, codec: int = codecs.GZIP) -> bytes:
    """A RecordBatch v2 whose records section is `body` (already compressed), header right."""
    good = v2.build([(0, None, b"x")] * count)
    header = bytearray(good[: v2.HEADER_SIZE])
    struct.pack_into(">i", header, 8, v2.HEADER_SIZE - v2.LENGTH_START + len(body))
    struct.pack_into(">h", header, v2.CRC_START, codec)
    return bytes(header) + body


def validate_measured(raw: bytes) -> tuple[Exception, int, float]:
    header = v2.read_header(raw)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        v2.validate_records(raw, header)
    except CorruptRecordError as exc:
        error = exc
    else:  # pragma: no cover - the assertion below says what happened
        error = AssertionError("accepted")
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return error, peak, time.perf_counter() - t0


def test_a_gzip_bomb_of_zeros_is_refused_at_its_first_record_in_bounded_memory():
    raw = v2_with_body(gzip_zeros(GIB))  # 1 MB that inflates to 1 GiB of zeros
    assert len(raw) < 1_100_000
    error, peak, seconds = validate_measured(raw)
    assert "record 0 of 0 bytes" in str(error)
    assert peak < 2 << 20, peak  # a few chunks, not the GiB (before: 2 GiB of RSS)
    assert seconds < 0.5


def test_a_gzip_bomb_behind_a_well_formed_record_stops_at_the_bound():
    # Record 0 claims a 1 GiB value, which the zeros fill: every byte is well formed, so only
    # the bound stops it (64 MiB: 64 x 1 MB), in a few chunks of memory.
    value_len = GIB - 100
    rec = bytearray(b"\x00\x00\x00\x01")  # attributes, ts delta 0, offset delta 0, null key
    v2._put_varint(rec, value_len)
    record = bytearray()
    v2._put_varint(record, len(rec) + value_len + 1)
    raw = v2_with_body(gzip_zeros(GIB, prefix=bytes(record + rec)))
    error, peak, _seconds = validate_measured(raw)
    assert isinstance(error, codecs.DecompressedTooLarge), error
    assert peak < 2 << 20, peak


def test_a_bad_record_is_refused_before_the_rest_is_decompressed(monkeypatch):
    pulled = []
    real = codecs.chunks

    def counting(*args, **kwargs):
        for piece in real(*args, **kwargs):
            pulled.append(len(piece))
            yield piece

    monkeypatch.setattr(v2.codecs, "chunks", counting)
    good = v2.build([(0, None, b"v" * 100)] * 3, compression=codecs.NONE)[v2.HEADER_SIZE :]
    bad = bytearray(good)
    # Each record: length (2 bytes), attributes, ts delta, offset delta, key, value (2 + 100),
    # headers: 109 bytes. Record 1's offset delta becomes 63 (zigzag 0x7E).
    assert bad[109 + 4] == 2
    bad[109 + 4] = 0x7E
    raw = v2_with_body(gzip.compress(bytes(bad) + bytes(50 << 20)), count=3)
    with pytest.raises(CorruptRecordError, match="record 1 has offset delta 63"):
        v2.validate_records(raw, v2.read_header(raw))
    assert sum(pulled) <= codecs.CHUNK  # one chunk of the 50 MiB behind it


@pytest.mark.parametrize("codec", CODECS)
def test_streamed_validation_agrees_with_the_records(codec):
    records = [(i, b"k" if i % 2 else None, b"v" * (i * 37 % 3000)) for i in range(500)]
    v2.validate_records(raw := v2.build(records, compression=codec), v2.read_header(raw))
    assert len(v2.decode_records(raw)) == 500
    short = v2.build(records[:499], compression=codec)
    body = short[v2.HEADER_SIZE :]
    lying = v2_with_body(body, count=500, codec=codec)  # claims one record more
    with pytest.raises(CorruptRecordError, match="claims 500 records and holds 499"):
        v2.validate_records(lying, v2.read_header(lying))
