"""The door of a node's listener to its control plane (rules in core/cluster_auth.py).

Every connection a listener serves gets a `MembershipSession`; the listener's read loop hands
each decoded request to `ClusterGate.screen` before any handler sees it, in arrival order, so a
proof of membership counts for the requests read after it and a refused request reaches no
handler at all (nothing is stored, no epoch is remembered). ClusterHandshake and
ClusterAuthenticate are answered here; a control-plane request (or a follower's Fetch) from a
connection that has not proven membership is answered CLUSTER_AUTHORIZATION_FAILED. Every
refusal is logged as `cluster_authorization_failed` with the API, the peer and the reason.

Nonces come from `secrets` (a challenge must be unpredictable, so not from the node's seeded
RNG; they decide nothing else, so runs stay replayable from their seed).
"""

from __future__ import annotations

import secrets

from minikafka.core.cluster_auth import NONCE_BYTES, MembershipSession, refusal
from minikafka.server.eventlog import EventLog
from minikafka.wire.messages import ClusterAuthenticateRequest, ClusterHandshakeRequest


class ClusterGate:
    """One node's cluster id and secret, and its log of refusals."""

    def __init__(self, *, cluster_id: str, secret: bytes, events: EventLog) -> None:
        if not cluster_id or not secret:
            raise ValueError("a ClusterGate needs the cluster id and secret")
        self._cluster_id = cluster_id
        self._secret = secret
        self.events = events
        self.refused = 0

    def session(self) -> MembershipSession:
        return MembershipSession(cluster_id=self._cluster_id, secret=self._secret)

    def screen(self, session: MembershipSession, body: object, peer: str) -> object | None:
        """The answer to `body` if the gate gives it (a handshake step or a refusal), or None
        if the request goes on to the node's dispatcher."""
        match body:
            case ClusterHandshakeRequest():
                response, reason = session.on_handshake(body, secrets.token_bytes(NONCE_BYTES))
                node = body.node_id
            case ClusterAuthenticateRequest():
                response, reason = session.on_authenticate(body)
                node = None
            case _:
                reason = session.refused(body)
                if reason is None:
                    return None
                response, node = refusal(body), session.member
        if reason is not None:
            self.refused += 1
            self.events.emit(
                "cluster_authorization_failed",
                api=type(body).__name__.removesuffix("Request"),
                peer=peer,
                reason=reason,
                node=node,
            )
        return response
