"""Kafka binary protocol codec and pure handlers (minikafka/kafka).

Requests are encoded with kio as a client would (header + body, no length prefix); responses
are decoded back with kio's readers, and once with kafka-python's own protocol classes.
"""

from __future__ import annotations

import dataclasses
import importlib
import struct
from functools import partial
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader

from minikafka.errors import ErrorCode, RemoteProtocolError
from minikafka.kafka.apis import api_versions_response, metadata_response, requested_topics
from minikafka.kafka.codec import (
    SUPPORTED,
    UnsupportedVersion,
    decode_request,
    encode_response,
)
from minikafka.testing.fuzz import encode_kafka
from minikafka.wire.controller_messages import BrokerInfo
from minikafka.wire.messages import MetadataResponse, PartitionMetadata, TopicMetadata

ENDPOINTS = {1: ("kafka-1", 19092), 2: ("kafka-2", 19093)}


def _module(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


# Header + body as a Kafka client writes them (what framing.py hands us): the fuzzer's encoder.
_client_bytes = partial(encode_kafka, correlation_id=42, client_id="cli")


def _api_versions_request(version: int) -> Any:
    cls = _module("api_versions", version, "request").ApiVersionsRequest
    if version >= 3:
        return cls(client_software_name="test", client_software_version="1.0")
    return cls()


def _metadata_request(version: int, topics: list[str] | None) -> Any:
    mod = _module("metadata", version, "request")
    kwargs: dict[str, Any] = {
        "topics": None
        if topics is None
        else tuple(mod.MetadataRequestTopic(name=t) for t in topics)
    }
    names = {f.name for f in dataclasses.fields(mod.MetadataRequest)}
    for flag in ("include_cluster_authorized_operations", "include_topic_authorized_operations"):
        if flag in names:
            kwargs[flag] = False
    return mod.MetadataRequest(**kwargs)


def _decode_response(payload: bytes, cls: type) -> tuple[int, Any]:
    header_cls = cls.__header_schema__
    header, used = entity_reader(header_cls)(payload, 0)
    body, body_used = entity_reader(cls)(payload, used)
    assert used + body_used == len(payload)
    return header.correlation_id, body


def _native() -> MetadataResponse:
    return MetadataResponse(
        brokers=[
            BrokerInfo(node_id=1, host="n1", port=9001),
            BrokerInfo(node_id=2, host="n2", port=9002),
            BrokerInfo(node_id=3, host="n3", port=9003),  # no Kafka listener
        ],
        controller_id=2,
        topics=[
            TopicMetadata(
                error_code=ErrorCode.NONE,
                name="t",
                partitions=[
                    PartitionMetadata(
                        error_code=ErrorCode.NONE,
                        partition=0,
                        leader=1,
                        leader_epoch=7,
                        replicas=[1, 2],
                        isr=[1, 2],
                    ),
                    PartitionMetadata(
                        error_code=ErrorCode.NONE,
                        partition=1,
                        leader=3,
                        leader_epoch=4,
                        replicas=[3, 1],
                        isr=[3],
                        offline_replicas=[1],
                    ),
                ],
            ),
            TopicMetadata(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name="nope", partitions=[]
            ),
        ],
    )


def _metadata(version: int) -> Any:
    request = _metadata_request(version, None if version else [])
    return metadata_response(version, request, _native(), cluster_id="mk", endpoints=ENDPOINTS)


# ------------------------------------------------------------------------------- decode_request


@pytest.mark.parametrize("version", range(0, 4))
def test_decode_api_versions(version: int) -> None:
    body = _api_versions_request(version)
    request = decode_request(_client_bytes(body, correlation_id=7))
    assert (request.api_key, request.api_version, request.correlation_id) == (18, version, 7)
    assert request.client_id == "cli"
    assert request.body == body


@pytest.mark.parametrize("version", range(0, 10))
def test_decode_metadata(version: int) -> None:
    body = _metadata_request(version, ["a", "b"])
    request = decode_request(_client_bytes(body, correlation_id=-3, client_id=None))
    assert (request.api_key, request.api_version, request.correlation_id) == (3, version, -3)
    assert request.client_id is None
    assert request.body == body


@pytest.mark.parametrize(("key", "version"), [(18, 4), (3, 10), (999, 0), (18, -1), (0, 2), (0, 9)])
def test_unsupported_version_carries_correlation_id(key: int, version: int) -> None:
    payload = struct.pack(">hhi", key, version, 1234) + b"\x00\x03cli\x00"
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(payload)
    assert (info.value.api_key, info.value.api_version) == (key, version)
    assert info.value.correlation_id == 1234


def test_api_versions_v4_from_a_real_encoding_is_unsupported() -> None:
    body = _api_versions_request(4)
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(_client_bytes(body, correlation_id=9))
    assert info.value.correlation_id == 9


@pytest.mark.parametrize("length", range(0, 8))
def test_short_payload_is_remote_protocol_error(length: int) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_request(struct.pack(">hhi", 3, 8, 1)[:length])


def test_truncated_payload_is_remote_protocol_error() -> None:
    payload = _client_bytes(_metadata_request(8, ["topic"]))
    for cut in range(8, len(payload)):
        with pytest.raises(RemoteProtocolError, match="MetadataRequest v8"):
            decode_request(payload[:cut])


def test_trailing_bytes_are_remote_protocol_error() -> None:
    payload = _client_bytes(_api_versions_request(3))
    with pytest.raises(RemoteProtocolError, match="trailing"):
        decode_request(payload + b"\x00")


def test_garbage_is_remote_protocol_error() -> None:
    # Header then a topics array claiming one element and a boolean that is neither 0 nor 1.
    payload = _client_bytes(_metadata_request(8, []))[:-3] + b"\x07\x00\x00"
    with pytest.raises(RemoteProtocolError, match="v8"):
        decode_request(payload + b"\xff" * 16)
    with pytest.raises(RemoteProtocolError):
        decode_request(struct.pack(">hhi", 18, 3, 1) + b"\xff" * 32)


# ------------------------------------------------------------------------------ encode_response


@pytest.mark.parametrize("version", range(0, 4))
def test_api_versions_response_round_trips(version: int) -> None:
    response = api_versions_response(version)
    payload = encode_response(77, response)
    correlation_id, back = _decode_response(payload, type(response))
    assert correlation_id == 77
    assert back == response
    assert back.error_code == KioErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in back.api_keys} == SUPPORTED
    # ApiVersionsResponse always uses ResponseHeader v0 (KIP-511), even the flexible v3:
    # correlation id then the body, with no tagged-field byte in between.
    assert type(response).__header_schema__.__name__ == "ResponseHeader"
    assert type(response).__header_schema__.__module__.endswith("response_header.v0.header")
    assert payload[:6] == struct.pack(">ih", 77, 0)


def test_api_versions_v0_error_response() -> None:
    response = api_versions_response(0, error_code=KioErrorCode.unsupported_version)
    payload = encode_response(5, response)
    correlation_id, error_code, count = struct.unpack_from(">ihi", payload)
    assert (correlation_id, error_code, count) == (5, 35, len(SUPPORTED))
    _, back = _decode_response(payload, type(response))
    assert back.error_code == KioErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in back.api_keys} == SUPPORTED


@pytest.mark.parametrize("version", range(0, 10))
def test_metadata_response_round_trips(version: int) -> None:
    response = _metadata(version)
    assert response.__version__ == version
    correlation_id, back = _decode_response(encode_response(-8, response), type(response))
    assert correlation_id == -8
    assert back == response


# ------------------------------------------------------------------------------------- handlers


@pytest.mark.parametrize("version", range(0, 10))
def test_metadata_response_advertises_kafka_endpoints(version: int) -> None:
    response = _metadata(version)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (1, "kafka-1", 19092),
        (2, "kafka-2", 19093),
    ]
    if version >= 1:
        assert response.controller_id == 2
    if version >= 2:
        assert response.cluster_id == "mk"


@pytest.mark.parametrize("version", range(0, 10))
def test_metadata_response_partitions(version: int) -> None:
    response = _metadata(version)
    topic, unknown = response.topics
    assert (topic.name, topic.error_code) == ("t", KioErrorCode.none)
    good, orphan = topic.partitions
    assert (good.partition_index, good.leader_id, good.error_code) == (0, 1, KioErrorCode.none)
    assert (good.replica_nodes, good.isr_nodes) == ((1, 2), (1, 2))
    # Leader 3 has no Kafka endpoint: no leader, retriable LEADER_NOT_AVAILABLE (5).
    assert (orphan.partition_index, orphan.leader_id) == (1, -1)
    assert orphan.error_code == KioErrorCode.leader_not_available == 5
    assert orphan.replica_nodes == (3, 1)
    if version >= 5:
        assert orphan.offline_replicas == (1,)
    if version >= 7:
        # The partitions' real epochs (KIP-320), a leaderless one's too, as Kafka sends it.
        assert (good.leader_epoch, orphan.leader_epoch) == (7, 4)
    if version >= 1:
        assert topic.is_internal is False
    if version >= 8:
        assert topic.topic_authorized_operations == -2147483648
        assert response.cluster_authorized_operations == -2147483648
    assert unknown.name == "nope"
    assert unknown.error_code == KioErrorCode.unknown_topic_or_partition
    assert unknown.partitions == ()


def test_metadata_controller_without_endpoint_is_minus_one() -> None:
    native = dataclasses.replace(_native(), controller_id=3)
    response = metadata_response(
        8, _metadata_request(8, None), native, cluster_id="mk", endpoints=ENDPOINTS
    )
    assert response.controller_id == -1


def test_error_codes_convert_by_number() -> None:
    for code in ErrorCode:
        assert KioErrorCode(int(code)) == code.value


def test_requested_topics_v0_empty_means_all() -> None:
    assert requested_topics(_metadata_request(0, [])) is None
    assert requested_topics(_metadata_request(0, ["a", "b"])) == ["a", "b"]


@pytest.mark.parametrize("version", range(1, 9))
def test_requested_topics_v1_plus(version: int) -> None:
    assert requested_topics(_metadata_request(version, None)) is None
    assert requested_topics(_metadata_request(version, [])) == []
    assert requested_topics(_metadata_request(version, ["a"])) == ["a"]


# ------------------------------------------------------------------------ kafka-python interop


def test_kafka_python_reads_our_bytes_and_we_read_its_bytes() -> None:
    kp = pytest.importorskip("kafka.protocol.metadata")

    request = kp.ApiVersionsRequest[3](client_software_name="kp", client_software_version="3")
    request.with_header(correlation_id=11, client_id="kafka-python")
    decoded = decode_request(bytes(request.encode(header=True)))
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (18, 3, 11)
    assert decoded.client_id == "kafka-python"

    topic = kp.MetadataRequest.MetadataRequestTopic
    request = kp.MetadataRequest[8](
        topics=[topic(name="t")],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    request.with_header(correlation_id=12, client_id="kafka-python")
    decoded = decode_request(bytes(request.encode(header=True)))
    assert requested_topics(decoded.body) == ["t"]

    versions = kp.ApiVersionsResponse.decode(
        encode_response(11, api_versions_response(3)), version=3, header=True
    )
    assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys} == SUPPORTED

    metadata = kp.MetadataResponse.decode(encode_response(12, _metadata(8)), version=8, header=True)
    assert metadata.controller_id == 2
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [
        (1, "kafka-1", 19092),
        (2, "kafka-2", 19093),
    ]
    partitions = {p.partition_index: p for p in metadata.topics[0].partitions}
    assert (partitions[1].leader_id, partitions[1].error_code) == (-1, 5)
    assert partitions[0].leader_epoch == 7


# librdkafka 2.16's all-topics MetadataRequest v9 (AdminClient.list_topics), as captured: after
# the null topic array and three booleans come `01 00 00 00`, which Kafka reads as one unknown
# tagged field and one ignored byte (kafka/lenient.py).
LIBRDKAFKA_ALL_TOPICS_V9 = bytes.fromhex("0003000900000003000772646b61666b61000000000001000000")
LIBRDKAFKA_NO_TOPICS_V9 = bytes.fromhex("0003000900000002000772646b61666b61000100000000")


def test_librdkafkas_metadata_v9_requests_are_read_as_kafka_reads_them() -> None:
    every = decode_request(LIBRDKAFKA_ALL_TOPICS_V9)
    assert (every.api_version, every.correlation_id, every.client_id) == (9, 3, "rdkafka")
    assert requested_topics(every.body) is None
    assert every.body.allow_auto_topic_creation is False
    assert requested_topics(decode_request(LIBRDKAFKA_NO_TOPICS_V9).body) == []


@pytest.mark.parametrize(
    "body",
    [
        "02" + "04" + "616263" + "00" + "000000" + "00",  # topic "abc", then exactly Kafka's end
        "02" + "04" + "616263" + "0101020000" + "000000" + "0000",  # unknown tag, trailing bytes
    ],
)
def test_a_lenient_metadata_v9_request_keeps_its_topics(body: str) -> None:
    header = LIBRDKAFKA_NO_TOPICS_V9[:18].hex()
    assert requested_topics(decode_request(bytes.fromhex(header + body)).body) == ["abc"]


@pytest.mark.parametrize(
    "body",
    [
        "02" + "7f" + "6162",  # a topic name longer than the frame
        "00" + "00",  # the booleans cut short
        "02" + "03" + "fffe" + "00" + "000000",  # not UTF-8
        "ffffffffff",  # a varint longer than 5 bytes
    ],
)
def test_a_lenient_metadata_v9_request_still_checks_its_lengths(body: str) -> None:
    header = LIBRDKAFKA_NO_TOPICS_V9[:18].hex()
    with pytest.raises(RemoteProtocolError):
        decode_request(bytes.fromhex(header + body))


def test_leniency_is_for_metadata_v9_only() -> None:
    with pytest.raises(RemoteProtocolError, match="trailing"):
        decode_request(_client_bytes(_metadata_request(8, ["a"]), correlation_id=1) + b"\x00")
