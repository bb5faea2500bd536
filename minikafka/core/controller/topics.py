"""CreateTopics and CreatePartitions validation and placement: from a `CreatableTopic` (or a
topic's new partition count) to replicas per partition.

Mirrors KRaft's `ReplicationControlManager.createTopic` checks and messages (manual
assignments and defaults) and `org.apache.kafka.common.internals.Topic.validate` (names). The
placement itself is Kafka's rack-unaware one (core/assignment.py) over the live, unfenced
brokers sorted by id. Pure functions: the controller applies a `TopicPlan`, or answers with
the `CreatableTopicResult` error, and one bad topic never stops the others.

Configs given at creation: KRaft's createTopics writes a topic's configs through the same
ConfigurationControlManager path as IncrementalAlterConfigs. So here they are checked by the
validator `configs --alter` uses (core/dynamic_config.py: the throttled-replica lists,
`min.insync.replicas`, `max.message.bytes`, `unclean.leader.election.enable`), and become the
new topic's dynamic configs (`dynamic_configs`), which the brokers and the controller apply.
An unknown name or a bad value refuses the topic (INVALID_CONFIG, one line naming the
accepted form), as Kafka's LogConfig.validate does: a config is honoured or refused, never
kept and ignored.

Bounded work per request: a topic asking for more than `max_partitions_per_topic` partitions is
refused (INVALID_PARTITIONS) before anything is placed, and a placement that would give any
broker more than `max_partitions_per_broker` replicas, counting those it hosts already, is
refused with POLICY_VIOLATION (Kafka's code for a refused limit, as CreateTopicPolicy uses it;
KIP-578 proposed the same check under `max.broker.partitions`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from minikafka.core.assignment import AssignmentError, assign_replicas
from minikafka.core.controller.model import VALUE, ControllerConfig, PartitionRecord
from minikafka.core.dynamic_config import TOPICS, validate_changes
from minikafka.errors import ConfigError, ErrorCode, bounded_message
from minikafka.wire.messages import CreatableTopic, CreatableTopicResult

MAX_NAME_LENGTH = 249  # Topic.MAX_NAME_LENGTH
# Topic.isInternal: the group coordinator's and the transaction coordinator's topics.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(**VALUE)
class TopicPlan:
    """A validated topic: replicas per partition (first = preferred leader), live ISR."""

    name: str
    replicas: list[list[int]]
    isrs: list[list[int]]
    configs: dict[str, str]  # not a dynamic config: none (a dynamic one is refused)
    # The throttled-replica lists given at creation, normalised: the topic's dynamic configs.
    dynamic_configs: dict[str, str] = field(default_factory=dict)


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate message for an illegal name, or None if the name is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"Topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def plan_topic(
    topic: CreatableTopic,
    *,
    existing: Container[str],
    registered: Container[int],
    live: Sequence[int],
    config: ControllerConfig,
    rng: random.Random,
    hosted: Mapping[int, int] | None = None,
) -> TopicPlan | CreatableTopicResult:
    """Validate one topic and place its replicas; an error result says what is wrong.

    `hosted`: replicas per broker already (`replicas_per_broker`), for the per-broker cap."""

    def error(code: ErrorCode, message: str) -> CreatableTopicResult:
        return CreatableTopicResult(
            name=topic.name, error_code=code, error_message=bounded_message(message)
        )

    name_error = topic_name_error(topic.name)
    if name_error is not None:
        return error(ErrorCode.INVALID_TOPIC_EXCEPTION, name_error)
    if topic.name in existing:
        return error(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    bad_config = _config_error(topic.configs)
    if bad_config is not None:
        return error(ErrorCode.INVALID_CONFIG, bad_config)
    try:
        _name, dynamic, _deletes = validate_changes(TOPICS, topic.name, topic.configs, ())
    except ConfigError as exc:
        return error(ErrorCode.INVALID_CONFIG, str(exc))
    if topic.assignments:
        result = _manual(topic, registered=registered, live=set(live), config=config)
    else:
        result = _automatic(topic, live=live, config=config, rng=rng)
    if isinstance(result, tuple):
        return error(*result)
    over = _broker_cap_error(result.replicas, hosted or {}, config.max_partitions_per_broker)
    if over is not None:
        return error(ErrorCode.POLICY_VIOLATION, over)
    static = {k: v for k, v in result.configs.items() if k not in dynamic}
    return replace(result, configs=static, dynamic_configs=dynamic)


def replicas_per_broker(partitions: Iterable[PartitionRecord]) -> Counter[int]:
    """How many partition replicas each broker hosts (moving replicas count on both sides)."""
    return Counter(b for p in partitions for b in p.replicas)


def _broker_cap_error(
    replicas: Sequence[Sequence[int]], hosted: Mapping[int, int], cap: int
) -> str | None:
    added = Counter(b for r in replicas for b in r)
    for broker, n in sorted(added.items()):
        if hosted.get(broker, 0) + n > cap:
            return (
                f"Placing {len(replicas)} partition(s) would give broker {broker} "
                f"{hosted.get(broker, 0) + n} partition replicas; the controller allows at "
                f"most {cap} per broker (max.broker.partitions)."
            )
    return None


def _config_error(configs: object) -> str | None:
    if not isinstance(configs, dict):
        return "Topic configs must be a map of config name to string value."
    for key, value in configs.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            return f"Topic config {key!r}={value!r} is invalid: names and values are strings."
    return None


def _automatic(
    topic: CreatableTopic, *, live: Sequence[int], config: ControllerConfig, rng: random.Random
) -> TopicPlan | tuple[ErrorCode, str]:
    partitions = topic.num_partitions
    factor = topic.replication_factor
    if partitions == -1:
        partitions = config.default_num_partitions
    if factor == -1:
        factor = config.default_replication_factor
    if partitions <= 0:
        return ErrorCode.INVALID_PARTITIONS, (
            "Number of partitions was set to an invalid non-positive value."
        )
    if partitions > config.max_partitions_per_topic:
        return ErrorCode.INVALID_PARTITIONS, _too_many(partitions, config)
    if factor <= 0:
        return ErrorCode.INVALID_REPLICATION_FACTOR, (
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if not live:
        return ErrorCode.INVALID_REPLICATION_FACTOR, (
            f"Unable to replicate the partition {factor} time(s): All brokers are currently fenced."
        )
    if factor > len(live):
        return ErrorCode.INVALID_REPLICATION_FACTOR, (
            f"Unable to replicate the partition {factor} time(s): The target replication factor "
            f"of {factor} cannot be reached because only {len(live)} broker(s) are registered."
        )
    try:
        replicas = assign_replicas(sorted(live), partitions, factor, rng)
    except AssignmentError as exc:  # unreachable after the checks above; kept as a guard
        return exc.code, str(exc)
    return TopicPlan(
        name=topic.name,
        replicas=replicas,
        isrs=[list(r) for r in replicas],
        configs=dict(topic.configs),
    )


def _manual(
    topic: CreatableTopic, *, registered: Container[int], live: Set[int], config: ControllerConfig
) -> TopicPlan | tuple[ErrorCode, str]:
    assert topic.assignments is not None
    if len(topic.assignments) > config.max_partitions_per_topic:
        return ErrorCode.INVALID_PARTITIONS, _too_many(len(topic.assignments), config)
    if topic.replication_factor != -1:
        return ErrorCode.INVALID_REQUEST, (
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if topic.num_partitions != -1:
        return ErrorCode.INVALID_REQUEST, (
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    isrs = _manual_isrs(topic.assignments, topic.assignments[0], registered, live, first_index=0)
    if isinstance(isrs, tuple):
        return isrs
    return TopicPlan(
        name=topic.name,
        replicas=[list(r) for r in topic.assignments],
        isrs=isrs,
        configs=dict(topic.configs),
    )


def _manual_isrs(
    assignments: Sequence[Sequence[int]],
    first: Sequence[int],
    registered: Container[int],
    live: Set[int],
    *,
    first_index: int,
) -> list[list[int]] | tuple[ErrorCode, str]:
    """Each manual replica list checked (validateManualPartitionAssignment) and its ISR: the
    live part of it, whose first member leads (KRaft), for partitions `first_index`, ..."""
    isrs: list[list[int]] = []
    for index, replicas in enumerate(assignments, start=first_index):
        problem = _manual_partition_error(replicas, first, registered)
        if problem is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        isr = [r for r in replicas if r in live]
        if not isr:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown."
            )
        isrs.append(isr)
    return isrs


def _too_many(partitions: int, config: ControllerConfig) -> str:
    return (
        f"Number of partitions {partitions} is above the controller's limit of "
        f"{config.max_partitions_per_topic} per topic (max_partitions_per_topic)."
    )


def replica_list_error(replicas: Sequence[int], registered: Container[int]) -> str | None:
    """The checks every manual replica list gets (KRaft's validateManualPartitionAssignment):
    not empty, no broker twice, every broker registered. Shared by topic creation and
    reassignment targets."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for broker in replicas:
        if broker in seen:
            return f"The manual partition assignment includes the broker {broker} more than once."
        seen.add(broker)
        if broker not in registered:
            return (
                f"The manual partition assignment includes broker {broker}, "
                "but no such broker is registered."
            )
    return None


def _manual_partition_error(
    replicas: Sequence[int], first: Sequence[int], registered: Container[int]
) -> str | None:
    """ReplicationControlManager.validateManualPartitionAssignment's messages."""
    error = replica_list_error(replicas, registered)
    if error is not None:
        return error
    if len(replicas) != len(first):
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{len(first)} replica(s)."
        )
    return None


@dataclass(**VALUE)
class PartitionsPlan:
    """CreatePartitions, validated: the new partitions' replicas and live ISRs, in index order
    from the topic's current count."""

    name: str
    first_index: int
    replicas: list[list[int]]
    isrs: list[list[int]]


def plan_partitions(
    name: str,
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    *,
    current: Sequence[Sequence[int]] | None,
    registered: Container[int],
    live: Sequence[int],
    config: ControllerConfig,
    rng: random.Random,
    hosted: Mapping[int, int] | None = None,
) -> PartitionsPlan | tuple[ErrorCode, str]:
    """KRaft's ReplicationControlManager.createPartitions checks and messages. `current`: the
    topic's partitions' replicas in index order (None: no such topic). The replication factor
    is the first partition's; new partitions are placed as a topic's are (core/assignment.py)
    unless `assignments` names them."""
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
    if count < len(current):
        return ErrorCode.INVALID_PARTITIONS, (
            f"The topic {name} currently has {len(current)} partition(s); {count} would not be "
            "an increase."
        )
    if count == len(current):
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {len(current)} partition(s)."
    if count > config.max_partitions_per_topic:
        return ErrorCode.INVALID_PARTITIONS, _too_many(count, config)
    additional = count - len(current)
    factor = len(current[0])
    if assignments is not None:
        if len(assignments) != additional:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"Attempted to add {additional} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified."
            )
        manual = _manual_isrs(
            assignments, current[0], registered, set(live), first_index=len(current)
        )
        if isinstance(manual, tuple):
            return manual
        isrs = manual
        replicas_out = [list(r) for r in assignments]
    else:
        if factor > len(live):
            return ErrorCode.INVALID_REPLICATION_FACTOR, (
                f"Unable to replicate the partition {factor} time(s): The target replication "
                f"factor of {factor} cannot be reached because only {len(live)} broker(s) are "
                "registered."
            )
        # As Kafka's AdminZkClient.createPartitions: continue the topic's layout, from the
        # broker that leads partition 0 (the first live id at or above it) and partition id
        # `len(current)`, so the new replicas spread as if the topic had been made this size.
        brokers = sorted(live)
        start = next((i for i, b in enumerate(brokers) if b >= current[0][0]), 0)
        try:
            replicas_out = assign_replicas(
                brokers,
                additional,
                factor,
                rng,
                fixed_start_index=start,
                start_partition_id=len(current),
            )
        except AssignmentError as exc:
            return exc.code, str(exc)
        isrs = [list(r) for r in replicas_out]
    over = _broker_cap_error(replicas_out, hosted or {}, config.max_partitions_per_broker)
    if over is not None:
        return ErrorCode.POLICY_VIOLATION, over
    return PartitionsPlan(name=name, first_index=len(current), replicas=replicas_out, isrs=isrs)
