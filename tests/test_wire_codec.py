"""Codec and correlator: round trips of every API, literal bytes, and every malformed class."""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import IntEnum

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from minikafka.wire import codec
from minikafka.wire.codec import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    MAX_LIST_LEN,
    MAX_STR_BYTES,
    RequestHeader,
    UnknownApiError,
    UnsupportedVersionError,
    decode_body,
    decode_request,
    decode_response,
    decode_response_envelope,
    encode_request,
    encode_response,
)
from minikafka.wire.correlation import Correlator
from minikafka.wire.messages import (
    API,
    API_KEY_OF,
    NO_EPOCH,
    ApiKey,
    ApiVersionRange,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreatableTopic,
    CreateTopicsRequest,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    PartitionState,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
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


def header(api_key: int, correlation_id: int = 1, client_id: str | None = "test") -> RequestHeader:
    return RequestHeader(
        api_key=api_key, api_version=0, correlation_id=correlation_id, client_id=client_id
    )


def raw_request(api_key: int, body: object, version: int = 0, correlation_id: int = 9) -> bytes:
    """A request payload built by hand, bypassing the encoder's checks."""
    return msgpack.packb([api_key, version, correlation_id, "evil", body], use_bin_type=True)


def produce_body(records: object = b"batch", index: int = 0) -> dict:
    parts = [{"topic": "t", "partition": i, "records": b"x"} for i in range(4)]
    parts[index]["records"] = records
    return {"acks": -1, "timeout_ms": 1000, "partitions": parts}


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
        current_leader_epoch=NO_EPOCH,
        last_fetched_epoch=NO_EPOCH,
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


# ---------------------------------------------------------------------------- malformed input


def assert_remote(payload: bytes, match: str, exc: type = RemoteProtocolError) -> Exception:
    with pytest.raises(exc, match=match) as info:
        decode_request(payload)
    return info.value


@pytest.mark.parametrize(
    "payload, match",
    [
        (b"", "not valid msgpack"),
        (b"\xc1", "not msgpack"),
        (b"\xde\xad\xbe\xef" * 4, "msgpack"),
        (b"\x95\x12\x00\x07\xa3cli", "not valid msgpack"),  # truncated: body missing
        (b"\x95\x12\x00\x07\xa3cl", "not valid msgpack"),  # truncated inside a str
        (b"\x95\x12\x00\x07\xa3cli\x80\x00", "trailing bytes"),
        (b"\x95\x12\x00\x07\xa2\xff\xfe\x80", "not valid msgpack"),  # invalid UTF-8 client id
        (b"\x91" * 5000 + b"\x00", "nests too deeply"),
    ],
    ids=[
        "empty",
        "reserved-byte",
        "garbage",
        "truncated",
        "truncated-str",
        "trailing",
        "bad-utf8",
        "deep",
    ],
)
def test_not_msgpack(payload, match):
    assert_remote(payload, match)


@pytest.mark.parametrize(
    "envelope, match",
    [
        ({"api_key": 18}, "must be an array"),
        ([18, 0, 1, "c"], "must be an array"),  # wrong arity
        ([18, 0, 1, "c", {}, "extra"], "must be an array"),
        (["18", 0, 1, "c", {}], "api_key: expected int"),
        ([True, 0, 1, "c", {}], "api_key: expected int"),
        ([18, 1.0, 1, "c", {}], "api_version: expected int"),
        ([18, 0, 2**31, "c", {}], "correlation_id: expected int"),
        ([18, 0, 1, b"c", {}], "client_id: expected str or nil"),
        ([18, 0, 1, "c", [1]], "ApiVersionsRequest: expected map"),
        (7, "must be an array"),
    ],
)
def test_bad_envelope(envelope, match):
    assert_remote(msgpack.packb(envelope, use_bin_type=True), match)


def test_unknown_api_key_carries_the_key():
    err = assert_remote(
        raw_request(999, {}, correlation_id=42), "unknown api key 999", UnknownApiError
    )
    assert (err.api_key, err.api_version, err.correlation_id) == (999, 0, 42)
    assert isinstance(err, RemoteProtocolError)


def test_unsupported_version():
    err = assert_remote(
        raw_request(ApiKey.FETCH, {}, version=3),
        "unsupported version 3 of FETCH",
        UnsupportedVersionError,
    )
    assert (err.api_key, err.api_version, err.correlation_id) == (ApiKey.FETCH, 3, 9)
    assert isinstance(err, RemoteProtocolError)


@pytest.mark.parametrize(
    "records, match",
    [
        ("batch", r"ProduceRequest\.partitions\[3\]\.records: expected bytes, got str"),
        (None, r"ProduceRequest\.partitions\[3\]\.records: expected bytes, got nil"),
        (17, r"ProduceRequest\.partitions\[3\]\.records: expected bytes, got int"),
        ([b"a"], r"ProduceRequest\.partitions\[3\]\.records: expected bytes, got array of 1"),
    ],
)
def test_wrong_type_at_a_nested_path(records, match):
    assert_remote(raw_request(ApiKey.PRODUCE, produce_body(records, index=3)), match)


def test_missing_required_field_names_the_path():
    body = produce_body()
    del body["partitions"][2]["topic"]
    assert_remote(
        raw_request(ApiKey.PRODUCE, body),
        r"ProduceRequest\.partitions\[2\]\.topic: missing required",
    )
    assert_remote(raw_request(ApiKey.PRODUCE, {}), r"ProduceRequest\.acks: missing required")


def test_bool_is_not_an_int_and_int_is_not_a_bool():
    body = produce_body()
    body["acks"] = True
    assert_remote(
        raw_request(ApiKey.PRODUCE, body), r"ProduceRequest\.acks: expected int, got bool"
    )
    create = {"topics": [], "validate_only": 1}
    assert_remote(
        raw_request(ApiKey.CREATE_TOPICS, create),
        r"CreateTopicsRequest\.validate_only: expected bool, got int",
    )


def test_float_is_not_an_int():
    body = produce_body()
    body["timeout_ms"] = 1000.0
    assert_remote(
        raw_request(ApiKey.PRODUCE, body), r"ProduceRequest\.timeout_ms: expected int, got float"
    )


def test_bytes_are_not_str():
    body = produce_body()
    body["partitions"][0]["topic"] = b"t"
    assert_remote(
        raw_request(ApiKey.PRODUCE, body), r"partitions\[0\]\.topic: expected str, got bytes"
    )


@pytest.mark.parametrize("value", [2**63, 2**64 - 1])  # msgpack carries up to uint64
def test_int_overflow(value):
    body = produce_body()
    body["partitions"][1]["partition"] = value
    assert_remote(
        raw_request(ApiKey.PRODUCE, body),
        rf"ProduceRequest\.partitions\[1\]\.partition: int {value} out of int64 range",
    )


def test_int64_limits_are_accepted():
    body = produce_body()
    body["acks"], body["timeout_ms"] = INT64_MIN, INT64_MAX
    _, got = decode_request(raw_request(ApiKey.PRODUCE, body))
    assert (got.acks, got.timeout_ms) == (INT64_MIN, INT64_MAX)


def test_nested_int_lists_and_maps_report_their_index_and_key():
    topic = {"name": "t", "assignments": [[1, 2], [3, "4"]], "configs": {}}
    assert_remote(
        raw_request(ApiKey.CREATE_TOPICS, {"topics": [topic]}),
        r"CreateTopicsRequest\.topics\[0\]\.assignments\[1\]\[1\]: expected int, got str",
    )
    topic = {"name": "t", "configs": {"retention.ms": 5}}
    assert_remote(
        raw_request(ApiKey.CREATE_TOPICS, {"topics": [topic]}),
        r"topics\[0\]\.configs\['retention\.ms'\]: expected str, got int",
    )
    topic = {"name": "t", "configs": {b"k": "v"}}
    assert_remote(
        raw_request(ApiKey.CREATE_TOPICS, {"topics": [topic]}),
        r"configs\[b'k'\]: expected str, got bytes",
    )


def test_optional_nested_dataclass():
    resp = {
        "partitions": [
            {"topic": "t", "partition": 0, "error_code": 0, "diverging_epoch": {"epoch": 1}}
        ]
    }
    with pytest.raises(
        RemoteProtocolError,
        match=r"FetchResponse\.partitions\[0\]\.diverging_epoch\.end_offset: missing required",
    ):
        decode_response(msgpack.packb([1, resp], use_bin_type=True), FetchResponse)
    resp["partitions"][0]["diverging_epoch"] = None
    _, got = decode_response(msgpack.packb([1, resp], use_bin_type=True), FetchResponse)
    assert got.partitions[0].diverging_epoch is None


def test_nil_for_a_non_optional_field():
    body = produce_body()
    body["partitions"] = None
    assert_remote(
        raw_request(ApiKey.PRODUCE, body), r"ProduceRequest\.partitions: expected array, got nil"
    )


def test_oversize_list_rejected():
    body = {"topics": [{"name": "t", "assignments": [[1] * (MAX_LIST_LEN + 1)]}]}
    assert_remote(raw_request(ApiKey.CREATE_TOPICS, body), "max_array_len")
    # at the limit it is accepted (and the fast int-list path does not copy)
    body = {"topics": [{"name": "t", "assignments": [[1] * MAX_LIST_LEN]}]}
    _, got = decode_request(raw_request(ApiKey.CREATE_TOPICS, body))
    assert len(got.topics[0].assignments[0]) == MAX_LIST_LEN


def test_oversize_string_rejected():
    body = produce_body()
    body["partitions"][0]["topic"] = "t" * (MAX_STR_BYTES + 1)
    assert_remote(raw_request(ApiKey.PRODUCE, body), "max_str_len")


def test_ext_types_rejected():
    body = produce_body(records=msgpack.ExtType(5, b"xyz"))
    assert_remote(raw_request(ApiKey.PRODUCE, body), "msgpack|expected bytes")


def test_non_string_map_keys_rejected():
    assert_remote(raw_request(ApiKey.PRODUCE, {1: 2}), "map key")


@pytest.mark.parametrize(
    "payload, match",
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb([1]), "must be an array"),
        (msgpack.packb({"c": 1}), "must be an array"),
        (msgpack.packb(["1", {}]), "correlation_id: expected int32"),
        (msgpack.packb([2**31, {}]), "correlation_id: expected int32"),
    ],
)
def test_bad_response_envelope(payload, match):
    with pytest.raises(RemoteProtocolError, match=match):
        decode_response_envelope(payload)


def test_response_body_checked_against_the_expected_type():
    payload = msgpack.packb([3, {"partitions": [{"topic": "t"}]}], use_bin_type=True)
    with pytest.raises(
        RemoteProtocolError, match=r"ProduceResponse\.partitions\[0\]\.partition: missing"
    ):
        decode_response(payload, ProduceResponse)


# ---------------------------------------------------------------------------- our own bugs


def test_encode_request_rejects_mismatched_api_key():
    with pytest.raises(LocalProtocolError, match="does not match ProduceRequest"):
        encode_request(header(ApiKey.FETCH), ProduceRequest(acks=1, timeout_ms=1, partitions=[]))
    with pytest.raises(LocalProtocolError, match="not a request message"):
        encode_request(header(ApiKey.FETCH), ProduceResponse(partitions=[]))
    with pytest.raises(LocalProtocolError, match="not a request message"):
        encode_request(header(ApiKey.FETCH), {"replica_id": 1})


def test_encode_request_rejects_bad_header_fields():
    body = ApiVersionsRequest()
    bad_headers = [
        RequestHeader(api_key=18, api_version=1, correlation_id=1, client_id=None),
        RequestHeader(api_key=18, api_version=0, correlation_id=2**31, client_id=None),
        RequestHeader(api_key=18, api_version=0, correlation_id=True, client_id=None),
        RequestHeader(api_key=18, api_version=0, correlation_id=1, client_id=b"c"),
        RequestHeader(api_key=18, api_version=0, correlation_id=1, client_id="c" * 40_000),
    ]
    for bad in bad_headers:
        with pytest.raises(LocalProtocolError):
            encode_request(bad, body)


def test_encode_names_the_bad_field_path():
    body = ProduceRequest(
        acks=1,
        timeout_ms=1,
        partitions=[
            ProducePartition(topic="t", partition=0, records=b""),
            ProducePartition(topic="t", partition=1, records="oops"),
        ],
    )
    with pytest.raises(
        LocalProtocolError, match=r"ProduceRequest\.partitions\[1\]\.records: expected bytes"
    ):
        encode_request(header(ApiKey.PRODUCE), body)
    with pytest.raises(LocalProtocolError, match=r"ProduceRequest\.acks: expected int, got bool"):
        encode_request(
            header(ApiKey.PRODUCE), ProduceRequest(acks=True, timeout_ms=1, partitions=[])
        )
    with pytest.raises(LocalProtocolError, match="out of int64 range"):
        encode_request(
            header(ApiKey.PRODUCE), ProduceRequest(acks=2**63, timeout_ms=1, partitions=[])
        )
    with pytest.raises(LocalProtocolError, match=r"\.topic: str longer than"):
        encode_request(
            header(ApiKey.PRODUCE),
            ProduceRequest(
                acks=1,
                timeout_ms=1,
                partitions=[ProducePartition(topic="\u00e9" * 20_000, partition=0, records=b"")],
            ),
        )


def test_encode_response_rejects_non_responses_and_bad_ids():
    with pytest.raises(LocalProtocolError, match="not a response message"):
        encode_response(1, ApiVersionsRequest())
    with pytest.raises(LocalProtocolError, match="int32"):
        encode_response(-(2**31) - 1, ApiVersionsResponse())


def test_int_enum_fields_encode_as_plain_ints():
    class Level(IntEnum):
        HIGH = 7

    payload = encode_response(1, ApiVersionsResponse(error_code=Level.HIGH))
    assert b"\xaaerror_code\x07" in payload


def test_every_api_type_compiles_once():
    for request_type, response_type in API.values():
        assert codec._converters(request_type) is codec._converters(request_type)
        assert codec._converters(response_type) is codec._converters(response_type)
    assert set(API_KEY_OF) == {req for req, _ in API.values()}


# ---------------------------------------------------------------------------- correlator


def api_versions_response(corr: int) -> bytes:
    return encode_response(corr, ApiVersionsResponse(error_code=0, throttle_time_ms=3))


def test_correlator_pairs_responses_in_any_order():
    c = Correlator()
    id_a, payload_a = c.next_request(ApiKey.API_VERSIONS, 0, "cli", ApiVersionsRequest())
    id_b, _ = c.next_request(ApiKey.METADATA, 0, "cli", MetadataRequest(topics=["t"]))
    assert (id_a, id_b) == (0, 1)
    assert c.pending_count == 2
    assert decode_request(payload_a)[0].correlation_id == id_a
    meta = msgpack.packb([id_b, {"brokers": [], "controller_id": 1, "topics": []}])
    corr, response = c.on_response(meta)
    assert corr == id_b and response.controller_id == 1
    assert c.on_response(api_versions_response(id_a)) == (
        id_a,
        ApiVersionsResponse(throttle_time_ms=3),
    )
    assert c.pending_count == 0


def test_correlator_rejects_unknown_and_duplicate_ids():
    c = Correlator()
    corr, _ = c.next_request(ApiKey.API_VERSIONS, 0, None, ApiVersionsRequest())
    with pytest.raises(RemoteProtocolError, match="correlation id 77"):
        c.on_response(api_versions_response(77))
    c.on_response(api_versions_response(corr))
    with pytest.raises(RemoteProtocolError, match="not in flight"):
        c.on_response(api_versions_response(corr))


def test_correlator_decodes_with_the_expected_type():
    c = Correlator()
    corr, _ = c.next_request(
        ApiKey.FETCH,
        0,
        None,
        FetchRequest(replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=1, partitions=[]),
    )
    # a well-formed ApiVersions response is not a FetchResponse
    with pytest.raises(RemoteProtocolError, match=r"FetchResponse\.partitions: missing"):
        c.on_response(api_versions_response(corr))


def test_correlator_wraps_int32_and_skips_ids_in_flight():
    c = Correlator(first_correlation_id=INT32_MAX - 1)
    ids = [c.next_request(ApiKey.API_VERSIONS, 0, None, ApiVersionsRequest())[0] for _ in range(3)]
    assert ids == [INT32_MAX - 1, INT32_MAX, 0]
    c2 = Correlator(first_correlation_id=INT32_MAX)
    first, _ = c2.next_request(ApiKey.API_VERSIONS, 0, None, ApiVersionsRequest())
    c2._next_id = INT32_MAX  # simulate 2**31 requests later with the first still in flight
    second, _ = c2.next_request(ApiKey.API_VERSIONS, 0, None, ApiVersionsRequest())
    assert (first, second) == (INT32_MAX, 0)


def test_correlator_acks_zero_expects_no_response():
    c = Correlator()
    body = ProduceRequest(acks=0, timeout_ms=1, partitions=[])
    corr, _ = c.next_request(ApiKey.PRODUCE, 0, None, body, expect_response=False)
    assert c.pending_count == 0
    with pytest.raises(RemoteProtocolError):
        c.on_response(encode_response(corr, ProduceResponse(partitions=[])))


def test_correlator_encode_error_burns_no_id():
    c = Correlator()
    with pytest.raises(LocalProtocolError):
        c.next_request(ApiKey.FETCH, 0, None, ApiVersionsRequest())
    assert c.pending_count == 0
    assert c.next_request(ApiKey.API_VERSIONS, 0, None, ApiVersionsRequest())[0] == 0


def test_oversize_config_map_rejected_both_ways():
    configs = {f"k{i}": "v" for i in range(codec.MAX_MAP_LEN + 1)}
    body = CreateTopicsRequest(topics=[CreatableTopic(name="t", configs=configs)])
    with pytest.raises(LocalProtocolError, match=r"topics\[0\]\.configs: map of 100001 entries"):
        encode_request(header(ApiKey.CREATE_TOPICS), body)
    raw = {"topics": [{"name": "t", "configs": configs}]}
    assert_remote(raw_request(ApiKey.CREATE_TOPICS, raw), "max_map_len")


# ---------------------------------------------------------------------------- decode budget


def nested_empty_arrays(total_bytes: int) -> bytes:
    """Issue 11 point 5: [[[], [], ...], ...] — every 0x90 byte becomes a 56-byte list plus an
    8-byte slot (~64x), so 8 MB of it used to build more than 500 MiB of objects."""
    inner = MAX_LIST_LEN // 2
    outer = total_bytes // inner
    return (
        b"\xdd"
        + outer.to_bytes(4, "big")
        + (b"\xdd" + inner.to_bytes(4, "big") + b"\x90" * inner) * outer
    )


def test_nested_empty_arrays_are_refused_within_the_budget():
    import tracemalloc

    payload = msgpack.packb([ApiKey.PRODUCE, 0, 9, "evil", None])[:-1] + nested_empty_arrays(
        8_000_000
    )
    assert len(payload) > 7_900_000
    tracemalloc.start()
    try:
        with pytest.raises(RemoteProtocolError, match=r"request payload of \d+ bytes expands past"):
            decode_request(payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 16x the frame is the budget; one more container (500,000 slots, 4 MB) may be built
    # before the hook sees it. Without the budget the peak is about 64x (> 500 MB).
    assert peak < (codec.DECODE_EXPANSION_MAX + 2) * len(payload)


def test_small_maps_with_distinct_keys_count_against_the_budget():
    # {"k123456": 1234}: 12 bytes -> a 184-byte dict, a 57-byte key, a 28-byte int (~22x).
    maps = [{f"k{i}": 1000 + i} for i in range(200_000)]
    body = {"acks": -1, "timeout_ms": 1, "partitions": maps}
    with pytest.raises(RemoteProtocolError, match="expands past"):
        decode_request(raw_request(ApiKey.PRODUCE, body))


def test_large_legitimate_messages_fit_the_budget():
    # A 1 MiB batch: bytes are one object, ~1x.
    body = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        partitions=[ProducePartition(topic="t", partition=0, records=b"r" * (1 << 20))],
    )
    _, got = decode_request(encode_request(header(ApiKey.PRODUCE), body))
    assert len(got.partitions[0].records) == 1 << 20
    # 50,000 partitions of metadata: ~6x, the densest message the cluster sends.
    states = [
        PartitionState(
            topic="topic-with-a-name",
            partition=i,
            leader=1000 + i % 3,
            leader_epoch=300 + i,
            isr=[1000, 1001, 1002],
            partition_epoch=500 + i,
            replicas=[1000, 1001, 1002],
        )
        for i in range(50_000)
    ]
    um = UpdateMetadataRequest(controller_id=1, controller_epoch=1, brokers=[], partitions=states)
    _, got = decode_request(encode_request(header(ApiKey.UPDATE_METADATA), um))
    assert len(got.partitions) == 50_000


def test_memory_error_while_decoding_is_the_peers_fault(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(codec.msgpack, "unpackb", no_memory)
    with pytest.raises(RemoteProtocolError, match="out of memory while decoding"):
        decode_request(raw_request(ApiKey.PRODUCE, produce_body()))
