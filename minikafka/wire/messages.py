"""The request and response messages of every API, as frozen dataclasses.

Shapes and API keys follow Kafka's where Kafka has the API (org.apache.kafka.common.message);
fields are flattened where Kafka nests by topic only for compactness. Partition lists in fetches
are flat lists of (topic, partition) entries so that a follower can put them in any order: the
leader fills a response in request order (KIP-74) and KIP-73 has followers randomise that order.

Record data travels as opaque `bytes` (a concatenation of record batches, see core/records.py).
The codec (wire/codec.py) checks every field against these annotations, so a peer that sends a
wrong type gets a RemoteProtocolError, never a half-built message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

MSG = dict(frozen=True, slots=True, kw_only=True)


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    ALTER_PARTITION = 56
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63


# Sentinels with Kafka's values.
CONSUMER_REPLICA_ID = -1  # FetchRequest.replica_id of a consumer
NO_LEADER = -1
NO_EPOCH = -1
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset (or HW for consumers)
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset


# ---------------------------------------------------------------------------- shared shapes


@dataclass(**MSG)
class BrokerInfo:
    node_id: int
    host: str
    port: int


@dataclass(**MSG)
class TopicPartitionError:
    topic: str
    partition: int
    error_code: int


@dataclass(**MSG)
class PartitionState:
    """A partition's registration as the controller holds it (LeaderAndIsr, UpdateMetadata)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


# ---------------------------------------------------------------------------- ApiVersions


@dataclass(**MSG)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(**MSG)
class ApiVersionsRequest:
    pass


@dataclass(**MSG)
class ApiVersionsResponse:
    error_code: int = 0
    api_keys: list[ApiVersionRange] = field(default_factory=list)
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- Metadata


@dataclass(**MSG)
class MetadataRequest:
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
    records: bytes  # one or more record batches


@dataclass(**MSG)
class ProduceRequest:
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
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH  # lets the leader answer with a diverging epoch
    log_start_offset: int = -1


@dataclass(**MSG)
class FetchRequest:
    replica_id: int  # CONSUMER_REPLICA_ID for consumers, the broker id for followers
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # whole-response cap (KIP-74, replica.fetch.response.max.bytes)
    partitions: list[FetchPartition]


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


# ---------------------------------------------------------------------------- ListOffsets


@dataclass(**MSG)
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int  # LATEST_TIMESTAMP or EARLIEST_TIMESTAMP


@dataclass(**MSG)
class ListOffsetsRequest:
    partitions: list[ListOffsetsPartition]
    replica_id: int = CONSUMER_REPLICA_ID


@dataclass(**MSG)
class ListOffsetsPartitionResponse:
    topic: str
    partition: int
    error_code: int
    offset: int = -1
    leader_epoch: int = NO_EPOCH


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
class OffsetForLeaderEpochRequest:
    replica_id: int
    partitions: list[OffsetForLeaderEpochPartition]


@dataclass(**MSG)
class OffsetForLeaderEpochPartitionResponse:
    topic: str
    partition: int
    error_code: int
    leader_epoch: int = NO_EPOCH
    end_offset: int = -1


@dataclass(**MSG)
class OffsetForLeaderEpochResponse:
    partitions: list[OffsetForLeaderEpochPartitionResponse]


# ---------------------------------------------------------------------------- controller -> broker


@dataclass(**MSG)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the receiving broker's epoch: a restarted broker rejects old requests
    partitions: list[PartitionState]
    live_leaders: list[BrokerInfo]


@dataclass(**MSG)
class LeaderAndIsrResponse:
    error_code: int
    partitions: list[TopicPartitionError] = field(default_factory=list)


@dataclass(**MSG)
class ConfigEntity:
    """One entity's dynamic configs (core/dynamic_config.py): `entity_name` "" is the default."""

    entity_type: str  # "brokers" | "topics" | "clients"
    entity_name: str
    configs: dict[str, str]


@dataclass(**MSG)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    brokers: list[BrokerInfo]
    partitions: list[PartitionState]
    # The whole dynamic config snapshot when `configs_version` >= 0 (sent when it changes and to
    # a newly registered broker); -1: this request carries no configs, keep the ones you have.
    configs: list[ConfigEntity] = field(default_factory=list)
    configs_version: int = -1


@dataclass(**MSG)
class UpdateMetadataResponse:
    error_code: int


@dataclass(**MSG)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int
    delete: bool


@dataclass(**MSG)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: list[StopReplicaPartition]


@dataclass(**MSG)
class StopReplicaResponse:
    error_code: int
    partitions: list[TopicPartitionError] = field(default_factory=list)


# ---------------------------------------------------------------------------- broker -> controller


@dataclass(**MSG)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: str  # new on every process start: a restart is a new incarnation
    host: str
    port: int


@dataclass(**MSG)
class BrokerRegistrationResponse:
    error_code: int
    broker_epoch: int = -1


@dataclass(**MSG)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int


@dataclass(**MSG)
class BrokerHeartbeatResponse:
    error_code: int
    is_fenced: bool = False


@dataclass(**MSG)
class AlterPartitionItem:
    topic: str
    partition: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int


@dataclass(**MSG)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    partitions: list[AlterPartitionItem]


@dataclass(**MSG)
class AlterPartitionItemResponse:
    topic: str
    partition: int
    error_code: int
    leader: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = -1


@dataclass(**MSG)
class AlterPartitionResponse:
    error_code: int
    partitions: list[AlterPartitionItemResponse] = field(default_factory=list)


# ---------------------------------------------------------------------------- CreateTopics


@dataclass(**MSG)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: list[list[int]] | None = None  # explicit replicas per partition
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(**MSG)
class CreateTopicsRequest:
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


# ---------------------------------------------------------------------------- configs
#
# Kafka's IncrementalAlterConfigs (44) and DescribeConfigs (32), with entity types as strings
# ("brokers", "topics", "clients": the kafka-configs tool's names) where Kafka has int8 resource
# types, and client quotas folded in (Kafka has AlterClientQuotas for those). Resource name ""
# is the default entity (a broker default or the default client). Brokers forward both requests
# to the controller. The top-level `error_code` is for the request as a whole (e.g. the
# controller could not be reached); per-resource outcomes are in the results.


@dataclass(**MSG)
class AlterableConfig:
    name: str
    op: str  # "set" | "delete" (Kafka's AlterConfigOp SET and DELETE)
    value: str | None = None  # required for "set"


@dataclass(**MSG)
class AlterConfigsResource:
    resource_type: str
    resource_name: str
    configs: list[AlterableConfig]


@dataclass(**MSG)
class IncrementalAlterConfigsRequest:
    resources: list[AlterConfigsResource]
    validate_only: bool = False


@dataclass(**MSG)
class AlterConfigsResourceResponse:
    resource_type: str
    resource_name: str
    error_code: int
    error_message: str | None = None


@dataclass(**MSG)
class IncrementalAlterConfigsResponse:
    responses: list[AlterConfigsResourceResponse] = field(default_factory=list)
    error_code: int = 0
    throttle_time_ms: int = 0


@dataclass(**MSG)
class DescribeConfigsResource:
    resource_type: str
    resource_name: str | None = None  # None: every entity of that type that has configs


@dataclass(**MSG)
class DescribeConfigsRequest:
    resources: list[DescribeConfigsResource]


@dataclass(**MSG)
class DescribeConfigsEntry:
    name: str
    value: str
    source: str  # "dynamic_entity" | "dynamic_default"


@dataclass(**MSG)
class DescribeConfigsResult:
    resource_type: str
    resource_name: str
    error_code: int
    error_message: str | None = None
    entries: list[DescribeConfigsEntry] = field(default_factory=list)


@dataclass(**MSG)
class DescribeConfigsResponse:
    results: list[DescribeConfigsResult] = field(default_factory=list)
    error_code: int = 0
    throttle_time_ms: int = 0


# ---------------------------------------------------------------------------- reassignments
#
# Kafka's AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455, flattened
# to one entry per partition. Brokers forward both to the controller. Beyond Kafka,
# `throttle_configs` records the dynamic configs the reassign tool set for this reassignment
# (broker rates, topic throttle lists): the controller removes exactly those keys when the last
# partition of the reassignment completes or is cancelled, unless a value was changed since.


@dataclass(**MSG)
class ReassignablePartition:
    topic: str
    partition: int
    replicas: list[int] | None  # the target replicas (first = preferred leader); None cancels


@dataclass(**MSG)
class AlterPartitionReassignmentsRequest:
    partitions: list[ReassignablePartition]
    timeout_ms: int = 60_000
    throttle_configs: list[ConfigEntity] = field(default_factory=list)


@dataclass(**MSG)
class ReassignablePartitionResponse:
    topic: str
    partition: int
    error_code: int
    error_message: str | None = None


@dataclass(**MSG)
class AlterPartitionReassignmentsResponse:
    responses: list[ReassignablePartitionResponse] = field(default_factory=list)
    error_code: int = 0  # the request as a whole (bad throttle_configs, controller unreachable)
    error_message: str | None = None
    throttle_time_ms: int = 0


@dataclass(**MSG)
class ListPartitionReassignmentsRequest:
    topics: list[str] | None = None  # None: every topic
    timeout_ms: int = 60_000


@dataclass(**MSG)
class OngoingPartitionReassignment:
    topic: str
    partition: int
    replicas: list[int]  # the union: target first, then the replicas being removed
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


@dataclass(**MSG)
class ListPartitionReassignmentsResponse:
    reassignments: list[OngoingPartitionReassignment] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None
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
    ApiKey.BROKER_REGISTRATION: (BrokerRegistrationRequest, BrokerRegistrationResponse),
    ApiKey.BROKER_HEARTBEAT: (BrokerHeartbeatRequest, BrokerHeartbeatResponse),
}

API_KEY_OF: dict[type, ApiKey] = {req: key for key, (req, _resp) in API.items()}

# Every API is at version 0; the version field exists so that the codec can reject what it
# does not know and later versions can be added beside.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {key: (0, 0) for key in API}
