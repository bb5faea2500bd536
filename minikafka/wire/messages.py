"""The request and response messages of every API, as frozen dataclasses.

Shapes and API keys follow Kafka's where Kafka has the API (org.apache.kafka.common.message);
fields are flattened where Kafka nests by topic only for compactness. Partition lists in fetches
are flat lists of (topic, partition) entries so that a follower can put them in any order: the
leader fills a response in request order (KIP-74) and KIP-73 has followers randomise that order.

Record data travels as opaque `bytes` (a concatenation of record batches, see core/records.py).
The codec (wire/codec.py) checks every field against these annotations, so a peer that sends a
wrong type gets a RemoteProtocolError, never a half-built message.

The messages of a few families live in modules of their own (admin_messages.py,
auth_messages.py, controller_messages.py, group_messages.py, producer_messages.py); this module re-exports every
name, so that `minikafka.wire.messages` stays the one import place, and holds the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from minikafka.common import (  # noqa: F401 - NO_LEADER re-exported for the wire's readers
    NO_LEADER,
    UNDEFINED_EPOCH,
)
from minikafka.wire.admin_messages import (  # noqa: F401 - re-exported: one import place for every message
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ConfigEntity,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    ReassignablePartition,
    ReassignablePartitionResponse,
)
from minikafka.wire.auth_messages import (  # noqa: F401 - re-exported
    ClusterAuthenticateRequest,
    ClusterAuthenticateResponse,
    ClusterHandshakeRequest,
    ClusterHandshakeResponse,
)
from minikafka.wire.controller_messages import (  # noqa: F401 - re-exported likewise
    AlterPartitionItem,
    AlterPartitionItemResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerInfo,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    OfflineReplica,
    PartitionState,
    StopReplicaPartition,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartitionError,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from minikafka.wire.group_messages import (  # noqa: F401 - re-exported likewise
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartition,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from minikafka.wire.producer_messages import (  # noqa: F401 - re-exported likewise
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from minikafka.wire.request import Request

MSG = dict(frozen=True, slots=True, kw_only=True)


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    CLUSTER_HANDSHAKE = 17  # Kafka's SaslHandshake
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    CREATE_PARTITIONS = 37
    DELETE_TOPICS = 20
    OFFSET_FOR_LEADER_EPOCH = 23
    DELETE_RECORDS = 21
    CLUSTER_AUTHENTICATE = 36  # Kafka's SaslAuthenticate
    DESCRIBE_CONFIGS = 32
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    INIT_PRODUCER_ID = 22
    ALTER_PARTITION = 56
    ALLOCATE_PRODUCER_IDS = 67
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63


# Sentinels with Kafka's values.
CONSUMER_REPLICA_ID = -1  # FetchRequest.replica_id of a consumer
# ListOffsets from a tool that wants the leader's log end offset, not the HW (Kafka's
# ListOffsetsRequest.DEBUGGING_REPLICA_ID: no isolation level applies, as for a replica).
DEBUGGING_REPLICA_ID = -2
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset (or HW for consumers)
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
MAX_TIMESTAMP = -3  # ListOffsets: the record with the largest timestamp (KIP-734)
EARLIEST_LOCAL_TIMESTAMP = -4  # ListOffsets: the local log start (KIP-1005; no tiered storage)
LATEST_TIERED_TIMESTAMP = -5  # ListOffsets: the last tiered offset (KIP-1005; none: -1)


# ---------------------------------------------------------------------------- ApiVersions


@dataclass(**MSG)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(**MSG)
class ApiVersionsRequest(Request["ApiVersionsResponse"]):
    pass


@dataclass(**MSG)
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: list[ApiVersionRange] = field(default_factory=list)
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- Metadata


@dataclass(**MSG)
class MetadataRequest(Request["MetadataResponse"]):
    topics: list[str] | None = None  # None: every topic


@dataclass(**MSG)
class PartitionMetadata:
    error_code: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass(**MSG)
class TopicMetadata:
    error_code: int
    name: str
    partitions: list[PartitionMetadata]


@dataclass(**MSG)
class MetadataResponse:
    brokers: list[BrokerInfo]
    controller_id: int
    topics: list[TopicMetadata]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- Produce


@dataclass(**MSG)
class ProducePartition:
    topic: str
    partition: int
    records: bytes  # one or more record batches (exactly one with a producer id)
    # The idempotent producer (KIP-98; Kafka carries these in the batch header, the leader
    # writes them into the stored batch's): -1 = none. Sequence of the batch's first record.
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(**MSG)
class ProduceRequest(Request["ProduceResponse"]):
    acks: int  # 0, 1 or -1 (all)
    timeout_ms: int
    partitions: list[ProducePartition]


@dataclass(**MSG)
class ProducePartitionResponse:
    topic: str
    partition: int
    error_code: int
    base_offset: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(**MSG)
class ProduceResponse:
    partitions: list[ProducePartitionResponse]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- Fetch


@dataclass(**MSG)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = UNDEFINED_EPOCH
    last_fetched_epoch: int = UNDEFINED_EPOCH  # lets the leader answer with a diverging epoch
    log_start_offset: int = -1


@dataclass(**MSG)
class ForgottenPartition:
    topic: str
    partition: int


@dataclass(**MSG)
class FetchRequest(Request["FetchResponse"]):
    replica_id: int  # CONSUMER_REPLICA_ID for consumers, the broker id for followers
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # whole-response cap (KIP-74, replica.fetch.response.max.bytes)
    partitions: list[FetchPartition]
    # KIP-227 fetch sessions (core/fetch_session.py). The defaults are a sessionless fetch
    # (FINAL_EPOCH), what consumers and older peers send. With a session, `partitions` holds
    # only the partitions added or changed since the last request and `forgotten` the ones
    # dropped from it; `partition_order` tells the leader how to order the partitions with news
    # under the response cap, since the request order no longer lists them all (KIP-73's
    # `random` or Kafka's `rotate`; "" for request order).
    session_id: int = 0
    session_epoch: int = -1
    forgotten: list[ForgottenPartition] = field(default_factory=list)
    partition_order: str = ""


@dataclass(**MSG)
class EpochEndOffset:
    epoch: int
    end_offset: int


@dataclass(**MSG)
class FetchPartitionResponse:
    topic: str
    partition: int
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: EpochEndOffset | None = None
    records: bytes = b""


@dataclass(**MSG)
class FetchResponse:
    partitions: list[FetchPartitionResponse]
    error_code: int = 0
    throttle_time_ms: int = 0
    session_id: int = 0  # KIP-227: the session the follower's next fetch names, 0 for none


# ---------------------------------------------------------------------------- ListOffsets


@dataclass(**MSG)
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int  # a record timestamp (KIP-79), or one of the *_TIMESTAMP sentinels


@dataclass(**MSG)
class ListOffsetsRequest(Request["ListOffsetsResponse"]):
    partitions: list[ListOffsetsPartition]
    replica_id: int = CONSUMER_REPLICA_ID


@dataclass(**MSG)
class ListOffsetsPartitionResponse:
    topic: str
    partition: int
    error_code: int
    offset: int = -1
    leader_epoch: int = UNDEFINED_EPOCH
    timestamp: int = -1  # the found record's timestamp (KIP-79), -1 for the other answers


@dataclass(**MSG)
class ListOffsetsResponse:
    partitions: list[ListOffsetsPartitionResponse]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- OffsetForLeaderEpoch


@dataclass(**MSG)
class OffsetForLeaderEpochPartition:
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(**MSG)
class OffsetForLeaderEpochRequest(Request["OffsetForLeaderEpochResponse"]):
    replica_id: int
    partitions: list[OffsetForLeaderEpochPartition]


@dataclass(**MSG)
class OffsetForLeaderEpochPartitionResponse:
    topic: str
    partition: int
    error_code: int
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = -1


@dataclass(**MSG)
class OffsetForLeaderEpochResponse:
    partitions: list[OffsetForLeaderEpochPartitionResponse]


# ---------------------------------------------------------------------------- CreateTopics


@dataclass(**MSG)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: list[list[int]] | None = None  # explicit replicas per partition
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(**MSG)
class CreateTopicsRequest(Request["CreateTopicsResponse"]):
    topics: list[CreatableTopic]
    timeout_ms: int = 30_000
    validate_only: bool = False


@dataclass(**MSG)
class CreatableTopicResult:
    name: str
    error_code: int
    error_message: str | None = None


@dataclass(**MSG)
class CreateTopicsResponse:
    topics: list[CreatableTopicResult]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- CreatePartitions


@dataclass(**MSG)
class CreatePartitionsTopic:
    """Grow `name` to `count` partitions; `assignments`: the new partitions' replicas, in order
    (None: placed by the controller)."""

    name: str
    count: int
    assignments: list[list[int]] | None = None


@dataclass(**MSG)
class CreatePartitionsRequest(Request["CreatePartitionsResponse"]):
    topics: list[CreatePartitionsTopic]
    timeout_ms: int = 30_000
    validate_only: bool = False


@dataclass(**MSG)
class CreatePartitionsResponse:
    results: list[CreatableTopicResult]  # name, error code and message per topic, in order
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- DeleteTopics


@dataclass(**MSG)
class DeleteTopicsRequest(Request["DeleteTopicsResponse"]):
    topics: list[str]
    timeout_ms: int = 30_000


@dataclass(**MSG)
class DeleteTopicsResponse:
    results: list[CreatableTopicResult]  # name, error code and message per topic, in order
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- DeleteRecords


@dataclass(**MSG)
class DeleteRecordsPartition:
    topic: str
    partition: int
    offset: int  # the new log start offset; -1: the high watermark (KIP-107)


@dataclass(**MSG)
class DeleteRecordsRequest(Request["DeleteRecordsResponse"]):
    partitions: list[DeleteRecordsPartition]
    timeout_ms: int = 30_000


@dataclass(**MSG)
class DeleteRecordsPartitionResponse:
    topic: str
    partition: int
    error_code: int
    low_watermark: int = -1  # the smallest log start offset of the live replicas


@dataclass(**MSG)
class DeleteRecordsResponse:
    partitions: list[DeleteRecordsPartitionResponse]
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- the registry

API: dict[ApiKey, tuple[type, type]] = {
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.LEADER_AND_ISR: (LeaderAndIsrRequest, LeaderAndIsrResponse),
    ApiKey.STOP_REPLICA: (StopReplicaRequest, StopReplicaResponse),
    ApiKey.UPDATE_METADATA: (UpdateMetadataRequest, UpdateMetadataResponse),
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.DELETE_RECORDS: (DeleteRecordsRequest, DeleteRecordsResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    ),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    ),
    ApiKey.ALTER_PARTITION: (AlterPartitionRequest, AlterPartitionResponse),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.ALLOCATE_PRODUCER_IDS: (AllocateProducerIdsRequest, AllocateProducerIdsResponse),
    ApiKey.BROKER_REGISTRATION: (BrokerRegistrationRequest, BrokerRegistrationResponse),
    ApiKey.BROKER_HEARTBEAT: (BrokerHeartbeatRequest, BrokerHeartbeatResponse),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.CLUSTER_HANDSHAKE: (ClusterHandshakeRequest, ClusterHandshakeResponse),
    ApiKey.CLUSTER_AUTHENTICATE: (ClusterAuthenticateRequest, ClusterAuthenticateResponse),
}

API_KEY_OF: dict[type, ApiKey] = {req: key for key, (req, _resp) in API.items()}
RESPONSE_OF: dict[type, type] = dict(API.values())  # the response type each request names

# Every API is at version 0; the version field exists so that the codec can reject what it
# does not know and later versions can be added beside.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {key: (0, 0) for key in API}
