"""Correlator (wire/correlation.py): pairing responses with requests by correlation id in any
order, ids that wrap and skip those in flight, acks=0, and decoding each response with the type
its request expects.
"""

from __future__ import annotations

import msgpack
import pytest

from minikafka.errors import LocalProtocolError, RemoteProtocolError
from minikafka.wire.codec import INT32_MAX, decode_request, encode_response
from minikafka.wire.correlation import Correlator
from minikafka.wire.messages import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)

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
