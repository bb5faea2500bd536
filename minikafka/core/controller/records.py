"""The controller's saved form: one record per broker, topic and partition, plus a small header.

A save costs the change: the shell used to save the whole document (core/controller/state.py
`to_doc`) after every call that returned effects, so one ISR change on a cluster of 20,000
partitions packed and wrote all 20,000. KRaft writes a record per change instead
(RegisterBrokerRecord, TopicRecord, PartitionRecord / PartitionChangeRecord, ConfigRecord); here the
metadata store keeps the latest record per key, and `ControllerState.take_changes()` returns the
records put or deleted since the last take, so a save costs what changed.

Keys (str) and values (msgpack-able):
- `header`: version, controller epoch, next broker epoch, next producer id (written every save);
- `broker/<id>`: `BrokerRecord.to_doc()`;
- `topic/<name>`: `{"configs": ...}` (the configs given at creation);
- `partition/<topic>/<index>`: `PartitionRecord.to_doc()` (a topic name has no `/`);
- `configs`: the dynamic-config snapshot, `reassignments`: the ongoing moves (each written only
  when it changed);
- `doc`: the whole document of a store written before records (read once, then deleted).

`doc_from_records` turns the records back into the document `ControllerState.from_doc` reads,
so a restore has one path and one set of checks whichever form was saved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from minikafka.common import TopicPartition
from minikafka.core.controller.model import VALUE

HEADER = "header"
CONFIGS = "configs"
REASSIGNMENTS = "reassignments"
LEGACY_DOC = "doc"
_BROKER, _TOPIC, _PARTITION = "broker", "topic", "partition"

K = TypeVar("K")
V = TypeVar("V")


@dataclass(**VALUE)
class RecordChanges:
    """What one save writes, in one transaction: records put (latest value per key), keys
    deleted."""

    puts: dict[str, Any] = field(default_factory=dict)
    deletes: tuple[str, ...] = ()


def broker_key(broker_id: int) -> str:
    return f"{_BROKER}/{broker_id}"


def topic_key(name: str) -> str:
    return f"{_TOPIC}/{name}"


def partition_key(tp: TopicPartition) -> str:
    return f"{_PARTITION}/{tp.topic}/{tp.partition}"


class TrackedDict(dict[K, V]):
    """A dict that remembers the keys set or deleted since the last `take_touched()`: the
    controller's tables report their own changes, so no write site can forget to."""

    __slots__ = ("_touched",)

    def __init__(self) -> None:
        super().__init__()
        self._touched: set[K] = set()

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self._touched.add(key)

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self._touched.add(key)

    def pop(self, key: K, *default: Any) -> Any:  # type: ignore[override]
        self._touched.add(key)
        return super().pop(key, *default)

    def _refused(self, *_args: Any, **_kwargs: Any) -> Any:
        raise TypeError("TrackedDict: set or delete keys one at a time")

    # dict's bulk writers bypass __setitem__ in CPython; none is needed here.
    update = setdefault = popitem = clear = __ior__ = _refused  # type: ignore[assignment]

    def take_touched(self) -> set[K]:
        touched, self._touched = self._touched, set()
        return touched


def doc_from_records(records: Mapping[str, Any]) -> dict[str, Any]:
    """The `to_doc()` document the records describe. Raises KeyError / ValueError when they
    are malformed (a partition without its topic, a gap in a topic's partitions)."""
    if HEADER not in records:
        return dict(records[LEGACY_DOC])  # written before records
    brokers: list[dict[str, Any]] = []
    topics: dict[str, dict[str, Any]] = {}
    partitions: dict[str, dict[int, Any]] = {}
    for key, value in records.items():
        kind, _, rest = key.partition("/")
        if kind == _BROKER:
            brokers.append(value)
        elif kind == _TOPIC:
            topics[rest] = value
        elif kind == _PARTITION:
            topic, _, index = rest.rpartition("/")
            partitions.setdefault(topic, {})[int(index)] = value
    if partitions.keys() - topics.keys():
        raise ValueError(f"partitions of unknown topics {sorted(partitions.keys() - topics)}")
    doc = dict(records[HEADER])
    doc["brokers"] = sorted(brokers, key=lambda b: int(b["broker_id"]))
    doc["topics"] = [
        {
            "name": name,
            "configs": topics[name]["configs"],
            "partitions": _contiguous(name, partitions.get(name, {})),
        }
        for name in sorted(topics)
    ]
    for key in (CONFIGS, REASSIGNMENTS):
        if key in records:
            doc[key] = records[key]
    return doc


def _contiguous(topic: str, by_index: Mapping[int, Any]) -> list[Any]:
    if sorted(by_index) != list(range(len(by_index))):
        raise ValueError(f"topic {topic!r} has partitions {sorted(by_index)}, not 0..n-1")
    return [by_index[i] for i in range(len(by_index))]


def keyed(
    touched: Iterable[K], table: Mapping[K, Any], key: Any, to_doc: Any
) -> tuple[dict[str, Any], list[str]]:
    """The puts and deletes for the `touched` keys of one table."""
    puts: dict[str, Any] = {}
    deletes: list[str] = []
    for k in touched:
        if k in table:
            puts[key(k)] = to_doc(table[k])
        else:
            deletes.append(key(k))
    return puts, deletes
