"""Codec: every class of malformed input is the peer's fault (RemoteProtocolError), and decoding
is budgeted by payload size.
"""

from __future__ import annotations

import msgpack
import pytest

from minikafka.errors import LocalProtocolError, RemoteProtocolError
from minikafka.testing.codec_requests import header, produce_body, raw_request
from minikafka.wire import codec
from minikafka.wire.codec import (
    INT64_MAX,
    INT64_MIN,
    MAX_LIST_LEN,
    MAX_STR_BYTES,
    UnknownApiError,
    UnsupportedVersionError,
    decode_request,
    decode_response,
    decode_response_envelope,
    encode_request,
)
from minikafka.wire.messages import (
    ApiKey,
    CreatableTopic,
    CreateTopicsRequest,
    FetchResponse,
    PartitionState,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    UpdateMetadataRequest,
)

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


def test_oversize_config_map_rejected_both_ways():
    configs = {f"k{i}": "v" for i in range(codec.MAX_MAP_LEN + 1)}
    body = CreateTopicsRequest(topics=[CreatableTopic(name="t", configs=configs)])
    with pytest.raises(LocalProtocolError, match=r"topics\[0\]\.configs: map of 100001 entries"):
        encode_request(header(ApiKey.CREATE_TOPICS), body)
    raw = {"topics": [{"name": "t", "configs": configs}]}
    assert_remote(raw_request(ApiKey.CREATE_TOPICS, raw), "max_map_len")


# ---------------------------------------------------------------------------- decode budget


def nested_empty_arrays(total_bytes: int) -> bytes:
    """Bounded decoding: [[[], [], ...], ...] — every 0x90 byte becomes a 56-byte list plus an
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


def test_a_long_map_key_is_cut_in_the_error_path():
    """The error names the field path in one short line: a peer's 30 KB config key is not
    echoed whole into the events log (found while fuzzing: 30 KB per refused request)."""
    key = "\u2603" * 10_000
    body = {"topics": [{"name": "t", "configs": {key: 5}}]}
    err = assert_remote(raw_request(ApiKey.CREATE_TOPICS, body), r"configs\['☃+'\.\.\. \(10000")
    assert len(str(err)) < 200
