"""Cluster membership: which requests only the cluster's own nodes may send, and how a
connection proves that it comes from one of them.

Kafka keeps its control plane behind the inter-broker listener and the CLUSTER_ACTION
permission (KafkaApis `authHelper.authorizeClusterOperation`): a LeaderAndIsr, UpdateMetadata,
StopReplica, AlterPartition, BrokerRegistration or BrokerHeartbeat, or a Fetch claiming a
follower's replica id, from a principal without it gets CLUSTER_AUTHORIZATION_FAILED (31) and
changes nothing. Here every node of a cluster holds the cluster id and a shared secret, and a
connection proves membership once, at its start, as a SASL handshake would (SaslHandshake then
SaslAuthenticate, with SCRAM's shape, KIP-84):

    node   -> server   ClusterHandshake(cluster_id, node_id)
    server -> node     (error_code, nonce)            another cluster's id is refused here
    node   -> server   ClusterAuthenticate(client_nonce, proof)
                         proof = HMAC-SHA256(secret, "node", cluster_id, node_id, nonce, client_nonce)
    server -> node     (error_code, server_proof)     server_proof: the same with "server"

Why a challenge-response: the server's fresh nonce makes a recorded proof worthless on any
other connection (a replayable token would let whoever saw one connection's bytes, say through
the fault proxy, open their own), and each nonce answers one attempt. It costs one extra round
trip per connection and none per request: connections between nodes live long. The server's
proof lets the node check that it reached its own cluster, not a stranger reusing the port.

Only the control plane needs membership: clients produce, fetch (replica id < 0), read
metadata and send admin requests (CreateTopics, configs, reassignments) without the secret.
An authenticated node may still act only as itself: a registration, heartbeat, AlterPartition
or follower fetch naming another node id is refused (a bug, or a node's secret used to pose as
another, is caught at the door).

Pure: nonces come in as arguments (the shell draws them from `secrets`).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    API,
    API_KEY_OF,
    AllocateProducerIdsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ClusterAuthenticateRequest,
    ClusterAuthenticateResponse,
    ClusterHandshakeRequest,
    ClusterHandshakeResponse,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
NONCE_BYTES = 16
MIN_SECRET_BYTES = 16
_LABEL = b"minikafka-cluster-auth-v1"

# The controller and inter-broker APIs (Kafka's CLUSTER_ACTION operations).
CONTROL_REQUESTS: tuple[type, ...] = (
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
    StopReplicaRequest,
    AlterPartitionRequest,
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AllocateProducerIdsRequest,  # KIP-730: a broker's block of producer ids
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterCredential:
    """What a node proves membership with. The secret is never shown (repr=False)."""

    cluster_id: str
    node_id: int
    secret: bytes = field(repr=False)


def needs_membership(body: object) -> bool:
    """Whether only the cluster's own nodes may send this request."""
    if isinstance(body, FetchRequest):
        return body.replica_id >= 0  # a follower's fetch moves the leader's HW and ISR
    return isinstance(body, CONTROL_REQUESTS)


def claimed_node(body: object) -> int | None:
    """The node id a request speaks for, if it names one."""
    match body:
        case (
            BrokerRegistrationRequest()
            | BrokerHeartbeatRequest()
            | AlterPartitionRequest()
            | AllocateProducerIdsRequest()
        ):
            return body.broker_id
        case FetchRequest():
            return body.replica_id
    return None


def proof(
    secret: bytes, side: str, cluster_id: str, node_id: int, nonce: bytes, client_nonce: bytes
) -> bytes:
    """HMAC-SHA256 over length-prefixed fields (no two field lists encode alike)."""
    mac = hmac.new(secret, _LABEL, hashlib.sha256)
    for part in (side.encode(), cluster_id.encode(), str(node_id).encode(), nonce, client_nonce):
        mac.update(len(part).to_bytes(4, "big") + part)
    return mac.digest()


def refusal(body: object) -> object:
    """The CLUSTER_AUTHORIZATION_FAILED answer to a request this connection may not send."""
    if isinstance(body, FetchRequest):
        return FetchResponse(
            error_code=DENIED,
            partitions=[
                FetchPartitionResponse(topic=p.topic, partition=p.partition, error_code=DENIED)
                for p in body.partitions
            ],
        )
    response_type = API[API_KEY_OF[type(body)]][1]
    return response_type(error_code=DENIED)


class MembershipSession:
    """One server-side connection's proof of membership (server/cluster_gate.py drives it).

    `member` is the proven node id, None until a handshake and a good proof. A failed attempt
    leaves the connection unauthenticated; clients' requests go on being served on it.
    """

    def __init__(self, *, cluster_id: str, secret: bytes) -> None:
        self._cluster_id = cluster_id
        self._secret = secret
        self._challenge: tuple[int, bytes] | None = None  # (node id, nonce) awaiting a proof
        self.member: int | None = None

    def on_handshake(
        self, req: ClusterHandshakeRequest, nonce: bytes
    ) -> tuple[ClusterHandshakeResponse, str | None]:
        """-> (response, why it was refused or None)."""
        self._challenge = None
        if req.cluster_id != self._cluster_id:
            reason = f"cluster id {req.cluster_id!r} is not this cluster's"
            return ClusterHandshakeResponse(error_code=DENIED, error_message=reason), reason
        if req.node_id < 0:
            reason = f"node id {req.node_id} is not a node's"
            return ClusterHandshakeResponse(error_code=DENIED, error_message=reason), reason
        self._challenge = (req.node_id, nonce)
        return ClusterHandshakeResponse(error_code=ErrorCode.NONE, nonce=nonce), None

    def on_authenticate(
        self, req: ClusterAuthenticateRequest
    ) -> tuple[ClusterAuthenticateResponse, str | None]:
        """-> (response, why it was refused or None). A nonce answers one attempt."""
        challenge, self._challenge = self._challenge, None
        if challenge is None:
            reason = "ClusterAuthenticate without a ClusterHandshake before it"
            return ClusterAuthenticateResponse(error_code=DENIED, error_message=reason), reason
        node_id, nonce = challenge
        expected = proof(self._secret, "node", self._cluster_id, node_id, nonce, req.client_nonce)
        if len(req.client_nonce) < NONCE_BYTES or not hmac.compare_digest(expected, req.proof):
            reason = f"wrong proof from node {node_id}: not made with this cluster's secret"
            return ClusterAuthenticateResponse(error_code=DENIED, error_message=reason), reason
        self.member = node_id
        server_proof = proof(
            self._secret, "server", self._cluster_id, node_id, nonce, req.client_nonce
        )
        return ClusterAuthenticateResponse(
            error_code=ErrorCode.NONE, server_proof=server_proof
        ), None

    def refused(self, body: object) -> str | None:
        """Why this connection may not send `body`, or None if it may."""
        if not needs_membership(body):
            return None
        if self.member is None:
            return "the connection has not proven cluster membership"
        claimed = claimed_node(body)
        if claimed is not None and claimed != self.member:
            return f"node {self.member} may not act as node {claimed}"
        return None
