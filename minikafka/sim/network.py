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

Each direction of a connection is a `Pipe` (sim/pipe.py): instant and in order, at most
SOCKET_BUFFER_BYTES waiting, one scheduling step per send and per receive. With a fault proxy
(`splice(proxy)`, sim/cluster.py) the proxy's control port and fault table are the real ones,
but a connection made to one of its link ports is joined straight to its target by two Pipes
that obey the link's faults as the proxy's pumps do (`SplicedConnection`): the proxy's own
tests run against both (tests/faults/test_proxy.py), and no pump task stands in between.

Each end of a connection belongs to the
node that opened or accepted it (`owner`), and `freeze(owner)` stands for SIGSTOP: until
`thaw(owner)`, that node's ends send and deliver nothing (what peers send waits in the stream,
as in a socket buffer), while its own timers still run, where a stopped process's would fire
late at SIGCONT: the difference is a paused node that notices its own silence sooner.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import trio

from minikafka.client.connection import open_connection
from minikafka.faults.config import ProxyLink
from minikafka.faults.proxy import FaultProxy
from minikafka.faults.pump import BUFFER_BYTES
from minikafka.sim.pipe import Pipe

FIRST_PORT = 45000  # port-0 binds (a spec's fixed ports are below: sim/cluster.py)
EPHEMERAL_FIRST = 50000  # the client side of each connection
# What one direction of a direct connection holds before a send waits: loopback TCP's buffers
# are about this (net.ipv4.tcp_wmem's maximum).
SOCKET_BUFFER_BYTES = 4 << 20


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
    """One end of a connection: it sends into one Pipe and receives from the other, with a
    socket stand-in, held up while its owner is frozen."""

    def __init__(
        self,
        send: Pipe,
        receive: Pipe,
        socket: SimSocket,
        network: SimNetwork,
        owner: int | None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._receive = receive
        self.socket = socket
        self._network = network
        self._owner = owner
        self._on_close = on_close

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._network.wait_thawed(self._owner)
        await self._send.send(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._send.wait_room()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._receive.receive(max_bytes)
        await self._network.wait_thawed(self._owner)  # frozen meanwhile: read after the thaw
        return data

    async def send_eof(self) -> None:
        self._send.close_writer()
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        if not (self._send.writer_closed and self._receive.reader_closed):
            self._send.close_writer()
            self._receive.close_reader()
            if self._on_close is not None:
                self._on_close()
        await trio.lowlevel.checkpoint()


class SplicedConnection:
    """A connection made to a proxy link's port, joined straight to the link's target by two
    Pipes that obey the link's faults, with the proxy's rules (faults/pump.py): counted in the
    link's state, dialled onward only once the link is not blocked (ECONNREFUSED there closes
    it), a close delivers what the closing side sent (dropped if the link is blocked) and then
    ends both sides, and the proxy's `kick` and `close` (a reset) reach it through
    `FaultProxy.track`."""

    def __init__(
        self,
        network: SimNetwork,
        proxy: FaultProxy,
        link: ProxyLink,
        socket: SimSocket,
        owner: int | None,
    ) -> None:
        self._network = network
        self._proxy = proxy
        self._link = link
        self.state = proxy.track(link.link, self)
        self.state.connections_open += 1
        self.state.connections_total += 1
        self.to_dst = Pipe(BUFFER_BYTES, self.state, "to_dst")
        self.to_src = Pipe(BUFFER_BYTES, self.state, "to_src")
        self.to_dst.on_drained = self.to_src.on_drained = self._finish
        self.src_end = SimStream(
            self.to_dst, self.to_src, socket, network, owner, on_close=self._src_closed
        )
        self._dialled = False
        self._done = False
        self.kick()

    def kick(self) -> None:
        """The link's faults changed: dial if no longer blocked, and wake both directions."""
        if not (self._done or self._dialled or self.state.faults.blocked):
            self._dial()
        self.to_dst.kick()
        self.to_src.kick()

    def close(self) -> None:
        """The proxy's reset: both sides end at once, nothing more delivered."""
        self.to_dst.reset()
        self.to_src.reset()
        self._finish()

    def _dial(self) -> None:
        self._dialled = True
        target = (self._link.target_host, self._link.target_port)
        listener = self._network.listeners.get(target)
        if listener is None:  # dst is down: the node sees its connection closed
            self.close()
            return
        socket = SimSocket(target, self._network.ephemeral_address())
        listener.deliver(
            SimStream(
                self.to_src, self.to_dst, socket, self._network, listener.owner, self._dst_closed
            )
        )

    def _src_closed(self) -> None:
        if not self._dialled:
            self.to_dst.drop()  # never reached dst
            self._finish()
        elif self.state.faults.blocked:
            self.to_dst.drop()  # a close seen while blocked ends the other side at once

    def _dst_closed(self) -> None:
        if self.state.faults.blocked:
            self.to_src.drop()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self.state.connections_open -= 1
            self._proxy.untrack(self._link.link, self)


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
        self._spliced: dict[tuple[str, int], tuple[FaultProxy, ProxyLink]] = {}

    def splice(self, proxy: FaultProxy) -> None:
        """Join connections made to `proxy`'s link ports straight to their targets
        (`SplicedConnection`); the proxy still binds those ports and serves its control port."""
        for link in proxy.config.links:
            self._spliced[(proxy.config.host, link.port)] = (proxy, link)

    def ephemeral_address(self) -> tuple[str, int]:
        address = ("127.0.0.1", self._next_ephemeral)
        self._next_ephemeral += 1
        return address

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
        spliced = self._spliced.get((host, port))
        listener = self.listeners.get((host, port))
        if listener is None:
            raise OSError(errno.ECONNREFUSED, f"nothing listens on {host}:{port}")
        self.connections += 1
        local = self.ephemeral_address()
        if spliced is not None:
            proxy, link = spliced
            return SplicedConnection(
                self, proxy, link, SimSocket(local, (host, port)), owner
            ).src_end
        to_server, to_client = Pipe(SOCKET_BUFFER_BYTES), Pipe(SOCKET_BUFFER_BYTES)
        listener.deliver(
            SimStream(to_client, to_server, SimSocket((host, port), local), self, listener.owner)
        )
        return SimStream(to_server, to_client, SimSocket(local, (host, port)), self, owner)

    @property
    def connect(self) -> Any:
        """open_connection over this network, for a client that is not a node."""
        return partial(open_connection, open_stream=self.open_stream)

    def edges_of(self, owner: int) -> tuple[Any, Any]:
        """(`Edges.connect`, `Edges.listen`) of node `owner`: its connections and listeners
        are its own, so `freeze(owner)` holds them up."""
        stream = partial(self.open_stream, owner=owner)
        return partial(open_connection, open_stream=stream), partial(self.listen, owner=owner)
