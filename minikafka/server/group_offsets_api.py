"""The native protocol's group-offset APIs (wire/group_messages.py): FindCoordinator,
OffsetCommit and OffsetFetch for minikafka's own tools, answered by the same GroupService that
serves Kafka's clients (server/groups.py), so a group's offsets are one set whichever protocol
committed them. A node without a coordinator (no Kafka listener) answers
COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

from minikafka.core.group.messages import OffsetFetch
from minikafka.errors import ErrorCode
from minikafka.server.groups import GroupService
from minikafka.server.routes import Call, Handler
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


class GroupOffsetsApi:
    """The three requests' handlers (server/routes.py), over `svc`, the node's group
    coordinator once it runs (None before, and on a node without a Kafka listener)."""

    def __init__(self, svc: GroupService | None = None) -> None:
        self.svc = svc
        self.routes: dict[type, Handler] = {
            FindCoordinatorRequest: self._find_coordinator,
            OffsetCommitRequest: self._commit,
            OffsetFetchRequest: self._fetch,
        }

    async def _find_coordinator(
        self, body: FindCoordinatorRequest, call: Call
    ) -> FindCoordinatorResponse:
        if self.svc is None:
            return FindCoordinatorResponse(error_code=_NONE)
        code, broker = self.svc.find_coordinator(body.key)
        if broker is None:
            return FindCoordinatorResponse(error_code=code)
        return FindCoordinatorResponse(
            error_code=code, node_id=broker.node_id, host=broker.host, port=broker.port
        )

    async def _commit(self, body: OffsetCommitRequest, call: Call) -> OffsetCommitResponse:
        wanted = {(p.topic, p.partition): (p.offset, p.metadata) for p in body.partitions}
        if self.svc is None:
            errors = dict.fromkeys(wanted, _NONE)
        else:
            errors = await self.svc.commit(
                body.group_id, body.member_id, body.generation_id, wanted
            )
        return OffsetCommitResponse(
            partitions=[
                OffsetCommitPartitionResponse(topic=t, partition=p, error_code=int(code))
                for (t, p), code in errors.items()
            ]
        )

    async def _fetch(self, body: OffsetFetchRequest, call: Call) -> OffsetFetchResponse:
        if self.svc is None:
            return OffsetFetchResponse(error_code=_NONE)
        asked = (
            None if body.partitions is None else [(p.topic, p.partition) for p in body.partitions]
        )
        code, results = self.svc.fetch_offsets(body.group_id, asked)
        if code:
            return OffsetFetchResponse(error_code=int(code))
        return OffsetFetchResponse(
            error_code=0,
            partitions=[_fetched(t, p, r) for (t, p), r in sorted(results.items())],
        )


def _fetched(topic: str, partition: int, r: OffsetFetch) -> OffsetFetchPartitionResponse:
    return OffsetFetchPartitionResponse(
        topic=topic,
        partition=partition,
        offset=r.offset,
        error_code=int(r.error),
        metadata=r.metadata,
    )
