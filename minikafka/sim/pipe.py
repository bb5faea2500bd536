"""One direction of a simulated connection: a bounded byte queue from one writer to one reader,
with no task in between, that obeys a fault proxy's link when it has one.

Why not `trio.testing.memory_stream_pair`: each of its sends and receives takes two scheduling
steps on purpose (to catch concurrent use in tests), and a connection through the fault proxy
adds two pump tasks per direction (faults/pump.py). In a simulated cluster that is most of
Trio's work; a `Pipe` takes one step per send and per receive, as a socket does in Trio (check
for cancellation, do the operation, yield once), and parks only when it must wait.

Rules, the socket's and the proxy's (faults/pump.py), in the same words:

- at most `limit` bytes wait in the pipe; a send beyond that waits for the reader (TCP's
  back-pressure), so memory stays bounded;
- on a proxy link (`link`, a `LinkState`), the reader waits while the link is blocked (bytes
  wait, none are dropped), takes each chunk `latency_ms` after it was sent, and takes slices
  of at most the token bucket's burst, held as long as the bucket says, exactly as the proxy's
  writer delivers them; `bytes_delivered` counts what the reader took;
- `close_writer()`: the reader gets what was sent, then b"" (EOF); `close_reader()`: the
  writer's next send raises BrokenResourceError (the peer is gone) and what waits is dropped;
  `reset()`: both at once, nothing more delivered.

`kick()` wakes the reader and the writer to re-check (the proxy calls it when a link's faults
change); every wait re-checks its condition after waking.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import trio
from trio.lowlevel import ParkingLot, cancel_shielded_checkpoint, checkpoint_if_cancelled

from minikafka.clock import now_ms
from minikafka.faults.links import LinkState


class Pipe:
    """Bytes from one writer to one reader, in order (module docstring)."""

    def __init__(
        self, limit: int, link: LinkState | None = None, direction: str = "to_dst"
    ) -> None:
        self.limit = limit
        self.link = link
        self.direction = direction
        self._chunks: deque[tuple[int, bytes]] = deque()  # (sent at, in ms; the bytes)
        self.nbytes = 0
        self.eof = False  # no more bytes will come: the reader gets b"" after the rest
        self.writer_closed = False  # the writer closed its own end
        self.broken = False  # the reader is gone or the connection reset: sends fail
        self.reader_closed = False  # the reader closed its own end
        self.on_drained: Callable[[], None] | None = None  # once: EOF and nothing left
        self._lot = ParkingLot()

    def kick(self) -> None:
        if self._lot:  # mostly nobody waits: the reader and the writer park only to wait
            self._lot.unpark_all()

    async def _park(self, until_s: float | None = None) -> None:
        if until_s is None:
            await self._lot.park()
            return
        with trio.move_on_at(until_s):
            await self._lot.park()

    # -- the writer -----------------------------------------------------------------------

    async def send(self, data: bytes | bytearray | memoryview) -> None:
        await checkpoint_if_cancelled()
        view = memoryview(data).cast("B")
        parked = False
        while True:
            if self.writer_closed:
                raise trio.ClosedResourceError("this end was closed")
            if self.broken:
                raise trio.BrokenResourceError("the connection was closed by the peer or reset")
            if not view:
                break
            room = self.limit - self.nbytes
            if room <= 0:
                await self._park()
                parked = True
                continue
            piece = bytes(view[:room])
            view = view[len(piece) :]
            self._chunks.append((now_ms(), piece))
            self.nbytes += len(piece)
            self.kick()
        if not parked:
            await cancel_shielded_checkpoint()

    async def wait_room(self) -> None:
        while self.nbytes >= self.limit and not (self.broken or self.writer_closed):
            await self._park()

    def close_writer(self) -> None:
        self.writer_closed = self.eof = True
        self.kick()
        self._maybe_drained()

    # -- the reader -----------------------------------------------------------------------

    async def receive(self, max_bytes: int | None) -> bytes:
        await checkpoint_if_cancelled()
        parked = False
        while True:
            if self.reader_closed:
                raise trio.ClosedResourceError("this end was closed")
            if not self._chunks:
                if self.eof:
                    data = b""
                    break
                await self._park()
                parked = True
                continue
            n = await self._clearance(max_bytes)
            if n is None:
                parked = True
                continue
            if not n:  # dropped while the bucket held it: look again
                assert not self._chunks, "a due chunk must give at least one byte"
                continue
            data = self._take(n)
            break
        if not parked:
            await cancel_shielded_checkpoint()
        return data

    async def _clearance(self, max_bytes: int | None) -> int | None:
        """How many bytes may be taken now, or None after a wait (the caller looks again)."""
        want = self.nbytes if max_bytes is None else min(max_bytes, self.nbytes)
        link = self.link
        if link is None:
            return want
        faults = link.faults
        if faults.blocked:
            await self._park()
            return None
        sent_ms, chunk = self._chunks[0]
        due_ms = sent_ms + faults.latency_ms
        now = now_ms()
        if now < due_ms:
            await self._park(due_ms / 1000)
            return None
        bucket = link.bucket(self.direction, now)
        if bucket is None:
            return self._due_bytes(want, now - faults.latency_ms)
        n = min(want, len(chunk), bucket.burst)
        delay_ms = bucket.delay_ms(n, now)
        if delay_ms:
            # As the proxy's writer: the tokens are taken, the hold is not interruptible.
            await trio.sleep(delay_ms / 1000)
        while link.faults.blocked and not self.reader_closed:
            await self._park()
        return min(n, self.nbytes)

    def _due_bytes(self, want: int, sent_by_ms: int) -> int:
        """Of the first `want` bytes, those sent by `sent_by_ms` (in order, so a prefix)."""
        n = 0
        for sent_ms, chunk in self._chunks:
            if sent_ms > sent_by_ms or n >= want:
                break
            n += len(chunk)
        return min(n, want)

    def _take(self, n: int) -> bytes:
        parts = []
        left = n
        while left:
            sent_ms, chunk = self._chunks[0]
            if len(chunk) <= left:
                self._chunks.popleft()
                parts.append(chunk)
                left -= len(chunk)
            else:
                parts.append(chunk[:left])
                self._chunks[0] = (sent_ms, chunk[left:])
                left = 0
        self.nbytes -= n
        if self.link is not None:
            self.link.bytes_delivered[self.direction] += n
        self.kick()  # the writer may have room now
        self._maybe_drained()
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close_reader(self) -> None:
        self.reader_closed = self.broken = True
        self.drop()

    # -- both -----------------------------------------------------------------------------

    def drop(self) -> None:
        """Forget what waits (a close while blocked, a reset)."""
        self._chunks.clear()
        self.nbytes = 0
        self.kick()
        self._maybe_drained()

    def reset(self) -> None:
        self.eof = self.broken = True
        self.drop()

    def _maybe_drained(self) -> None:
        if self.eof and not self._chunks and self.on_drained is not None:
            callback, self.on_drained = self.on_drained, None
            callback()
