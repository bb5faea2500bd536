"""The pipelined client Connection against a scripted fake server on memory streams, and its
client-side throttling (KIP-219).

The fake server reads requests with the wire codec and answers MetadataRequest(topics=[name])
with a TopicMetadata named `name`, in whatever order the test asks, so a mismatched correlation
id shows up as a wrong name.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from minikafka.client.connection import Connection
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.codec import RequestHeader, decode_request, encode_response
from minikafka.wire.framing import FrameDecoder, frame
from minikafka.wire.messages import (
    MetadataRequest,
    MetadataResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    TopicMetadata,
)


class FakeServer:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def read_requests(self, n: int) -> list[tuple[RequestHeader, object]]:
        out = []
        while len(out) < n:
            payload = self.decoder.next_frame()
            if payload is None:
                data = await self.stream.receive_some(1 << 16)
                assert data, "client closed"
                self.decoder.receive_data(data)
                continue
            out.append(decode_request(payload))
        return out

    async def answer(self, header: RequestHeader, body: MetadataRequest) -> None:
        response = MetadataResponse(
            brokers=[],
            controller_id=-1,
            topics=[TopicMetadata(error_code=0, name=body.topics[0], partitions=[])],
        )
        await self.stream.send_all(frame(encode_response(header.correlation_id, response)))


def metadata(name: str) -> MetadataRequest:
    return MetadataRequest(topics=[name])


async def test_concurrent_requests_matched_by_correlation_id(autojump_clock):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    names = ["a", "b", "c", "d", "e"]
    results: dict[str, str] = {}

    async def ask(name: str) -> None:
        resp = await conn.request(metadata(name))
        assert isinstance(resp, MetadataResponse)
        results[name] = resp.topics[0].name

    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        async with trio.open_nursery() as askers:
            for name in names:
                askers.start_soon(ask, name)
            requests = await server.read_requests(len(names))
            # Every request went out before any answer: they are pipelined on one connection.
            assert sorted(body.topics[0] for _h, body in requests) == names
            assert len({h.correlation_id for h, _b in requests}) == len(names)
            assert {h.client_id for h, _b in requests} == {"c1"}
            for header, body in reversed(requests):  # answer in reverse order
                await server.answer(header, body)
        assert results == {n: n for n in names}
        nursery.cancel_scope.cancel()


async def test_server_close_fails_every_pending_request_retriably(autojump_clock):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    errors: list[BrokerError] = []

    async def ask(name: str) -> None:
        with pytest.raises(BrokerError) as info:
            await conn.request(metadata(name))
        errors.append(info.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        async with trio.open_nursery() as askers:
            for name in "xyz":
                askers.start_soon(ask, name)
            await server.read_requests(3)
            await server_stream.aclose()
        assert len(errors) == 3
        assert all(e.code == ErrorCode.NETWORK_EXCEPTION and e.retriable for e in errors)
        assert conn.broken
        # Later requests fail at once with the same retriable error.
        with pytest.raises(BrokerError) as info:
            await conn.request(metadata("late"))
        assert info.value.code == ErrorCode.NETWORK_EXCEPTION and info.value.retriable


async def test_eof_inside_a_frame_fails_pending_requests(autojump_clock):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)

        async def close_mid_frame() -> None:
            await server.read_requests(1)
            await server_stream.send_all(b"\x00\x00\x00\x10abc")  # 3 of 16 bytes
            await server_stream.aclose()

        nursery.start_soon(close_mid_frame)
        with pytest.raises(BrokerError) as info:
            await conn.request(metadata("a"))
        assert info.value.code == ErrorCode.NETWORK_EXCEPTION


async def test_request_timeout_then_late_answer_is_dropped(autojump_clock):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        start = trio.current_time()
        with pytest.raises(BrokerError) as info:
            await conn.request(metadata("slow"), timeout_s=5)
        assert info.value.code == ErrorCode.REQUEST_TIMED_OUT and info.value.retriable
        assert trio.current_time() - start == pytest.approx(5.0)
        # The server answers late; the connection drops that answer and keeps working.
        [(header, body)] = await server.read_requests(1)
        await server.answer(header, body)

        async def serve_next() -> None:
            [(h, b)] = await server.read_requests(1)
            await server.answer(h, b)

        nursery.start_soon(serve_next)
        resp = await conn.request(metadata("next"), timeout_s=5)
        assert resp.topics[0].name == "next"
        assert not conn.broken
        nursery.cancel_scope.cancel()


async def test_send_oneway_gets_no_waiter_and_next_request_works(autojump_clock):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    produce = ProduceRequest(
        acks=0, timeout_ms=100, partitions=[ProducePartition(topic="t", partition=0, records=b"r")]
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        await conn.send_oneway(produce)

        async def serve_two() -> None:
            (h0, b0), (h1, b1) = await server.read_requests(2)
            assert (h0.correlation_id, b0) == (-1, produce)
            await server.answer(h1, b1)

        nursery.start_soon(serve_two)
        resp = await conn.request(metadata("after"))
        assert resp.topics[0].name == "after"
        nursery.cancel_scope.cancel()


async def test_a_cancelled_request_leaves_no_waiter_behind(autojump_clock):
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="t")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        with trio.move_on_after(1):
            await conn.request(MetadataRequest())
        assert conn._waiters == {}  # the cancelled request forgot its waiter
        assert not conn.broken  # the frame had been sent whole: the connection is still good
        nursery.cancel_scope.cancel()


async def test_the_next_request_waits_out_the_throttle_time(autojump_clock):
    """KIP-219, the client's half (Kafka's NetworkClient marks the node throttled): after an
    answer with throttle_time_ms = 250 at t = 0, nothing more is sent on this connection until
    t = 0.25 s, requests and acks=0 sends alike. The wait is not part of the request timeout."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    arrivals: list[tuple[float, object]] = []

    async def serve() -> None:
        while True:
            [(header, body)] = await server.read_requests(1)
            arrivals.append((trio.current_time(), body))
            if isinstance(body, ProduceRequest) and body.acks == 0:
                continue
            throttle = 250 if len(arrivals) == 1 else 0
            response = ProduceResponse(partitions=[], throttle_time_ms=throttle)
            await server_stream.send_all(frame(encode_response(header.correlation_id, response)))

    produce = ProduceRequest(acks=1, timeout_ms=100, partitions=[])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        nursery.start_soon(serve)
        first = await conn.request(produce)
        assert first.throttle_time_ms == 250 and trio.current_time() == 0
        assert conn.throttle_delay_ms() == 250
        second = await conn.request(produce, timeout_s=0.1)  # waits 0.25 s, yet no timeout
        assert second.throttle_time_ms == 0
        assert trio.current_time() == pytest.approx(0.25)
        assert [t for t, _b in arrivals] == [0, pytest.approx(0.25)]
        assert conn.throttle_delay_ms() == 0
        await conn.send_oneway(ProduceRequest(acks=0, timeout_ms=100, partitions=[]))
        await trio.testing.wait_all_tasks_blocked()
        assert arrivals[-1][0] == pytest.approx(0.25)  # not throttled any more: sent at once
        nursery.cancel_scope.cancel()


async def test_concurrent_requests_all_wait_for_the_throttle(autojump_clock):
    """Several requests waiting for a throttled node all go out when it ends (pipelined), and
    a throttle that arrives while they wait (an answer to a request already sent) extends it."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    conn = Connection(client_stream, client_id="c1", label="fake")
    server = FakeServer(server_stream)
    produce = ProduceRequest(acks=1, timeout_ms=100, partitions=[])

    async def answer(header: RequestHeader, throttle_ms: int) -> None:
        response = ProduceResponse(partitions=[], throttle_time_ms=throttle_ms)
        await server_stream.send_all(frame(encode_response(header.correlation_id, response)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run_reader)
        async with trio.open_nursery() as askers:
            askers.start_soon(conn.request, produce)
            askers.start_soon(conn.request, produce)
            h1, h2 = [h for h, _b in await server.read_requests(2)]
            await answer(h1, 100)  # t = 0: throttled until 0.1 s
            await trio.testing.wait_all_tasks_blocked()
            for _ in range(3):
                askers.start_soon(conn.request, produce)
            await trio.sleep(0.05)
            await answer(h2, 200)  # t = 0.05 s: throttled until 0.25 s
            later = await server.read_requests(3)
            assert trio.current_time() == pytest.approx(0.25)
            for header, _body in later:
                await answer(header, 0)
        nursery.cancel_scope.cancel()
