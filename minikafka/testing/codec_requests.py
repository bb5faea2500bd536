"""Requests for the codec tests (tests/wire/test_codec_*.py): a header, and payloads built by
hand that bypass the encoder's checks."""

from __future__ import annotations

import msgpack

from minikafka.wire.codec import RequestHeader


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
