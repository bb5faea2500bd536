"""RecordBatch v2 for the fuzzer: valid batches, and malformed ones a broker must refuse.

The malformed kinds are those a produce path meets in the wild (Kafka's DefaultRecordBatch
checks them in `ensureValid` and `DefaultRecord.readFrom`): a wrong CRC, a record count far
past what the batch holds, a record length past the batch's end, a batch length that lies,
another magic, compression attribute bits with junk bodies, and a decompression bomb (gzip of
a GiB of zeros, about 1 MiB on the wire). Each malformed batch but the bad-CRC one carries a
correct CRC-32C, so a broker's check of the CRC alone cannot refuse it.

Pure: a `random.Random` chooses (hypothesis's `st.randoms()` in tests, so failures shrink).
"""

from __future__ import annotations

import random
import struct
import zlib
from functools import cache

import crc32c

from minikafka.core.record_batch_v2 import CRC_START, HEADER_SIZE, LENGTH_START, build

_LENGTH_AT = 8  # batchLength, after baseOffset
_CRC_AT = 17  # the CRC's own offset: baseOffset 8, batchLength 4, epoch 4, magic 1
_ATTRIBUTES_AT = CRC_START  # int16
_COUNT_AT = 57  # recordCount, the last header field
BOMB_BYTES = 1 << 30  # what BOMB's records inflate to


def valid_batch(rng: random.Random) -> bytes:
    """A RecordBatch v2 of 1-4 records with small keys and values."""
    records = [
        (
            rng.randrange(0, 1 << 41),
            None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 9)),
            rng.randbytes(rng.randrange(0, 33)),
        )
        for _ in range(rng.randrange(1, 5))
    ]
    return build(records, base_sequence=rng.choice((-1, 0)), producer_id=rng.choice((-1, 7)))


def resealed(batch: bytes | bytearray) -> bytes:
    """The batch with its batchLength and CRC-32C made right again."""
    out = bytearray(batch)
    struct.pack_into(">i", out, _LENGTH_AT, len(out) - LENGTH_START)
    struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(bytes(out[CRC_START:])))
    return bytes(out)


def with_records(attributes: int, count: int, body: bytes) -> bytes:
    """A batch header (attributes, recordCount) over any records section, sealed."""
    head = bytearray(valid_batch(random.Random(0))[:HEADER_SIZE])
    struct.pack_into(">h", head, _ATTRIBUTES_AT, attributes)
    struct.pack_into(">i", head, _COUNT_AT, count)
    return resealed(bytes(head) + body)


@cache
def bomb() -> bytes:
    """gzip (attributes 1) records that inflate to BOMB_BYTES of zeros: one record claimed."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip container
    chunk = bytes(1 << 20)
    parts = [z.compress(chunk) for _ in range(BOMB_BYTES // len(chunk))]
    return with_records(1, 1, b"".join(parts) + z.flush())


def _bad_crc(rng: random.Random) -> bytes:
    batch = bytearray(valid_batch(rng))
    batch[_CRC_AT + rng.randrange(4)] ^= 1 << rng.randrange(8)
    return bytes(batch)


def _huge_count(rng: random.Random) -> bytes:
    batch = bytearray(valid_batch(rng))
    count = rng.choice((2**31 - 1, 2**24, -1, -(2**31), 0))
    struct.pack_into(">i", batch, _COUNT_AT, count)
    return resealed(batch)


def _record_past_end(rng: random.Random) -> bytes:
    batch = bytearray(valid_batch(rng))
    # The first record's length (a zigzag varint): 2^28 - 1, far past the batch's end.
    batch[HEADER_SIZE : HEADER_SIZE + 1] = rng.choice((b"\xfe\xff\xff\xff\x01", b"\x7e", b"\x01"))
    return resealed(batch)


def _long_varint(rng: random.Random) -> bytes:
    """A record's length, or its key's, as a varint of 6 to 10 bytes (Kafka's
    ByteUtils.readVarint stops at 5: "Varint is too long")."""
    batch = bytearray(valid_batch(rng))
    at = HEADER_SIZE if rng.random() < 0.5 else HEADER_SIZE + 1
    width = rng.randrange(6, 11)
    batch[at : at + 1] = b"\xff" * (width - 1) + b"\x01"
    return resealed(batch)


def _lying_length(rng: random.Random) -> bytes:
    batch = bytearray(valid_batch(rng))
    claim = rng.choice((2**31 - 1, -1, 0, len(batch) - LENGTH_START + 1, 49))
    struct.pack_into(">i", batch, _LENGTH_AT, claim)
    return bytes(batch)


def _other_magic(rng: random.Random) -> bytes:
    batch = bytearray(valid_batch(rng))
    batch[16] = rng.choice((0, 1, 3, 0xFF))
    return bytes(batch)


def _junk_compression(rng: random.Random) -> bytes:
    attributes = rng.choice((1, 2, 3, 4, 5, 6, 7)) | rng.choice((0, 0x08, 0x10, 0x20, 0x40))
    body = rng.randbytes(rng.randrange(0, 64))
    if rng.random() < 0.5:  # a valid gzip/zlib start, then garbage
        body = zlib.compress(body)[: rng.randrange(1, 12)] + body
    return with_records(attributes, rng.randrange(1, 4), body)


def _small_bomb(rng: random.Random) -> bytes:
    """gzip of 16 MiB of zeros (16 KiB on the wire), claiming one record: cheap to send often."""
    return with_records(1, 1, _zeros_gzip(16 << 20))


@cache
def _zeros_gzip(size: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return z.compress(bytes(size)) + z.flush()


def _truncated(rng: random.Random) -> bytes:
    batch = valid_batch(rng)
    return batch[: rng.randrange(0, len(batch))]


MALFORMED = {
    "bad_crc": _bad_crc,
    "huge_count": _huge_count,
    "record_past_end": _record_past_end,
    "long_varint": _long_varint,
    "lying_length": _lying_length,
    "other_magic": _other_magic,
    "junk_compression": _junk_compression,
    "small_bomb": _small_bomb,
    "truncated": _truncated,
}


def malformed_batch(rng: random.Random, *, with_bomb: bool = False) -> tuple[str, bytes]:
    """(kind, bytes) of one malformed batch, sometimes after a valid one (the second batch of
    a records field is where a reader that checks only the first goes wrong)."""
    kinds = [*MALFORMED, "bomb"] if with_bomb else list(MALFORMED)
    kind = rng.choice(kinds)
    bad = bomb() if kind == "bomb" else MALFORMED[kind](rng)
    if rng.random() < 0.25:
        bad = valid_batch(rng) + bad
    return kind, bad
