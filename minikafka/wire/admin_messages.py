"""Admin messages: dynamic configs (IncrementalAlterConfigs, DescribeConfigs, and the config
snapshot a controller pushes in UpdateMetadata) and partition reassignments (KIP-455's
AlterPartitionReassignments and ListPartitionReassignments).

Split from wire/messages.py, which re-exports every name here and holds the API registry; the
same rules apply (frozen dataclasses checked field by field by the codec).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.wire.request import Request

MSG = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**MSG)
class ConfigEntity:
    """One entity's dynamic configs (core/dynamic_config.py): `entity_name` "" is the default."""

    entity_type: str  # "brokers" | "topics" | "clients"
    entity_name: str
    configs: dict[str, str]


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
class IncrementalAlterConfigsRequest(Request["IncrementalAlterConfigsResponse"]):
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
class DescribeConfigsRequest(Request["DescribeConfigsResponse"]):
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
class AlterPartitionReassignmentsRequest(Request["AlterPartitionReassignmentsResponse"]):
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
class ListPartitionReassignmentsRequest(Request["ListPartitionReassignmentsResponse"]):
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
