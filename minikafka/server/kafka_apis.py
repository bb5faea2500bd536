"""A broker's Kafka-protocol listener (issue 14): what it answers, and how it reads and writes.

The listener is the broker's ordinary one (server/listener.py: framing, max.connections,
connections.max.idle.ms, KIP-219 muting) with Kafka's codec (minikafka/kafka) in place of
msgpack, no cluster gate (nothing of the control plane is served here), and one request in
flight per connection: Kafka's SocketServer mutes a channel until its response is sent, and
clients (librdkafka, kafka-python) match responses to requests in order.

Served so far: ApiVersions and Metadata (minikafka/kafka/codec.py `SUPPORTED`). A request for
an API or version outside that is answered as Kafka answers it: ApiVersions with the v0 error
response listing what is served (KIP-511, so a client retries at a version we have), anything
else by closing the connection (Kafka cannot parse it either).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from minikafka.errors import RemoteProtocolError
from minikafka.kafka.apis import api_versions_response, metadata_response, requested_topics
from minikafka.kafka.codec import (
    API_VERSIONS,
    METADATA,
    SUPPORTED,
    KafkaRequest,
    UnsupportedVersion,
    decode_request,
    encode_response,
)
from minikafka.server.listener import WireCodec
from minikafka.server.metadata_cache import MetadataCache


class UnsupportedApiVersions:
    """The body of an ApiVersions request at a version we do not serve: answered with the v0
    error response (KIP-511), never decoded further (a newer client's body may not parse)."""


def decode(payload: bytes) -> tuple[KafkaRequest, object]:
    try:
        request = decode_request(payload)
    except UnsupportedVersion as exc:
        if exc.api_key != API_VERSIONS:
            raise RemoteProtocolError(
                f"Kafka API {exc.api_key} v{exc.api_version} is not served "
                f"(served: {', '.join(f'{k} v{lo}-{hi}' for k, (lo, hi) in SUPPORTED.items())})"
            ) from exc
        header = KafkaRequest(
            api_key=exc.api_key,
            api_version=exc.api_version,
            correlation_id=exc.correlation_id,
            client_id=None,
            body=None,
        )
        return header, UnsupportedApiVersions()
    return request, request.body


KAFKA_CODEC = WireCodec(decode=decode, encode=encode_response)


class KafkaApis:
    """The handlers of the Kafka listener (Kafka's KafkaApis), over the broker's own state."""

    def __init__(self, *, cache: MetadataCache, cluster_id: str) -> None:
        self.cache = cache
        self.cluster_id = cluster_id

    async def dispatch(self, header: KafkaRequest, body: object) -> Any:
        if isinstance(body, UnsupportedApiVersions):
            return api_versions_response(0, error_code=KafkaErrorCode.unsupported_version)
        if header.api_key == API_VERSIONS:
            return api_versions_response(header.api_version)
        if header.api_key == METADATA:
            return self.metadata(header.api_version, body)
        # decode_request only lets SUPPORTED keys through, and each has a handler above.
        raise AssertionError(f"no handler for Kafka API {header.api_key}")

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """The live brokers' Kafka listeners, by broker id."""
        return {
            b.node_id: (b.kafka_host or b.host, b.kafka_port)
            for b in self.cache.brokers.values()
            if b.kafka_port > 0
        }

    def metadata(self, version: int, body: object) -> Any:
        endpoints = self.endpoints()
        native = self.cache.response(requested_topics(body))
        # Admin requests go to the controller the response names. In KRaft mode the controller
        # quorum is not reachable by clients, so a broker names a random live broker
        # (KRaftMetadataCache.getRandomAliveBrokerId) and forwards what needs the controller;
        # we name the lowest live broker with a Kafka listener, which does the same.
        controller = min(endpoints, default=-1)
        native = dataclasses.replace(native, controller_id=controller)
        return metadata_response(
            version, body, native, cluster_id=self.cluster_id, endpoints=endpoints
        )
