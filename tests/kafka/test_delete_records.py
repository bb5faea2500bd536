"""Kafka's DeleteRecords (KIP-107) translated (minikafka/kafka/delete_records.py) and forwarded by
the Kafka listener's shell (server/kafka_apis.py). Independent of the broker's native handler:
a fake native dispatch answers."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as K
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import i32, i64

from minikafka.errors import BrokerError, ErrorCode
from minikafka.kafka import delete_records as dr
from minikafka.kafka.codec import (
    DELETE_RECORDS,
    SUPPORTED,
    KafkaRequest,
    decode_request,
    encode_response,
)
from minikafka.server.kafka_apis import KafkaApis
from minikafka.server.metadata_cache import MetadataCache
from minikafka.wire.messages import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)


def test_served_versions() -> None:
    assert SUPPORTED[DELETE_RECORDS] == (0, 1)  # v2 is flexible


def _request(version: int, timeout_ms: int, *topics: tuple[str, list[tuple[int, int]]]) -> Any:
    mod = importlib.import_module(f"kio.schema.delete_records.v{version}.request")
    return mod.DeleteRecordsRequest(
        topics=tuple(
            mod.DeleteRecordsTopic(
                name=TopicName(name),
                partitions=tuple(
                    mod.DeleteRecordsPartition(partition_index=i32(p), offset=i64(o))
                    for p, o in parts
                ),
            )
            for name, parts in topics
        ),
        timeout=timedelta(milliseconds=timeout_ms),
    )


@pytest.mark.parametrize(
    ("version", "timeout_ms", "topics", "expected"),
    [
        (0, 5000, [("a", [(0, 10), (1, -1)])],
         [DeleteRecordsPartition(topic="a", partition=0, offset=10),
          DeleteRecordsPartition(topic="a", partition=1, offset=-1)]),  # -1: the HW
        (1, 0, [("a", [(2, 3)]), ("b", [(0, 7)])],
         [DeleteRecordsPartition(topic="a", partition=2, offset=3),
          DeleteRecordsPartition(topic="b", partition=0, offset=7)]),
        (1, 30_000, [], []),
    ],
)  # fmt: skip
def test_to_native(version, timeout_ms, topics, expected) -> None:
    native = dr.to_native(_request(version, timeout_ms, *topics))
    assert native == DeleteRecordsRequest(partitions=expected, timeout_ms=timeout_ms)


def _answer(topic: str, partition: int, code: int, low: int = -1) -> DeleteRecordsPartitionResponse:
    return DeleteRecordsPartitionResponse(
        topic=topic, partition=partition, error_code=code, low_watermark=low
    )


def _round_trip(response: Any) -> Any:
    payload = encode_response(5, response)
    cls = type(response)
    _h, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, body_used = entity_reader(cls)(payload, used)
    assert used + body_used == len(payload)
    return body


def _table(response: Any) -> list[tuple[str, int, K, int]]:
    return [
        (str(t.name), int(p.partition_index), p.error_code, int(p.low_watermark))
        for t in response.topics
        for p in t.partitions
    ]


@pytest.mark.parametrize(
    ("answer", "throttle_ms", "expected"),
    [
        # Topics grouped (each once, in the order first seen), partitions in the broker's order.
        ([_answer("a", 0, ErrorCode.NONE, 10), _answer("b", 0, ErrorCode.NONE, 7),
          _answer("a", 1, ErrorCode.NONE, 4)], 0,
         [("a", 0, K.none, 10), ("a", 1, K.none, 4), ("b", 0, K.none, 7)]),
        # Every error the broker answers goes out as Kafka's code, with the low watermark -1
        # (or the one reached, for a timeout).
        ([_answer("a", 0, ErrorCode.OFFSET_OUT_OF_RANGE),
          _answer("a", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
          _answer("a", 2, ErrorCode.REQUEST_TIMED_OUT, 3),
          _answer("x", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
          _answer("__consumer_offsets", 0, ErrorCode.INVALID_TOPIC_EXCEPTION),
          _answer("c", 0, ErrorCode.POLICY_VIOLATION),
          _answer("d", 0, ErrorCode.KAFKA_STORAGE_ERROR)], 250,
         [("a", 0, K.offset_out_of_range, -1), ("a", 1, K.not_leader_or_follower, -1),
          ("a", 2, K.request_timed_out, 3), ("x", 0, K.unknown_topic_or_partition, -1),
          ("__consumer_offsets", 0, K.invalid_topic_exception, -1),
          ("c", 0, K.policy_violation, -1), ("d", 0, K.kafka_storage_error, -1)]),
        ([], 0, []),
    ],
)  # fmt: skip
@pytest.mark.parametrize("version", [0, 1])
def test_to_kafka(version, answer, throttle_ms, expected) -> None:
    native = DeleteRecordsResponse(partitions=answer, throttle_time_ms=throttle_ms)
    got = _round_trip(dr.to_kafka(version, native))
    assert got.throttle_time == timedelta(milliseconds=throttle_ms)
    assert _table(got) == expected


def _header(body: Any) -> KafkaRequest:
    return KafkaRequest(
        api_key=int(body.__api_key__), api_version=int(body.__version__), correlation_id=1,
        client_id="cli", body=body,
    )  # fmt: skip


async def test_the_shell_forwards_to_the_broker() -> None:
    seen: list[object] = []

    async def native(request: object, *, client_id: str = "", order: object = None) -> object:
        seen.append(request)
        assert isinstance(request, DeleteRecordsRequest)
        return DeleteRecordsResponse(
            partitions=[_answer(p.topic, p.partition, 0, p.offset) for p in request.partitions]
        )

    apis = KafkaApis(cache=MetadataCache(), cluster_id="c", broker=native)
    body = _request(1, 1000, ("a", [(0, 5)]))
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert seen == [DeleteRecordsRequest(
        partitions=[DeleteRecordsPartition(topic="a", partition=0, offset=5)], timeout_ms=1000
    )]  # fmt: skip
    assert _table(out) == [("a", 0, K.none, 5)]


async def test_a_failed_forward_answers_every_partition() -> None:
    async def down(request: object, *, client_id: str = "", order: object = None) -> object:
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "gone")

    apis = KafkaApis(cache=MetadataCache(), cluster_id="c", broker=down)
    body = _request(0, 1000, ("a", [(0, 5), (1, 6)]))
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert _table(out) == [("a", 0, K.not_leader_or_follower, -1)] * 1 + [
        ("a", 1, K.not_leader_or_follower, -1)
    ]


def test_kafka_pythons_request_decodes() -> None:
    from kafka.protocol.admin import DeleteRecordsRequest as KpRequest

    topic_cls = KpRequest.DeleteRecordsTopic
    part_cls = topic_cls.DeleteRecordsPartition
    request = KpRequest(
        topics=[topic_cls(name="t", partitions=[part_cls(partition_index=1, offset=9)])],
        timeout_ms=2500,
        version=1,
    )
    request.with_header(correlation_id=3, client_id="kafka-python")
    decoded = decode_request(bytes(request.encode(header=True)))
    assert dr.to_native(decoded.body) == DeleteRecordsRequest(
        partitions=[DeleteRecordsPartition(topic="t", partition=1, offset=9)], timeout_ms=2500
    )
