"""Codec: round trips of every API (hypothesis, from the message annotations), literal bytes,
and forward compatibility (unknown fields ignored, missing ones defaulted).
"""

from __future__ import annotations

import dataclasses
import types
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.common import UNDEFINED_EPOCH
from minikafka.errors import ErrorCode
from minikafka.testing.codec_requests import header, produce_body, raw_request
from minikafka.wire.codec import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    RequestHeader,
    decode_body,
    decode_request,
    decode_response,
    decode_response_envelope,
    encode_request,
    encode_response,
)
from minikafka.wire.messages import (
    API,
    ApiKey,
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreatableTopic,
    CreateTopicsRequest,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchResponse,
    MetadataRequest,
    PartitionState,
    ProducePartition,
    ProduceRequest,
    UpdateMetadataRequest,
)

# ---------------------------------------------------------------------------- strategies


def strategy_for(tp: typing.Any) -> st.SearchStrategy:
    """A hypothesis strategy derived from a message annotation (mirrors the codec's rules)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(INT64_MIN, INT64_MAX)
    if tp is str:
        return st.text(max_size=12)
    if tp is bytes:
        return st.binary(max_size=64)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | strategy_for(inner)
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=4)
    if origin is dict:
        return st.dictionaries(strategy_for(args[0]), strategy_for(args[1]), max_size=3)
    assert dataclasses.is_dataclass(tp), tp
    hints = typing.get_type_hints(tp)
    return st.builds(tp, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp)})


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("api_key", list(API), ids=lambda k: k.name)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_every_request(api_key, data):
    request_type = API[api_key][0]
    body = data.draw(strategy_for(request_type))
    corr = data.draw(st.integers(-(2**31), INT32_MAX))
    client_id = data.draw(st.none() | st.text(max_size=10))
    payload = encode_request(header(api_key, corr, client_id), body)
    got_header, got_body = decode_request(payload)
    assert got_header == header(api_key, corr, client_id)
    assert got_body == body
    assert encode_request(got_header, got_body) == payload  # deterministic


@pytest.mark.parametrize("api_key", list(API), ids=lambda k: k.name)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_every_response(api_key, data):
    response_type = API[api_key][1]
    body = data.draw(strategy_for(response_type))
    corr = data.draw(st.integers(-(2**31), INT32_MAX))
    payload = encode_response(corr, body)
    assert decode_response(payload, response_type) == (corr, body)
    envelope_corr, raw = decode_response_envelope(payload)
    assert envelope_corr == corr
    assert decode_body(response_type, raw) == body


def test_round_trip_hand_written_nested_values():
    fetch = FetchResponse(
        partitions=[
            FetchPartitionResponse(
                topic="orders",
                partition=3,
                error_code=ErrorCode.FENCED_LEADER_EPOCH,
                high_watermark=INT64_MAX,
                log_start_offset=INT64_MIN,
                diverging_epoch=EpochEndOffset(epoch=4, end_offset=1200),
                records=b"\x00\xff" * 1000,
            ),
            FetchPartitionResponse(topic="orders", partition=0, error_code=0),
        ],
        throttle_time_ms=250,
    )
    corr, got = decode_response(encode_response(5, fetch), FetchResponse)
    assert (corr, got) == (5, fetch)
    assert type(got.partitions[0].error_code) is int  # IntEnum went out as a plain int
    create = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name="t\u00e9",
                assignments=[[1, 2, 3], [2, 3, 1]],
                configs={"leader.replication.throttled.replicas": "0:1,1:2"},
            )
        ],
        validate_only=True,
    )
    assert decode_request(encode_request(header(ApiKey.CREATE_TOPICS), create))[1] == create


def test_api_versions_request_literal_bytes():
    payload = encode_request(
        RequestHeader(
            api_key=ApiKey.API_VERSIONS, api_version=0, correlation_id=7, client_id="cli"
        ),
        ApiVersionsRequest(),
    )
    # fixarray(5), 18, 0, 7, fixstr(3) "cli", fixmap(0)
    assert payload == b"\x95\x12\x00\x07\xa3cli\x80"
    hdr, body = decode_request(payload)
    assert hdr == RequestHeader(api_key=18, api_version=0, correlation_id=7, client_id="cli")
    assert isinstance(hdr.api_key, ApiKey)
    assert body == ApiVersionsRequest()


def test_small_response_literal_bytes():
    body = ApiVersionsResponse(api_keys=[ApiVersionRange(api_key=1, min_version=0, max_version=0)])
    expected = (
        b"\x92\x07\x83"  # [7, {3 fields}]
        b"\xaaerror_code\x00"
        b"\xa8api_keys\x91\x83\xa7api_key\x01\xabmin_version\x00\xabmax_version\x00"
        b"\xb0throttle_time_ms\x00"
    )
    assert encode_response(7, body) == expected


def test_bytes_travel_as_bin_and_str_as_str():
    payload = encode_request(
        header(ApiKey.PRODUCE),
        ProduceRequest(
            acks=1,
            timeout_ms=1,
            partitions=[ProducePartition(topic="t", partition=0, records=b"r")],
        ),
    )
    assert b"\xc4\x01r" in payload  # bin8 of length 1
    assert b"\xa1t" in payload  # fixstr "t"


def test_encoder_accepts_bytes_like_records_and_tuples():
    view = memoryview(b"..batch..")[2:7]
    body = ProduceRequest(
        acks=-1,
        timeout_ms=10,
        partitions=(ProducePartition(topic="t", partition=0, records=view),),
    )
    _, got = decode_request(encode_request(header(ApiKey.PRODUCE), body))
    assert got.partitions == [ProducePartition(topic="t", partition=0, records=b"batch")]


# ---------------------------------------------------------------------------- forward compat


def test_unknown_fields_are_ignored_at_every_level():
    body = produce_body()
    body["future_field"] = [1, 2, {"x": b"y"}]
    body["partitions"][1]["compression"] = "zstd"
    _, got = decode_request(raw_request(ApiKey.PRODUCE, body))
    assert got.partitions[1] == ProducePartition(topic="t", partition=1, records=b"x")


def test_missing_fields_with_defaults_get_the_default():
    fetch = {
        "replica_id": 2,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 10_000_000,
        "partitions": [{"topic": "t", "partition": 0, "fetch_offset": 5, "partition_max_bytes": 9}],
    }
    _, got = decode_request(raw_request(ApiKey.FETCH, fetch))
    assert got.partitions[0] == FetchPartition(
        topic="t",
        partition=0,
        fetch_offset=5,
        partition_max_bytes=9,
        current_leader_epoch=UNDEFINED_EPOCH,
        last_fetched_epoch=UNDEFINED_EPOCH,
        log_start_offset=-1,
    )
    _, meta = decode_request(raw_request(ApiKey.METADATA, {}))
    assert meta == MetadataRequest(topics=None)
    state = {
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1],
        "partition_epoch": 0,
        "replicas": [1],
    }
    body = {"controller_id": 0, "controller_epoch": 1, "brokers": [], "partitions": [state]}
    _, update = decode_request(raw_request(ApiKey.UPDATE_METADATA, body))
    assert isinstance(update, UpdateMetadataRequest)
    assert update.partitions[0].adding_replicas == []  # default_factory
    assert update.partitions[0] == PartitionState(**state)
