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
throttles end at the latest (core/throttle_gate.py).
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from minikafka.core.throttle_gate import ThrottleGate
from minikafka.errors import RemoteProtocolError
from minikafka.server.clock import now_ms, wait_out
from minikafka.server.eventlog import EventLog
from minikafka.wire.codec import RequestHeader, decode_request, encode_response
from minikafka.wire.framing import FrameDecoder, frame_header


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A handler's outcome for its connection: the response to send (None: none, as for Produce
    with acks=0) and for how long to read nothing more from the connection (KIP-219; Kafka's
    RequestChannel sends the response and starts a ThrottledChannel). A dispatcher may also
    return a bare response (or None), which means no throttle."""

    response: object | None
    throttle_ms: int = 0


Dispatcher = Callable[[RequestHeader, object], Awaitable[object | None]]
RECV_CHUNK = 1 << 20


async def serve_connection(
    stream: trio.SocketStream,
    dispatch: Dispatcher,
    *,
    max_frame_bytes: int,
    max_in_flight: int,
    events: EventLog,
) -> None:
    peer = _peer_name(stream)
    decoder = FrameDecoder(max_frame_bytes)
    send_lock = trio.Lock()
    in_flight = trio.Semaphore(max_in_flight)
    mute = ThrottleGate()

    async def handle(header: RequestHeader, body: object, scope: trio.CancelScope) -> None:
        try:
            result = await dispatch(header, body)
            reply = result if isinstance(result, Reply) else Reply(response=result)
            mute.throttle(now_ms(), reply.throttle_ms)  # before the response can reach the peer
            if reply.response is not None:
                payload = encode_response(header.correlation_id, reply.response)
                async with send_lock:
                    await stream.send_all(frame_header(len(payload)) + payload)
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
            in_flight.release()

    async def read_requests(nursery: trio.Nursery) -> None:
        try:
            while True:
                payload = decoder.next_frame()
                if payload is None:
                    data = await stream.receive_some(RECV_CHUNK)
                    decoder.receive_data(data)
                    if not data:
                        decoder.next_frame()  # raises on EOF inside a frame
                        return  # clean EOF: in-flight requests finish, then we close
                    continue
                header, body = decode_request(payload)
                await in_flight.acquire()
                # Muted (KIP-219): this request waits, unprocessed, until the throttle ends. The
                # check comes after every await, so a mute that began meanwhile counts. Nothing
                # more is received while we wait: the socket buffers fill and TCP holds the peer.
                await wait_out(mute)
                nursery.start_soon(handle, header, body, nursery.cancel_scope)
        except RemoteProtocolError as exc:
            events.emit("bad_request", peer=peer, error=str(exc))
            nursery.cancel_scope.cancel()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            nursery.cancel_scope.cancel()

    # Errors are handled inside the nursery: whatever a peer does ends this connection only,
    # never the listener (an exception escaping here would end the node).
    try:
        async with trio.open_nursery() as nursery:
            await read_requests(nursery)
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def run_listener(
    host: str,
    port: int,
    dispatch: Dispatcher,
    *,
    max_frame_bytes: int,
    max_in_flight: int,
    events: EventLog,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on host:port (0 = any free port) and report the bound port through task_status."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]

    async def on_connection(stream: trio.SocketStream) -> None:
        # trio.SocketStream sets TCP_NODELAY itself: small responses are not delayed.
        await serve_connection(
            stream,
            dispatch,
            max_frame_bytes=max_frame_bytes,
            max_in_flight=max_in_flight,
            events=events,
        )

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, on_connection, listeners)
        task_status.started(bound)


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"
