"""The fault proxy: one process serving every directed link of a cluster, plus its control port.

`FaultProxy(config)` listens on 127.0.0.1 (the config's host) at one port per link and at the
control port. A connection on link (src, dst)'s port is node src dialling node dst (the node's
`--route` sent it here); it is pumped to dst's real address by a `ProxiedConnection`
(faults/pump.py) under the link's faults (faults/links.py). The control port speaks JSON lines
(faults/requests.py): each line is checked whole, then applied, then answered with one line; a
bad line gets `{"ok": false, "error": ...}` and the connection stays usable.

`serve_proxy_until_signalled` is the `minikafka proxy` process: start, write the ready file
(`pid`, `control_port`; like a node's node.json, atomically), run until SIGTERM or SIGINT.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import trio

from minikafka.errors import ClusterError, ConfigError
from minikafka.faults.config import ProxyConfig, ProxyLink
from minikafka.faults.links import FaultTable, LinkId, LinkState
from minikafka.faults.pump import CHUNK_BYTES, ProxiedConnection
from minikafka.faults.requests import (
    MAX_LINE_BYTES,
    Heal,
    Partition,
    Reset,
    SetFaults,
    Show,
    decode_line,
    parse_request,
)
from minikafka.server.listener import Listen, open_listeners

CONNECT_TIMEOUT_S = 10.0

Dial = Callable[[str, int], Awaitable[trio.abc.Stream]]


class LinkConnection(Protocol):
    """A live connection on a link, as the proxy's control reaches it."""

    def kick(self) -> None:
        """The link's faults changed: re-check them."""

    def close(self) -> None:
        """A reset: close both sides at once."""


async def dial_tcp(host: str, port: int) -> trio.abc.Stream:
    """Connect to a node's real address; OSError (a stream error to the pump) if it fails."""
    with trio.move_on_after(CONNECT_TIMEOUT_S):
        return await trio.open_tcp_stream(host, port)
    raise OSError(f"connect to {host}:{port} timed out")


class FaultProxy:
    """Every link's fault state and live connections; `run()` serves them over TCP."""

    def __init__(
        self, config: ProxyConfig, *, dial: Dial = dial_tcp, listen: Listen = open_listeners
    ) -> None:
        self.config = config
        self.table = FaultTable(link.link for link in config.links)
        self._links: dict[LinkId, ProxyLink] = {link.link: link for link in config.links}
        # Each link's live connections, in the order they arrived (a dict, not a set: a kick
        # or a reset then reaches them in an order that does not depend on memory addresses,
        # so a simulated run repeats itself).
        self._conns: dict[LinkId, dict[LinkConnection, None]] = {ln: {} for ln in self._links}
        self._dial = dial
        self._listen = listen  # TCP, or the simulation's network (minikafka/sim)

    # -- serving --------------------------------------------------------------------------

    async def bind(self) -> list[tuple[LinkId | None, Sequence[trio.abc.Listener[Any]]]]:
        """Open the control listener (link None) and one per link; ClusterError if one fails."""
        bound: list[tuple[LinkId | None, Sequence[trio.abc.Listener[Any]]]] = []
        ports = [(None, self.config.control_port)]
        ports += [(link.link, link.port) for link in self.config.links]
        try:
            for link, port in ports:
                try:
                    bound.append((link, await self._listen(self.config.host, port)))
                except OSError as e:
                    raise ClusterError(
                        f"fault proxy cannot listen on {self.config.host}:{port}: {e.strerror or e}"
                    ) from None
        except BaseException:
            for _, listeners in bound:
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
            raise
        return bound

    async def run(
        self,
        bound: list[tuple[LinkId | None, Sequence[trio.abc.Listener[Any]]]] | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the control port and every link (binding them first unless given `bound`)."""
        if bound is None:
            bound = await self.bind()
        async with trio.open_nursery() as nursery:
            for link, listeners in bound:
                handler = self.serve_control if link is None else partial(self.serve_link, link)
                nursery.start_soon(trio.serve_listeners, handler, listeners)
            task_status.started()

    async def serve_link(self, link: LinkId, stream: trio.abc.Stream) -> None:
        """Pump one connection that arrived on `link` until it ends."""
        target = self._links[link]
        conn = ProxiedConnection(
            self.table.state(link),
            stream,
            partial(self._dial, target.target_host, target.target_port),
        )
        self.track(link, conn)
        try:
            await conn.run()
        finally:
            self.untrack(link, conn)

    def track(self, link: LinkId, conn: LinkConnection) -> LinkState:
        """Count `conn` among `link`'s live connections, which a change of the link's faults
        kicks and a reset closes; the link's state. (The pumps above, or the simulation's
        spliced connections, sim/network.py.)"""
        self._conns[link][conn] = None
        return self.table.state(link)

    def untrack(self, link: LinkId, conn: LinkConnection) -> None:
        self._conns[link].pop(conn, None)

    async def serve_control(self, stream: trio.abc.Stream) -> None:
        """Answer JSON-line requests on one control connection until it closes."""
        buf = bytearray()
        async with stream:
            while True:
                try:
                    data = await stream.receive_some(CHUNK_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                buf += data
                while (end := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:end])
                    del buf[: end + 1]
                    if line.strip():
                        await _send_line(stream, self.handle_line(line))
                if len(buf) > MAX_LINE_BYTES:  # no newline in sight: we cannot find the next one
                    error = f"a request line must be at most {MAX_LINE_BYTES} bytes"
                    await _send_line(stream, {"ok": False, "error": error})
                    return

    # -- control --------------------------------------------------------------------------

    def handle_line(self, line: bytes) -> dict[str, Any]:
        try:
            return self.handle(decode_line(line))
        except ConfigError as e:
            return {"ok": False, "error": str(e)}

    def handle(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Apply one control request; a bad one raises ConfigError before anything changes."""
        request = parse_request(obj, self._links.keys())
        match request:
            case Show():
                return {"ok": True, "links": self.show()}
            case SetFaults():
                changed = self.table.set(request.links, request.changes)
                self._kick(changed)
                return {"ok": True, "links": [self._row(link) for link in changed]}
            case Partition():
                blocked = self.table.partition(request.groups)
                self._kick(blocked)
                return {"ok": True, "blocked": [list(link) for link in blocked]}
            case Heal():
                healed = self.table.heal()
                self._kick(healed)
                return {"ok": True, "healed": [list(link) for link in healed]}
            case Reset():
                return {"ok": True, "closed": self.reset(request.links)}
        raise AssertionError(f"unhandled request {request!r}")  # parse_request's ops are above

    def show(self) -> list[dict[str, Any]]:
        return [self._row(link) for link in self._links]

    def reset(self, links: tuple[LinkId, ...]) -> int:
        """Close every current connection on `links`; how many were closed."""
        closed = 0
        for link in links:
            conns = list(self._conns[link])
            self.table.state(link).resets += len(conns)
            for conn in conns:
                conn.close()
            closed += len(conns)
        return closed

    def _row(self, link: LinkId) -> dict[str, Any]:
        target = self._links[link]
        return {
            **self.table.state(link).to_json(),
            "listen": f"{self.config.host}:{target.port}",
            "target": target.target,
        }

    def _kick(self, links: list[LinkId]) -> None:
        for link in links:
            for conn in self._conns[link]:
                conn.kick()


async def _send_line(stream: trio.abc.Stream, reply: dict[str, Any]) -> None:
    try:
        await stream.send_all(json.dumps(reply).encode() + b"\n")
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the client went away; nothing to tell it


async def serve_proxy_until_signalled(config: ProxyConfig, ready_file: Path) -> None:
    """The `minikafka proxy` process: serve, write `ready_file`, stop on SIGTERM or SIGINT."""
    proxy = FaultProxy(config)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        bound = await proxy.bind()  # outside the nursery: a bind error stays one plain error
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.run, bound)
            write_ready_file(ready_file, config)
            print(
                f"fault proxy serving {len(config.links)} links; control on "
                f"{config.host}:{config.control_port}",
                flush=True,
            )
            async for _signum in signals:
                nursery.cancel_scope.cancel()
                break


def write_ready_file(path: Path, config: ProxyConfig) -> None:
    doc = {
        "pid": os.getpid(),
        "host": config.host,
        "control_port": config.control_port,
        "links": len(config.links),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)  # readers see the whole file or none (the node.json contract)
