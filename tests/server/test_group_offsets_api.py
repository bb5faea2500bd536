"""The native group-offset APIs (server/group_offsets_api.py) on a node without a group
coordinator: every request is answered, with COORDINATOR_NOT_AVAILABLE, and others pass by."""

from __future__ import annotations

from minikafka.errors import ErrorCode
from minikafka.server.group_offsets_api import GroupOffsetsApi
from minikafka.server.routes import RouteTable
from minikafka.wire.messages import (
    FindCoordinatorRequest,
    MetadataRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_without_a_coordinator_each_answer_says_so() -> None:
    dispatch_group_offsets = RouteTable(GroupOffsetsApi().routes).answer
    found = await dispatch_group_offsets(FindCoordinatorRequest(key="g"))
    assert found.error_code == NOT_AVAILABLE and found.node_id == -1
    commit = OffsetCommitRequest(
        group_id="g",
        partitions=[OffsetCommitPartition(topic="t", partition=p, offset=5) for p in (0, 1)],
    )
    committed = await dispatch_group_offsets(commit)
    assert [(p.partition, p.error_code) for p in committed.partitions] == [
        (0, NOT_AVAILABLE), (1, NOT_AVAILABLE),
    ]  # fmt: skip
    fetched = await dispatch_group_offsets(OffsetFetchRequest(group_id="g"))
    assert fetched.error_code == NOT_AVAILABLE and fetched.partitions == []
    assert await dispatch_group_offsets(MetadataRequest(topics=None)) is NotImplemented
