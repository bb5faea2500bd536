"""What the reassign tool reads and writes: the topics-to-move and reassignment JSON files, the
broker list, their validation against the cluster, and `--generate`'s proposal (pure).

Mirrors Kafka's `ReassignPartitionsCommand`: `parseTopicsData` / `parseExecuteAssignmentArgs`
(the shapes), `verifyBrokerIds` and the partition lookups (`validate_reassignment`),
`calculateAssignment` (`propose_assignment`: Kafka's rack-unaware placer, per topic) and
`formatAsReassignmentJson`. The move arithmetic on the result (move map, bytes, throttles) is
tools/reassign/moves.py's. Nothing here talks to a cluster: the current assignment, the live
brokers and the random generator come in as arguments.

Every user-input error is a `ConfigError` with a one-line message naming the accepted form.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from minikafka.common import TopicPartition
from minikafka.core.assignment import assign_replicas
from minikafka.errors import ConfigError

TOPICS_FORM = '{"version":1,"topics":[{"topic":"name"},...]}'
REASSIGNMENT_FORM = (
    '{"version":1,"partitions":[{"topic":"name","partition":0,"replicas":[1,2]},...]}'
)
BROKER_LIST_FORM = "a comma-separated list of distinct broker ids, e.g. 1,2,3"

Assignment = Mapping[TopicPartition, Sequence[int]]


def is_int(value: Any) -> bool:
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
    if not is_int(version) or version != 1:
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
        if not is_int(partition) or partition < 0:
            raise ConfigError(
                f'partitions[{i}] "partition" is {partition!r}: expected an integer >= 0, '
                f"as in {entry_form}"
            )
        tp = TopicPartition(topic, partition)
        if not isinstance(replicas, list) or not all(is_int(r) and r >= 0 for r in replicas):
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
