"""Kafka's Produce translated to minikafka's and back (minikafka/kafka/produce.py)."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import i16, i32

from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.kafka.codec import encode_response
from minikafka.kafka.produce import Translated, to_kafka, to_native
from minikafka.wire.messages import ProducePartitionResponse, ProduceResponse

TS = 1_700_000_000_000
PLAIN = v2.build([(TS, None, b"a"), (TS, None, b"b")])
IDEMPOTENT = v2.build([(TS, None, b"a")], producer_id=7, producer_epoch=1, base_sequence=3)


def request(version: int, parts: dict[tuple[str, int], bytes], *, acks=-1, txn=None):
    mod = importlib.import_module(f"kio.schema.produce.v{version}.request")
    topics: dict[str, list] = {}
    for (topic, index), records in parts.items():
        topics.setdefault(topic, []).append(
            mod.PartitionProduceData(index=i32(index), records=records)
        )
    return mod.ProduceRequest(
        transactional_id=txn,
        acks=i16(acks),
        timeout=timedelta(milliseconds=1500),
        topic_data=tuple(
            mod.TopicProduceData(name=TopicName(t), partition_data=tuple(ps))
            for t, ps in topics.items()
        ),
    )


@pytest.mark.parametrize("version", [3, 5, 8])
def test_each_partition_becomes_a_native_entry_with_its_batch_and_producer(version):
    t = to_native(request(version, {("a", 0): PLAIN, ("a", 1): IDEMPOTENT, ("b", 0): PLAIN}))
    assert isinstance(t, Translated)
    assert (t.native.acks, t.native.timeout_ms) == (-1, 1500)
    got = [(e.topic, e.partition, e.producer_id, e.base_sequence) for e in t.native.partitions]
    assert got == [("a", 0, -1, -1), ("a", 1, 7, 3), ("b", 0, -1, -1)]
    assert t.native.partitions[1].records == IDEMPOTENT  # as the client wrote it
    assert t.refused == []


@pytest.mark.parametrize(
    ("records", "why"),
    [
        (PLAIN + PLAIN, "exactly one record batch"),
        (make_batch([(TS, None, b"x")]), "RecordBatch v2"),
        (PLAIN[:40], "truncated"),
    ],
)
def test_a_partition_without_exactly_one_v2_batch_is_refused_alone(records, why):
    t = to_native(request(8, {("a", 0): records, ("a", 1): PLAIN}))
    assert [e.partition for e in t.native.partitions] == [1]
    [refused] = t.refused
    assert (refused.partition, refused.error_code) == (0, ErrorCode.INVALID_RECORD)
    assert why in refused.error_message


def test_a_transactional_batch_is_refused():
    raw = v2.build([(TS, None, b"a")], producer_id=1, producer_epoch=0, base_sequence=0)
    body = bytearray(raw)
    body[22] |= v2.TRANSACTIONAL  # the attributes' low byte (the CRC is not checked here)
    t = to_native(request(8, {("a", 0): bytes(body)}))
    assert t.refused[0].error_code == ErrorCode.INVALID_RECORD


def test_a_client_may_not_write_the_internal_offsets_topic():
    """Its records are the group coordinator's; forged ones must never reach the log."""
    t = to_native(request(8, {("__consumer_offsets", 3): PLAIN, ("a", 0): PLAIN}))
    assert [(e.topic, e.partition) for e in t.native.partitions] == [("a", 0)]
    [refused] = t.refused
    assert (refused.topic, refused.error_code) == (
        "__consumer_offsets",
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    )


@pytest.mark.parametrize(
    ("acks", "txn", "code"),
    [
        (2, None, ErrorCode.INVALID_REQUIRED_ACKS),
        (-1, "tx-1", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ],
)
def test_a_request_refused_as_a_whole_answers_every_partition(acks, txn, code):
    t = to_native(request(8, {("a", 0): PLAIN, ("b", 2): PLAIN}, acks=acks, txn=txn))
    assert t.native is None  # nothing reaches the broker
    assert [(p.topic, p.partition, p.error_code) for p in t.refused] == [
        ("a", 0, code),
        ("b", 2, code),
    ]


@pytest.mark.parametrize("version", [3, 8])
def test_the_answer_keeps_the_request_order_and_kafkas_fields(version):
    t = to_native(request(version, {("a", 0): PLAIN, ("a", 1): PLAIN[:10], ("b", 0): PLAIN}))
    answer = ProduceResponse(
        partitions=[
            ProducePartitionResponse(
                topic="a", partition=0, error_code=0, base_offset=40, log_start_offset=0
            ),
            ProducePartitionResponse(
                topic="b", partition=0, error_code=6, base_offset=99, error_message="not the leader"
            ),
        ],  # fmt: skip
        throttle_time_ms=250,
    )
    out = to_kafka(version, t, answer)
    payload = encode_response(9, out)
    mod = importlib.import_module(f"kio.schema.produce.v{version}.response")
    header, used = entity_reader(mod.ProduceResponse.__header_schema__)(payload, 0)
    decoded, _ = entity_reader(mod.ProduceResponse)(payload, used)
    assert header.correlation_id == 9 and decoded.throttle_time == timedelta(milliseconds=250)
    rows = [
        (str(t.name), int(p.index), p.error_code, int(p.base_offset))
        for t in decoded.responses
        for p in t.partition_responses
    ]
    assert rows == [
        ("a", 0, KafkaErrorCode.none, 40),
        ("a", 1, KafkaErrorCode.invalid_record, -1),
        ("b", 0, KafkaErrorCode.not_leader_or_follower, -1),  # no offset with an error
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_init_producer_id_translates_both_ways(version):
    from minikafka.kafka.produce import init_producer_id_to_kafka, init_producer_id_to_native
    from minikafka.wire.producer_messages import InitProducerIdResponse

    mod = importlib.import_module(f"kio.schema.init_producer_id.v{version}.request")
    kio_req = mod.InitProducerIdRequest(
        transactional_id=None, transaction_timeout=timedelta(milliseconds=60000)
    )
    native = init_producer_id_to_native(kio_req)
    assert (native.transactional_id, native.transaction_timeout_ms) == (None, 60000)
    out = init_producer_id_to_kafka(
        version, InitProducerIdResponse(error_code=0, producer_id=1234, producer_epoch=0)
    )
    payload = encode_response(3, out)
    rmod = importlib.import_module(f"kio.schema.init_producer_id.v{version}.response")
    _h, used = entity_reader(rmod.InitProducerIdResponse.__header_schema__)(payload, 0)
    decoded, _ = entity_reader(rmod.InitProducerIdResponse)(payload, used)
    assert (decoded.error_code, int(decoded.producer_id), decoded.producer_epoch) == (
        KafkaErrorCode.none,
        1234,
        0,
    )
