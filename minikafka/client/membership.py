"""A node's side of proving cluster membership on a connection it opened.

`prove_membership` runs the handshake of core/cluster_auth.py: ClusterHandshake, then
ClusterAuthenticate with an HMAC proof made with the cluster secret, then checks the server's
own proof. Any refusal raises BrokerError CLUSTER_AUTHORIZATION_FAILED (not retriable: a wrong
cluster id or secret does not fix itself) with the server's reason.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Protocol

from minikafka.core.cluster_auth import NONCE_BYTES, ClusterCredential, proof
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import (
    ClusterAuthenticateRequest,
    ClusterHandshakeRequest,
)
from minikafka.wire.request import R, Request

AUTH_TIMEOUT_S = 10.0


class Connection(Protocol):
    """What the handshake needs of a client/connection.py Connection (named structurally, so
    that connection.py, which runs the handshake when it opens, is not imported back)."""

    label: str

    async def request(self, body: Request[R], *, timeout_s: float = ...) -> R: ...


async def prove_membership(
    conn: Connection, credential: ClusterCredential, *, timeout_s: float = AUTH_TIMEOUT_S
) -> None:
    """Authenticate `conn` (a client Connection) as `credential`'s node of its cluster."""
    cred = credential
    hello = await conn.request(
        ClusterHandshakeRequest(cluster_id=cred.cluster_id, node_id=cred.node_id),
        timeout_s=timeout_s,
    )
    label = conn.label or "the server"
    if hello.error_code != ErrorCode.NONE:
        raise BrokerError(
            hello.error_code,
            f"{label} refused node {cred.node_id} of cluster {cred.cluster_id!r}: "
            f"{hello.error_message or 'no reason given'}",
        )
    client_nonce = secrets.token_bytes(NONCE_BYTES)
    mine = proof(cred.secret, "node", cred.cluster_id, cred.node_id, hello.nonce, client_nonce)
    done = await conn.request(
        ClusterAuthenticateRequest(client_nonce=client_nonce, proof=mine), timeout_s=timeout_s
    )
    if done.error_code != ErrorCode.NONE:
        raise BrokerError(
            done.error_code,
            f"{label} refused node {cred.node_id}'s proof of membership of cluster "
            f"{cred.cluster_id!r}: {done.error_message or 'no reason given'}",
        )
    theirs = proof(cred.secret, "server", cred.cluster_id, cred.node_id, hello.nonce, client_nonce)
    if not hmac.compare_digest(theirs, done.server_proof):
        raise BrokerError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{label} did not prove that it belongs to cluster {cred.cluster_id!r}",
        )


async def try_prove_membership(
    conn: Connection, credential: ClusterCredential | None
) -> BrokerError | None:
    """`prove_membership` if there is a credential: the refusal (returned, for the caller to
    raise outside its nursery, unwrapped), or None if proven or there is nothing to prove."""
    if credential is None:
        return None
    try:
        await prove_membership(conn, credential)
    except BrokerError as exc:
        return exc
    return None
