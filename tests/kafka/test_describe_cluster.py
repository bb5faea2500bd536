"""Kafka's DescribeCluster (KIP-700) answered by minikafka/kafka/apis.py, through the bytes."""

from __future__ import annotations

import io

import pytest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode as K
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from minikafka.kafka import codec
from minikafka.kafka.apis import describe_cluster_response
from minikafka.kafka.codec import SUPPORTED, decode_request, encode_response

ENDPOINTS = {3: ("127.0.0.1", 9303), 1: ("127.0.0.1", 9301), 2: ("h2", 9302)}


def _round_trip(response: object) -> object:
    payload = encode_response(5, response)
    cls = type(response)
    header, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, body_used = entity_reader(cls)(payload, used)
    assert header.correlation_id == 5 and used + body_used == len(payload)
    return body


def test_the_request_decodes() -> None:
    body = DescribeClusterRequest(include_cluster_authorized_operations=True)
    header_cls = DescribeClusterRequest.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(
        out,
        header_cls(
            request_api_key=i16(codec.DESCRIBE_CLUSTER),
            request_api_version=i16(0),
            correlation_id=i32(5),
            client_id="admin",
        ),
    )
    entity_writer(DescribeClusterRequest)(out, body)
    decoded = decode_request(out.getvalue())
    assert (decoded.api_key, decoded.client_id, decoded.body) == (60, "admin", body)


@pytest.mark.parametrize("version", range(SUPPORTED[codec.DESCRIBE_CLUSTER][1] + 1))
@pytest.mark.parametrize(("controller", "advertised"), [(2, 2), (9, -1)])
def test_describe_cluster_response(version: int, controller: int, advertised: int) -> None:
    """Brokers by id, no rack, authorized operations "not requested"; a controller without a
    Kafka endpoint goes out as -1, as in Metadata."""
    got = _round_trip(
        describe_cluster_response(
            version,
            cluster_id="mk-1",
            controller_id=controller,
            endpoints=ENDPOINTS,
            throttle_ms=12,
        )
    )
    assert (got.error_code, got.error_message, got.cluster_id) == (K.none, None, "mk-1")
    assert int(got.controller_id) == advertised
    assert got.throttle_time.total_seconds() == 0.012
    assert [(int(b.broker_id), b.host, int(b.port), b.rack) for b in got.brokers] == [
        (1, "127.0.0.1", 9301, None),
        (2, "h2", 9302, None),
        (3, "127.0.0.1", 9303, None),
    ]
    assert int(got.cluster_authorized_operations) == -2147483648
