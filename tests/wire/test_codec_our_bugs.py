"""Codec: what we send wrong is our own bug (LocalProtocolError), named by its field path; and
what the encoder builds once per type.
"""

from __future__ import annotations

from enum import IntEnum

import pytest

from minikafka.errors import LocalProtocolError
from minikafka.testing.codec_requests import header
from minikafka.wire import converters
from minikafka.wire.codec import RequestHeader, encode_request, encode_response
from minikafka.wire.messages import (
    API,
    API_KEY_OF,
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)

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
        assert converters.converters(request_type) is converters.converters(request_type)
        assert converters.converters(response_type) is converters.converters(response_type)
    assert set(API_KEY_OF) == {req for req, _ in API.values()}
