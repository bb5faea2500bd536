"""RecordBatch v2's codecs as Kafka serves them, decompressed in bounded chunks.

Kafka's CompressionType (attributes bits 0-2 of a RecordBatch v2): 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. What each means on the wire, and what reads it here:

- gzip: RFC 1952 (Java's GZIPOutputStream); members may follow one another, as
  GZIPInputStream reads them. The stdlib's zlib, whose `decompressobj().decompress(data,
  max_length)` is a bounded streaming inflate.
- snappy: snappy-java's "xerial" framing (SnappyOutputStream: magic ``\\x82SNAPPY\\x00``,
  int32 version, int32 compatible version, then [int32 length][raw snappy block]...), or plain
  raw snappy without the magic, which SnappyInputStream and librdkafka read too (librdkafka
  writes it). cramjam's raw snappy, one block at a time; a block's decompressed length is read
  from its preamble before it is inflated, so it is charged to the bound first.
- lz4: the LZ4 frame format (Kafka's KafkaLZ4BlockOutputStream, KIP-57). lz4's
  LZ4FrameDecompressor, which takes an output bound per call.
- zstd: Zstandard frames (zstd-jni, KIP-110). zstandard's decompressobj, fed a few bytes at a
  time (`_zstd`), with a window of at most `ZSTD_MAX_WINDOW` (a frame may ask for 2 GiB).

Why chunks: a 1 MB gzip batch of zeros inflates to 1 GiB. Kafka validates compressed batches
record by record from a stream (DefaultRecordBatch.compressedIterator over ChunkedBytesStream)
and refuses the batch at its first bad record; `chunks` gives the same stream here, so memory
stays a few chunks however large the output. And a bound, which Kafka lacks: a batch may
decompress to at most `decompressed_limit(len(compressed))` bytes (64 x its compressed size,
at least 64 MiB), else `DecompressedTooLarge`. That caps the CPU one batch may cost (~0.1 s of
inflate) and what a consumer's `decompress` holds; real data compresses 2-10 x, and clients'
default batches are under 1 MB before compression. The same function bounds reading, so every
batch a broker stored can be read back.

Pure: no trio, no threads. The shell decides where this runs (server/produce.py runs the
validation of compressed batches in a worker thread; zlib, lz4 and zstd release the GIL).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame
import zstandard

from minikafka.errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODECS = frozenset(NAMES)

CHUNK = 64 * 1024  # decompressed bytes handed out at a time (ChunkedBytesStream's buffer)
_IN_STEP = 64 * 1024  # compressed bytes fed to a decompressor at a time (no copy of the rest)
_ZSTD_STEP = 64  # see _zstd
MIN_LIMIT = 64 * 1024 * 1024
RATIO_LIMIT = 64
ZSTD_MAX_WINDOW = 1 << 24  # 16 MiB: zstd's level 19 uses 8 MiB; a decoder allocates the window
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_INT32 = struct.Struct(">i")
XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size (SnappyOutputStream)


class DecompressedTooLarge(CorruptRecordError):
    """A batch decompresses to more than its bound (Kafka's RecordTooLargeException, 10)."""

    def __init__(self, codec: int, limit: int) -> None:
        super().__init__(
            f"{NAMES.get(codec, codec)} records decompress to more than {limit} bytes "
            f"(the bound: {RATIO_LIMIT} x the compressed size, at least {MIN_LIMIT >> 20} MiB)"
        )


def decompressed_limit(compressed_size: int) -> int:
    """The most a batch whose records section is `compressed_size` bytes may decompress to."""
    return max(MIN_LIMIT, RATIO_LIMIT * compressed_size)


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed as Kafka's producers write `codec` (ValueError for an unknown one)."""
    if codec == NONE:
        return data
    if codec == GZIP:
        # mtime 0, as Java's GZIPOutputStream writes it: the same records compress to the same
        # bytes on every replica (a cleaned batch is compressed again, core/compaction.py).
        return gzip.compress(data, mtime=0)
    if codec == SNAPPY:
        out = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
        for at in range(0, len(data), XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[at : at + XERIAL_BLOCK]))
            out += [_INT32.pack(len(block)), block]
        return b"".join(out)
    if codec == LZ4:
        # Independent 64 KiB blocks, no content size: what KafkaLZ4BlockInputStream reads.
        return lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            store_size=False,
        )
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise ValueError(f"compression {codec}: expected one of {sorted(NAMES)}")


def chunks(
    codec: int, data: bytes | memoryview, *, limit: int | None = None, chunk: int = CHUNK
) -> Iterator[bytes]:
    """The decompressed bytes of `data`, a piece of at most `chunk` bytes at a time (raw snappy:
    one block's worth, sliced), at most `limit` in all (default `decompressed_limit`):
    CorruptRecordError for input that does not decompress, DecompressedTooLarge past the
    bound. Nothing is decompressed before it is asked for."""
    if limit is None:
        limit = decompressed_limit(len(data))
    pieces = _pieces(codec, memoryview(data), chunk, limit)
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limit:
            raise DecompressedTooLarge(codec, limit)
        if piece:
            yield piece


def decompress(codec: int, data: bytes | memoryview, *, limit: int | None = None) -> bytes:
    """The whole decompressed `data` (a consumer's view), within the same bound."""
    return b"".join(chunks(codec, data, limit=limit))


def _pieces(codec: int, data: memoryview, chunk: int, limit: int) -> Iterator[bytes]:
    if codec == NONE:
        return (bytes(data[at : at + chunk]) for at in range(0, len(data), chunk))
    if codec == GZIP:
        return _guard(codec, _gzip(data, chunk))
    if codec == SNAPPY:
        return _guard(codec, _snappy(data, chunk, limit))
    if codec == LZ4:
        return _guard(codec, _lz4(data, chunk))
    if codec == ZSTD:
        return _guard(codec, _zstd(data, chunk))
    raise CorruptRecordError(f"unknown compression type {codec}")


def _guard(codec: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
    """The codec libraries' own errors as one CorruptRecordError naming the codec."""
    try:
        yield from pieces
    except CorruptRecordError:
        raise
    except (zlib.error, RuntimeError, ValueError, OSError, EOFError, zstandard.ZstdError,
            cramjam.DecompressionError) as exc:  # fmt: skip
        raise CorruptRecordError(f"{NAMES[codec]} records do not decompress ({exc})") from exc


def _gzip(data: memoryview, chunk: int) -> Iterator[bytes]:
    pos = 0
    while True:  # one gzip member per round; GZIPInputStream reads members back to back
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not d.eof:
            if pos >= len(data) and not d.unconsumed_tail:
                raise CorruptRecordError("gzip records end inside a gzip member")
            tail = d.unconsumed_tail or data[pos : pos + _IN_STEP]
            if not d.unconsumed_tail:
                pos += len(tail)
            yield d.decompress(tail, chunk)
        pos -= len(d.unused_data)  # the next member's start, within the last step fed
        if pos >= len(data):
            return


def _lz4(data: memoryview, chunk: int) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):  # one LZ4 frame per round (frames may be concatenated)
        d = lz4.frame.LZ4FrameDecompressor()
        while not d.eof:
            if d.needs_input:
                if pos >= len(data):
                    raise CorruptRecordError("lz4 records end inside an LZ4 frame")
                step = data[pos : pos + _IN_STEP]
                pos += len(step)
                yield d.decompress(step, max_length=chunk)
            else:
                yield d.decompress(b"", max_length=chunk)
        pos -= len(d.unused_data or b"")


def _zstd(data: memoryview, chunk: int) -> Iterator[bytes]:
    """Fed `_ZSTD_STEP` bytes at a time: a zstd block yields at most 128 KiB and takes at least
    4 bytes, so one call yields at most 2 MiB (zstandard's decompressobj takes no output bound,
    and its stream reader cannot tell a frame cut short from one that ended)."""
    dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    pos = 0
    while pos < len(data):  # one zstd frame per round (frames may be concatenated)
        d = dctx.decompressobj()
        while not d.eof:
            if pos >= len(data):
                raise CorruptRecordError("zstd records end inside a zstd frame")
            step = data[pos : pos + _ZSTD_STEP]
            pos += len(step)
            out = d.decompress(step)
            for at in range(0, len(out), chunk):
                yield out[at : at + chunk]
        pos -= len(d.unused_data)


def _snappy(data: memoryview, chunk: int, limit: int) -> Iterator[bytes]:
    if bytes(data[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        yield from _snappy_block(data, chunk, limit, limit)  # plain raw snappy: one block
        return
    if len(data) < _XERIAL_HEADER.size:
        raise CorruptRecordError("snappy records end inside the xerial header")
    pos, total = _XERIAL_HEADER.size, 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("snappy records end inside a block length")
        (n,) = _INT32.unpack_from(data, pos)
        if n < 0 or pos + 4 + n > len(data):
            raise CorruptRecordError(f"a snappy block of {n} bytes runs past its records")
        for piece in _snappy_block(data[pos + 4 : pos + 4 + n], chunk, limit - total, limit):
            total += len(piece)
            yield piece
        pos += 4 + n


def _snappy_block(block: memoryview, chunk: int, room: int, limit: int) -> Iterator[bytes]:
    """One raw snappy block, its declared length charged to the bound before it is inflated
    (raw snappy holds at most ~21 x its size: its longest copy is 64 bytes for 3)."""
    declared = cramjam.snappy.decompress_raw_len(bytes(block))
    if declared > room:
        raise DecompressedTooLarge(SNAPPY, limit)
    out = memoryview(bytes(cramjam.snappy.decompress_raw(bytes(block))))
    for at in range(0, len(out), chunk):
        yield bytes(out[at : at + chunk])
