"""IncrementalAlterConfigs and DescribeConfigs on the controller's config snapshot (pure).

Mirrors KRaft's ConfigurationControlManager.incrementalAlterConfigs: resources are handled in
request order, each against the state the previous ones produced; one bad resource does not stop
the others, but within a resource nothing is applied if any part of it is invalid (the rules are
core/dynamic_config.py's). Every resource changed by one request gets the same new snapshot
version. The controller (core/controller/state.py) keeps the result and pushes it to the brokers.

Error codes, as Kafka answers them: a malformed request (duplicate resource, duplicate config
name, an op other than set/delete, set without a value) is INVALID_REQUEST; an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; anything `dynamic_config` refuses is INVALID_CONFIG with its message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from minikafka.core.controller.model import Event
from minikafka.core.dynamic_config import (
    BROKERS,
    TOPICS,
    ConfigSnapshot,
    check_entity_type,
    describe_entries,
    normalize_entity_name,
    validate_alter,
)
from minikafka.errors import ConfigError, ErrorCode, bounded_message
from minikafka.wire.messages import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    DescribeConfigsEntry,
    DescribeConfigsResource,
    DescribeConfigsResult,
)

OP_SET = "set"
OP_DELETE = "delete"


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def alter_configs(
    current: ConfigSnapshot,
    resources: Sequence[AlterConfigsResource],
    *,
    topic_exists: Callable[[str], bool],
) -> tuple[list[AlterConfigsResourceResponse], ConfigSnapshot, list[Event]]:
    """-> (one response per resource, in order; the resulting snapshot; config_changed events).

    The snapshot is `current` itself when nothing changed.
    """
    keys = [_key(r.resource_type, r.resource_name) for r in resources]
    counts = Counter(keys)
    version = current.version + 1
    snapshot = current  # as altered so far, for KIP-542's checks across brokers
    altered: dict[tuple[str, str], dict[str, str]] = {}
    responses: list[AlterConfigsResourceResponse] = []
    events: list[Event] = []
    for resource, key in zip(resources, keys, strict=True):
        try:
            if counts[key] > 1:
                raise _Refused(
                    ErrorCode.INVALID_REQUEST,
                    f"duplicate resource {resource.resource_type} {resource.resource_name!r}: "
                    "expected each entity at most once per request",
                )
            entity_type, name, result = _alter_one(snapshot, resource, topic_exists)
        except _Refused as refused:
            responses.append(_response(resource, refused.code, refused.message))
            continue
        responses.append(_response(resource, ErrorCode.NONE))
        before = snapshot.configs(entity_type, name)
        if result == before:
            continue
        altered[(entity_type, name)] = result
        if entity_type == BROKERS:  # the only checks that read other entities' configs
            snapshot = snapshot.with_entity(entity_type, name, result, version=version)
        fields = {
            "entity_type": entity_type,
            "entity_name": name,
            "set": {k: v for k, v in sorted(result.items()) if before.get(k) != v},
            "deleted": sorted(k for k in before if k not in result),
            "version": version,
        }
        events.append(Event(name="config_changed", fields=fields))
    # One new snapshot for the request (one per resource copied every entity each).
    after = current.with_entities(altered, version=version) if altered else current
    return responses, after, events


def created_topic_event(topic: str, configs: Mapping[str, str], *, version: int) -> Event:
    """The `config_changed` event an alter setting a new topic's throttle lists would emit
    (given at creation, validated by core/controller/topics.py, committed at `version`)."""
    fields = {
        "entity_type": TOPICS,
        "entity_name": topic,
        "set": dict(sorted(configs.items())),
        "deleted": [],
        "version": version,
    }
    return Event(name="config_changed", fields=fields)


def _alter_one(
    snapshot: ConfigSnapshot,
    resource: AlterConfigsResource,
    topic_exists: Callable[[str], bool],
) -> tuple[str, str, dict[str, str]]:
    set_configs: dict[str, str] = {}
    delete_configs: list[str] = []
    seen: set[str] = set()
    for op in resource.configs:
        if op.name in seen:
            raise _Refused(
                ErrorCode.INVALID_REQUEST,
                f"config {op.name!r} appears more than once: expected one operation per config",
            )
        seen.add(op.name)
        if op.op == OP_SET and op.value is not None:
            set_configs[op.name] = op.value
        elif op.op == OP_DELETE:
            delete_configs.append(op.name)
        else:
            raise _Refused(
                ErrorCode.INVALID_REQUEST,
                f"config {op.name!r}: operation {op.op!r} with value {op.value!r}: "
                "expected set with a value, or delete",
            )
    try:
        entity_type = check_entity_type(resource.resource_type)
        name = normalize_entity_name(entity_type, resource.resource_name)
        if entity_type == TOPICS and not topic_exists(name):
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _unknown_topic(name))
        result = validate_alter(entity_type, name, set_configs, delete_configs, snapshot)
    except ConfigError as exc:
        raise _Refused(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return entity_type, name, result


def describe_configs(
    snapshot: ConfigSnapshot,
    resources: Sequence[DescribeConfigsResource],
    *,
    topic_exists: Callable[[str], bool],
) -> list[DescribeConfigsResult]:
    """One result per named resource; a resource without a name expands to every entity of its
    type that has configs (their own configs only). A named broker or client also shows the
    defaults it inherits (source dynamic_default): what it actually applies."""
    results: list[DescribeConfigsResult] = []
    for resource in resources:
        entity_type = resource.resource_type
        try:
            check_entity_type(entity_type)
            if resource.resource_name is None:
                for name in snapshot.names(entity_type):
                    results.append(_described(snapshot, entity_type, name, effective=False))
                continue
            name = normalize_entity_name(entity_type, resource.resource_name)
        except ConfigError as exc:
            results.append(
                DescribeConfigsResult(
                    resource_type=entity_type,
                    resource_name=resource.resource_name or "",
                    error_code=ErrorCode.INVALID_CONFIG,
                    error_message=bounded_message(str(exc)),
                )
            )
            continue
        if entity_type == TOPICS and not topic_exists(name):
            results.append(
                DescribeConfigsResult(
                    resource_type=entity_type,
                    resource_name=name,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=_unknown_topic(name),
                )
            )
            continue
        results.append(_described(snapshot, entity_type, name, effective=True))
    return results


def _described(
    snapshot: ConfigSnapshot, entity_type: str, name: str, *, effective: bool
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        resource_type=entity_type,
        resource_name=name,
        error_code=ErrorCode.NONE,
        entries=[
            DescribeConfigsEntry(name=k, value=v, source=src)
            for k, v, src in describe_entries(snapshot, entity_type, name, effective=effective)
        ],
    )


def _key(entity_type: str, entity_name: str) -> tuple[str, str]:
    """The entity a resource names, normalised when it can be ("01" and "1" are one broker)."""
    try:
        return entity_type, normalize_entity_name(entity_type, entity_name)
    except ConfigError:
        return entity_type, entity_name


def _response(
    resource: AlterConfigsResource, code: ErrorCode, message: str | None = None
) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        error_code=code,
        error_message=bounded_message(message),
    )


def _unknown_topic(name: str) -> str:
    return f"unknown topic {name!r}: expected an existing topic"
