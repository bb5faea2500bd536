"""What the requests a node has read and not yet answered may hold: `queued.max.request.bytes`.

Kafka's SocketServer allocates each request's bytes from a MemoryPool as soon as its size
prefix is read, and stops reading from a connection while the pool cannot give that much
(`queued.max.request.bytes`; -1, Kafka's default, is an unbounded pool). Here the listener
takes a frame's length from the pool once the frame's 4-byte prefix has arrived (before the
rest of the body is read), and gives it back when the request is answered: so however many
clients send large requests at once, the frames buffered and the requests being handled hold
at most the pool, plus a small read buffer per connection.

Like Kafka's non-strict SimpleMemoryPool, a frame larger than the whole pool is admitted when
nothing else is held, so that any frame the size cap accepts can still be served. Connections
of the cluster's own nodes are not metered (server/listener.py): a produce waiting for its
followers must never keep their fetches from being read.
"""

from __future__ import annotations

import trio


class RequestMemory:
    """A byte budget shared by every client connection of a node; `capacity` < 0: unbounded."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self.waits = 0  # how many times a read waited for memory (a gauge for tests and metrics)
        self._lot = trio.lowlevel.ParkingLot()

    def _fits(self, n: int) -> bool:
        return self.capacity < 0 or self.held == 0 or self.held + n <= self.capacity

    async def take(self, n: int) -> int:
        """Wait until `n` bytes fit, hold them, and return n (for `release`)."""
        if not self._fits(n):
            self.waits += 1
            while not self._fits(n):
                await self._lot.park()
        self.held += n
        return n

    def release(self, n: int) -> None:
        if n:
            self.held -= n
            self._lot.unpark_all()
