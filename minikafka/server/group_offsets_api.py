"""The native protocol's group-offset APIs (wire/group_messages.py): FindCoordinator,
OffsetCommit and OffsetFetch for minikafka's own tools, answered by the same GroupService that
serves Kafka's clients (server/groups.py), so a group's offsets are one set whichever protocol
committed them. A node without a coordinator (no Kafka listener) answers
COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from minikafka.core.group.messages import OffsetFetch
from minikafka.errors import ErrorCode
from minikafka.server.groups import GroupService
from minikafka.wire.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

_NONE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)


async def dispatch_group_offsets(svc: GroupService | None, body: object) -> object:
    """The answer to one of the three requests, or NotImplemented for any other."""
    match body:
        case FindCoordinatorRequest():
            if svc is None:
                return FindCoordinatorResponse(error_code=_NONE)
            code, broker = svc.find_coordinator(body.key)
            if broker is None:
                return FindCoordinatorResponse(error_code=code)
            return FindCoordinatorResponse(
                error_code=code, node_id=broker.node_id, host=broker.host, port=broker.port
            )
        case OffsetCommitRequest():
            wanted = {(p.topic, p.partition): (p.offset, p.metadata) for p in body.partitions}
            if svc is None:
                errors = dict.fromkeys(wanted, _NONE)
            else:
                errors = await svc.commit(body.group_id, body.member_id, body.generation_id, wanted)
            return OffsetCommitResponse(
                partitions=[
                    OffsetCommitPartitionResponse(topic=t, partition=p, error_code=int(code))
                    for (t, p), code in errors.items()
                ]
            )
        case OffsetFetchRequest():
            if svc is None:
                return OffsetFetchResponse(error_code=_NONE)
            asked = (
                None
                if body.partitions is None
                else [(p.topic, p.partition) for p in body.partitions]
            )
            code, results = svc.fetch_offsets(body.group_id, asked)
            if code:
                return OffsetFetchResponse(error_code=int(code))
            return OffsetFetchResponse(
                error_code=0,
                partitions=[_fetched(t, p, r) for (t, p), r in sorted(results.items())],
            )
    return NotImplemented


def _fetched(topic: str, partition: int, r: OffsetFetch) -> OffsetFetchPartitionResponse:
    return OffsetFetchPartitionResponse(
        topic=topic,
        partition=partition,
        offset=r.offset,
        error_code=int(r.error),
        metadata=r.metadata,
    )
