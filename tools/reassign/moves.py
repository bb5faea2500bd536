"""The reassignment tool's arithmetic, as Kafka's `ReassignPartitionsCommand` does it (pure).

Owns: the two JSON file formats (topics-to-move for `--generate`, reassignment for `--execute`)
and their validation; `--generate`'s proposal (Kafka's rack-unaware placer, per topic); KIP-73's
MoveRatio and the bytes a move copies; the move map (sources and destinations per partition,
`calculateCurrentMoveMap` / `calculateProposedMoveMap`); and the throttle configs `--execute
--throttle` sets, either KIP-73's (replica lists + replication rates) or KIP-542's (reassignment
rates only). Nothing here talks to a cluster: the current assignment, the live brokers, the
ongoing reassignments and the random generator come in as arguments (REFERENCE.md section 4).

Rules:
- a partition's sources are its current replicas, or, while a reassignment of it is in progress
  (`--additional`), the ORIGINAL replicas of that move (its replicas minus the adding ones);
  destinations are the proposed replicas not among the sources;
- every ongoing reassignment stays in the move map, so extending a move (or resubmitting it to
  change the throttle) keeps the earlier moves throttled, as in Kafka;
- a topic's throttle lists are rebuilt from the move map and overwrite its previous values;
- deliberate departure from Kafka: a partition whose move has no destination (nothing to copy,
  e.g. only the replica order changes) puts no `partition:source` in the leader list and no
  broker in the throttled set. Kafka lists it anyway, which charges that partition's in-sync
  traffic to the leader quota (the leader records every listed partition's bytes) for nothing.

Every user-input error is a `ConfigError` with a one-line message naming the accepted form.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from minikafka.core.assignment import assign_replicas
from minikafka.core.dynamic_config import (
    BROKERS,
    FOLLOWER_RATE,
    FOLLOWER_REASSIGNMENT_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REASSIGNMENT_RATE,
    LEADER_REPLICAS,
    TOPICS,
    ThrottledReplicas,
)
from minikafka.core.types import TopicPartition
from minikafka.errors import ConfigError

VALUE = dict(frozen=True, slots=True, kw_only=True)

TOPICS_FORM = '{"version":1,"topics":[{"topic":"name"},...]}'
REASSIGNMENT_FORM = (
    '{"version":1,"partitions":[{"topic":"name","partition":0,"replicas":[1,2]},...]}'
)
BROKER_LIST_FORM = "a comma-separated list of distinct broker ids, e.g. 1,2,3"
THROTTLE_FORM = "a rate in bytes per second, an integer >= 1"

MODE_REPLICATION = "replication"  # KIP-73: replica lists + *.replication.throttled.rate
MODE_REASSIGNMENT = "reassignment"  # KIP-542: *.reassignment.throttled.rate, no lists
MODES = (MODE_REPLICATION, MODE_REASSIGNMENT)

Assignment = Mapping[TopicPartition, Sequence[int]]


# ---------------------------------------------------------------------------- values


@dataclass(**VALUE)
class OngoingReassignment:
    """A reassignment in progress (Kafka's `PartitionReassignment`, ListPartitionReassignments).

    `replicas` is the full replica set during the move: the original replicas plus the adding ones.
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(**VALUE)
class PartitionMove:
    """Kafka's `PartitionMove`: who may send (sources) and who copies (destinations), sorted."""

    sources: tuple[int, ...]
    destinations: tuple[int, ...]

    @property
    def moving(self) -> bool:
        """True when some replica has to be copied."""
        return bool(self.destinations)


@dataclass(**VALUE)
class ConfigChange:
    """One dynamic config to set: what the CLI sends (IncrementalAlterConfigs SET) and prints."""

    entity_type: str  # "topics" or "brokers"
    entity_name: str
    name: str
    value: str

    def __str__(self) -> str:
        return f"{self.entity_type} {self.entity_name}: {self.name}={self.value}"


# ---------------------------------------------------------------------------- parsing


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _load(text: str, what: str, form: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{what} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}): "
            f"expected {form}"
        ) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{what} is a JSON {type(doc).__name__}, not an object: expected {form}")
    # Kafka defaults a missing version to 1 (EARLIEST_VERSION) and knows no other.
    version = doc.get("version", 1)
    if not _is_int(version) or version != 1:
        raise ConfigError(f"{what} has version {version!r}: expected version 1, as in {form}")
    return doc


def _list_field(doc: Mapping[str, Any], key: str, what: str, form: str) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list):
        got = "no" if value is None else f"a {type(value).__name__} as"
        raise ConfigError(f'{what} has {got} "{key}" list: expected {form}')
    if not value:
        raise ConfigError(f'{what} has an empty "{key}" list: expected at least one entry, {form}')
    return value


def parse_topics_json(text: str) -> list[str]:
    """The topics of a topics-to-move file (`--topics-to-move-json-file`), in file order."""
    what = "topics-to-move file"
    doc = _load(text, what, TOPICS_FORM)
    topics: list[str] = []
    for i, entry in enumerate(_list_field(doc, "topics", what, TOPICS_FORM)):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise ConfigError(
                f'topics[{i}] has no "topic" name: expected {{"topic":"name"}}, as in {TOPICS_FORM}'
            )
        topics.append(topic)
    dup = _first_duplicate(topics)
    if dup is not None:
        raise ConfigError(f"topic {dup!r} appears twice in the {what}: expected each topic once")
    return topics


def parse_reassignment_json(text: str) -> dict[TopicPartition, list[int]]:
    """The partitions and target replicas of a reassignment file, in file order.

    Checks the shape only (Kafka's `parseExecuteAssignmentArgs`); `validate_reassignment` checks
    it against the cluster. An optional "log_dirs" list per partition is accepted and ignored
    (this project has one log directory per node).
    """
    what = "reassignment file"
    doc = _load(text, what, REASSIGNMENT_FORM)
    entry_form = '{"topic":"name","partition":0,"replicas":[1,2]}'
    result: dict[TopicPartition, list[int]] = {}
    for i, entry in enumerate(_list_field(doc, "partitions", what, REASSIGNMENT_FORM)):
        if not isinstance(entry, dict):
            raise ConfigError(f"partitions[{i}] is not an object: expected {entry_form}")
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f'partitions[{i}] has no "topic" name: expected {entry_form}')
        if not _is_int(partition) or partition < 0:
            raise ConfigError(
                f'partitions[{i}] "partition" is {partition!r}: expected an integer >= 0, '
                f"as in {entry_form}"
            )
        tp = TopicPartition(topic, partition)
        if not isinstance(replicas, list) or not all(_is_int(r) and r >= 0 for r in replicas):
            raise ConfigError(
                f'partition {tp} "replicas" is {replicas!r}: expected a list of broker ids '
                f"(integers >= 0), as in {entry_form}"
            )
        if not replicas:
            raise ConfigError(
                f"partition {tp} has an empty replica list: expected at least one broker id"
            )
        dup = _first_duplicate(replicas)
        if dup is not None:
            raise ConfigError(
                f"partition {tp} lists broker {dup} twice in {replicas}: expected distinct ids"
            )
        if tp in result:
            raise ConfigError(
                f"partition {tp} appears twice in the {what}: expected each partition once"
            )
        result[tp] = list(replicas)
    return result


def parse_broker_list(text: str) -> list[int]:
    """`--broker-list 1,2,3` -> [1, 2, 3] (Kafka refuses duplicates too)."""
    items = [s.strip() for s in text.split(",")]
    if not all(s.isascii() and s.isdigit() for s in items):
        raise ConfigError(f"broker list {text!r}: expected {BROKER_LIST_FORM}")
    ids = [int(s) for s in items]
    dup = _first_duplicate(ids)
    if dup is not None:
        raise ConfigError(
            f"broker list {text!r} names broker {dup} twice: expected {BROKER_LIST_FORM}"
        )
    return ids


def _first_duplicate(items: Iterable[Any]) -> Any | None:
    seen: set[Any] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def _topic_partitions(current: Assignment) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(current):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def _check_topics(topics: Iterable[str], by_topic: Mapping[str, list[int]], where: str) -> None:
    for topic in topics:
        if topic not in by_topic:
            known = ", ".join(sorted(by_topic)) or "none"
            raise ConfigError(
                f"unknown topic {topic!r} in the {where}: expected an existing topic ({known})"
            )


def validate_reassignment(
    proposed: Assignment, *, current: Assignment, live_brokers: Collection[int]
) -> None:
    """Check a parsed reassignment against the cluster (Kafka's `verifyBrokerIds` and lookups).

    Every topic and partition must exist in `current`, every replica must be a live broker, and
    no replica list may be longer than the number of live brokers.
    """
    by_topic = _topic_partitions(current)
    live = sorted(set(live_brokers))
    for tp, replicas in proposed.items():
        _check_topics([tp.topic], by_topic, "reassignment file")
        if tp not in current:
            parts = by_topic[tp.topic]
            raise ConfigError(
                f"unknown partition {tp}: expected a partition of topic {tp.topic!r} "
                f"({parts[0]}..{parts[-1]})"
            )
        if len(replicas) > len(live):
            raise ConfigError(
                f"partition {tp} has replication factor {len(replicas)} but only {len(live)} "
                f"brokers are live: expected at most {len(live)} replicas"
            )
        for broker in replicas:
            if broker not in live:
                raise ConfigError(
                    f"partition {tp} names broker {broker}, which is not live: expected ids "
                    f"among {', '.join(map(str, live)) or 'none'}"
                )


# ---------------------------------------------------------------------------- --generate


def propose_assignment(
    current: Assignment,
    topics: Sequence[str],
    broker_list: Sequence[int],
    rng: random.Random,
    *,
    live_brokers: Collection[int] | None = None,
) -> dict[TopicPartition, list[int]]:
    """Kafka's `calculateAssignment`: each topic re-placed over `broker_list` from scratch.

    One `assign_replicas` call per topic (topics in sorted order, so one seed gives one answer),
    same partition count. A topic whose partitions have different replication factors (after an
    earlier manual move) is placed at the largest and each list cut to its own length, so every
    partition keeps its factor; with one factor this is exactly Kafka's placement.
    """
    by_topic = _topic_partitions(current)
    _check_topics(topics, by_topic, "topics-to-move file")
    if not broker_list:
        raise ConfigError(f"empty broker list: expected {BROKER_LIST_FORM}")
    dup = _first_duplicate(broker_list)
    if dup is not None:
        raise ConfigError(f"broker list names broker {dup} twice: expected {BROKER_LIST_FORM}")
    if live_brokers is not None:
        dead = sorted(set(broker_list) - set(live_brokers))
        if dead:
            raise ConfigError(
                f"broker list names broker {dead[0]}, which is not live: expected ids among "
                f"{', '.join(map(str, sorted(live_brokers))) or 'none'}"
            )
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in sorted(set(topics)):
        parts = by_topic[topic]
        factors = [len(current[TopicPartition(topic, p)]) for p in parts]
        rf = max(factors)
        if rf > len(broker_list):
            raise ConfigError(
                f"topic {topic!r} has replication factor {rf} but the broker list has "
                f"{len(broker_list)} brokers: expected at least {rf} brokers in the list"
            )
        placed = assign_replicas(broker_list, len(parts), rf, rng)
        for p, replicas, factor in zip(parts, placed, factors, strict=True):
            proposed[TopicPartition(topic, p)] = replicas[:factor]
    return proposed


def format_reassignment_json(assignment: Assignment) -> str:
    """Kafka's `formatAsReassignmentJson` (compact, sorted by topic and partition), without
    "log_dirs" (one log directory per node here)."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(assignment[tp])}
        for tp in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def generate(
    current: Assignment,
    topics: Sequence[str],
    broker_list: Sequence[int],
    rng: random.Random,
    *,
    live_brokers: Collection[int] | None = None,
) -> tuple[str, str]:
    """`--generate`: (current assignment JSON of the topics, proposed assignment JSON)."""
    proposed = propose_assignment(current, topics, broker_list, rng, live_brokers=live_brokers)
    wanted = set(topics)
    subset = {tp: r for tp, r in current.items() if tp.topic in wanted}
    return format_reassignment_json(subset), format_reassignment_json(proposed)


def _moved(current: Assignment, proposed: Assignment) -> list[TopicPartition]:
    for tp in proposed:
        if tp not in current:
            raise ConfigError(f"unknown partition {tp}: expected a partition that exists")
    return [tp for tp in sorted(proposed) if set(proposed[tp]) != set(current[tp])]


def move_ratio(current: Assignment, proposed: Assignment) -> float:
    """KIP-73's MoveRatio: partitions whose replica SET changes / all partitions of `current`.

    A new order alone (a new preferred leader) copies nothing and is not a move. Pass the whole
    cluster's assignment as `current` to get the ratio KIP-73's MoveTime formula multiplies with
    the total log size; 0.0 when `current` is empty.
    """
    moved = _moved(current, proposed)
    return len(moved) / len(current) if current else 0.0


def _size(partition_sizes: Mapping[TopicPartition, int], tp: TopicPartition) -> int:
    if tp not in partition_sizes:
        raise ConfigError(f"no size for partition {tp}: expected a size in bytes for every move")
    return int(partition_sizes[tp])


def bytes_to_move(
    current: Assignment, proposed: Assignment, partition_sizes: Mapping[TopicPartition, int]
) -> int:
    """Bytes the move copies: per moved partition, its size x the number of new replicas."""
    return sum(
        _size(partition_sizes, tp) * len(set(proposed[tp]) - set(current[tp]))
        for tp in _moved(current, proposed)
    )


# ---------------------------------------------------------------------------- move map


def move_map(
    current: Assignment,
    proposed: Assignment,
    ongoing: Mapping[TopicPartition, OngoingReassignment] | None = None,
) -> dict[TopicPartition, PartitionMove]:
    """Kafka's `calculateProposedMoveMap`, sorted by partition.

    First every ongoing reassignment (`calculateCurrentMoveMap`): sources = its replicas minus
    the adding ones (the original replicas), destinations = the adding ones. Then each proposed
    partition: sources = the ongoing move's sources if one exists, else its current replicas;
    destinations = proposed replicas not among the sources. A proposed partition that is neither
    ongoing nor in `current` is an error (Kafka: "reassign a topic partition with 0 replicas").
    """
    moves: dict[TopicPartition, PartitionMove] = {}
    for tp, r in (ongoing or {}).items():
        adding = set(r.adding)
        sources = set(r.replicas) - adding
        moves[tp] = PartitionMove(
            sources=tuple(sorted(sources)), destinations=tuple(sorted(adding))
        )
    for tp, replicas in proposed.items():
        if tp in moves:
            sources = set(moves[tp].sources)
        elif tp in current:
            sources = set(current[tp])
        else:
            raise ConfigError(f"unknown partition {tp}: expected a partition that exists")
        destinations = set(replicas) - sources
        moves[tp] = PartitionMove(
            sources=tuple(sorted(sources)), destinations=tuple(sorted(destinations))
        )
    return dict(sorted(moves.items()))


def bytes_to_move_per_broker(
    moves: Mapping[TopicPartition, PartitionMove], partition_sizes: Mapping[TopicPartition, int]
) -> dict[int, int]:
    """Bytes each destination broker copies (its follower throttle carries them), sorted by id.

    An ongoing move counts its whole partition size: an upper bound, as part may be copied.
    """
    per_broker: Counter[int] = Counter()
    for tp, move in moves.items():
        for broker in move.destinations:
            per_broker[broker] += _size(partition_sizes, tp)
    return dict(sorted(per_broker.items()))


# ---------------------------------------------------------------------------- throttles


def throttle_lists(moves: Mapping[TopicPartition, PartitionMove]) -> dict[str, tuple[str, str]]:
    """{topic: (leader list, follower list)} as the topic configs take them, sorted.

    Kafka's `calculateLeaderThrottles` (`partition:source` for every source: any source may be
    the leader) and `calculateFollowerThrottles` (`partition:destination`). Every topic of the
    move map gets both values, possibly "", because they overwrite the topic's previous lists.
    """
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    for tp, move in moves.items():
        leader_pairs = leaders.setdefault(tp.topic, set())
        follower_pairs = followers.setdefault(tp.topic, set())
        if not move.moving:
            continue  # nothing to copy: see the module docstring
        leader_pairs.update((tp.partition, b) for b in move.sources)
        follower_pairs.update((tp.partition, b) for b in move.destinations)
    # ThrottledReplicas' string is the normalised config value (numeric order).
    return {
        topic: (
            str(ThrottledReplicas(pairs=frozenset(leaders[topic]))),
            str(ThrottledReplicas(pairs=frozenset(followers[topic]))),
        )
        for topic in sorted(leaders)
    }


def throttled_brokers(moves: Mapping[TopicPartition, PartitionMove]) -> list[int]:
    """Kafka's `calculateReassigningBrokers`: every source or destination of a move, sorted."""
    brokers: set[int] = set()
    for move in moves.values():
        if move.moving:
            brokers.update(move.sources)
            brokers.update(move.destinations)
    return sorted(brokers)


def reassignment_throttle_configs(
    moves: Mapping[TopicPartition, PartitionMove], throttle: int, mode: str
) -> list[ConfigChange]:
    """The configs `--execute --throttle T` sets, topics first, then brokers (Kafka's order).

    - "replication" (KIP-73, Kafka's `modifyReassignmentThrottle`): both throttle lists of every
      topic in the move map, and `leader/follower.replication.throttled.rate` = T on every
      throttled broker.
    - "reassignment" (KIP-542): `leader/follower.reassignment.throttled.rate` = T on every
      throttled broker, no lists (brokers learn the adding replicas from LeaderAndIsr). The
      controller refuses a rate above a replication rate already set there.
    """
    if not _is_int(throttle) or throttle < 1:
        raise ConfigError(f"throttle {throttle!r}: expected {THROTTLE_FORM}")
    if mode not in MODES:
        raise ConfigError(f"throttle mode {mode!r}: expected one of {', '.join(MODES)}")
    changes: list[ConfigChange] = []
    if mode == MODE_REPLICATION:
        rates = (LEADER_RATE, FOLLOWER_RATE)
        for topic, lists in throttle_lists(moves).items():
            for name, value in zip((LEADER_REPLICAS, FOLLOWER_REPLICAS), lists, strict=True):
                changes.append(_change(TOPICS, topic, name, value))
    else:
        rates = (LEADER_REASSIGNMENT_RATE, FOLLOWER_REASSIGNMENT_RATE)
    for broker in throttled_brokers(moves):
        changes.extend(_change(BROKERS, str(broker), name, str(throttle)) for name in rates)
    return changes


def _change(entity_type: str, entity_name: str, name: str, value: str) -> ConfigChange:
    return ConfigChange(entity_type=entity_type, entity_name=entity_name, name=name, value=value)


def changes_by_entity(changes: Iterable[ConfigChange]) -> dict[tuple[str, str], dict[str, str]]:
    """{(entity_type, entity_name): {name: value}}: one IncrementalAlterConfigs per entity."""
    grouped: dict[tuple[str, str], dict[str, str]] = {}
    for c in changes:
        grouped.setdefault((c.entity_type, c.entity_name), {})[c.name] = c.value
    return grouped
