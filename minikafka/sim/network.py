"""The simulation's network: listeners and connections over memory streams, in one Trio run.

A node of the simulation listens with `SimNetwork.listen` and connects with
`SimNetwork.connect` (open_connection's signature, which it is: `open_connection` with this
network's `open_stream`), passed to it as its `Edges` (server/edges.py). Its code serves and
connects exactly as over TCP: `run_listener` accepts from a `SimListener`, and the accepted
stream is served in the listening node's own nursery, so a node that is stopped drops its
connections as a killed process's kernel would.

Addresses are what the nodes' configs say (host, port); port 0 binds the next free port from
`FIRST_PORT`, in the order of the calls, so a run and its replay get the same ports. Each stream
carries a `socket` stand-in whose `getpeername()` and `getsockname()` give those addresses, so
the listener's per-IP connection counts and its log lines read as they do over TCP.

Delivery is instant and in order (`trio.testing.memory_stream_pair`); link faults come from
the real fault proxy on this network (sim/cluster.py). Each end of a connection belongs to the
node that opened or accepted it (`owner`), and `freeze(owner)` stands for SIGSTOP: until
`thaw(owner)`, that node's ends send and deliver nothing (what peers send waits in the stream,
as in a socket buffer), while its own timers still run, where a stopped process's would fire
late at SIGCONT: the difference is a paused node that notices its own silence sooner.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from functools import partial
from typing import Any

import trio
import trio.testing

from minikafka.client.connection import open_connection

FIRST_PORT = 45000  # port-0 binds (a spec's fixed ports are below: sim/cluster.py)
EPHEMERAL_FIRST = 50000  # the client side of each connection


class SimSocket:
    """What the shell reads of a socket: its own address and its peer's."""

    def __init__(self, local: tuple[str, int], peer: tuple[str, int] | None) -> None:
        self._local = local
        self._peer = peer

    def getsockname(self) -> tuple[str, int]:
        return self._local

    def getpeername(self) -> tuple[str, int]:
        if self._peer is None:
            raise OSError(errno.ENOTCONN, "not connected")
        return self._peer


class SimStream(trio.abc.HalfCloseableStream):
    """One end of a connection: a memory stream with a socket stand-in, held up while its
    owner is frozen."""

    def __init__(
        self,
        inner: trio.StapledStream[Any, Any],
        socket: SimSocket,
        network: SimNetwork,
        owner: int | None,
    ) -> None:
        self._inner = inner
        self.socket = socket
        self._network = network
        self._owner = owner

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._network.wait_thawed(self._owner)
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._inner.receive_some(max_bytes)
        await self._network.wait_thawed(self._owner)  # frozen meanwhile: read after the thaw
        return data

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()


class SimListener(trio.abc.Listener[SimStream]):
    """A bound address: `accept()` returns each connection made to it, in order."""

    def __init__(self, network: SimNetwork, address: tuple[str, int], owner: int | None) -> None:
        self._network = network
        self.address = address
        self.owner = owner
        self.socket = SimSocket(address, None)  # bound_port() reads getsockname()
        self._send, self._receive = trio.open_memory_channel[SimStream](float("inf"))

    def deliver(self, stream: SimStream) -> None:
        self._send.send_nowait(stream)

    async def accept(self) -> SimStream:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.ClosedResourceError("the listener is closed") from None

    async def aclose(self) -> None:
        self._network.unbind(self)
        self._send.close()
        # Connections made but never accepted: reset, as a closed socket's backlog is.
        while True:
            try:
                pending = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            await trio.aclose_forcefully(pending)
        self._receive.close()
        await trio.lowlevel.checkpoint()


class SimNetwork:
    """Every address bound in the simulation, and the connections between them."""

    def __init__(self) -> None:
        self.listeners: dict[tuple[str, int], SimListener] = {}
        self._next_port = FIRST_PORT
        self._next_ephemeral = EPHEMERAL_FIRST
        self.connections = 0  # ever opened
        self._frozen: dict[int, trio.Event] = {}  # owner -> set at its thaw

    def freeze(self, owner: int) -> None:
        """Hold up every stream end of `owner` (module docstring) until `thaw(owner)`."""
        self._frozen.setdefault(owner, trio.Event())

    def thaw(self, owner: int) -> None:
        event = self._frozen.pop(owner, None)
        if event is not None:
            event.set()

    async def wait_thawed(self, owner: int | None) -> None:
        event = None if owner is None else self._frozen.get(owner)
        if event is not None:
            await event.wait()

    async def listen(
        self, host: str, port: int, *, owner: int | None = None
    ) -> Sequence[SimListener]:
        """`Edges.listen`: bind host:port (0: the next free port) for `owner` (None: not a
        node). OSError EADDRINUSE if taken."""
        await trio.lowlevel.checkpoint()
        if port == 0:
            while (host, self._next_port) in self.listeners:
                self._next_port += 1
            port = self._next_port
            self._next_port += 1
        address = (host, port)
        if address in self.listeners:
            raise OSError(errno.EADDRINUSE, f"{host}:{port} is already bound in the simulation")
        listener = SimListener(self, address, owner)
        self.listeners[address] = listener
        return [listener]

    def unbind(self, listener: SimListener) -> None:
        if self.listeners.get(listener.address) is listener:
            del self.listeners[listener.address]

    async def open_stream(self, host: str, port: int, *, owner: int | None = None) -> SimStream:
        """`owner`'s end of a new connection to host:port; OSError ECONNREFUSED if nothing
        listens there (open_connection turns that into NETWORK_EXCEPTION, as for TCP)."""
        await trio.lowlevel.checkpoint()
        listener = self.listeners.get((host, port))
        if listener is None:
            raise OSError(errno.ECONNREFUSED, f"nothing listens on {host}:{port}")
        self.connections += 1
        local = ("127.0.0.1", self._next_ephemeral)
        self._next_ephemeral += 1
        client_end, server_end = trio.testing.memory_stream_pair()
        listener.deliver(
            SimStream(server_end, SimSocket((host, port), local), self, listener.owner)
        )
        return SimStream(client_end, SimSocket(local, (host, port)), self, owner)

    @property
    def connect(self) -> Any:
        """open_connection over this network, for a client that is not a node."""
        return partial(open_connection, open_stream=self.open_stream)

    def edges_of(self, owner: int) -> tuple[Any, Any]:
        """(`Edges.connect`, `Edges.listen`) of node `owner`: its connections and listeners
        are its own, so `freeze(owner)` holds them up."""
        stream = partial(self.open_stream, owner=owner)
        return partial(open_connection, open_stream=stream), partial(self.listen, owner=owner)
