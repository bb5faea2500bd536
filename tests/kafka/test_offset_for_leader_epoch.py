"""Kafka's OffsetForLeaderEpoch (KIP-320) translated (minikafka/kafka/offset_for_leader_epoch.py)
and served by the Kafka listener's shell (server/kafka_apis.py) through the native dispatch."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as K
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i32

from minikafka.errors import BrokerError, ErrorCode
from minikafka.kafka import offset_for_leader_epoch as ofle
from minikafka.kafka.codec import (
    OFFSET_FOR_LEADER_EPOCH,
    SUPPORTED,
    KafkaRequest,
    decode_request,
    encode_response,
)
from minikafka.server.kafka_apis import KafkaApis
from minikafka.server.metadata_cache import MetadataCache
from minikafka.wire.messages import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)


def test_served_versions_are_the_non_flexible_ones_kio_has() -> None:
    assert SUPPORTED[OFFSET_FOR_LEADER_EPOCH] == (2, 3)
    assert not importlib.import_module(
        "kio.schema.offset_for_leader_epoch.v3.request"
    ).OffsetForLeaderEpochRequest.__flexible__


def _request(version: int, *topics: tuple[str, list[tuple[int, int, int]]]) -> Any:
    mod = importlib.import_module(f"kio.schema.offset_for_leader_epoch.v{version}.request")
    kwargs: dict[str, Any] = {
        "topics": tuple(
            mod.OffsetForLeaderTopic(
                topic=TopicName(name),
                partitions=tuple(
                    mod.OffsetForLeaderPartition(
                        partition=i32(p), current_leader_epoch=i32(cur), leader_epoch=i32(e)
                    )
                    for p, cur, e in parts
                ),
            )
            for name, parts in topics
        )
    }
    if version >= 3:
        kwargs["replica_id"] = BrokerId(-1)
    return mod.OffsetForLeaderEpochRequest(**kwargs)


@pytest.mark.parametrize(("version", "replica_id"), [(2, -2), (3, -1)])
def test_to_native(version: int, replica_id: int) -> None:
    body = _request(version, ("a", [(0, 5, 4), (1, -1, 3)]), ("b", [(2, 7, 7)]))
    assert ofle.to_native(body) == OffsetForLeaderEpochRequest(
        replica_id=replica_id,  # v2 has none: Kafka reads it as DEBUGGING_REPLICA_ID
        partitions=[
            OffsetForLeaderEpochPartition(topic="a", partition=0, current_leader_epoch=5,
                                          leader_epoch=4),
            OffsetForLeaderEpochPartition(topic="a", partition=1, current_leader_epoch=-1,
                                          leader_epoch=3),
            OffsetForLeaderEpochPartition(topic="b", partition=2, current_leader_epoch=7,
                                          leader_epoch=7),
        ],
    )  # fmt: skip


def _answer(topic: str, partition: int, code: int, epoch: int = -1, end: int = -1) -> Any:
    return OffsetForLeaderEpochPartitionResponse(
        topic=topic, partition=partition, error_code=code, leader_epoch=epoch, end_offset=end
    )


def _round_trip(response: Any) -> Any:
    payload = encode_response(9, response)
    cls = type(response)
    _h, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, body_used = entity_reader(cls)(payload, used)
    assert used + body_used == len(payload)
    return body


@pytest.mark.parametrize("version", [2, 3])
def test_to_kafka_groups_topics_and_keeps_codes_epochs_and_offsets(version: int) -> None:
    answer = OffsetForLeaderEpochResponse(
        partitions=[
            _answer("a", 0, ErrorCode.NONE, 3, 20),
            _answer("b", 0, ErrorCode.FENCED_LEADER_EPOCH),
            _answer("a", 1, ErrorCode.NONE),  # an epoch above every known one: -1, -1
            _answer("b", 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
            _answer("c", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ]
    )
    got = _round_trip(ofle.to_kafka(version, answer))
    assert int(got.throttle_time.total_seconds()) == 0
    table = [
        (str(t.topic), int(p.partition), p.error_code, int(p.leader_epoch), int(p.end_offset))
        for t in got.topics
        for p in t.partitions
    ]
    assert table == [
        ("a", 0, K.none, 3, 20),
        ("a", 1, K.none, -1, -1),
        ("b", 0, K.fenced_leader_epoch, -1, -1),
        ("b", 1, K.unknown_leader_epoch, -1, -1),
        ("c", 0, K.not_leader_or_follower, -1, -1),
    ]


def _header(body: Any) -> KafkaRequest:
    return KafkaRequest(
        api_key=int(body.__api_key__), api_version=int(body.__version__), correlation_id=1,
        client_id="cli", body=body,
    )  # fmt: skip


async def test_the_shell_asks_the_broker_and_translates_back() -> None:
    seen: list[object] = []

    async def native(request: object, *, client_id: str = "", order: object = None) -> object:
        seen.append(request)
        assert isinstance(request, OffsetForLeaderEpochRequest)
        return OffsetForLeaderEpochResponse(
            partitions=[_answer(p.topic, p.partition, 0, p.leader_epoch, 42)
                        for p in request.partitions]
        )  # fmt: skip

    apis = KafkaApis(cache=MetadataCache(), cluster_id="c", broker=native)
    body = _request(3, ("a", [(0, 5, 4)]))
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert len(seen) == 1
    [p] = out.topics[0].partitions
    assert (p.error_code, int(p.leader_epoch), int(p.end_offset)) == (K.none, 4, 42)


async def test_a_failed_forward_answers_every_partition() -> None:
    async def down(request: object, *, client_id: str = "", order: object = None) -> object:
        raise BrokerError(ErrorCode.NETWORK_EXCEPTION, "unreachable")

    apis = KafkaApis(cache=MetadataCache(), cluster_id="c", broker=down)
    body = _request(2, ("a", [(0, 5, 4), (1, 5, 4)]))
    out = _round_trip(await apis.dispatch(_header(body), body))
    assert [p.error_code for p in out.topics[0].partitions] == [K.network_exception] * 2


def test_kafka_pythons_request_decodes() -> None:
    """kafka-python's own bytes (its Fetcher._send_offset_for_leader_epoch_request)."""
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest as KpRequest

    topic_cls = KpRequest.OffsetForLeaderTopic
    part_cls = topic_cls.OffsetForLeaderPartition
    request = KpRequest(
        replica_id=-1,
        topics=[
            topic_cls(
                topic="t",
                partitions=[part_cls(partition=0, current_leader_epoch=5, leader_epoch=4)],
            )
        ],
        version=3,
    )
    request.with_header(correlation_id=3, client_id="kafka-python")
    decoded = decode_request(bytes(request.encode(header=True)))
    assert ofle.to_native(decoded.body).partitions == [
        OffsetForLeaderEpochPartition(topic="t", partition=0, current_leader_epoch=5,
                                      leader_epoch=4)
    ]  # fmt: skip
