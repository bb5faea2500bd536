"""The reassignment tool's arithmetic, as Kafka's `ReassignPartitionsCommand` does it (pure).

Owns: KIP-73's MoveRatio and the bytes a move copies; the move map (sources and destinations
per partition, `calculateCurrentMoveMap` / `calculateProposedMoveMap`); and the throttle configs
`--execute --throttle` sets, either KIP-73's (replica lists + replication rates) or KIP-542's
(reassignment rates only). The files the tool reads and writes, and `--generate`'s proposal, are
tools/reassign/assignment_files.py's. Nothing here talks to a cluster: the current assignment
and the ongoing reassignments come in as arguments (docs/throttling.md#the-reassignment-tool).

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

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minikafka.common import TopicPartition
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
from minikafka.errors import ConfigError
from minikafka.tools.reassign.assignment_files import Assignment, is_int

VALUE = dict(frozen=True, slots=True, kw_only=True)

THROTTLE_FORM = "a rate in bytes per second, an integer >= 1"

MODE_REPLICATION = "replication"  # KIP-73: replica lists + *.replication.throttled.rate
MODE_REASSIGNMENT = "reassignment"  # KIP-542: *.reassignment.throttled.rate, no lists
MODES = (MODE_REPLICATION, MODE_REASSIGNMENT)


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
    if not is_int(throttle) or throttle < 1:
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
