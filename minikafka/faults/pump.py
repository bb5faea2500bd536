"""One proxied connection: two byte pumps that obey their link's faults (Trio shell).

A connection arriving on link (src, dst) is node src talking to node dst. Each direction has a
reader (source stream -> bounded buffer, stamped with the read time) and a writer (buffer ->
the other stream) that, chunk by chunk, waits while the link is blocked, waits until
`read time + latency_ms`, and paces slices through the direction's token bucket. Rules:

- reads are at most 64 KiB; a direction buffers at most BUFFER_BYTES, then stops reading, so a
  blocked link back-pressures the sender through TCP and memory stays bounded;
- blocked means bytes wait, never dropped while both ends stay open: after the heal everything
  arrives intact, in order;
- a connection that arrives while its link is blocked is accepted, but dst is dialled only after
  the heal (what the node sent meanwhile waits in the buffer);
- when either side closes, what it sent is delivered (unless the link is blocked) and then both
  sides are closed; a close seen while blocked closes the other side at once. Kafka's protocol
  never half-closes, so neither does the proxy. (A sender whose buffer is full while blocked is
  not read, so its close is seen only after the heal: the price of bounded memory.)
- `close()` (the control `reset` op) closes both sides at once.

Every wait re-checks its condition after a wake-up: the proxy kicks a link's connections
whenever its faults change, and each pump kicks its connection when its buffer moves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import trio

from minikafka.clock import now_ms
from minikafka.faults.links import LinkState

CHUNK_BYTES = 64 * 1024
BUFFER_BYTES = 256 * 1024
# What ends a pump at once: the peer reset or closed, or we closed the stream ourselves.
STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

Connect = Callable[[], Awaitable[trio.abc.Stream]]


class _Wakeup:
    """A condition-variable-like kick: `wait()` returns at the next `fire()`."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self, deadline_s: float = float("inf")) -> None:
        with trio.move_on_at(deadline_s):
            await self._event.wait()


class _Buffer:
    """Chunks read but not yet delivered, each with its read time; `nbytes` not yet delivered."""

    def __init__(self) -> None:
        self.chunks: deque[tuple[int, memoryview]] = deque()
        self.nbytes = 0
        self.eof = False


class ProxiedConnection:
    """A connection on one link: `run()` pumps until a side closes or `close()` is called."""

    def __init__(self, state: LinkState, client: trio.abc.Stream, connect: Connect) -> None:
        self.state = state
        self.client = client
        self._connect = connect
        self._server: trio.abc.Stream | None = None
        self._wakeup = _Wakeup()
        self._scope = trio.CancelScope()

    def kick(self) -> None:
        """Re-check the link's faults (called when they change)."""
        self._wakeup.fire()

    def close(self) -> None:
        self._scope.cancel()

    async def run(self) -> None:
        st = self.state
        st.connections_open += 1
        st.connections_total += 1
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    to_dst, to_src = _Buffer(), _Buffer()
                    nursery.start_soon(self._read, self.client, to_dst)
                    while st.faults.blocked:  # accepted, but not connected onward until healed
                        await self._wakeup.wait()
                    try:
                        self._server = await self._connect()
                    except STREAM_ERRORS:
                        self.close()  # dst is down: the node sees its connection closed
                        return
                    nursery.start_soon(self._read, self._server, to_src)
                    nursery.start_soon(self._write, to_dst, self._server, "to_dst")
                    nursery.start_soon(self._write, to_src, self.client, "to_src")
        finally:
            st.connections_open -= 1
            await trio.aclose_forcefully(self.client)
            if self._server is not None:
                await trio.aclose_forcefully(self._server)

    async def _read(self, source: trio.abc.Stream, buf: _Buffer) -> None:
        try:
            while True:
                while buf.nbytes >= BUFFER_BYTES:
                    await self._wakeup.wait()
                data = await source.receive_some(CHUNK_BYTES)
                if not data:
                    break
                buf.chunks.append((now_ms(), memoryview(data)))
                buf.nbytes += len(data)
                self.kick()
        except STREAM_ERRORS:
            self.close()
            return
        buf.eof = True
        self.kick()
        while buf.nbytes and not self.state.faults.blocked:
            await self._wakeup.wait()  # let the writer deliver what the closing side sent
        self.close()

    async def _write(self, buf: _Buffer, sink: trio.abc.Stream, direction: str) -> None:
        try:
            while True:
                while not buf.chunks:
                    if buf.eof:
                        return
                    await self._wakeup.wait()
                read_ms, data = buf.chunks[0]
                n = await self._clearance(read_ms, len(data), direction)
                await sink.send_all(data[:n])
                self.state.bytes_delivered[direction] += n
                buf.nbytes -= n
                if n == len(data):
                    buf.chunks.popleft()
                else:
                    buf.chunks[0] = (read_ms, data[n:])
                self.kick()
        except STREAM_ERRORS:
            self.close()

    async def _clearance(self, read_ms: int, size: int, direction: str) -> int:
        """Wait until up to `size` bytes read at `read_ms` may go; how many may go now."""
        st = self.state
        while True:
            if st.faults.blocked:
                await self._wakeup.wait()
                continue
            due_ms = read_ms + st.faults.latency_ms
            if now_ms() < due_ms:
                await self._wakeup.wait(due_ms / 1000)
                continue
            bucket = st.bucket(direction, now_ms())
            if bucket is None:
                return size
            n = min(size, bucket.burst)
            delay_ms = bucket.delay_ms(n, now_ms())
            if delay_ms:
                # Not interruptible: the tokens are taken, and a slice holds at most about
                # BURST_MS plus the debt, so a change of rate shows within a slice or two.
                await trio.sleep(delay_ms / 1000)
            while st.faults.blocked:
                await self._wakeup.wait()
            return n
