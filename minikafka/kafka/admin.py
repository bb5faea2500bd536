"""Kafka's admin APIs on the Kafka listener: kio requests to minikafka's native admin messages
and back. Pure: the shell (server/kafka_apis.py) hands the native request to the broker, which
forwards it to the controller (KIP-590 style, server/broker.py).

Served: CreateTopics (19) v2-4, DescribeConfigs (32) v1-3, IncrementalAlterConfigs (44) v0-1
(KIP-339), CreatePartitions and DeleteTopics; AlterPartitionReassignments (45) v0 and
ListPartitionReassignments (46) v0 (KIP-455) are in kafka/reassignments.py, on these helpers.
What cannot be said natively (a resource type other than TOPIC and BROKER, APPEND and SUBTRACT
config ops, a non-consecutive replica assignment) is refused here per entity and never reaches
the broker; everything else is the controller's to judge, with Kafka's codes and messages.
Answers keep the request's order and echo its names (kafka-python keys its results by the
resource name it receives). A native top-level error (controller unreachable) becomes every
entity's error, as Kafka's forwarding broker reports a failed forward (KIP-590).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8

from minikafka.errors import bounded_message
from minikafka.kafka import codec
from minikafka.wire import admin_messages as am
from minikafka.wire import messages

# Kafka's ConfigResource.Type (org.apache.kafka.common.config.ConfigResource).
TOPIC, BROKER = 2, 4
ENTITY_TYPES = {TOPIC: "topics", BROKER: "brokers"}

# Kafka's AlterConfigOp.OpType: SET=0, DELETE=1, APPEND=2, SUBTRACT=3.
OPS = {0: "set", 1: "delete"}

# Kafka's DescribeConfigsResponse.ConfigSource.
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# A topic config the broker applies when the topic sets none: name -> (value, ConfigSource).
TopicDefaults = Mapping[str, tuple[str, int]]

Refusals = dict[int, tuple[KafkaErrorCode, str]]  # request entity index -> its error


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Translated:
    """The native request for what can be forwarded (None: nothing can), and the request's
    entities refused here, by their index in the request."""

    native: Any
    refused: Refusals = dataclasses.field(default_factory=dict)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _has(cls: type, name: str) -> bool:
    return name in _field_names(cls)


def kafka_error(code: int) -> KafkaErrorCode:
    """minikafka's codes are Kafka's numbers; one Kafka does not know becomes UNKNOWN_SERVER_ERROR
    (clients map unknown codes to that anyway)."""
    try:
        return KafkaErrorCode(int(code))
    except ValueError:
        return KafkaErrorCode.unknown_server_error


def timeout_ms(timeout: timedelta) -> int:
    return int(timeout.total_seconds() * 1000)


def _entity_type(resource_type: int) -> str | tuple[KafkaErrorCode, str]:
    entity = ENTITY_TYPES.get(int(resource_type))
    if entity is None:
        return KafkaErrorCode.invalid_request, (
            f"resource type {resource_type} is not served: only TOPIC (2) and BROKER (4)"
        )
    return entity


# ---------------------------------------------------------------------------- CreateTopics


def create_topics_request(request: Any) -> Translated:
    """kio CreateTopicsRequest (v2-4) -> native CreateTopicsRequest.

    num_partitions and replication_factor -1 pass through: the controller applies
    num.partitions and default.replication.factor (KIP-464), and refuses an assignment given
    together with either (INVALID_REQUEST, Kafka's message). Assignments become the native list
    by partition index, so they must be 0, 1, ... n-1 (Kafka's
    INVALID_REPLICA_ASSIGNMENT otherwise, ZkAdminManager/ReplicationControlManager).
    """
    topics: list[messages.CreatableTopic] = []
    refused: Refusals = {}
    for i, t in enumerate(request.topics):
        by_index = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in t.assignments}
        if len(by_index) != len(t.assignments) or sorted(by_index) != list(range(len(by_index))):
            got = sorted(int(a.partition_index) for a in t.assignments)
            message = f"Partitions should be a consecutive 0-based integer sequence, got {got}."
            refused[i] = KafkaErrorCode.invalid_replica_assignment, message
            continue
        topics.append(
            messages.CreatableTopic(
                name=str(t.name),
                num_partitions=int(t.num_partitions),
                replication_factor=int(t.replication_factor),
                assignments=[by_index[p] for p in range(len(by_index))] or None,
                configs={c.name: c.value for c in t.configs if c.value is not None},
            )
        )
    native = None
    if topics:
        native = messages.CreateTopicsRequest(
            topics=topics,
            timeout_ms=max(0, timeout_ms(request.timeout)),
            validate_only=bool(request.validate_only),
        )
    return Translated(native=native, refused=refused)


def create_topics_failed(
    native: messages.CreateTopicsRequest, code: int, message: str
) -> messages.CreateTopicsResponse:
    """What to answer when the forward itself failed (the controller could not be reached):
    every forwarded topic gets that error."""
    return messages.CreateTopicsResponse(
        topics=_all_failed([t.name for t in native.topics], code, message)
    )


def _all_failed(
    names: Sequence[str], code: int, message: str
) -> list[messages.CreatableTopicResult]:
    """One result per topic, each with the error of a forward that failed."""
    return [
        messages.CreatableTopicResult(name=name, error_code=code, error_message=message)
        for name in names
    ]


def create_topics_response(
    version: int,
    request: Any,
    translated: Translated,
    native: messages.CreateTopicsResponse | None,
) -> Any:
    """native CreateTopicsResponse -> kio CreateTopicsResponse, one result per requested topic."""
    mod = codec.response_module(codec.CREATE_TOPICS, version)
    by_name = {r.name: r for r in native.topics} if native is not None else {}
    results = []
    for i, t in enumerate(request.topics):
        name = str(t.name)
        if i in translated.refused:
            code, message = translated.refused[i]
        elif name in by_name:
            code, message = kafka_error(by_name[name].error_code), by_name[name].error_message
        else:
            code, message = KafkaErrorCode.unknown_server_error, "no answer for this topic"
        results.append(
            mod.CreatableTopicResult(
                name=TopicName(name), error_code=code, error_message=bounded_message(message)
            )
        )
    return mod.CreateTopicsResponse(throttle_time=timedelta(0), topics=tuple(results))


# ---------------------------------------------------------------------------- DescribeConfigs


def describe_configs_request(request: Any) -> Translated:
    """kio DescribeConfigsRequest (v1-3) -> native DescribeConfigsRequest.

    Resource name "" of a BROKER is the cluster-wide default (Kafka's ConfigEntityName.DEFAULT),
    natively the default entity "". include_synonyms and include_documentation are ignored:
    no synonyms or documentation are sent.
    """
    resources: list[am.DescribeConfigsResource] = []
    refused: Refusals = {}
    for i, r in enumerate(request.resources):
        entity = _entity_type(r.resource_type)
        if isinstance(entity, tuple):
            refused[i] = entity
            continue
        resources.append(
            am.DescribeConfigsResource(resource_type=entity, resource_name=r.resource_name)
        )
    native = am.DescribeConfigsRequest(resources=resources) if resources else None
    return Translated(native=native, refused=refused)


def _source(resource_type: int, native_source: str) -> int:
    if native_source == "dynamic_default":
        return DYNAMIC_DEFAULT_BROKER_CONFIG
    return TOPIC_CONFIG if resource_type == TOPIC else DYNAMIC_BROKER_CONFIG


def describe_configs_response(
    version: int,
    request: Any,
    translated: Translated,
    native: am.DescribeConfigsResponse | None,
    topic_defaults: TopicDefaults | None = None,
) -> Any:
    """native DescribeConfigsResponse -> kio DescribeConfigsResponse.

    The controller describes the dynamic configs (an entity's own, and for a broker the dynamic
    defaults it inherits). A topic also lists, as Kafka's ConfigHelper.describeConfigs does,
    every topic config minikafka honours that it does not set, with the value the broker
    applies (`topic_defaults`, from the answering broker's own configs: STATIC_BROKER_CONFIG
    or DEFAULT_CONFIG), in name order. A broker lists only its dynamic configs: Kafka also lists
    its static ones. `configuration_keys` filters them; null or empty means all (ConfigHelper).
    Entries are not read-only, not sensitive, no synonyms.
    """
    mod = codec.response_module(codec.DESCRIBE_CONFIGS, version)
    entry_cls, result_cls = mod.DescribeConfigsResourceResult, mod.DescribeConfigsResult
    answers = iter(_native_results(native, len(request.resources) - len(translated.refused)))
    results = []
    for i, r in enumerate(request.resources):
        entries: tuple[Any, ...] = ()
        if i in translated.refused:
            code, message = translated.refused[i]
        else:
            code, message, native_entries = next(answers)
            keys = set(r.configuration_keys or ())
            rows = [
                (e.name, e.value, _source(int(r.resource_type), e.source)) for e in native_entries
            ]
            if int(r.resource_type) == TOPIC and code == KafkaErrorCode.none:
                own = {name for name, _v, _s in rows}
                rows += [
                    (n, v, src) for n, (v, src) in (topic_defaults or {}).items() if n not in own
                ]
                rows.sort(key=lambda row: row[0])  # names are unique
            entries = tuple(
                _entry(entry_cls, name, value, source)
                for name, value, source in rows
                if not keys or name in keys
            )
        results.append(
            result_cls(
                error_code=code,
                error_message=message,
                resource_type=i8(int(r.resource_type)),
                resource_name=r.resource_name,
                configs=entries,
            )
        )
    return mod.DescribeConfigsResponse(throttle_time=timedelta(0), results=tuple(results))


def _native_results(
    native: am.DescribeConfigsResponse | None, n: int
) -> list[tuple[KafkaErrorCode, str | None, list[am.DescribeConfigsEntry]]]:
    """One (error, message, entries) per forwarded resource: the controller answers a named
    resource with exactly one result, in order (core/controller/configs.py)."""
    if native is not None and native.error_code:
        return [(kafka_error(native.error_code), None, [])] * n
    got = list(native.results) if native is not None else []
    if len(got) != n:
        return [(KafkaErrorCode.unknown_server_error, f"{len(got)} results for {n}", [])] * n
    return [(kafka_error(r.error_code), r.error_message, r.entries) for r in got]


def _entry(cls: type, name: str, value: str | None, source: int) -> Any:
    fields: dict[str, Any] = {
        "name": name,
        "value": value,
        "read_only": False,
        "config_source": i8(source),
        "is_sensitive": False,
        "synonyms": (),
    }
    if _has(cls, "documentation"):
        fields["documentation"] = None
    return cls(**fields)


# ---------------------------------------------------------------------------- IncrementalAlter


def incremental_alter_configs_request(request: Any) -> Translated:
    """kio IncrementalAlterConfigsRequest (v0-1, KIP-339) -> native request.

    SET and DELETE map to the native "set" and "delete"; a resource with APPEND or SUBTRACT
    (list-valued configs) is refused as a whole with INVALID_REQUEST, as Kafka refuses a
    resource whose op it cannot apply (ConfigAdminManager).
    """
    resources: list[am.AlterConfigsResource] = []
    refused: Refusals = {}
    for i, r in enumerate(request.resources):
        entity = _entity_type(r.resource_type)
        if isinstance(entity, tuple):
            refused[i] = entity
            continue
        bad = [c for c in r.configs if int(c.config_operation) not in OPS]
        if bad:
            message = (
                f"config {bad[0].name!r}: operation {int(bad[0].config_operation)} is not "
                "served: only SET (0) and DELETE (1), not APPEND (2) or SUBTRACT (3)"
            )
            refused[i] = KafkaErrorCode.invalid_request, message
            continue
        configs = [
            am.AlterableConfig(name=c.name, op=OPS[int(c.config_operation)], value=c.value)
            for c in r.configs
        ]
        resources.append(
            am.AlterConfigsResource(
                resource_type=entity, resource_name=r.resource_name, configs=configs
            )
        )
    native = None
    if resources:
        native = am.IncrementalAlterConfigsRequest(
            resources=resources, validate_only=bool(request.validate_only)
        )
    return Translated(native=native, refused=refused)


def incremental_alter_configs_response(
    version: int,
    request: Any,
    translated: Translated,
    native: am.IncrementalAlterConfigsResponse | None,
) -> Any:
    """native IncrementalAlterConfigsResponse -> kio, one answer per requested resource."""
    mod = codec.response_module(codec.INCREMENTAL_ALTER_CONFIGS, version)
    n = len(request.resources) - len(translated.refused)
    got = list(native.responses) if native is not None else []
    if native is not None and native.error_code:
        answers = [(kafka_error(native.error_code), None)] * n
    elif len(got) != n:
        answers = [(KafkaErrorCode.unknown_server_error, f"{len(got)} answers for {n}")] * n
    else:
        answers = [(kafka_error(r.error_code), r.error_message) for r in got]
    it = iter(answers)
    responses = []
    for i, r in enumerate(request.resources):
        code, message = translated.refused[i] if i in translated.refused else next(it)
        responses.append(
            mod.AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=i8(int(r.resource_type)),
                resource_name=r.resource_name,
            )
        )
    return mod.IncrementalAlterConfigsResponse(
        throttle_time=timedelta(0), responses=tuple(responses)
    )


# ---------------------------------------------------------------------------- CreatePartitions


def create_partitions_request(request: Any) -> messages.CreatePartitionsRequest:
    """kio CreatePartitionsRequest (v0-1) -> native: the new count and, if given, the new
    partitions' replicas in order (Kafka's CreatePartitionsAssignment list)."""
    return messages.CreatePartitionsRequest(
        topics=[
            messages.CreatePartitionsTopic(
                name=str(t.name),
                count=int(t.count),
                assignments=None
                if t.assignments is None
                else [[int(b) for b in a.broker_ids] for a in t.assignments],
            )
            for t in request.topics
        ],
        timeout_ms=timeout_ms(request.timeout),
        validate_only=bool(request.validate_only),
    )


def create_partitions_failed(
    native: messages.CreatePartitionsRequest, code: int, message: str
) -> messages.CreatePartitionsResponse:
    """The forward failed (no controller): every topic gets that error."""
    return messages.CreatePartitionsResponse(
        results=_all_failed([t.name for t in native.topics], code, message)
    )


def create_partitions_response(version: int, native: messages.CreatePartitionsResponse) -> Any:
    mod = codec.response_module(codec.CREATE_PARTITIONS, version)
    return mod.CreatePartitionsResponse(
        throttle_time=timedelta(milliseconds=native.throttle_time_ms),
        results=tuple(
            mod.CreatePartitionsTopicResult(
                name=TopicName(r.name),
                error_code=kafka_error(r.error_code),
                error_message=r.error_message,
            )
            for r in native.results
        ),
    )


# ---------------------------------------------------------------------------- DeleteTopics


def delete_topics_request(request: Any) -> messages.DeleteTopicsRequest:
    """kio DeleteTopicsRequest (v1-3: topic names only; topic ids come with v6) -> native."""
    return messages.DeleteTopicsRequest(
        topics=[str(name) for name in request.topic_names], timeout_ms=timeout_ms(request.timeout)
    )


def delete_topics_failed(
    native: messages.DeleteTopicsRequest, code: int, message: str
) -> messages.DeleteTopicsResponse:
    return messages.DeleteTopicsResponse(results=_all_failed(native.topics, code, message))


def delete_topics_response(version: int, native: messages.DeleteTopicsResponse) -> Any:
    """Error messages travel from v5 on: before, the code alone."""
    mod = codec.response_module(codec.DELETE_TOPICS, version)
    return mod.DeleteTopicsResponse(
        throttle_time=timedelta(milliseconds=native.throttle_time_ms),
        responses=tuple(
            mod.DeletableTopicResult(name=TopicName(r.name), error_code=kafka_error(r.error_code))
            for r in native.results
        ),
    )
