"""A node's door on memory streams (docs/front-door.md): strangers cannot lock the nodes out.

serve_admitted with the node's ConnectionQuotas and RequestMemory, under the autojump clock:
- a connection over the client limits is on probation: a node proving membership with the
  cluster secret is served past every limit, a stranger is closed at its first request, and a
  silent one when its probation ends;
- a client connection that proves membership gives its client slot back;
- a peer trickling a frame a byte at a time is closed at connections.max.idle.ms;
- queued.max.request.bytes: the frames of clients' unanswered requests never hold more than
  the pool, and the nodes' own connections are not metered.
"""

from __future__ import annotations

import secrets
from functools import partial

import pytest
import trio
import trio.testing

from minikafka.client.membership import prove_membership
from minikafka.core.cluster_auth import ClusterCredential
from minikafka.core.connection_quotas import NATIVE as NATIVE_LISTENER
from minikafka.core.connection_quotas import ConnectionQuotas
from minikafka.server.cluster_gate import ClusterGate
from minikafka.server.eventlog import EventLog
from minikafka.server.listener import Door, serve_admitted
from minikafka.server.request_memory import RequestMemory
from minikafka.wire.codec import RequestHeader, decode_response, encode_request
from minikafka.wire.framing import FrameDecoder, frame
from minikafka.wire.messages import (
    API,
    API_KEY_OF,
    ApiKey,
    ClusterHandshakeRequest,
    MetadataRequest,
    MetadataResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)

MAX_FRAME = 1 << 20
CLUSTER = "door-test"
SECRET = secrets.token_bytes(32)
IDLE_MS = 60_000
PROBATION_MS = 5_000


class Peer:
    """The client end of a memory stream, with a Connection's `request` (for the handshake)."""

    label = "node"

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(MAX_FRAME)
        self.corr = 0

    async def send(self, body: object) -> int:
        self.corr += 1
        api_key = API_KEY_OF[type(body)]
        header = RequestHeader(
            api_key=api_key, api_version=0, correlation_id=self.corr, client_id="t"
        )
        await self.stream.send_all(frame(encode_request(header, body)))
        return api_key

    async def request(self, body: object, *, timeout_s: float = 10.0) -> object:
        api_key = await self.send(body)
        response_type = API[api_key][1]
        while (payload := self.decoder.next_frame()) is None:
            data = await self.stream.receive_some(1 << 16)
            if not data:
                raise trio.BrokenResourceError("closed by the server")
            self.decoder.receive_data(data)
        return decode_response(payload, response_type)[1]

    async def closed_by_server(self) -> bool:
        try:
            return await self.stream.receive_some(1 << 16) == b""
        except trio.BrokenResourceError:
            return True


class Dispatcher:
    """Metadata: answered at once. Produce: answered after `produce_s` simulated seconds."""

    def __init__(self, produce_s: float = 0.0) -> None:
        self.produce_s = produce_s
        self.calls: list[str] = []

    async def __call__(self, header: RequestHeader, body: object) -> object:
        self.calls.append(type(body).__name__)
        if isinstance(body, ProduceRequest):
            await trio.sleep(self.produce_s)
            return ProduceResponse(partitions=[])
        return MetadataResponse(brokers=[], controller_id=-1, topics=[])


@pytest.fixture
def events() -> EventLog:
    return EventLog(None, node_id=1)


def make_door(*, max_connections: int = 100, memory: int = -1) -> Door:
    quotas = ConnectionQuotas(max_connections=max_connections, max_connections_per_ip=1 << 20)
    return Door(
        quotas=quotas,
        listener=NATIVE_LISTENER,
        memory=RequestMemory(memory),
        probation_ms=PROBATION_MS,
    )


def gate(events: EventLog) -> ClusterGate:
    return ClusterGate(cluster_id=CLUSTER, secret=SECRET, events=events)


def credential(node_id: int) -> ClusterCredential:
    return ClusterCredential(cluster_id=CLUSTER, node_id=node_id, secret=SECRET)


def server(stream, door, events, dispatch, *, with_gate=True):
    return partial(
        serve_admitted,
        stream,
        dispatch,
        door,
        max_frame_bytes=MAX_FRAME,
        max_in_flight=8,
        events=events,
        idle_ms=IDLE_MS,
        gate=gate(events) if with_gate else None,
    )


async def test_a_node_gets_in_past_a_full_door_and_strangers_do_not(autojump_clock, events):
    door = make_door(max_connections=1)
    dispatch = Dispatcher()
    pairs = [trio.testing.memory_stream_pair() for _ in range(4)]
    async with trio.open_nursery() as nursery:
        for _, server_end in pairs:  # one at a time: the first takes the one client slot
            nursery.start_soon(server(server_end, door, events, dispatch))
            await trio.testing.wait_all_tasks_blocked()
        client, node, stranger, silent = (Peer(c) for c, _ in pairs)
        assert (door.quotas.open, door.quotas.refused) == (1, 3)
        await prove_membership(node, credential(2))
        assert door.quotas.members == 1
        assert await node.request(MetadataRequest(topics=[])) is not None
        await stranger.send(MetadataRequest(topics=[]))
        served_stranger = not await stranger.closed_by_server()
        await trio.sleep(PROBATION_MS / 1000 + 1)
        silent_closed = await silent.closed_by_server()
        client_answered = await client.request(MetadataRequest(topics=[]))
        nursery.cancel_scope.cancel()
    # The node was served over the limit; the one admitted client too; the others not.
    assert client_answered is not None and not served_stranger and silent_closed
    assert events.counts.get("connection_refused") == 1


async def test_a_client_connection_that_proves_membership_frees_its_slot(autojump_clock, events):
    door = make_door(max_connections=1)
    (node_end, node_server), (client_end, client_server) = (
        trio.testing.memory_stream_pair() for _ in range(2)
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server(node_server, door, events, Dispatcher()))
        await trio.testing.wait_all_tasks_blocked()
        assert door.quotas.open == 1
        await prove_membership(Peer(node_end), credential(3))
        assert (door.quotas.open, door.quotas.members) == (0, 1)
        nursery.start_soon(server(client_server, door, events, Dispatcher()))
        assert await Peer(client_end).request(MetadataRequest(topics=[])) is not None
        assert door.quotas.refused == 0
        nursery.cancel_scope.cancel()


async def test_a_trickled_frame_does_not_keep_a_connection_open(autojump_clock, events):
    """Only whole requests count as activity: one byte of a frame every idle/2 seconds is
    closed IDLE_MS after the connection opened, not kept forever."""
    door = make_door()
    client_end, server_end = trio.testing.memory_stream_pair()
    payload = frame(
        encode_request(
            RequestHeader(api_key=ApiKey.METADATA, api_version=0, correlation_id=1, client_id="t"),
            MetadataRequest(topics=[]),
        )
    )

    async def trickle() -> None:
        for byte in payload[:-1]:
            await client_end.send_all(bytes([byte]))
            await trio.sleep(IDLE_MS / 1000 / 2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trickle)
        await server(server_end, door, events, Dispatcher())()
        assert trio.current_time() == pytest.approx(IDLE_MS / 1000)
        nursery.cancel_scope.cancel()
    assert events.counts == {"connection_idle_closed": 1}


def produce(n_bytes: int) -> ProduceRequest:
    part = ProducePartition(topic="t", partition=0, records=b"x" * n_bytes)
    return ProduceRequest(acks=1, timeout_ms=1000, partitions=[part])


async def test_unanswered_requests_hold_at_most_queued_max_request_bytes(autojump_clock, events):
    """Three clients each send a 300 KB produce answered after 1 s; the pool holds 700 KB: two
    are read and handled at once, the third frame waits, unread, until one is answered."""
    door = make_door(memory=700_000)
    dispatch = Dispatcher(produce_s=1.0)
    pairs = [trio.testing.memory_stream_pair() for _ in range(3)]
    answered_at: list[float] = []
    peak = 0

    async def client(stream) -> None:
        await Peer(stream).request(produce(300_000))
        answered_at.append(trio.current_time())

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, door.memory.held)
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        for _, server_end in pairs:
            nursery.start_soon(server(server_end, door, events, dispatch))
        async with trio.open_nursery() as clients:
            for client_end, _ in pairs:
                clients.start_soon(client, client_end)
        nursery.cancel_scope.cancel()
    assert sorted(round(t) for t in answered_at) == [1, 1, 2]
    assert 600_000 < peak <= 700_000
    assert door.memory.held == 0 and door.memory.waits == 1


async def test_a_nodes_connection_is_not_metered(autojump_clock, events):
    """A node's requests are read even while clients hold the whole pool: a produce waiting
    for its followers must never keep their fetches from being read."""
    door = make_door(memory=100_000)
    dispatch = Dispatcher(produce_s=10.0)
    (client_end, client_server), (node_end, node_server) = (
        trio.testing.memory_stream_pair() for _ in range(2)
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server(client_server, door, events, dispatch))
        nursery.start_soon(server(node_server, door, events, dispatch))
        nursery.start_soon(Peer(client_end).request, produce(90_000))
        await trio.sleep(1)
        assert door.memory.held > 90_000
        node = Peer(node_end)
        await prove_membership(node, credential(2))
        started = trio.current_time()
        await node.request(produce(50_000))
        assert trio.current_time() - started == pytest.approx(10.0)  # its own wait, no other
        nursery.cancel_scope.cancel()


async def test_probation_places_are_bounded_and_a_failed_proof_ends_one(autojump_clock, events):
    """A stranger's flood over the limits cannot hold the node's file descriptors: with the
    client slot full and 2 probation places, of 4 more connections 2 wait on probation and 2
    are closed at once; a wrong cluster id on probation closes that connection at once."""
    door = make_door(max_connections=1)
    door.quotas.max_probation = 2
    pairs = [trio.testing.memory_stream_pair() for _ in range(5)]
    async with trio.open_nursery() as nursery:
        for _, server_end in pairs:
            nursery.start_soon(server(server_end, door, events, Dispatcher()))
            await trio.testing.wait_all_tasks_blocked()
        assert (door.quotas.open, door.quotas.on_probation) == (1, 2)
        assert events.counts == {"connection_refused": 2}
        assert trio.current_time() == 0
        stranger = Peer(pairs[1][0])
        await stranger.send(ClusterHandshakeRequest(cluster_id="another", node_id=7))
        assert await stranger.closed_by_server()
        await trio.testing.wait_all_tasks_blocked()
        assert door.quotas.on_probation == 1 and trio.current_time() == 0
        nursery.cancel_scope.cancel()
