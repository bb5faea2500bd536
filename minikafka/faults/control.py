"""Clients of a fault proxy's control port (the JSON-lines protocol of faults/requests.py).

`FaultProxyClient` is async (Trio): each call opens a connection, sends one request line, reads
one reply line and closes, so a client holds nothing open and can be used from any Trio run.
`BlockingFaultProxyClient` wraps each call in `trio.run` for synchronous code (the CLI, or an
experiment driven from a worker thread). Links are (src, dst) node-id pairs; `both_ways` adds
the reverse of each. A refused request raises ConfigError with the proxy's one-line reason (and
the proxy changed nothing); an unreachable or silent proxy raises ClusterError.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import trio

from minikafka.errors import ClusterError, ConfigError
from minikafka.faults.links import LinkId
from minikafka.faults.requests import MAX_LINE_BYTES


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()  # "leave this fault as it is" in set_links (None clears it)


def both_ways(links: Iterable[LinkId]) -> list[LinkId]:
    """Each link and its reverse, in order, without duplicates."""
    out: list[LinkId] = []
    for src, dst in links:
        for link in ((src, dst), (dst, src)):
            if link not in out:
                out.append(link)
    return out


class FaultProxyClient:
    """Talk to the fault proxy whose control port is `host:port`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout_s: float = 10.0,
        open_stream: Callable[[str, int], Awaitable[trio.abc.Stream]] = trio.open_tcp_stream,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._open_stream = open_stream  # TCP, or the simulation's network (minikafka/sim)

    def __repr__(self) -> str:
        return f"FaultProxyClient({self.host!r}, {self.port})"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def blocking(self) -> BlockingFaultProxyClient:
        return BlockingFaultProxyClient(self)

    async def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request object; the reply object. ConfigError if the proxy refused it."""
        line = json.dumps(dict(request)).encode() + b"\n"
        try:
            with trio.fail_after(self.timeout_s):
                stream = await self._open_stream(self.host, self.port)
                async with stream:
                    await stream.send_all(line)
                    reply = await _read_line(stream)
        except trio.TooSlowError:
            raise ClusterError(
                f"the fault proxy at {self.address} did not answer within {self.timeout_s:g}s"
            ) from None
        except (OSError, trio.BrokenResourceError) as e:
            raise ClusterError(f"cannot reach the fault proxy at {self.address}: {e}") from None
        try:
            answer = json.loads(reply)
        except (json.JSONDecodeError, UnicodeDecodeError):
            answer = None
        if not isinstance(answer, dict) or "ok" not in answer:
            raise ClusterError(f"the fault proxy at {self.address} sent a malformed reply")
        if not answer["ok"]:
            raise ConfigError(str(answer.get("error", "request refused")))
        return answer

    async def show(self) -> list[dict[str, Any]]:
        """Every link: src, dst, listen, target, blocked, latency_ms, bandwidth_bps,
        bytes_to_dst, bytes_to_src, connections_open, connections_total, resets."""
        return (await self.request({"op": "show"}))["links"]

    async def set_links(
        self,
        links: Iterable[LinkId],
        *,
        blocked: bool | None = KEEP,
        latency_ms: int | None = KEEP,
        bandwidth_bps: int | None = KEEP,
    ) -> list[dict[str, Any]]:
        """Set faults on `links` (each a (src, dst) pair); None clears a fault, KEEP leaves it.
        Returns the changed links' rows (as `show`)."""
        request: dict[str, Any] = {"op": "set", "links": [list(link) for link in links]}
        for name, value in (
            ("blocked", blocked),
            ("latency_ms", latency_ms),
            ("bandwidth_bps", bandwidth_bps),
        ):
            if value is not KEEP:
                request[name] = value
        return (await self.request(request))["links"]

    async def partition(self, groups: Iterable[Iterable[int]]) -> list[LinkId]:
        """Block every link between nodes of different groups, both ways (nodes in no group
        keep their links); adds to earlier blocks until `heal`. The links it blocked."""
        reply = await self.request({"op": "partition", "groups": [list(g) for g in groups]})
        return [(src, dst) for src, dst in reply["blocked"]]

    async def heal(self) -> list[LinkId]:
        """Clear every fault on every link; the links that had one."""
        return [(src, dst) for src, dst in (await self.request({"op": "heal"}))["healed"]]

    async def reset(self, links: Iterable[LinkId]) -> int:
        """Close every current connection on `links`; how many were closed."""
        reply = await self.request({"op": "reset", "links": [list(link) for link in links]})
        return reply["closed"]


class BlockingFaultProxyClient:
    """`FaultProxyClient`'s calls for synchronous code: each one is a `trio.run`."""

    def __init__(self, client: FaultProxyClient) -> None:
        self.client = client

    def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return trio.run(self.client.request, request)

    def show(self) -> list[dict[str, Any]]:
        return trio.run(self.client.show)

    def set_links(self, links: Iterable[LinkId], **faults: Any) -> list[dict[str, Any]]:
        links = list(links)
        return trio.run(lambda: self.client.set_links(links, **faults))

    def partition(self, groups: Iterable[Iterable[int]]) -> list[LinkId]:
        return trio.run(self.client.partition, [list(g) for g in groups])

    def heal(self) -> list[LinkId]:
        return trio.run(self.client.heal)

    def reset(self, links: Iterable[LinkId]) -> int:
        return trio.run(self.client.reset, list(links))


async def _read_line(stream: trio.abc.Stream) -> bytes:
    buf = bytearray()
    while b"\n" not in buf:
        data = await stream.receive_some(MAX_LINE_BYTES)
        if not data:
            raise trio.BrokenResourceError("the proxy closed the connection without a reply")
        buf += data
    return bytes(buf[: buf.index(b"\n")])
