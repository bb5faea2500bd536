"""Throttles recorded with reassignments, removed when the move is over (beyond Kafka).

Kafka leaves the reassignment throttles to `kafka-reassign-partitions --verify`, and a forgotten
verify leaves them in place for good (docs/throttling.md#the-reassignment-tool). Here an
AlterPartitionReassignments request may record the dynamic configs the reassign tool set for it
(`throttle_configs`): they
become a *throttle group*, and each config key is *claimed* by every group that recorded it, the
latest recorded value winning (so `--additional`, which re-sets the throttles, hands a key on
instead of racing to remove it). When the last partition of a group completes or is cancelled
(core/controller/reassign.py), the group releases its claims; a key no group claims any more is
deleted through the dynamic-config path (core/controller/configs.py) if it still has the recorded
value, and otherwise left in place with a `throttle_left_in_place` event naming it: someone
changed it since, and it is theirs now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from minikafka.core.controller.configs import OP_DELETE, alter_configs
from minikafka.core.controller.model import VALUE, Event
from minikafka.core.dynamic_config import (
    ConfigSnapshot,
    check_config_name,
    check_entity_type,
    normalize_entity_name,
)
from minikafka.errors import ConfigError, ErrorCode
from minikafka.wire.messages import AlterableConfig, AlterConfigsResource, ConfigEntity

ThrottleKey = tuple[str, str, str]  # (entity_type, entity_name, config name)


@dataclass(**VALUE)
class ThrottleClaim:
    value: str  # normalised, as last recorded
    groups: frozenset[int]  # the throttle groups still moving partitions under it


def normalise_throttles(entities: Sequence[ConfigEntity]) -> dict[ThrottleKey, str]:
    """The recorded configs as {(type, name, key): normalised value}; ConfigError if an entity
    or a config is not one the configs tool could have set, or an entity appears twice."""
    out: dict[ThrottleKey, str] = {}
    seen: set[tuple[str, str]] = set()
    for entity in entities:
        entity_type = check_entity_type(entity.entity_type)
        name = normalize_entity_name(entity_type, entity.entity_name)
        if (entity_type, name) in seen:
            raise ConfigError(
                f"throttle_configs name {entity_type} {name!r} twice: expected each entity once"
            )
        seen.add((entity_type, name))
        for key, value in entity.configs.items():
            out[(entity_type, name, key)] = check_config_name(entity_type, key)(key, value)
    return out


class ThrottleClaims:
    """Which throttle groups claim which config keys, and the next group id (persisted)."""

    def __init__(self) -> None:
        self.claims: dict[ThrottleKey, ThrottleClaim] = {}
        self.next_group = 1

    def record(self, throttles: Mapping[ThrottleKey, str]) -> int:
        """A new group claiming `throttles`; -> its id."""
        group = self.next_group
        self.next_group += 1
        for key, value in throttles.items():
            claim = self.claims.get(key)
            groups = (claim.groups if claim is not None else frozenset()) | {group}
            self.claims[key] = ThrottleClaim(value=value, groups=groups)
        return group

    def release(self, group: int) -> dict[ThrottleKey, str]:
        """The group is over: -> the keys nobody claims any more, with their recorded values."""
        unclaimed: dict[ThrottleKey, str] = {}
        for key, claim in sorted(self.claims.items()):
            if group not in claim.groups:
                continue
            rest = claim.groups - {group}
            if rest:
                self.claims[key] = replace(claim, groups=rest)
            else:
                del self.claims[key]
                unclaimed[key] = claim.value
        return unclaimed

    def to_doc(self) -> dict[str, Any]:
        return {
            "claims": [
                {"type": t, "name": n, "config": k, "value": c.value, "groups": sorted(c.groups)}
                for (t, n, k), c in sorted(self.claims.items())
            ],
            "next_group": self.next_group,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> ThrottleClaims:
        book = cls()
        for c in doc["claims"]:
            book.claims[(str(c["type"]), str(c["name"]), str(c["config"]))] = ThrottleClaim(
                value=str(c["value"]), groups=frozenset(int(g) for g in c["groups"])
            )
        book.next_group = int(doc["next_group"])
        return book


def remove_unclaimed(
    snapshot: ConfigSnapshot,
    unclaimed: Mapping[ThrottleKey, str],
    *,
    topic_exists: Callable[[str], bool],
) -> tuple[ConfigSnapshot, list[Event]]:
    """Delete the unclaimed keys that still have their recorded value.

    -> (the new snapshot, `snapshot` itself if nothing changed; `config_changed` events for the
    deletions and `throttle_left_in_place` for the keys kept). A key already gone is nothing.
    """
    events: list[Event] = []
    deletes: dict[tuple[str, str], list[str]] = {}
    for (entity_type, name, key), recorded in sorted(unclaimed.items()):
        current = snapshot.configs(entity_type, name).get(key)
        if current is None:
            continue
        if current != recorded:
            events.append(_left_in_place((entity_type, name, key), recorded, current))
            continue
        deletes.setdefault((entity_type, name), []).append(key)
    resources = [
        AlterConfigsResource(
            resource_type=entity_type,
            resource_name=name,
            configs=[AlterableConfig(name=k, op=OP_DELETE) for k in keys],
        )
        for (entity_type, name), keys in deletes.items()
    ]
    responses, after, config_events = alter_configs(snapshot, resources, topic_exists=topic_exists)
    for resource, response in zip(resources, responses, strict=True):
        if response.error_code == ErrorCode.NONE:
            continue
        # E.g. deleting a broker's replication rate would put a reassignment rate someone set
        # above the default one (KIP-542's rule): the keys stay, and the event says why.
        for op in resource.configs:
            key = (resource.resource_type, resource.resource_name, op.name)
            events.append(
                _left_in_place(key, unclaimed[key], unclaimed[key], response.error_message)
            )
    return after, events + config_events


def _left_in_place(
    key: ThrottleKey,
    recorded: str,
    current: str,
    reason: str | None = "changed since the reassignment recorded it",
) -> Event:
    entity_type, name, config = key
    return Event(
        name="throttle_left_in_place",
        fields={
            "entity_type": entity_type,
            "entity_name": name,
            "config": config,
            "recorded": recorded,
            "current": current,
            "reason": reason,
        },
    )
