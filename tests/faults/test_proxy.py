"""The fault proxy's Trio shell on memory streams under the autojump MockClock.

A `FaultProxy` with an injected dialer: a connection "arriving" on link (1, 2) is one end of a
memory stream pair (the other end plays node 1), and dialling node 2 hands the proxy one end of
another pair (the other end plays node 2). Faults are set through `proxy.handle`, exactly as the
control port applies them. No real sockets, no real sleeps.

Every test of a link's behaviour runs twice (the `h` fixture): through the proxy's pumps, and
through the simulation's spliced connections (sim/network.py), which join node src to node dst
with two Pipes that must obey the same link faults under the same proxy, with no pump between.
"""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from minikafka.errors import ConfigError
from minikafka.faults.config import ProxyConfig, ProxyLink
from minikafka.faults.control import FaultProxyClient, both_ways
from minikafka.faults.proxy import FaultProxy
from minikafka.faults.pump import BUFFER_BYTES
from minikafka.sim.network import SimNetwork

LINKS = [(1, 2), (2, 1), (1, 3), (3, 1), (2, 3), (3, 2)]


class Harness:
    """A proxy whose dialer hands out memory streams; `connect(link)` plays node src."""

    def __init__(self, nursery: trio.Nursery) -> None:
        config = ProxyConfig(
            host="127.0.0.1",
            control_port=4000,
            links=tuple(
                ProxyLink(src=s, dst=d, port=4001 + i, target_host="node", target_port=9000 + d)
                for i, (s, d) in enumerate(LINKS)
            ),
        )
        self.proxy = FaultProxy(config, dial=self._dial)
        self.nursery = nursery
        self.dials: list[tuple[str, int]] = []
        self.dst_ends: list[trio.abc.Stream] = []
        self.refuse = False

    async def _dial(self, host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        self.dials.append((host, port))
        if self.refuse:
            raise OSError("connection refused")
        proxy_end, dst_end = trio.testing.memory_stream_pair()
        self.dst_ends.append(dst_end)
        return proxy_end

    async def connect(self, link=(1, 2), *, lockstep: bool = False) -> trio.abc.Stream:
        """Open a connection on `link`; the src node's end."""
        pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
        src_end, proxy_end = pair()
        self.nursery.start_soon(self.proxy.serve_link, link, proxy_end)
        await trio.testing.wait_all_tasks_blocked()
        return src_end

    async def connect_through(self, link=(1, 2)) -> tuple[trio.abc.Stream, trio.abc.Stream]:
        """Open a connection and return (src end, dst end) once the proxy dialled dst."""
        before = len(self.dst_ends)
        src = await self.connect(link)
        assert len(self.dst_ends) == before + 1, "the proxy did not dial dst"
        return src, self.dst_ends[-1]

    def set(self, links, **faults) -> dict:
        return self.proxy.handle({"op": "set", "links": [list(ln) for ln in links], **faults})

    def row(self, link) -> dict:
        return next(r for r in self.proxy.show() if (r["src"], r["dst"]) == link)


class SplicedHarness(Harness):
    """The same proxy on a SimNetwork that splices its links: `connect(link)` is node src
    dialling the link's port, and node dst's listener records what reaches it."""

    def __init__(self, nursery: trio.Nursery) -> None:
        super().__init__(nursery)
        self.network = SimNetwork()
        self.proxy = FaultProxy(self.proxy.config, listen=self.network.listen)
        self.network.splice(self.proxy)
        self._targets: list = []

    async def start(self) -> None:
        await self.nursery.start(self.proxy.run)
        for link in self.proxy.config.links:
            address = (link.target_host, link.target_port)
            if address not in self.network.listeners:
                [listener] = await self.network.listen(*address, owner=link.dst)
                self._targets.append(listener)
                self.nursery.start_soon(self._accept, listener)

    async def _accept(self, listener) -> None:
        while True:
            stream = await listener.accept()
            self.dials.append(listener.address)
            self.dst_ends.append(stream)

    @property
    def refuse(self) -> bool:
        return not self._targets

    @refuse.setter
    def refuse(self, value: bool) -> None:
        if value:  # nothing listens at the targets any more
            for listener in self._targets:
                self.network.unbind(listener)
            self._targets.clear()

    async def connect(self, link=(1, 2), *, lockstep: bool = False) -> trio.abc.Stream:
        # A Pipe holds at most BUFFER_BYTES on a link whatever `lockstep` says.
        port = next(ln.port for ln in self.proxy.config.links if ln.link == tuple(link))
        src_end = await self.network.open_stream("127.0.0.1", port, owner=link[0])
        await trio.testing.wait_all_tasks_blocked()
        return src_end


@pytest.fixture(params=["pumps", "spliced"])
async def h(request):
    async with trio.open_nursery() as nursery:
        if request.param == "pumps":
            yield Harness(nursery)
        else:
            harness = SplicedHarness(nursery)
            await harness.start()
            yield harness
        nursery.cancel_scope.cancel()


async def receive_exactly(stream: trio.abc.Stream, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = await stream.receive_some(n - len(data))
        assert chunk, f"stream closed after {len(data)} of {n} bytes"
        data += chunk
    return bytes(data)


async def nothing_arrives(stream: trio.abc.Stream, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        await stream.receive_some(1)
        return False
    return True


# ---------------------------------------------------------------------------- healthy link


async def test_healthy_link_forwards_both_ways_and_counts(autojump_clock, h):
    src, dst = await h.connect_through((1, 2))
    assert h.dials == [("node", 9002)]
    await src.send_all(b"fetch")
    assert await receive_exactly(dst, 5) == b"fetch"
    await dst.send_all(b"records!")
    assert await receive_exactly(src, 8) == b"records!"
    row = h.row((1, 2))
    assert (row["bytes_to_dst"], row["bytes_to_src"]) == (5, 8)
    assert (row["connections_open"], row["connections_total"]) == (1, 1)
    assert (row["listen"], row["target"]) == ("127.0.0.1:4001", "node:9002")
    assert h.row((2, 1))["bytes_to_dst"] == 0  # the reverse link is another link


# ---------------------------------------------------------------------------- blocked


async def test_blocked_link_holds_bytes_both_ways_until_healed(autojump_clock, h):
    src, dst = await h.connect_through((1, 2))
    h.set([(1, 2)], blocked=True)
    request = bytes(range(256)) * 600  # 153,600 bytes, several 64 KiB reads
    answer = b"".join(i.to_bytes(4, "big") for i in range(20_000))
    await src.send_all(request)
    await dst.send_all(answer)
    assert await nothing_arrives(dst, 30)
    assert await nothing_arrives(src, 0.1)
    assert h.row((1, 2))["bytes_to_dst"] == 0
    h.proxy.handle({"op": "heal"})
    assert await receive_exactly(dst, len(request)) == request  # intact and in order
    assert await receive_exactly(src, len(answer)) == answer
    assert h.row((1, 2))["bytes_to_dst"] == len(request)


async def test_blocked_link_stops_reading_a_sender_at_the_buffer_bound(autojump_clock, h):
    src = await h.connect((1, 2), lockstep=True)  # a send returns only once the proxy read it
    dst = h.dst_ends[-1]
    h.set([(1, 2)], blocked=True)
    payload = b"x" * (4 * BUFFER_BYTES)
    sent = trio.Event()

    async def send() -> None:
        await src.send_all(payload)
        sent.set()

    h.nursery.start_soon(send)
    await trio.sleep(60)
    assert not sent.is_set()  # the proxy holds at most BUFFER_BYTES: back-pressure, not memory
    h.proxy.handle({"op": "heal"})
    assert await receive_exactly(dst, len(payload)) == payload
    await sent.wait()


async def test_connection_arriving_while_blocked_is_dialled_after_the_heal(autojump_clock, h):
    h.set([(1, 2)], blocked=True)
    src = await h.connect((1, 2))
    await src.send_all(b"hello")
    await trio.sleep(5)
    assert h.dials == []  # accepted, but dst is not dialled during the partition
    assert h.row((1, 2))["connections_open"] == 1
    h.proxy.handle({"op": "heal"})
    await trio.testing.wait_all_tasks_blocked()
    assert h.dials == [("node", 9002)]
    assert await receive_exactly(h.dst_ends[-1], 5) == b"hello"


async def test_blocking_one_link_leaves_the_others_alone(autojump_clock, h):
    h.proxy.handle({"op": "partition", "groups": [[1], [3]]})
    src, dst = await h.connect_through((2, 3))
    await src.send_all(b"ok")
    assert await receive_exactly(dst, 2) == b"ok"


# ---------------------------------------------------------------------------- latency


async def test_latency_delays_each_chunk_in_order_both_ways(autojump_clock, h):
    src, dst = await h.connect_through((1, 2))
    h.set([(1, 2)], latency_ms=100)
    start = trio.current_time()
    arrivals = []

    async def receiver() -> None:
        for _ in range(3):
            arrivals.append((await dst.receive_some(100), trio.current_time() - start))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        for i, gap in enumerate([0.0, 0.03, 0.03]):
            await trio.sleep(gap)
            await src.send_all(f"m{i}".encode())
    assert [data for data, _ in arrivals] == [b"m0", b"m1", b"m2"]
    assert [at for _, at in arrivals] == pytest.approx([0.1, 0.13, 0.16], abs=0.002)
    sent_at = trio.current_time()
    await dst.send_all(b"back")
    assert await receive_exactly(src, 4) == b"back"
    assert trio.current_time() - sent_at == pytest.approx(0.1, abs=0.002)


# ---------------------------------------------------------------------------- bandwidth


async def test_bandwidth_caps_the_byte_rate(autojump_clock, h):
    src, dst = await h.connect_through((1, 2))
    h.set([(1, 2)], bandwidth_bps=10_000)  # burst: 50 ms worth = 500 bytes
    payload = bytes(range(256)) * 400  # 102,400 bytes
    start = trio.current_time()
    await src.send_all(payload)
    got = bytearray()
    with trio.move_on_after(5):
        while True:
            got += await dst.receive_some(1 << 16)
    assert 49_000 <= len(got) <= 51_000  # paced, not delivered in bursts: ~10 kB per second
    got += await receive_exactly(dst, len(payload) - len(got))
    elapsed = trio.current_time() - start
    # (102,400 - 500 burst) / 10,000 B/s = 10.19 s
    assert elapsed == pytest.approx(10.19, abs=0.06)
    assert bytes(got) == payload


async def test_bandwidth_is_per_direction_and_shared_by_a_links_connections(autojump_clock, h):
    a_src, a_dst = await h.connect_through((1, 2))
    b_src, b_dst = await h.connect_through((1, 2))
    h.set([(1, 2)], bandwidth_bps=10_000)
    start = trio.current_time()
    done: dict[str, float] = {}

    async def transfer(name, sender, receiver, n) -> None:
        await sender.send_all(b"z" * n)
        await receive_exactly(receiver, n)
        done[name] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(transfer, "a", a_src, a_dst, 25_000)
        nursery.start_soon(transfer, "b", b_src, b_dst, 25_000)
        nursery.start_soon(transfer, "back", a_dst, a_src, 25_000)
    # 50,000 bytes to dst share one 10 kB/s bucket: ~5 s; the 25,000 back have their own: ~2.5 s.
    assert max(done["a"], done["b"]) == pytest.approx(4.95, abs=0.1)
    assert done["back"] == pytest.approx(2.45, abs=0.1)


# ---------------------------------------------------------------------------- closing


async def test_close_delivers_what_was_sent_then_closes_the_other_side(autojump_clock, h):
    src, dst = await h.connect_through((1, 2))
    h.set([(1, 2)], latency_ms=50)
    await src.send_all(b"last words")
    await src.aclose()
    assert await receive_exactly(dst, 10) == b"last words"
    assert await dst.receive_some(10) == b""
    await trio.testing.wait_all_tasks_blocked()
    assert h.row((1, 2))["connections_open"] == 0


async def test_close_while_blocked_closes_the_other_side_at_once(autojump_clock, h):
    src, dst = await h.connect_through((1, 2))
    h.set([(1, 2)], blocked=True)
    await src.send_all(b"never delivered")
    await src.aclose()  # node 1 goes away during the partition, its bytes still held
    with trio.fail_after(1):
        assert await dst.receive_some(10) == b""
    assert h.row((1, 2))["bytes_to_dst"] == 0
    # And the other way round: node 2 closing during a partition closes node 1's end.
    src, dst = await h.connect_through((1, 3))
    h.set([(1, 3)], blocked=True)
    await dst.aclose()
    with trio.fail_after(1):
        assert await src.receive_some(10) == b""


async def test_unreachable_destination_closes_the_connection(autojump_clock, h):
    h.refuse = True
    src = await h.connect((1, 2))
    with trio.fail_after(1):
        assert await src.receive_some(10) == b""
    assert h.row((1, 2))["connections_open"] == 0


async def test_reset_closes_every_connection_of_the_link(autojump_clock, h):
    pairs = [await h.connect_through((1, 2)) for _ in range(2)]
    other_src, other_dst = await h.connect_through((2, 1))
    assert h.proxy.handle({"op": "reset", "links": [[1, 2]]}) == {"ok": True, "closed": 2}
    for src, dst in pairs:
        assert await src.receive_some(10) == b""
        assert await dst.receive_some(10) == b""
    await other_src.send_all(b"still up")
    assert await receive_exactly(other_dst, 8) == b"still up"
    await trio.testing.wait_all_tasks_blocked()
    row = h.row((1, 2))
    assert (row["connections_open"], row["connections_total"], row["resets"]) == (0, 2, 2)


# ---------------------------------------------------------------------------- control


async def control_session(h: Harness) -> tuple[trio.abc.Stream, list]:
    client, server = trio.testing.memory_stream_pair()
    h.nursery.start_soon(h.proxy.serve_control, server)
    return client, []


async def read_replies(stream: trio.abc.Stream, n: int) -> list[dict]:
    buf = b""
    while buf.count(b"\n") < n:
        data = await stream.receive_some(1 << 16)
        assert data, "control connection closed"
        buf += data
    return [json.loads(line) for line in buf.splitlines()]


async def test_control_answers_each_line_and_survives_bad_ones(autojump_clock, h):
    client, _ = await control_session(h)
    before = h.proxy.show()
    lines = [
        b'{"op": "set", "links": [[1, 2]], "latency_ms": 5, "blocked": "maybe"}',
        b"this is not json",
        b'{"op": "set", "links": [[1, 2], [5, 6]], "blocked": true}',
        b'{"op": "partition", "groups": [[1], [1]]}',
    ]
    await client.send_all(b"\n".join(lines) + b"\n\n")
    replies = await read_replies(client, 4)
    assert [r["ok"] for r in replies] == [False] * 4
    assert "blocked must be true, false or null" in replies[0]["error"]
    assert "one JSON object per line" in replies[1]["error"]
    assert "no link 5->6" in replies[2]["error"]
    assert h.proxy.show() == before  # nothing changed, not even link 1->2 of request 3
    # The same connection goes on; a request split over two sends is one line.
    await client.send_all(b'{"op": "partition", ')
    await client.send_all(b'"groups": [[1], [2, 3]]}\n{"op": "show"}\n')
    partition, show = await read_replies(client, 2)
    assert partition == {"ok": True, "blocked": [[1, 2], [2, 1], [1, 3], [3, 1]]}
    assert [(r["src"], r["dst"], r["blocked"]) for r in show["links"]][:3] == [
        (1, 2, True),
        (2, 1, True),
        (1, 3, True),
    ]
    await client.send_all(b'{"op": "heal"}\n')
    [heal] = await read_replies(client, 1)
    assert heal == {"ok": True, "healed": [[1, 2], [2, 1], [1, 3], [3, 1]]}


async def test_control_refuses_an_endless_line_and_hangs_up(autojump_clock, h):
    client, _ = await control_session(h)
    await client.send_all(b"x" * (70 * 1024))
    [reply] = await read_replies(client, 1)
    assert reply["ok"] is False and "at most" in reply["error"]
    assert await client.receive_some(10) == b""


async def test_client_methods_over_the_control_protocol(autojump_clock, h):
    async def open_memory(host, port):
        assert (host, port) == ("127.0.0.1", 4000)
        client, server = trio.testing.memory_stream_pair()
        h.nursery.start_soon(h.proxy.serve_control, server)
        return client

    client = FaultProxyClient("127.0.0.1", 4000, open_stream=open_memory)
    rows = await client.set_links(both_ways([(1, 2)]), latency_ms=20, bandwidth_bps=1000)
    assert [(r["src"], r["dst"], r["latency_ms"], r["bandwidth_bps"]) for r in rows] == [
        (1, 2, 20, 1000),
        (2, 1, 20, 1000),
    ]
    rows = await client.set_links([(1, 2)], bandwidth_bps=None)  # None clears, the rest stays
    assert (rows[0]["latency_ms"], rows[0]["bandwidth_bps"]) == (20, None)
    assert await client.partition([[3], [1, 2]]) == [(1, 3), (3, 1), (2, 3), (3, 2)]
    assert sorted(await client.heal()) == [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]
    src, _dst = await h.connect_through((1, 3))
    assert await client.reset([(1, 3)]) == 1
    shown = await client.show()
    assert len(shown) == len(LINKS) and all(not r["blocked"] for r in shown)
    with pytest.raises(ConfigError, match="no link 1->1"):
        await client.set_links([(1, 1)], blocked=True)
