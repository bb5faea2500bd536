"""serve_connection on memory streams: pipelining, acks=0, the peer's malformed frames, and
the KIP-219 mute after a throttled reply.

A fake dispatcher answers MetadataRequest(topics=[name]) with a TopicMetadata named `name`,
after sleeping `DELAYS[name]` simulated seconds (the autojump clock makes that instant), and
answers ProduceRequest with acks=0 by None. A malformed frame must close that connection only,
log `bad_request`, and never reach the dispatcher.
"""

from __future__ import annotations

import contextlib
import struct
from functools import partial

import msgpack
import pytest
import trio
import trio.testing

from minikafka.core.connection_quotas import ConnectionQuotas
from minikafka.server.eventlog import EventLog
from minikafka.server.listener import (
    NATIVE,
    Door,
    Ordering,
    Reply,
    WireCodec,
    serve_admitted,
    serve_connection,
)
from minikafka.wire.codec import RequestHeader, decode_response, encode_request
from minikafka.wire.framing import FrameDecoder, frame
from minikafka.wire.messages import (
    ApiKey,
    MetadataRequest,
    MetadataResponse,
    ProducePartition,
    ProduceRequest,
    TopicMetadata,
)

MAX_FRAME = 1 << 16
DELAYS = {"slow": 2.0, "fast": 1.0, "now": 0.0}


class FakeDispatcher:
    def __init__(self) -> None:
        self.calls: list[tuple[int, object]] = []

    async def __call__(self, header: RequestHeader, body: object) -> object | None:
        self.calls.append((header.correlation_id, body))
        if isinstance(body, ProduceRequest):
            assert body.acks == 0
            return None
        assert isinstance(body, MetadataRequest) and body.topics
        if body.topics[0] == "boom":
            raise ValueError("handler bug")
        await trio.sleep(DELAYS[body.topics[0]])
        return MetadataResponse(
            brokers=[],
            controller_id=-1,
            topics=[TopicMetadata(error_code=0, name=body.topics[0], partitions=[])],
        )


class RawClient:
    """The client end of a memory stream: writes raw frames, reads framed responses."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(MAX_FRAME)

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(self, corr_id: int, body: object) -> None:
        header = RequestHeader(
            api_key=_api_key(body), api_version=0, correlation_id=corr_id, client_id="t"
        )
        await self.send_raw(frame(encode_request(header, body)))

    async def receive(self) -> tuple[int, MetadataResponse]:
        while (payload := self.decoder.next_frame()) is None:
            data = await self.stream.receive_some(1 << 16)
            assert data, "server closed the connection instead of answering"
            self.decoder.receive_data(data)
        return decode_response(payload, MetadataResponse)

    async def closed_by_server(self) -> bool:
        """True when the server closed the stream (EOF or a broken stream)."""
        try:
            data = await self.stream.receive_some(1 << 16)
        except trio.BrokenResourceError:
            return True
        return data == b""


def _api_key(body: object) -> int:
    return ApiKey.METADATA if isinstance(body, MetadataRequest) else ApiKey.PRODUCE


def metadata(name: str) -> MetadataRequest:
    return MetadataRequest(topics=[name])


def serve(stream, dispatch, events):
    return partial(
        serve_connection,
        stream,
        dispatch,
        max_frame_bytes=MAX_FRAME,
        max_in_flight=8,
        events=events,
    )


@pytest.fixture
def events() -> EventLog:
    return EventLog(None, node_id=1)


async def test_request_gets_its_response_with_its_correlation_id(autojump_clock, events):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        await client.send(41, metadata("now"))
        corr_id, response = await client.receive()
        assert corr_id == 41
        assert response.topics[0].name == "now"
        assert dispatch.calls == [(41, metadata("now"))]
        await client_stream.aclose()
    assert events.counts.get("bad_request", 0) == 0


async def test_pipelined_requests_answered_out_of_order(autojump_clock, events):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        start = trio.current_time()
        await client.send(1, metadata("slow"))  # handler finishes at t+2
        await client.send(2, metadata("fast"))  # handler finishes at t+1
        first = await client.receive()
        second = await client.receive()
        # The fast one overtakes the slow one, and each carries its own correlation id.
        assert (first[0], first[1].topics[0].name) == (2, "fast")
        assert (second[0], second[1].topics[0].name) == (1, "slow")
        # Handled concurrently: both done after 2 simulated seconds, not 3.
        assert trio.current_time() - start == pytest.approx(2.0)
        await client_stream.aclose()


async def test_clean_eof_lets_in_flight_requests_finish(autojump_clock, events):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        await client.send(7, metadata("slow"))
        await client_stream.send_eof()  # half-close: no more requests
        corr_id, response = await client.receive()
        assert (corr_id, response.topics[0].name) == (7, "slow")
        assert await client.closed_by_server()
    assert events.counts.get("bad_request", 0) == 0


async def test_acks_zero_gets_no_response(autojump_clock, events):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    produce = ProduceRequest(
        acks=0,
        timeout_ms=1000,
        partitions=[ProducePartition(topic="t", partition=0, records=b"x")],
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        await client.send(-1, produce)
        await client.send(5, metadata("fast"))
        # The first (and only) frame back is the Metadata answer: nothing for acks=0.
        corr_id, response = await client.receive()
        assert corr_id == 5
        assert client.decoder.buffered_bytes == 0
        assert [c for c, _ in dispatch.calls] == [-1, 5]
        await client_stream.aclose()


def _envelope(api_key: int, body: object) -> bytes:
    return frame(msgpack.packb([api_key, 0, 9, "bad-client", body], use_bin_type=True))


BAD_FRAMES = {
    "garbage_msgpack": frame(b"\xc1\xc1\xc1"),
    "oversized_length": struct.pack(">I", MAX_FRAME + 1) + b"\x00" * 16,
    "unknown_api_key": _envelope(999, {}),
    "wrong_field_type": _envelope(
        int(ApiKey.PRODUCE), {"acks": "all", "timeout_ms": 1000, "partitions": []}
    ),
    # A valid produce whose unknown (ignored) field holds ~60 KB of empty arrays, ~3.8 MB of lists
    # once decoded: past the decode budget of 16x (docs/front-door.md), refused before dispatch.
    "expands_past_budget": _envelope(
        int(ApiKey.PRODUCE), {"acks": 0, "timeout_ms": 1, "partitions": [], "pad": [[]] * 60_000}
    ),
}


@pytest.mark.parametrize("bad", list(BAD_FRAMES), ids=list(BAD_FRAMES))
async def test_malformed_frame_closes_only_that_connection(autojump_clock, events, bad):
    bad_client_stream, bad_server_stream = trio.testing.memory_stream_pair()
    good_client_stream, good_server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    bad_served = trio.Event()

    async def serve_bad() -> None:
        await serve(bad_server_stream, dispatch, events)()
        bad_served.set()  # serve_connection returned normally: it did not crash the nursery

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_bad)
        nursery.start_soon(serve(good_server_stream, dispatch, events))
        good = RawClient(good_client_stream)
        await good.send(1, metadata("slow"))  # in flight on the good connection meanwhile

        bad_client = RawClient(bad_client_stream)
        await bad_client.send_raw(BAD_FRAMES[bad])
        assert await bad_client.closed_by_server()
        await bad_served.wait()
        assert events.counts == {"bad_request": 1}

        # The other connection is unaffected: its in-flight request and a new one are answered.
        await good.send(2, metadata("now"))
        answers = {(await good.receive())[0], (await good.receive())[0]}
        assert answers == {1, 2}
        # The dispatcher never saw the malformed request: only the good connection's two.
        assert [c for c, _ in dispatch.calls] == [1, 2]
        await good_client_stream.aclose()


async def test_malformed_frame_after_good_one_still_logged_once(autojump_clock, events):
    """A good request and a garbage frame in one chunk: the dispatcher sees only the good one,
    and the connection is closed with one bad_request event."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    header = RequestHeader(api_key=ApiKey.METADATA, api_version=0, correlation_id=3, client_id="t")
    chunk = frame(encode_request(header, metadata("now"))) + BAD_FRAMES["garbage_msgpack"]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        await client_stream.send_all(chunk)
        client = RawClient(client_stream)
        # Drain until the server closes (a response to the good request may or may not come).
        while True:
            try:
                data = await client_stream.receive_some(1 << 16)
            except trio.BrokenResourceError:
                break
            if not data:
                break
            client.decoder.receive_data(data)
    assert events.counts == {"bad_request": 1}
    assert [c for c, _ in dispatch.calls] in ([], [3])


async def test_handler_bug_drops_that_connection_only(autojump_clock, events):
    bad_client_stream, bad_server_stream = trio.testing.memory_stream_pair()
    good_client_stream, good_server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(bad_server_stream, dispatch, events))
        nursery.start_soon(serve(good_server_stream, dispatch, events))
        bad_client = RawClient(bad_client_stream)
        await bad_client.send(1, metadata("boom"))
        assert await bad_client.closed_by_server()
        assert events.counts == {"handler_error": 1}
        good = RawClient(good_client_stream)
        await good.send(2, metadata("now"))
        assert (await good.receive())[0] == 2
        await good_client_stream.aclose()


# ---------------------------------------------------------------------------- KIP-219 muting


class ThrottlingDispatcher(FakeDispatcher):
    """FakeDispatcher whose Metadata for a topic in THROTTLES is answered with a `Reply`
    carrying that throttle time (after `late-` topics' 0.2 s of work), as a client-quota
    violation is (KIP-219); Produce acks=0 gets a 0.5 s throttle and no response. Records when
    each request reached it."""

    THROTTLES = {"over-quota": 1000, "late-over-quota": 1000}
    ACKS_0_THROTTLE_MS = 500

    def __init__(self) -> None:
        super().__init__()
        self.reached_at: dict[int, float] = {}

    async def __call__(self, header: RequestHeader, body: object) -> object | None:
        self.reached_at[header.correlation_id] = trio.current_time()
        if isinstance(body, ProduceRequest):
            self.calls.append((header.correlation_id, body))
            return Reply(response=None, throttle_ms=self.ACKS_0_THROTTLE_MS)
        name = body.topics[0] if isinstance(body, MetadataRequest) and body.topics else ""
        if name not in self.THROTTLES:
            return await super().__call__(header, body)
        self.calls.append((header.correlation_id, body))
        if name.startswith("late-"):
            await trio.sleep(0.2)
        response = MetadataResponse(brokers=[], controller_id=-1, topics=[])
        return Reply(response=response, throttle_ms=self.THROTTLES[name])


async def test_a_throttled_reply_mutes_the_connection_but_what_was_read_finishes(
    autojump_clock, events
):
    """The answer carrying the throttle goes out at once; the connection then takes no request
    for 1 s, while a request read before the mute is still processed and answered."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = ThrottlingDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        await client.send(1, metadata("fast"))  # read at t = 0, its handler takes 1 s
        await client.send(2, metadata("over-quota"))  # read at t = 0, answered at once: 1 s mute
        assert (await client.receive())[0] == 2
        assert trio.current_time() == 0
        await client.send(3, metadata("now"))  # arrives while muted
        await trio.sleep(0.999)
        assert sorted(dispatch.reached_at) == [1, 2]  # 3 is not read while muted
        # 1 was read before the mute: answered at t = 1 s; 3 is read when the mute ends, t = 1 s.
        answers = [await client.receive(), await client.receive()]
        assert sorted(corr for corr, _r in answers) == [1, 3]
        assert dispatch.reached_at[3] == pytest.approx(1.0)
        assert trio.current_time() == pytest.approx(1.0)
        # Unmuted: the next request is read and answered at once.
        await client.send(4, metadata("now"))
        assert (await client.receive())[0] == 4
        assert dispatch.reached_at[4] == pytest.approx(1.0)
        await client_stream.aclose()


async def test_overlapping_throttles_mute_until_the_latest_end(autojump_clock, events):
    """Two throttled requests in flight at once: 2 mutes from t = 0 until 1.0 s, then 1, read
    before that mute, is answered at 0.2 s with its own 1 s: the mute lasts until 1.2 s."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = ThrottlingDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        await client.send(1, metadata("late-over-quota"))
        await client.send(2, metadata("over-quota"))
        assert (await client.receive())[0] == 2
        await client.send(3, metadata("now"))
        assert (await client.receive())[0] == 1
        assert trio.current_time() == pytest.approx(0.2)
        assert (await client.receive())[0] == 3
        assert dispatch.reached_at[3] == pytest.approx(1.2)
        await client_stream.aclose()


async def test_acks_zero_over_quota_mutes_without_an_answer(autojump_clock, events):
    """Produce acks=0 has no answer to carry the throttle: the mute alone holds the client."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = ThrottlingDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve(server_stream, dispatch, events))
        client = RawClient(client_stream)
        await client.send(-1, ProduceRequest(acks=0, timeout_ms=1, partitions=[]))
        # Once the produce is handled (the server is idle), the next request finds the mute.
        # (Sent in the same chunk, it could be taken off the connection before the produce's
        # handler has decided: up to request.max.in.flight requests are read concurrently.)
        await trio.testing.wait_all_tasks_blocked()
        assert dispatch.reached_at == {-1: 0.0}
        await client.send(5, metadata("now"))
        corr_id, _response = await client.receive()
        assert corr_id == 5 and client.decoder.buffered_bytes == 0  # nothing for the produce
        assert dispatch.reached_at[5] == pytest.approx(0.5)
        await client_stream.aclose()


# ---------------------------------------------------------------------------- bounded per peer

IDLE_MS = 10_000


def door(max_connections: int) -> Door:
    return Door(
        quotas=ConnectionQuotas(max_connections=max_connections, max_connections_per_ip=1 << 20)
    )


def serve_limited(stream, dispatch, events, slots, *, max_in_flight=8, idle_ms=IDLE_MS):
    return partial(
        serve_admitted,
        stream,
        dispatch,
        slots,
        max_frame_bytes=MAX_FRAME,
        max_in_flight=max_in_flight,
        events=events,
        idle_ms=idle_ms,
    )


async def test_an_idle_connection_is_closed_after_connections_max_idle_ms(autojump_clock, events):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = FakeDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_limited(server_stream, dispatch, events, door(10)))
        client = RawClient(client_stream)
        # Activity keeps it open: a request every 0.9 idle periods, for 5 periods.
        for corr_id in range(6):
            await trio.sleep(0.9 * IDLE_MS / 1000)
            await client.send(corr_id, metadata("now"))
            assert (await client.receive())[0] == corr_id
        answered = trio.current_time()
        assert await client.closed_by_server()
        # closed IDLE_MS after the last response was written, not before
        assert trio.current_time() - answered == pytest.approx(IDLE_MS / 1000)
    assert events.counts == {"connection_idle_closed": 1}


async def test_a_client_that_never_reads_pins_in_flight_responses_only_then_is_closed(
    autojump_clock, events
):
    # lockstep: send_all returns only once the peer has read the bytes, like a full TCP window
    client_stream, server_stream = trio.testing.lockstep_stream_pair()
    dispatch = FakeDispatcher()
    served = trio.Event()

    async def serve_it() -> None:
        await serve_limited(server_stream, dispatch, events, door(10), max_in_flight=4)()
        served.set()

    async def flood() -> None:
        client = RawClient(client_stream)
        with contextlib.suppress(trio.BrokenResourceError):  # until the server closes
            for corr_id in range(100):
                await client.send(corr_id, metadata("now"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_it)
        nursery.start_soon(flood)
        await trio.sleep(IDLE_MS / 1000 / 2)
        # 4 responses wait to be written; the 5th request was read and waits for a slot;
        # nothing more is read, so nothing more is built.
        assert len(dispatch.calls) == 4
        await served.wait()  # the idle timeout ends it: no response was written, none read
        assert trio.current_time() == pytest.approx(IDLE_MS / 1000)
        nursery.cancel_scope.cancel()
    assert len(dispatch.calls) == 4
    assert events.counts == {"connection_idle_closed": 1}


async def test_connections_beyond_max_connections_are_closed_at_once_and_counted(
    autojump_clock, events
):
    slots = door(2)
    dispatch = FakeDispatcher()
    pairs = [trio.testing.memory_stream_pair() for _ in range(4)]
    ended = [trio.Event() for _ in pairs]

    async def serve_one(i: int) -> None:
        await serve_limited(pairs[i][1], dispatch, events, slots)()
        ended[i].set()

    async def round_trip(i: int) -> None:
        client = RawClient(pairs[i][0])
        await client.send(i, metadata("now"))
        assert (await client.receive())[0] == i

    async with trio.open_nursery() as nursery:
        for i in range(2):  # one at a time: trio does not promise to start tasks in order
            nursery.start_soon(serve_one, i)
            await round_trip(i)
        nursery.start_soon(serve_one, 2)
        # the third is refused: closed at once, counted, logged
        assert await RawClient(pairs[2][0]).closed_by_server()
        await ended[2].wait()
        assert trio.current_time() == 0  # at once, not at the idle timeout
        assert (slots.quotas.open, slots.quotas.refused) == (2, 1)
        assert events.counts == {"connection_refused": 1}
        # one closes: its slot is free again, and a fourth is served
        await pairs[1][0].aclose()
        await ended[1].wait()
        assert slots.quotas.open == 1
        nursery.start_soon(serve_one, 3)
        await round_trip(3)
        assert (slots.quotas.open, slots.quotas.refused) == (2, 1)
        nursery.cancel_scope.cancel()


# --- ordered connections (Kafka's listener: server/kafka_apis.py KAFKA_CODEC) -----------------

ORDERED = WireCodec(decode=NATIVE.decode, encode=NATIVE.encode, ordered=True)


class OrderedDispatcher:
    """Answers metadata([name]) after DELAYS[name] s; a name starting with "r-" first releases
    its `Ordering` (as a produce does once queued); "throttled" answers with a 1 s throttle."""

    def __init__(self) -> None:
        self.started: list[tuple[str, float]] = []

    async def __call__(self, header: RequestHeader, body: object, *, order: Ordering) -> object:
        assert isinstance(body, MetadataRequest) and body.topics
        name = body.topics[0]
        self.started.append((name, trio.current_time()))
        if name.startswith("r-"):
            order.release()
        await trio.sleep(DELAYS.get(name.removeprefix("r-"), 0.0))
        response = MetadataResponse(
            brokers=[],
            controller_id=-1,
            topics=[TopicMetadata(error_code=0, name=name, partitions=[])],
        )
        return Reply(response=response, throttle_ms=1000 if name == "throttled" else 0)


async def _ordered_run(names: list[str], events: EventLog) -> tuple[list, list, float]:
    """Send `names` pipelined on an ordered connection; -> (answers, starts, elapsed s)."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    dispatch = OrderedDispatcher()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            partial(
                serve_connection, server_stream, dispatch, max_frame_bytes=MAX_FRAME,
                max_in_flight=8, events=events, codec=ORDERED,
            )
        )  # fmt: skip
        client = RawClient(client_stream)
        t0 = trio.current_time()
        for i, name in enumerate(names):
            await client.send(i, metadata(name))
        answers = []
        for _ in names:
            corr_id, response = await client.receive()
            answers.append((corr_id, response.topics[0].name))
        elapsed = trio.current_time() - t0
        await client_stream.aclose()
    starts = [(name, round(t - t0, 3)) for name, t in dispatch.started]
    return answers, starts, elapsed


async def test_an_ordered_connection_runs_requests_one_after_another(autojump_clock, events):
    """Kafka's SocketServer: one request at a time per connection, answered in order."""
    answers, starts, elapsed = await _ordered_run(["slow", "fast"], events)
    assert answers == [(0, "slow"), (1, "fast")]
    assert starts == [("slow", 0.0), ("fast", 2.0)]
    assert elapsed == pytest.approx(3.0)


async def test_a_released_order_lets_the_next_start_but_answers_stay_in_order(autojump_clock, events):
    answers, starts, elapsed = await _ordered_run(["r-slow", "fast"], events)
    assert starts == [("r-slow", 0.0), ("fast", 0.0)]  # overlapped
    assert answers == [(0, "r-slow"), (1, "fast")]  # fast finished first, answered second
    assert elapsed == pytest.approx(2.0)


async def test_on_an_ordered_connection_a_throttle_delays_the_next_start(autojump_clock, events):
    """KIP-219: the throttled answer mutes the channel before the next request is processed."""
    _answers, starts, _elapsed = await _ordered_run(["throttled", "now"], events)
    assert starts == [("throttled", 0.0), ("now", 1.0)]
