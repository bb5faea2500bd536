"""Length-prefixed framing: a 4-byte big-endian unsigned length, then that many payload bytes.

The payload of every frame is one msgpack document (see wire/codec.py). This module owns only
the byte stream: cutting it into frames and refusing frames that break the size cap. Like h11
it is sans-IO: the shell feeds whatever bytes arrived with `FrameDecoder.receive_data()` and
pulls complete frames with `next_frame()`; `b""` means the peer closed its side.

Rules:

- The cap (`max_frame_bytes`, default 64 MiB, cf. Kafka's `socket.request.max.bytes`) bounds
  the payload length. A peer that declares more, or declares an empty frame, or closes the
  connection in the middle of a frame gets a `RemoteProtocolError`; asking us to *send* such a
  frame is a `LocalProtocolError` (our bug).
- An oversize length is rejected as soon as its 4 header bytes arrive, before any of the body
  is buffered, so a hostile peer cannot make us hold more than one cap's worth of data.
- After a protocol error the decoder is broken for good: every later call raises again. The
  connection must be closed.
- No quadratic copying: chunks are kept in a deque with a read offset into the first one and
  are joined once, when a frame is complete. A frame that is exactly one received chunk is
  returned without any copy; many small frames in one chunk are sliced out one by one.
"""

from __future__ import annotations

import struct
from collections import deque

from minikafka.errors import LocalProtocolError, RemoteProtocolError

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
HEADER_SIZE = 4
_HEADER = struct.Struct(">I")
_MAX_UINT32 = 0xFFFF_FFFF


def frame_header(payload_len: int, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """The 4-byte length prefix of a payload of `payload_len` bytes."""
    if not 0 < payload_len <= min(max_frame_bytes, _MAX_UINT32):
        raise LocalProtocolError(
            f"cannot frame a payload of {payload_len} bytes: "
            f"accepted lengths are 1..{min(max_frame_bytes, _MAX_UINT32)}"
        )
    return _HEADER.pack(payload_len)


JOIN_BELOW_BYTES = 64 * 1024  # frame_parts: smaller payloads go out joined to their header


def frame_parts(payload: bytes, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[bytes]:
    """The bytes to write, in order, to send one frame: header and payload joined when the
    payload is small (one write), else apart, so that a large payload (a 10 MB fetch response)
    is never copied just to put 4 bytes in front of it."""
    header = frame_header(len(payload), max_frame_bytes)
    if len(payload) < JOIN_BELOW_BYTES:
        return [header + payload]
    return [header, payload]


def frame(payload: bytes, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """Header plus payload as one bytes object.

    This copies the payload once; a shell that wants to avoid it can send
    `frame_header(len(payload))` and `payload` back to back.
    """
    return frame_header(len(payload), max_frame_bytes) + payload


class FrameDecoder:
    """Cuts a received byte stream into frame payloads.

    Usage, once per received chunk::

        decoder.receive_data(chunk)          # b"" when the peer closed
        while (payload := decoder.next_frame()) is not None:
            handle(payload)
        if decoder.at_eof:
            close()

    `receive_data` raises `RemoteProtocolError` when the header of the frame in progress is
    invalid; `next_frame` raises it for the headers of later frames and for EOF mid-frame.
    """

    __slots__ = ("_chunks", "_offset", "_buffered", "_body_len", "_eof", "_error", "_max")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if not 0 < max_frame_bytes <= _MAX_UINT32:
            raise ValueError(f"max_frame_bytes must be in 1..{_MAX_UINT32}, got {max_frame_bytes}")
        self._max = max_frame_bytes
        self._chunks: deque[bytes] = deque()
        self._offset = 0  # read position inside self._chunks[0]
        self._buffered = 0  # unread bytes over all chunks
        self._body_len: int | None = None  # payload length of the frame in progress
        self._eof = False
        self._error: RemoteProtocolError | None = None

    # ------------------------------------------------------------------ public

    @property
    def max_frame_bytes(self) -> int:
        return self._max

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned in a frame (a parsed header no longer counts)."""
        return self._buffered

    @property
    def pending_frame_bytes(self) -> int | None:
        """The payload length of the frame in progress, once its header has arrived (None
        between frames): what the shell reserves before reading the body
        (queued.max.request.bytes, server/request_memory.py)."""
        return self._body_len

    @property
    def at_eof(self) -> bool:
        """The peer closed its side (`receive_data(b"")` was called)."""
        return self._eof

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the peer; `b""` means EOF. Data after EOF is a LocalProtocolError."""
        self._check_not_broken()
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("receive_data() called with data after EOF")
        if type(data) is not bytes:
            data = bytes(data)  # bytearray/memoryview: the caller may reuse its buffer
        self._chunks.append(data)
        self._buffered += len(data)
        if self._body_len is None:
            self._try_read_header()  # reject an oversize frame before buffering its body

    def next_frame(self) -> bytes | None:
        """The next complete payload, or None when more data is needed (or EOF at a boundary)."""
        self._check_not_broken()
        if self._body_len is None and not self._try_read_header():
            if self._eof and self._buffered:
                self._fail(f"connection closed inside a frame header ({self._buffered} of 4 bytes)")
            return None
        body_len = self._body_len
        assert body_len is not None
        if self._buffered < body_len:
            if self._eof:
                self._fail(
                    f"connection closed inside a frame ({self._buffered} of {body_len} bytes)"
                )
            return None
        self._body_len = None
        return self._take(body_len)

    # ------------------------------------------------------------------ internals

    def _check_not_broken(self) -> None:
        if self._error is not None:
            raise RemoteProtocolError(f"frame decoder is broken by an earlier error: {self._error}")

    def _fail(self, message: str) -> None:
        self._error = RemoteProtocolError(message)
        self._chunks.clear()
        self._buffered = 0
        raise self._error

    def _try_read_header(self) -> bool:
        if self._buffered < HEADER_SIZE:
            return False
        (length,) = _HEADER.unpack(self._take(HEADER_SIZE))
        if length == 0:
            self._fail("peer sent a zero-length frame")
        if length > self._max:
            self._fail(f"peer declared a frame of {length} bytes, over the cap of {self._max}")
        self._body_len = length
        return True

    def _take(self, n: int) -> bytes:
        """Remove and return the next n buffered bytes (n <= self._buffered)."""
        chunks = self._chunks
        first = chunks[0]
        start = self._offset
        available = len(first) - start
        self._buffered -= n
        if n < available:  # inside the first chunk: one slice
            self._offset = start + n
            return first[start : start + n]
        if n == available:  # exactly the rest of the first chunk
            chunks.popleft()
            self._offset = 0
            return first if start == 0 else first[start:]
        # Spans chunks: gather zero-copy views, copy once in join.
        views = [memoryview(first)[start:]]
        chunks.popleft()
        needed = n - available
        while needed:
            chunk = chunks[0]
            if len(chunk) <= needed:
                views.append(chunk)
                chunks.popleft()
                needed -= len(chunk)
            else:
                views.append(memoryview(chunk)[:needed])
                self._offset = needed
                needed = 0
                break
        else:
            self._offset = 0
        return b"".join(views)
