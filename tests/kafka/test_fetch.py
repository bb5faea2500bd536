"""Kafka's Fetch for consumers, translated (minikafka/kafka/fetch.py)."""

from __future__ import annotations

import dataclasses
import importlib
from datetime import timedelta

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i64

from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.kafka.codec import encode_response
from minikafka.kafka.fetch import (
    as_record_batch_v2,
    is_follower_fetch,
    refuse_follower,
    to_kafka,
    to_native,
)
from minikafka.wire.messages import FetchPartitionResponse, FetchResponse

TS = 1_700_000_000_000


def request(version: int, *, replica_id: int = -1):
    mod = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    names = mod.FetchPartition.__dataclass_fields__
    extra = {"current_leader_epoch": i32(-1)} if "current_leader_epoch" in names else {}
    if "log_start_offset" in names:
        extra["log_start_offset"] = i64(-1)
    part = mod.FetchPartition(
        partition=i32(2), fetch_offset=i64(40), partition_max_bytes=i32(1 << 20), **extra
    )
    kwargs = dict(
        replica_id=BrokerId(replica_id),
        max_wait=timedelta(milliseconds=500),
        min_bytes=i32(1),
        max_bytes=i32(50 << 20),
        isolation_level=i8(0),
        topics=(mod.FetchTopic(topic=TopicName("t"), partitions=(part,)),),
    )
    fields = mod.FetchRequest.__dataclass_fields__
    if "session_id" in fields:
        kwargs.update(session_id=i32(0), session_epoch=i32(-1))
    if "forgotten_topics_data" in fields:
        kwargs["forgotten_topics_data"] = ()
    if "rack_id" in fields:
        kwargs["rack_id"] = ""
    return mod.FetchRequest(**kwargs)


@pytest.mark.parametrize("version", [4, 7, 11])
def test_a_consumer_fetch_becomes_the_native_one(version):
    native = to_native(request(version))
    assert (native.replica_id, native.max_wait_ms, native.min_bytes) == (-1, 500, 1)
    [p] = native.partitions
    assert (p.topic, p.partition, p.fetch_offset, p.partition_max_bytes) == ("t", 2, 40, 1 << 20)


def test_a_follower_fetch_is_refused_on_the_kafka_listener():
    req = request(11, replica_id=2)
    assert is_follower_fetch(req)
    out = refuse_follower(11, req)
    [topic] = out.responses
    assert topic.partitions[0].error_code == KafkaErrorCode.cluster_authorization_failed


def test_native_batches_go_out_as_record_batch_v2_and_v2_batches_unchanged():
    native = make_batch(
        [(TS, None, b"a"), (TS + 1, b"k", b"b")], base_offset=40, leader_epoch=3,
        producer_id=5, producer_epoch=0, base_sequence=9,
    )  # fmt: skip
    kafka = v2.restamp(v2.build([(TS, None, b"c")]), base_offset=42, leader_epoch=3)
    out = as_record_batch_v2(native + kafka)
    batches = list(iter_batches(out))  # CRCs hold
    assert all(v2.is_v2(b.raw) for b in batches)
    assert batches[1].raw == kafka
    first = DefaultRecordBatch(batches[0].raw)  # what a Kafka client reads
    assert first.validate_crc() and first.producer_id == 5 and first.base_sequence == 9
    assert [(r.offset, r.key, r.value) for r in first] == [(40, None, b"a"), (41, b"k", b"b")]
    assert as_record_batch_v2(kafka) is kafka  # nothing to convert: no copy


@pytest.mark.parametrize("version", [4, 11])
def test_the_answer_carries_kafkas_fields(version):
    records = v2.build([(TS, None, b"x")], base_offset=40)
    answer = FetchResponse(
        partitions=[
            FetchPartitionResponse(
                topic="t",
                partition=2,
                error_code=0,
                high_watermark=41,
                log_start_offset=0,
                records=records,
            ),
            FetchPartitionResponse(
                topic="t", partition=3, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            ),
        ],  # fmt: skip
        throttle_time_ms=30,
    )
    payload = encode_response(5, to_kafka(version, answer))
    mod = importlib.import_module(f"kio.schema.fetch.v{version}.response")
    _h, used = entity_reader(mod.FetchResponse.__header_schema__)(payload, 0)
    decoded, _ = entity_reader(mod.FetchResponse)(payload, used)
    [topic] = decoded.responses
    ok, moved = topic.partitions
    assert (ok.high_watermark, ok.last_stable_offset, bytes(ok.records)) == (41, 41, records)
    assert moved.error_code == KafkaErrorCode.not_leader_or_follower
    assert moved.records == b""  # Kafka's MemoryRecords.EMPTY, never null (kafka-python needs it)
    assert decoded.throttle_time == timedelta(milliseconds=30)
    if version >= 7:
        assert decoded.session_id == 0  # sessions declined (KIP-227)


@pytest.mark.parametrize(("version", "expected"), [(8, -1), (9, 7), (11, 7)])
def test_current_leader_epoch_reaches_the_leaders_check(version, expected):
    """KIP-320: Fetch v9+ names the leader epoch the consumer knows (the leader fences it,
    core/log.py check_follower_fetch); v4-8 have none (-1: not checked)."""
    body = request(version)
    topic = body.topics[0]
    if "current_leader_epoch" in type(topic.partitions[0]).__dataclass_fields__:
        part = dataclasses.replace(topic.partitions[0], current_leader_epoch=i32(7))
        body = dataclasses.replace(body, topics=(dataclasses.replace(topic, partitions=(part,)),))
    assert to_native(body).partitions[0].current_leader_epoch == expected


@pytest.mark.parametrize(
    ("code", "kio_code"),
    [
        (ErrorCode.FENCED_LEADER_EPOCH, KafkaErrorCode.fenced_leader_epoch),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, KafkaErrorCode.unknown_leader_epoch),
    ],
)
def test_a_fenced_fetch_goes_out_with_kafkas_code(code, kio_code):
    answer = FetchResponse(
        partitions=[FetchPartitionResponse(topic="t", partition=2, error_code=code)]
    )
    [p] = to_kafka(11, answer).responses[0].partitions
    assert p.error_code is kio_code and p.records == b""
