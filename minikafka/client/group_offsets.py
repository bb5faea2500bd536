"""A consumer group's committed offsets, read and written as Kafka's "simple" consumers do
(assign() and commitSync() without joining: generation -1, no member id), over the native
protocol's FindCoordinator, OffsetFetch and OffsetCommit (wire/group_messages.py).

The coordinator is found again, after a short backoff, while the answer is retriable
(COORDINATOR_NOT_AVAILABLE while `__consumer_offsets` is created, COORDINATOR_LOAD_IN_PROGRESS
while a new coordinator loads, NOT_COORDINATOR after it moved), up to `wait_s`. A group with
members (Kafka clients subscribed to it) refuses a simple commit: Kafka answers
UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION, and so does the coordinator here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.common import TopicPartition
from minikafka.core.group.messages import (
    ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import (
    FindCoordinatorRequest,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartition,
    OffsetFetchRequest,
)

RETRY_BACKOFF_S = 0.2
_AGAIN = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
}


class GroupOffsets:
    def __init__(self, client: ClusterClient, group_id: str, *, wait_s: float = 30.0) -> None:
        self.client = client
        self.group_id = group_id
        self.wait_s = wait_s

    async def committed(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The committed offset of each partition that has one."""
        req = OffsetFetchRequest(
            group_id=self.group_id,
            partitions=[OffsetFetchPartition(topic=tp.topic, partition=tp.partition) for tp in tps],
        )
        resp = await self._coordinator_request(req, lambda r: r.error_code)
        out = {}
        for p in resp.partitions:
            if p.error_code:
                raise BrokerError(p.error_code, f"offset fetch {p.topic}-{p.partition}")
            if p.offset >= 0:
                out[TopicPartition(p.topic, p.partition)] = p.offset
        return out

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit the next offset to read of each partition (Kafka's convention), durably."""
        if not offsets:
            return
        req = OffsetCommitRequest(
            group_id=self.group_id,
            partitions=[
                OffsetCommitPartition(topic=tp.topic, partition=tp.partition, offset=offset)
                for tp, offset in offsets.items()
            ],
        )

        def first_error(r: object) -> int:
            assert isinstance(r, OffsetCommitResponse)
            return next((p.error_code for p in r.partitions if p.error_code), 0)

        code = first_error(await self._coordinator_request(req, first_error))
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS):
            raise BrokerError(
                code,
                f"group {self.group_id!r} has members (Kafka consumers subscribed to it); "
                "a simple consumer commits only to a group without members",
            )
        if code:
            raise BrokerError(code, f"offset commit for group {self.group_id!r}")

    async def _coordinator_request(self, req: object, error_of) -> object:  # noqa: ANN001
        with trio.move_on_after(self.wait_s):
            while True:
                found = await self.client.request_any(FindCoordinatorRequest(key=self.group_id))
                if found.error_code == 0:
                    try:
                        conn = await self.client.connection((found.host, found.port))
                        resp = await conn.request(req, timeout_s=30)
                    except BrokerError as exc:
                        if not exc.retriable:
                            raise
                    else:
                        if error_of(resp) not in _AGAIN:
                            return resp
                elif found.error_code not in _AGAIN:
                    raise BrokerError(found.error_code, f"find coordinator of {self.group_id!r}")
                await trio.sleep(RETRY_BACKOFF_S)
        raise BrokerError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"no coordinator for group {self.group_id!r} answered within {self.wait_s:g} s",
        )
