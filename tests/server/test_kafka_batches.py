"""Kafka's RecordBatch v2 through a broker (server/produce.py, fetch, replication): stored with
the leader's offsets and epoch and otherwise byte for byte, replicated unchanged, read back by
native consumers; refused with Kafka's error codes when its producer fields or its codec are
not acceptable. In-process brokers on memory streams (testing/memory_node.py)."""

from __future__ import annotations

import struct

import crc32c
import pytest

from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import decode_records, iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    replicating_config,
    wait_until,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest, ProduceResponse

TS = 1_700_000_000_000


def kafka_batch(n: int, tag: str = "k", **producer) -> bytes:
    return v2.build([(TS + i, None, f"{tag}{i}".encode()) for i in range(n)], **producer)


async def produce(broker: MemoryBroker, *entries: ProducePartition, acks: int = 1):
    req = ProduceRequest(acks=acks, timeout_ms=5000, partitions=list(entries))
    resp = (await handle_produce(broker.replica_manager, req, broker.topics)).response
    assert isinstance(resp, ProduceResponse)
    return resp.partitions


def entry(records: bytes, **producer) -> ProducePartition:
    return ProducePartition(topic="t", partition=0, records=records, **producer)


@pytest.fixture
async def pair(tmp_path):
    network = MemoryNetwork()
    a = MemoryBroker(replicating_config(1), tmp_path / "a", network=network)
    b = MemoryBroker(replicating_config(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        state = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
        await a.apply([state], [a.info, b.info])
        await b.apply([state], [a.info, b.info])
        yield a, b


async def test_v2_batches_are_stored_as_produced_and_replicated_byte_for_byte(autojump_clock, pair):
    a, b = pair
    native = make_batch([(TS, None, b"n0"), (TS, None, b"n1")])
    kafka = kafka_batch(3)
    [first] = await produce(a, entry(native), acks=-1)
    [second] = await produce(a, entry(kafka), acks=-1)
    assert (first.error_code, second.error_code) == (0, 0)
    assert (first.base_offset, second.base_offset) == (0, 2)
    await wait_until(lambda: b.partition("t").high_watermark == 5)
    stored = a.log_bytes("t")
    assert b.log_bytes("t") == stored
    views = list(iter_batches(stored))
    assert views[1].raw[v2.MAGIC_OFFSET :] == kafka[v2.MAGIC_OFFSET :]  # the client's bytes
    assert (views[1].base_offset, views[1].leader_epoch) == (2, 1)  # the leader's stamp
    values = [r.value for view in views for r in decode_records(view)]
    assert values == [b"n0", b"n1", b"k0", b"k1", b"k2"]


async def test_an_idempotent_v2_batch_is_deduplicated_like_a_native_one(autojump_clock, pair):
    a, _b = pair
    fields = dict(producer_id=4, producer_epoch=0, base_sequence=0)
    raw = kafka_batch(2, **fields)
    [first] = await produce(a, entry(raw, **fields))
    [again] = await produce(a, entry(raw, **fields))  # a retry: answered from the original
    assert (first.error_code, again.error_code) == (0, 0)
    assert again.base_offset == first.base_offset == 0
    assert a.partition("t").log_end_offset == 2


@pytest.mark.parametrize(
    "claimed",
    [
        {},  # the batch names a producer, the entry none
        dict(producer_id=4, producer_epoch=0, base_sequence=5),  # another sequence
    ],
)
async def test_v2_producer_fields_other_than_the_entrys_are_refused(autojump_clock, pair, claimed):
    a, _b = pair
    raw = kafka_batch(2, producer_id=4, producer_epoch=0, base_sequence=0)
    [answer] = await produce(a, entry(raw, **claimed))
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert a.partition("t").log_end_offset == 0


async def test_a_v2_batch_in_a_codec_the_broker_lacks_is_unsupported_compression(
    autojump_clock, pair
):
    a, _b = pair
    raw = kafka_batch(2)
    body = struct.pack(">h", 5) + raw[v2.CRC_START + 2 :]  # CompressionType has ids 0-4
    unknown = raw[: v2.MAGIC_OFFSET + 1] + struct.pack(">I", crc32c.crc32c(body)) + body
    [answer] = await produce(a, entry(unknown))
    assert answer.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert "compressed with 5" in (answer.error_message or "")
    assert a.partition("t").log_end_offset == 0


async def test_a_v2_batch_with_a_bad_crc_is_a_corrupt_message(autojump_clock, pair):
    a, _b = pair
    raw = bytearray(kafka_batch(2))
    raw[-1] ^= 1
    [answer] = await produce(a, entry(bytes(raw)))
    assert answer.error_code == ErrorCode.CORRUPT_MESSAGE
    assert a.partition("t").log_end_offset == 0
