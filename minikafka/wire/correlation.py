"""Client-side pairing of responses with requests by correlation id (sans-IO).

A `Correlator` belongs to one connection. It allocates correlation ids (int32, wrapping to 0
after 2**31 - 1 and skipping ids still in flight, like Kafka's NetworkClient), encodes the
request, and remembers which response type each id expects, so that `on_response` can decode
a response whose type is only known once its envelope has been read.

A response with an id that is not in flight (never sent, already answered, or belonging to a
request that expects no response) is the peer's fault: `RemoteProtocolError`, close the
connection. Kafka closes the connection on a request timeout too, so there is no way to
forget a single request here; drop the whole correlator with its connection.
"""

from __future__ import annotations

from typing import Any

from minikafka.errors import LocalProtocolError, RemoteProtocolError
from minikafka.wire.codec import (
    INT32_MAX,
    RequestHeader,
    decode_body,
    decode_response_envelope,
    encode_request,
)
from minikafka.wire.messages import API, ApiKey


class Correlator:
    __slots__ = ("_next_id", "_pending")

    def __init__(self, *, first_correlation_id: int = 0) -> None:
        if not 0 <= first_correlation_id <= INT32_MAX:
            raise ValueError(f"first_correlation_id must be in 0..{INT32_MAX}")
        self._next_id = first_correlation_id
        self._pending: dict[int, type] = {}  # correlation id -> expected response type

    @property
    def pending_count(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    def next_request(
        self,
        api_key: int,
        api_version: int,
        client_id: str | None,
        body: object,
        *,
        expect_response: bool = True,
    ) -> tuple[int, bytes]:
        """Allocate an id, encode the request; returns (correlation_id, frame payload).

        Pass `expect_response=False` for requests the server never answers (Produce with
        acks=0), so that they are not left pending forever.
        Raises LocalProtocolError if the body does not match the api key or version.
        """
        correlation_id = self._allocate()
        header = RequestHeader(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=client_id,
        )
        payload = encode_request(header, body)  # checks api key, version and body first
        self._next_id = 0 if correlation_id == INT32_MAX else correlation_id + 1
        if expect_response:
            self._pending[correlation_id] = API[ApiKey(api_key)][1]
        return correlation_id, payload

    def on_response(self, payload: bytes) -> tuple[int, Any]:
        """Decode a response payload: (correlation_id, response message)."""
        correlation_id, raw_body = decode_response_envelope(payload)
        response_type = self._pending.pop(correlation_id, None)
        if response_type is None:
            raise RemoteProtocolError(
                f"response with correlation id {correlation_id}, which is not in flight "
                f"({len(self._pending)} pending)"
            )
        return correlation_id, decode_body(response_type, raw_body)

    def _allocate(self) -> int:
        if len(self._pending) > INT32_MAX:
            raise LocalProtocolError("every correlation id is in flight")
        correlation_id = self._next_id
        while correlation_id in self._pending:
            correlation_id = 0 if correlation_id == INT32_MAX else correlation_id + 1
        return correlation_id
