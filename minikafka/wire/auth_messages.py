"""The messages by which a connection proves it belongs to the cluster.

They mirror Kafka's SaslHandshake (17) and SaslAuthenticate (36), which an inter-broker
listener runs once at the start of a connection; the proof itself is ours (an HMAC challenge-
response, see core/cluster_auth.py). Re-exported by wire/messages.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.wire.request import Request

MSG = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**MSG)
class ClusterHandshakeRequest(Request["ClusterHandshakeResponse"]):
    cluster_id: str
    node_id: int


@dataclass(**MSG)
class ClusterHandshakeResponse:
    error_code: int
    nonce: bytes = b""  # the server's challenge, for one ClusterAuthenticate on this connection
    error_message: str | None = None


@dataclass(**MSG)
class ClusterAuthenticateRequest(Request["ClusterAuthenticateResponse"]):
    client_nonce: bytes
    proof: bytes  # HMAC-SHA256 with the cluster secret over both nonces (core/cluster_auth.py)


@dataclass(**MSG)
class ClusterAuthenticateResponse:
    error_code: int
    server_proof: bytes = b""  # the server's own proof: the node checks it reached its cluster
    error_message: str | None = None
