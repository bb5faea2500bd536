"""The TCP listener and the per-connection request pump.

Each connection reads frames, decodes requests and hands them to the node's dispatcher; up to
`request.max.in.flight` requests of one connection are handled concurrently (a follower's long
poll must not hold up the produce requests behind it), and responses are written whole, each
under the connection's send lock, tagged with their correlation id. A malformed frame or message
is the peer's fault: that connection is closed and logged, every other connection goes on, and
nothing was stored for it (decoding happens before any handler runs).

Client quotas (KIP-219): a handler may return a `Reply` carrying a throttle time. The connection
is then muted from the moment the reply is ready (before its response is written, so a client
that answers the response at once still finds it muted) until the throttle time has passed: the
read loop takes no further request off the connection meanwhile (Kafka's SocketServer mutes a
throttled channel), while requests already taken keep being processed and answered. Overlapping
throttles end at the latest (core/quota/gate.py).

Bounded work per peer (docs/front-door.md):

- `connections.max.idle.ms` (Kafka's name and default, 10 minutes): a connection on which no
  whole request was received and no response was written for that long is closed, as Kafka's
  Selector closes idle channels. Requests being handled do not count as activity (neither do
  they in Kafka), so a peer that never reads its responses is closed too, with its handlers;
  nor do the bytes of a frame still arriving, so a peer trickling one frame a byte
  at a time cannot hold a connection forever.
- Such a peer pins at most `request.max.in.flight` responses: a request's slot is given back
  only once its response is written, and no further request is read while every slot is taken
  (Kafka goes further and mutes a channel until its one response is sent).
- Who may connect (docs/front-door.md, core/connection_quotas.py, a `Door` shared by the node's
  listeners): `max.connections` over both listeners, `listener.name.<name>.max.connections`,
  `max.connections.per.ip`, for clients; a connection beyond them is closed at once and logged
  as `connection_refused` (Kafka's Acceptor instead stops accepting until one closes, leaving
  the peer in the kernel's backlog; closing says at once that the broker is full). The
  cluster's own nodes are never locked out: on the native listener a connection beyond the
  limits is on probation, and served past them if it proves membership in time (KIP-402 lets
  the inter-broker listener past the broker-wide limit); a client connection that proves
  membership gives its client slot back.
- `queued.max.request.bytes` (server/request_memory.py): a client's frame is taken from the
  node's request memory once its length prefix has arrived, before its body is read, and
  given back once it is answered; while the memory is full, nothing more is read from that
  connection. Nodes' connections are not metered.

The control plane answers only the cluster's own nodes (cluster membership): with a `ClusterGate`
(server/cluster_gate.py) each request is screened in the read loop, in arrival order, before any
handler runs; the gate answers the membership handshake itself and refuses a control-plane
request from a connection that has not proven membership. Every node passes one; only tests of
the pump itself serve without.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from minikafka.clock import now_ms, wait_out
from minikafka.core.connection_quotas import NATIVE as NATIVE_LISTENER
from minikafka.core.connection_quotas import ConnectionQuotas
from minikafka.core.quota.gate import ThrottleGate
from minikafka.errors import RemoteProtocolError
from minikafka.server.cluster_gate import ClusterGate
from minikafka.server.eventlog import EventLog
from minikafka.server.request_memory import RequestMemory
from minikafka.wire.codec import decode_request, encode_response
from minikafka.wire.framing import FrameDecoder, frame_parts


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A handler's outcome for its connection: the response to send (None: none, as for Produce
    with acks=0) and for how long to read nothing more from the connection (KIP-219; Kafka's
    RequestChannel sends the response and starts a ThrottledChannel). A dispatcher may also
    return a bare response (or None), which means no throttle."""

    response: object | None
    throttle_ms: int = 0


# (header, body) -> response, Reply or None; on an ordered codec also `order=` (`Ordering`).
Dispatcher = Callable[..., Awaitable[object | None]]


@dataclass(frozen=True, slots=True)
class WireCodec:
    """How a listener reads requests and writes responses: `decode(payload) -> (header, body)`
    (the header has `correlation_id` and `client_id`; RemoteProtocolError for a malformed one)
    and `encode(correlation_id, response) -> payload`. Frames are the same 4-byte big-endian
    length prefix for both protocols a broker speaks: minikafka's msgpack (wire/codec.py, the
    default) and Kafka's binary protocol (minikafka/kafka, server/kafka_apis.py)."""

    decode: Callable[[bytes], tuple[Any, object]]
    encode: Callable[[int, object], bytes]
    # Kafka's order (`Ordering`): requests start one at a time, in arrival order, and are
    # answered in that order; the dispatcher is called with `order=`. Off (minikafka's
    # protocol): handled concurrently, answered as they finish, matched by correlation id.
    ordered: bool = False


class Ordering:
    """One request's place on an ordered connection: `release()` lets the next request start
    now, before this one is answered.

    Kafka's SocketServer mutes a channel until its one request is answered, so a connection's
    requests are processed strictly one after another. A handler releases once everything it
    must do in arrival order is done and no KIP-219 throttle can follow: Produce, once its
    batches are stamped and queued for the log (server/produce.py). Its wait for the disk and
    the replicas then overlaps the next request's, as in Kafka, where that wait (acks=all) is
    the only long one; here an acks=1 answer also waits for a synced LMDB commit, which would
    otherwise be paid once per request in series. Appends and answers keep the connection's
    order. The listener passes one to the dispatcher of an ordered codec (`order=`) and calls
    `release` itself when the handler returns; releasing twice is releasing once."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release

    def release(self) -> None:
        self._release()


NATIVE = WireCodec(decode=decode_request, encode=encode_response)
RECV_CHUNK = 1 << 20
# Between two frames of a metered connection: enough for many pipelined small requests, little
# enough that frames not yet taken from queued.max.request.bytes stay small per connection.
BETWEEN_FRAMES_CHUNK = 64 << 10
DEFAULT_IDLE_MS = 600_000  # connections.max.idle.ms (Kafka's default)
# A connection over the client limits may still be a node's: it has this long to prove it.
DEFAULT_PROBATION_MS = 5_000


async def serve_connection(
    stream: trio.SocketStream,
    dispatch: Dispatcher,
    *,
    max_frame_bytes: int,
    max_in_flight: int,
    events: EventLog,
    idle_ms: int = DEFAULT_IDLE_MS,
    gate: ClusterGate | None = None,
    codec: WireCodec = NATIVE,
    memory: RequestMemory | None = None,
    on_member: Callable[[], None] | None = None,
    probation_ms: int | None = None,
) -> None:
    """Serve one connection until the peer closes it, breaks the protocol or idles.

    `memory`: queued.max.request.bytes, taken for each frame of a client (not of a node that
    proved membership) from its prefix on, given back once it is answered. `on_member` is
    called once, when the connection proves membership. `probation_ms` (a connection over the
    client limits, core/connection_quotas.py): it may only prove membership, within that time.
    """
    peer = _peer_name(stream)
    session = gate.session() if gate is not None else None
    last_active = trio.current_time()  # a whole request received or a response written
    decoder = FrameDecoder(max_frame_bytes)
    send_lock = trio.Lock()
    in_flight = trio.Semaphore(max_in_flight)
    mute = ThrottleGate()

    async def handle(
        header: Any,
        body: object,
        scope: trio.CancelScope,
        held: int,
        previous: trio.Event | None = None,
        answered: trio.Event | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """One request. On an ordered connection (`previous` given, started with
        nursery.start) the read loop waits until this one is handled or releases its
        `Ordering`, and its answer waits for `previous`'s; `answered` is set once it is
        written."""
        started = False

        def next_may_start() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        try:
            if previous is not None:
                result = await dispatch(header, body, order=Ordering(next_may_start))
            else:
                result = await dispatch(header, body)
            reply = result if isinstance(result, Reply) else Reply(response=result)
            # Muted before the response can reach the peer, and before the next request starts.
            mute.throttle(now_ms(), reply.throttle_ms)
            next_may_start()
            if previous is not None:
                await previous.wait()
            if reply.response is not None:
                await send_answer(header, reply.response)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            scope.cancel()  # the peer went away
        except Exception as exc:  # noqa: BLE001 - our bug: log it, drop this connection only
            events.emit(
                "handler_error",
                peer=peer,
                api=type(body).__name__,
                error=repr(exc),
                traceback=traceback.format_exc(),
            )
            scope.cancel()
        finally:
            next_may_start()
            if answered is not None:
                answered.set()
            in_flight.release()
            if memory is not None:
                memory.release(held)

    async def send_answer(header: Any, response: object) -> None:
        nonlocal last_active
        payload = codec.encode(header.correlation_id, response)
        async with send_lock:
            for part in frame_parts(payload):
                await stream.send_all(part)
            last_active = trio.current_time()

    async def read_requests(nursery: trio.Nursery) -> None:
        nonlocal last_active
        previous = trio.Event()  # the last ordered request's answer
        previous.set()
        reserved = held = 0  # queued.max.request.bytes held, not yet handed to a handler
        try:
            while True:
                payload = decoder.next_frame()
                metered = memory is not None and (session is None or session.member is None)
                if payload is None:
                    # A frame's bytes are taken from the pool once its prefix says how many,
                    # before its body is read on; between frames only a small read is made.
                    pending = decoder.pending_frame_bytes
                    if metered and pending is not None and not reserved:
                        reserved = await memory.take(pending)
                    chunk = RECV_CHUNK if reserved or not metered else BETWEEN_FRAMES_CHUNK
                    data = await stream.receive_some(chunk)
                    decoder.receive_data(data)
                    if not data:
                        decoder.next_frame()  # raises on EOF inside a frame
                        return  # clean EOF: in-flight requests finish, then we close
                    continue
                # Only whole requests count as activity: a peer trickling one frame a byte at
                # a time is closed at connections.max.idle.ms like an idle one.
                last_active = trio.current_time()
                held, reserved = reserved, 0
                if metered and not held:  # the frame arrived within one read
                    held = await memory.take(len(payload))
                header, body = codec.decode(payload)
                if gate is not None and session is not None:
                    was_member = session.member is not None
                    answer = gate.screen(session, body, peer)
                    if session.member is not None and not was_member:
                        proved()
                    elif (
                        probation_ms is not None
                        and session.member is None
                        and (answer is None or getattr(answer, "error_code", 0))
                    ):
                        # On probation only a node's proof is heard, at its first try.
                        events.emit("connection_refused", peer=peer, reason="over the limits")
                        nursery.cancel_scope.cancel()
                        return
                    if answer is not None:  # the handshake, or a refusal: no handler runs
                        await send_answer(header, answer)
                        if memory is not None:
                            memory.release(held)
                        held = 0
                        continue
                await in_flight.acquire()
                # Muted (KIP-219): this request waits, unprocessed, until the throttle ends. The
                # check comes after every await, so a mute that began meanwhile counts. Nothing
                # more is received while we wait: the socket buffers fill and TCP holds the peer.
                await wait_out(mute)
                if codec.ordered:
                    answered = trio.Event()
                    await nursery.start(
                        handle, header, body, nursery.cancel_scope, held, previous, answered
                    )
                    previous = answered
                else:
                    nursery.start_soon(handle, header, body, nursery.cancel_scope, held)
                held = 0  # the handler gives it back
        except RemoteProtocolError as exc:
            events.emit("bad_request", peer=peer, error=str(exc))
            nursery.cancel_scope.cancel()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            nursery.cancel_scope.cancel()
        finally:
            if memory is not None:
                memory.release(reserved + held)

    def proved() -> None:
        """The connection proved membership: a node's from now on, probation lifted."""
        if on_member is not None:
            on_member()
        if connection_scope is not None:
            connection_scope.deadline = math.inf

    async def close_when_idle(connection: trio.CancelScope) -> None:
        # Read last_active again after each sleep: activity meanwhile moves the deadline.
        while (deadline := last_active + idle_ms / 1000) > trio.current_time():
            await trio.sleep_until(deadline)
        events.emit("connection_idle_closed", peer=peer, idle_ms=idle_ms)
        connection.cancel()

    # Errors are handled inside the nursery: whatever a peer does ends this connection only,
    # never the listener (an exception escaping here would end the node).
    connection_scope: trio.CancelScope | None = None
    try:
        async with trio.open_nursery() as connection:
            connection_scope = connection.cancel_scope
            if probation_ms is not None:  # prove membership in time, or be closed
                connection_scope.deadline = trio.current_time() + probation_ms / 1000
            connection.start_soon(close_when_idle, connection.cancel_scope)
            async with trio.open_nursery() as nursery:
                await read_requests(nursery)
            connection.cancel_scope.cancel()  # served: stop watching
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


@dataclass(frozen=True, slots=True, kw_only=True)
class Door:
    """What a listener admits: the node's connection quotas (shared by its listeners), this
    listener's name in them, the node's request memory, and how long a connection over the
    limits has to prove it is a node's (core/connection_quotas.py)."""

    quotas: ConnectionQuotas
    listener: str = NATIVE_LISTENER
    memory: RequestMemory | None = None
    probation_ms: int = DEFAULT_PROBATION_MS


async def run_listener(
    host: str,
    port: int,
    dispatch: Dispatcher,
    *,
    max_frame_bytes: int,
    max_in_flight: int,
    events: EventLog,
    door: Door,
    idle_ms: int = DEFAULT_IDLE_MS,
    gate: ClusterGate | None,
    codec: WireCodec = NATIVE,
    listeners: Sequence[trio.abc.Listener[Any]] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on host:port (0 = any free port) and report the bound port through task_status;
    or serve `listeners` already bound (`open_listeners`), when the port had to be known first."""
    if listeners is None:
        listeners = await open_listeners(host, port)
    bound = bound_port(listeners)

    async def on_connection(stream: trio.SocketStream) -> None:
        # trio.SocketStream sets TCP_NODELAY itself: small responses are not delayed.
        await serve_admitted(
            stream,
            dispatch,
            door,
            max_frame_bytes=max_frame_bytes,
            max_in_flight=max_in_flight,
            events=events,
            idle_ms=idle_ms,
            gate=gate,
            codec=codec,
        )

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, on_connection, listeners)
        task_status.started(bound)


# (host, port) -> listeners bound there, not yet accepting (port 0: any free one): TCP's
# `open_listeners`, or the simulation's network (server/edges.py).
Listen = Callable[[str, int], Awaitable[Sequence[trio.abc.Listener[Any]]]]


async def open_listeners(host: str, port: int) -> list[trio.SocketListener]:
    """Sockets bound to host:port (0: any free port), not yet accepting."""
    return await trio.open_tcp_listeners(port, host=host)


def bound_port(listeners: Sequence[trio.abc.Listener[Any]]) -> int:
    """The port of listeners bound to port 0: theirs or, for the simulation's, their `socket`
    stand-in's (anything with `getsockname()`)."""
    return listeners[0].socket.getsockname()[1]  # type: ignore[attr-defined]


async def serve_admitted(
    stream: trio.SocketStream,
    dispatch: Dispatcher,
    door: Door,
    *,
    max_frame_bytes: int,
    max_in_flight: int,
    events: EventLog,
    idle_ms: int = DEFAULT_IDLE_MS,
    gate: ClusterGate | None = None,
    codec: WireCodec = NATIVE,
) -> None:
    """serve_connection as a client's if the quotas admit it; else, where a node may be
    knocking (a listener with a ClusterGate), on probation; else close the stream at once."""
    quotas, listener = door.quotas, door.listener
    peer = _peer_name(stream)
    ip = peer.rpartition(":")[0] or peer
    refused = quotas.admit(listener, ip)
    probation = refused is not None and gate is not None and quotas.try_probation()
    if refused is not None and not probation:
        events.emit("connection_refused", peer=peer, reason=refused, refused=quotas.refused)
        await trio.aclose_forcefully(stream)
        return
    member = False

    def on_member() -> None:
        nonlocal member, probation
        member = True
        if refused is None:
            quotas.to_member(listener, ip)
        else:
            quotas.end_probation()
            probation = False
            quotas.member_admitted()

    try:
        await serve_connection(
            stream,
            dispatch,
            max_frame_bytes=max_frame_bytes,
            max_in_flight=max_in_flight,
            events=events,
            idle_ms=idle_ms,
            gate=gate,
            codec=codec,
            memory=door.memory,
            on_member=on_member,
            probation_ms=None if refused is None else door.probation_ms,
        )
    finally:
        if member:
            quotas.member_closed()
        elif refused is None:
            quotas.release(listener, ip)
        if probation:
            quotas.end_probation()


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"
