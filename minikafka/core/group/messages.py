"""The classic consumer-group protocol's messages, codes, states and config (see
core/group/__init__.py); the results the state machine returns to its shell."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from minikafka.errors import ErrorCode

# Kafka's codes (org.apache.kafka.common.protocol.Errors) that minikafka.errors does not hold.
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81

NONE = int(ErrorCode.NONE)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
COORDINATOR_LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)

NO_GENERATION = -1  # JoinGroupResponse.generationId on error; a "simple" committer's generation
NO_OFFSET = -1  # OffsetFetch answer for a partition with no committed offset

TopicPartitionKey = tuple[str, int]
Protocols = tuple[tuple[str, bytes], ...]


class GroupState(Enum):
    """GroupState.scala; the value is the name Kafka reports (DescribeGroups, ListGroups v4)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The broker settings GroupConfig in Kafka carries (KafkaConfig group.* keys)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int | None = None  # group.max.size (Kafka: Int.MaxValue, i.e. unbounded)
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
    # KIP-211: an Empty group's offsets expire this long after it became Empty (a standalone
    # group's, after each commit); checked every `retention_check_interval_ms`.
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes (7 days)
    retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms


# --- messages ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinedMember:
    """One entry of the leader's JoinGroupResponse.members."""

    member_id: str
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinResponse:
    """Kafka's JoinGroupResult. Only the leader's carries the members' metadata."""

    group_id: str
    member_id: str
    error: int
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncResponse:
    """Kafka's SyncGroupResult: this member's assignment (empty on error)."""

    group_id: str
    member_id: str
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


Response = JoinResponse | SyncResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinOutcome:
    """`response` is None when the join is parked until the rebalance completes; `member_id`
    is the id the member holds (generated for a new member), which its answer will carry."""

    member_id: str
    response: JoinResponse | None
    completed: tuple[Response, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncOutcome:
    """`response` is None when a follower waits for the leader's assignment."""

    response: SyncResponse | None
    completed: tuple[Response, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveOutcome:
    """LeaveGroupResponse v3+: a group-level error and one error per member (KIP-345)."""

    error: int
    members: dict[str, int]
    completed: tuple[Response, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistOffsets:
    """Effect: write these commits durably (Kafka appends them to __consumer_offsets) before
    answering the OffsetCommit. The group already serves them from memory."""

    group_id: str
    offsets: dict[TopicPartitionKey, OffsetAndMetadata]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRecord:
    """One member of a GroupMetadataValue (its MemberMetadata struct): the subscription is the
    member's metadata for the group's protocol only, as Kafka stores it."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRecord:
    """Kafka's GroupMetadataValue (keyed by GroupMetadataKey = the group id): what a new
    coordinator needs to serve a Stable group's members without a rebalance."""

    group_id: str
    protocol_type: str  # "" for none
    generation_id: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int  # currentStateTimestamp; -1 unknown
    members: tuple[MemberRecord, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistGroup:
    """Effect: append this group's GroupMetadata record (GroupMetadataManager.storeGroup).
    `awaited`: the leader's SyncGroup completed a rebalance, and the group goes Stable only
    once the append succeeded: the shell answers with `GroupCoordinator.group_stored`. A
    group that just became Empty is stored without waiting (onCompleteJoin)."""

    record: GroupRecord
    awaited: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireGroup:
    """Effect: append tombstones for these expired offsets, and for the group's metadata record
    when `group_removed` (GroupMetadataManager.cleanupGroupMetadata), so a reload of the
    partition does not bring them back. The coordinator forgot them already."""

    group_id: str
    partitions: tuple[TopicPartitionKey, ...]
    group_removed: bool


Effect = PersistGroup | ExpireGroup


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitOutcome:
    errors: dict[TopicPartitionKey, int]
    effects: tuple[PersistOffsets, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetch:
    offset: int  # NO_OFFSET when nothing is committed
    metadata: str = ""
    error: int = NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberSummary:
    """DescribeGroups member (MemberMetadata.summary). Metadata and assignment are only shown
    while Stable, as Kafka's GroupMetadata.summary does."""

    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
