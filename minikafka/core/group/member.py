"""A member of a consumer group (Kafka's MemberMetadata)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from minikafka.core.group.messages import Protocols


@dataclass(slots=True, kw_only=True)
class Member:
    """MemberMetadata. Mutable: the group updates it in place as Kafka's does."""

    member_id: str
    client_id: str
    client_host: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    session_deadline_ms: int
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def vote(self, candidates: set[str]) -> str:
        """MemberMetadata.vote: this member's most preferred protocol among the candidates."""
        return next(name for name, _ in self.protocols if name in candidates)


def default_id_factory() -> str:
    return str(uuid.uuid4())
