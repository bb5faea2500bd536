"""What a produce may not do to a broker (server/produce.py): write an internal topic, wedge a
partition with a producer id a native batch cannot carry, or stall the event loop and blow up
memory with a compressed batch. In-process brokers (testing/memory_node.py)."""

from __future__ import annotations

import gzip

import pytest
import trio

from minikafka.core import compression as codecs
from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import decode_records, iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.server.listener import Ordering
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    broker_config,
    partition_state,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest, ProduceResponse

TS = 1_700_000_000_000
OFFSETS = "__consumer_offsets"


async def produce(broker: MemoryBroker, *entries: ProducePartition, internal: bool = False):
    req = ProduceRequest(acks=1, timeout_ms=5000, partitions=list(entries))
    reply = await handle_produce(broker.replica_manager, req, broker.topics, internal=internal)
    assert isinstance(reply.response, ProduceResponse)
    return reply.response.partitions


def entry(records: bytes, topic: str = "t", **producer) -> ProducePartition:
    return ProducePartition(topic=topic, partition=0, records=records, **producer)


def broker_leading(tmp_path, *topics: str, run_sync=None):
    b = MemoryBroker(broker_config(1), tmp_path / "b", network=MemoryNetwork(), run_sync=run_sync)
    states = [partition_state(t, 0, leader=1, isr=[1], replicas=[1]) for t in topics]
    return b, states


async def test_a_client_cannot_write_an_internal_topic_but_the_coordinator_can(
    autojump_clock, tmp_path
):
    b, states = broker_leading(tmp_path, OFFSETS)
    async with b.running():
        await b.apply(states, [b.info])
        junk = make_batch([(TS, b"k", b"\x00")])
        [refused] = await produce(b, entry(junk, OFFSETS))
        assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION  # Kafka's 17
        assert refused.error_message == f"cannot append to internal topic {OFFSETS}"
        assert b.log_bytes(OFFSETS) == b""  # nothing written
        [ok] = await produce(b, entry(junk, OFFSETS), internal=True)  # the group coordinator
        assert (ok.error_code, ok.base_offset) == (0, 0)


async def test_a_producer_id_a_native_batch_cannot_carry_is_refused(autojump_clock, tmp_path):
    b, states = broker_leading(tmp_path, "t")
    async with b.running():
        await b.apply(states, [b.info])
        batch = make_batch([(TS, None, b"x")])
        big = 2**57  # its first byte, 0x02, is RecordBatch v2's magic
        [refused] = await produce(b, entry(batch, producer_id=big, producer_epoch=0,
                                           base_sequence=0))  # fmt: skip
        assert refused.error_code == ErrorCode.INVALID_RECORD
        assert "does not fit a native batch" in (refused.error_message or "")
        [ok] = await produce(b, entry(batch))
        assert ok.error_code == 0
        # The partition still reads: before, the stamped batch read as a broken v2 batch and
        # every fetch of the partition failed.
        assert [r.value for v in iter_batches(b.log_bytes("t")) for r in decode_records(v)] == [
            b"x"
        ]
        # Kafka's own batches carry any int64 producer id: its byte 16 is always the magic.
        for pid in (2**56, 2**62, 2**63 - 1):
            kafka = v2.build([(TS, None, b"k")], producer_id=pid, producer_epoch=0,
                             base_sequence=0)  # fmt: skip
            [k] = await produce(b, entry(kafka, producer_id=pid, producer_epoch=0,
                                         base_sequence=0))  # fmt: skip
            assert k.error_code == 0, k
        views = list(iter_batches(b.log_bytes("t")))
        assert [v.producer_id for v in views] == [-1, 2**56, 2**62, 2**63 - 1]


def bomb_behind_a_record(total: int) -> bytes:
    """A RecordBatch v2 whose one record claims a value of `total` bytes, which zeros fill:
    well formed byte after byte, gzip of 1 MiB members of zeros (about 1 KiB each)."""
    rec = bytearray(b"\x00\x00\x00\x01")  # attributes, ts delta, offset delta, null key
    v2._put_varint(rec, total)
    record = bytearray()
    v2._put_varint(record, len(rec) + total + 1)
    head = bytes(record + rec)
    body = gzip.compress(head + bytes((1 << 20) - len(head)), 9)
    body += gzip.compress(bytes(1 << 20), 9) * (total // (1 << 20))
    good = bytearray(v2.build([(TS, None, b"x")], compression=codecs.GZIP))
    good[8:12] = (v2.HEADER_SIZE - v2.LENGTH_START + len(body)).to_bytes(4, "big")
    raw = bytes(good[: v2.HEADER_SIZE]) + body
    crc = v2.crc32c.crc32c(raw[v2.CRC_START :])
    return raw[: v2.MAGIC_OFFSET + 1] + crc.to_bytes(4, "big") + raw[v2.CRC_START :]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (lambda: bomb_behind_a_record(900 << 20), ErrorCode.MESSAGE_TOO_LARGE),
        (lambda: v2.build([(TS, None, b"v")] * 3, compression=codecs.ZSTD), ErrorCode.NONE),
        (lambda: v2.build([(TS, None, b"v")] * 3, compression=codecs.SNAPPY), ErrorCode.NONE),
        (lambda: v2.build([(TS, None, b"v")] * 3, compression=codecs.LZ4), ErrorCode.NONE),
    ],
)
async def test_compressed_batches_are_validated_off_the_event_loop(tmp_path, raw, code):
    # Real worker threads and Trio's real clock (no sleeps): while the broker inflates the
    # batch, another task keeps being scheduled.
    b, states = broker_leading(tmp_path, "t", run_sync=trio.to_thread.run_sync)
    batch = raw()
    ticks = 0
    async with b.running():
        await b.apply(states, [b.info])

        async def ticker() -> None:
            # 1 ms naps, not a busy loop: a loop that never waits holds the GIL between its
            # turns, and the worker thread then waits a switch interval (5 ms) for it at every
            # chunk, which made this test take a minute (a node's loop waits in epoll).
            nonlocal ticks
            while True:
                ticks += 1
                await trio.sleep(0.001)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            await trio.sleep(0)
            start = ticks
            [answer] = await produce(b, entry(batch))
            during = ticks - start
            nursery.cancel_scope.cancel()
        stored = b.log_bytes("t")
    assert answer.error_code == code, answer
    if code == ErrorCode.MESSAGE_TOO_LARGE:
        assert "decompress to more than" in (answer.error_message or "")
        assert during > 20, during  # inline, the ~64 MiB inflate allowed none
    else:
        assert [r.value for v in iter_batches(stored) for r in decode_records(v)] == [b"v"] * 3


async def test_a_compressed_partition_does_not_reorder_another_requests_appends(
    autojump_clock, tmp_path
):
    """Request A names "p" (plain) then "q" (gzip: its validation leaves the event loop);
    request B names "p" while A waits there. Offsets are stamped and queued at once, in order:
    had A stamped "p" before leaving the loop, B's later offsets would reach the log writer
    first and the append would fail. A's and B's records are both stored, in stamp order."""

    async def leave_the_loop(fn, *args):  # a worker thread's await, under the MockClock
        await trio.sleep(0.01)
        return fn(*args)

    b, states = broker_leading(tmp_path, "p", "q", run_sync=leave_the_loop)
    async with b.running():
        await b.apply(states, [b.info])
        plain = make_batch([(TS, None, b"a")])
        gz = v2.build([(TS, None, b"z")], compression=codecs.GZIP)
        results = {}

        async def send(name, *entries):
            results[name] = await produce(b, *entries)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, "A", entry(plain, "p"), entry(gz, "q"))
            await trio.sleep(0.001)  # A waits at q's validation
            nursery.start_soon(send, "B", entry(make_batch([(TS, None, b"b")]), "p"))
        assert [r.error_code for r in results["A"] + results["B"]] == [0, 0, 0]
        stored = [r.value for v in iter_batches(b.log_bytes("p")) for r in decode_records(v)]
        assert sorted(stored) == [b"a", b"b"]


async def test_a_produce_releases_its_connections_order_once_queued_not_after_the_wait(
    autojump_clock, tmp_path
):
    """On a Kafka connection the next request may start once this produce's batches are queued
    for the log (server/listener.py `Ordering`): an acks=all produce that waits for a follower
    has released its order long before it is answered; the broker's own appends have none."""
    b = MemoryBroker(broker_config(1), tmp_path / "b", network=MemoryNetwork())
    async with b.running():
        # Replicas 1 and 2, both in the ISR, and no broker 2 to fetch: acks=all waits it out.
        await b.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])], [b.info])
        released: list[float] = []
        order = Ordering(lambda: released.append(trio.current_time()))
        req = ProduceRequest(
            acks=-1, timeout_ms=2000, partitions=[entry(make_batch([(TS, None, b"x")]))]
        )
        t0 = trio.current_time()
        reply = await handle_produce(b.replica_manager, req, b.topics, order=order)
        assert isinstance(reply.response, ProduceResponse)
        assert reply.response.partitions[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert trio.current_time() - t0 == pytest.approx(2.0)  # the wait, after the release
        assert len(released) == 1 and released[0] - t0 < 0.1
