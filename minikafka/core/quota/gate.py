"""Holding a connection after a client-quota violation (KIP-219), sans IO.

Since KIP-219 a broker answers a throttled produce or fetch at once, with `throttle_time_ms` in
the response, and then mutes the connection: it reads no further request from it until the
throttle time has passed (Kafka's `ThrottledChannel` in `RequestChannel`, whose start and end
make `SocketServer`'s Processor mute and unmute the channel). Requests read before the mute
began are still processed and answered. The client does its half: `NetworkClient` marks the
node throttled until then (`ClusterConnectionStates.throttle`) and sends it nothing meanwhile,
so a client that honours the throttle never meets the mute, and one that does not is held by
the broker anyway.

Why a mute and not a delayed response (KIP-13 as first written): a delayed response holds one
request, while a client with N requests in flight has the other N - 1 read, recorded and
answered meanwhile, each delayed on its own, so it gets about N delays' worth of extra data. A
mute holds the connection: the requests read before it began are the only excess, once per mute,
and each of them counted towards the throttle time that ends it.

`ThrottleGate` is the rule both sides share: throttled until max(until, now + throttle_ms).
"""

from __future__ import annotations

__all__ = ["ThrottleGate"]


class ThrottleGate:
    """Until when one connection is throttled, in the caller's monotonic milliseconds.

    Several throttles may overlap (requests in flight are answered while muted): the latest end
    wins and a throttle never shortens another, as `ClusterConnectionStates.throttle` keeps the
    later of its `throttleUntilTimeMs` and the new one.
    """

    __slots__ = ("until_ms",)

    def __init__(self) -> None:
        self.until_ms: int | None = None  # None: never throttled

    def throttle(self, now_ms: int, throttle_ms: int) -> None:
        """A response carrying `throttle_ms` was sent (server) or received (client) at `now_ms`."""
        if throttle_ms <= 0:
            return
        end = now_ms + throttle_ms
        if self.until_ms is None or end > self.until_ms:
            self.until_ms = end

    def next_deadline_ms(self) -> int | None:
        """When the latest throttle ends (it may have passed); None if never throttled."""
        return self.until_ms

    def delay_ms(self, now_ms: int) -> int:
        """How long to wait at `now_ms` before reading (server) or sending (client) the next
        request on this connection; 0 when it is not throttled (`throttleDelayMs`)."""
        if self.until_ms is None:
            return 0
        return max(self.until_ms - now_ms, 0)
