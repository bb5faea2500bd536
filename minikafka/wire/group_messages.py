"""Committed offsets of consumer groups on the native protocol: FindCoordinator (api 10),
OffsetCommit (8) and OffsetFetch (9) with Kafka's api keys and meanings, for minikafka's own
tools (`minikafka consume --group`). They reach the same group coordinator as Kafka's clients
(server/groups.py) and commit as Kafka's "simple" consumers do: generation -1 and no member id,
accepted only while the group has no members (GroupMetadata, KafkaApis.handleOffsetCommit).
Group membership (JoinGroup, SyncGroup, ...) is served on the Kafka listener only.

Re-exported by wire/messages.py with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.wire.request import Request

MSG = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**MSG)
class FindCoordinatorRequest(Request["FindCoordinatorResponse"]):
    key: str  # the group id (key type 0, GROUP: the only one served)


@dataclass(**MSG)
class FindCoordinatorResponse:
    error_code: int
    node_id: int = -1
    host: str = ""
    port: int = -1  # the coordinator's native listener
    throttle_time_ms: int = 0


@dataclass(**MSG)
class OffsetCommitPartition:
    topic: str
    partition: int
    offset: int
    metadata: str = ""


@dataclass(**MSG)
class OffsetCommitRequest(Request["OffsetCommitResponse"]):
    group_id: str
    partitions: list[OffsetCommitPartition]
    generation_id: int = -1  # a simple consumer's
    member_id: str = ""


@dataclass(**MSG)
class OffsetCommitPartitionResponse:
    topic: str
    partition: int
    error_code: int


@dataclass(**MSG)
class OffsetCommitResponse:
    partitions: list[OffsetCommitPartitionResponse]
    throttle_time_ms: int = 0


@dataclass(**MSG)
class OffsetFetchPartition:
    topic: str
    partition: int


@dataclass(**MSG)
class OffsetFetchRequest(Request["OffsetFetchResponse"]):
    group_id: str
    partitions: list[OffsetFetchPartition] | None = None  # None: every committed partition


@dataclass(**MSG)
class OffsetFetchPartitionResponse:
    topic: str
    partition: int
    offset: int  # -1: nothing committed
    error_code: int = 0
    metadata: str = ""


@dataclass(**MSG)
class OffsetFetchResponse:
    error_code: int
    partitions: list[OffsetFetchPartitionResponse] = field(default_factory=list)
    throttle_time_ms: int = 0
