"""One pipelined request/response connection to a node, over any Trio stream.

Requests are written as soon as they are made and matched to responses by correlation id, so
many can be in flight on one connection (round trips are the expensive thing here; batch and
pipeline). A background reader task, living in the caller's nursery, decodes frames and wakes
the waiting requester. When the stream breaks, every pending and future request fails with a
retriable NETWORK_EXCEPTION BrokerError.

Client-side throttling (KIP-219): a response with `throttle_time_ms` > 0 marks the node
throttled until then, and no request is sent on this connection before that (Kafka's
NetworkClient: `ClusterConnectionStates.throttle`, the node is not ready while throttled).
Requests already sent are not affected. The broker mutes the connection for the same time, so a
client that waits too never has a request sitting unread in a muted connection.

Cluster membership: a node opening a connection to a peer passes its `credential`,
and the connection proves membership before the block starts (client/membership.py); clients
pass none. Whatever the block raises comes out of `open_connection` as itself.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import cast

import trio

from minikafka.client.membership import try_prove_membership
from minikafka.clock import now_ms, wait_out
from minikafka.core.cluster_auth import ClusterCredential
from minikafka.core.quota.gate import ThrottleGate
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError, ProtocolError
from minikafka.wire.codec import RequestHeader, encode_request
from minikafka.wire.correlation import Correlator
from minikafka.wire.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, frame_parts
from minikafka.wire.messages import API_KEY_OF
from minikafka.wire.request import R, Request

RECV_CHUNK = 1 << 20


class Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        client_id: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        label: str = "",
    ) -> None:
        self._stream = stream
        self._client_id = client_id
        self._decoder = FrameDecoder(max_frame_bytes)
        self._correlator = Correlator()
        self._waiters: dict[int, _Waiter] = {}
        self._send_lock = trio.Lock()
        self._broken: BaseException | None = None
        self._throttle = ThrottleGate()
        self.label = label

    @property
    def broken(self) -> bool:
        return self._broken is not None

    def throttle_delay_ms(self) -> int:
        """How long the next request will wait for the broker's last throttle (KIP-219)."""
        return self._throttle.delay_ms(now_ms())

    async def request(self, body: Request[R], *, timeout_s: float = math.inf) -> R:
        """Send one request and wait for its response, of the type the request names
        (wire/request.py; BrokerError NETWORK_EXCEPTION if the connection breaks,
        REQUEST_TIMED_OUT after timeout_s)."""
        waiter = _Waiter()
        corr_id = await self._send(body, waiter)
        try:
            with trio.move_on_after(timeout_s) as scope:
                await waiter.event.wait()
        finally:  # timed out or cancelled: a late answer is decoded and dropped
            if not waiter.event.is_set():
                self._waiters.pop(corr_id, None)
        if scope.cancelled_caught:
            raise BrokerError(
                ErrorCode.REQUEST_TIMED_OUT, f"no answer from {self.label} in {timeout_s}s"
            )
        if waiter.error is not None:
            raise waiter.error
        # The reader decodes each response by its request's API key (wire/correlation.py), so
        # it is of the type the request names (tests/wire/test_request_types.py).
        return cast(R, waiter.response)

    async def send_oneway(self, body: object) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        await self._send(body, None)

    async def _send(self, body: object, waiter: _Waiter | None) -> int:
        # KIP-219: nothing goes to a throttled node (the wait is not part of any request timeout:
        # Kafka starts that clock when the request is sent). A response that arrives meanwhile
        # may throttle us for longer: wait_out reads the gate again after each sleep.
        await wait_out(self._throttle)
        self._raise_if_broken()
        api_key = API_KEY_OF[type(body)]
        if waiter is not None:
            corr_id, payload = self._correlator.next_request(api_key, 0, self._client_id, body)
            self._waiters[corr_id] = waiter
        else:  # no response will come, so nothing to pair: correlation id -1
            corr_id = -1
            header = RequestHeader(
                api_key=api_key, api_version=0, correlation_id=-1, client_id=self._client_id
            )
            payload = encode_request(header, body)
        async with self._send_lock:
            try:
                for part in frame_parts(payload):
                    await self._stream.send_all(part)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self._fail_all(exc)
                self._raise_if_broken()
            except trio.Cancelled:
                # A frame may be half written: nothing more can be sent on this stream.
                self._fail_all(trio.ClosedResourceError("a send was cancelled mid-frame"))
                raise
        return corr_id

    async def run_reader(self) -> None:
        """Read responses until the stream ends; then fail whatever is still pending."""
        try:
            while True:
                frame = self._decoder.next_frame()
                if frame is None:
                    data = await self._stream.receive_some(RECV_CHUNK)
                    self._decoder.receive_data(data)
                    if not data:
                        self._decoder.next_frame()  # raises if EOF fell inside a frame
                        raise trio.BrokenResourceError("connection closed by peer")
                    continue
                corr_id, response = self._correlator.on_response(frame)
                # Every response type may carry a throttle (Kafka: AbstractResponse.throttleTimeMs);
                # a late answer to a request we gave up on still throttles the node.
                self._throttle.throttle(now_ms(), getattr(response, "throttle_time_ms", 0))
                waiter = self._waiters.pop(corr_id, None)
                if waiter is not None:
                    waiter.response = response
                    waiter.event.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ProtocolError) as exc:
            self._fail_all(exc)

    def _fail_all(self, exc: BaseException) -> None:
        if self._broken is None:
            self._broken = exc
        for waiter in self._waiters.values():
            waiter.error = _network_error(self.label, self._broken)
            waiter.event.set()
        self._waiters.clear()

    def _raise_if_broken(self) -> None:
        if self._broken is not None:
            raise _network_error(self.label, self._broken)

    async def aclose(self) -> None:
        self._fail_all(trio.ClosedResourceError("connection closed"))
        await self._stream.aclose()


class _Waiter:
    __slots__ = ("event", "response", "error")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: object = None
        self.error: MiniKafkaError | None = None


def _network_error(label: str, cause: BaseException) -> BrokerError:
    return BrokerError(ErrorCode.NETWORK_EXCEPTION, f"connection to {label} failed: {cause}")


@asynccontextmanager
async def open_connection(
    host: str,
    port: int,
    *,
    client_id: str,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    connect_timeout_s: float = 10.0,
    credential: ClusterCredential | None = None,
    open_stream: Callable[[str, int], Awaitable[trio.abc.Stream]] = trio.open_tcp_stream,
) -> AsyncIterator[Connection]:
    """Connect and run the reader for the duration of the block. With a `credential` (the
    cluster's own nodes), first prove membership of the cluster (client/membership.py): BrokerError
    CLUSTER_AUTHORIZATION_FAILED if the server refuses. `open_stream` is TCP, or the
    simulation's network (minikafka/sim/network.py)."""
    label = f"{host}:{port}"
    try:
        with trio.fail_after(connect_timeout_s):
            stream = await open_stream(host, port)
    except (OSError, trio.TooSlowError) as exc:
        raise _network_error(label, exc) from None
    conn = Connection(stream, client_id=client_id, max_frame_bytes=max_frame_bytes, label=label)
    async with running(conn, credential):
        yield conn


@asynccontextmanager
async def running(
    conn: Connection,
    credential: ClusterCredential | None = None,
    *background: Callable[[], Awaitable[object]],
) -> AsyncIterator[Connection]:
    """Run `conn`'s reader (and `background` tasks) for the block, after proving membership if
    there is a `credential`; then close the connection. What the block raises comes out as
    itself, not wrapped in the nursery's ExceptionGroup, so callers' `except BrokerError` work."""
    refused: BrokerError | None = None
    try:
        async with trio.open_nursery() as nursery:
            for task in background:
                nursery.start_soon(task)
            nursery.start_soon(conn.run_reader)
            try:
                refused = await try_prove_membership(conn, credential)
                if refused is None:
                    yield conn
            finally:
                nursery.cancel_scope.cancel()
                # Shielded: an unshielded await in the cancelled nursery raised Cancelled, which
                # replaced what the block raised and was then absorbed by the nursery, so an
                # error inside `async with open_connection(...)` used to vanish silently.
                with trio.CancelScope(shield=True):
                    await conn.aclose()
    except BaseExceptionGroup as group:
        raise sole_exception(group) from None
    if refused is not None:
        raise refused


def sole_exception(group: BaseExceptionGroup) -> BaseException:
    """The one exception a group holds (the tasks here never raise, so only the block's), or
    the group itself if it holds several."""
    if len(group.exceptions) != 1:
        return group
    inner = group.exceptions[0]
    return sole_exception(inner) if isinstance(inner, BaseExceptionGroup) else inner


async def hold_connection(
    address: tuple[str, int],
    client_id: str,
    *,
    credential: ClusterCredential | None = None,
    connect: Callable[..., AbstractAsyncContextManager[Connection]] | None = None,
    task_status: trio.TaskStatus[tuple[Connection, trio.CancelScope]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open a connection inside the caller's nursery (`nursery.start`) and keep it open until the
    returned cancel scope is cancelled: for long-lived connections owned by a pool. `connect`
    has open_connection's signature (the default) and is how a simulation connects."""
    with trio.CancelScope() as scope:
        async with (connect or open_connection)(
            address[0], address[1], client_id=client_id, credential=credential
        ) as conn:
            task_status.started((conn, scope))
            await trio.sleep_forever()
