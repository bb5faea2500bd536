"""Dynamic configs: the names this project knows, their validation, and the effective views.

Dynamic configs are set with IncrementalAlterConfigs (the `minikafka configs` tool), kept by the
controller in its metadata document and pushed whole to every broker in UpdateMetadata, which
applies them without a restart. This module owns the rules; it is pure (no I/O, no time).

Entities are (entity_type, entity_name):

- `brokers`: a broker id ("0", "1", ...) or the cluster default "" (Kafka's `<default>`);
- `topics`: an existing topic (no default; the controller checks that the topic exists);
- `clients`: a client id (any string of 1..255 characters) or the default client "" (KIP-13).

A per-entity value wins over the default, key by key (Kafka's DynamicBrokerConfig for brokers,
ClientQuotaManager's `<client-id>` then `<default>` lookup for clients).

Rules (docs/throttling.md#configs):

- replication rates are B/s, integers >= 0, as Kafka's DynamicConfig.Broker validates them
  (`atLeast(0)`). A rate of 0 holds back everything it throttles once anything has been
  measured: Kafka's Quota.acceptable(0) holds only for a measured 0 (core/quota/stats.py);
- reassignment rates (KIP-542) are -1 (no reassignment throttle, also the meaning of unset) or an
  integer >= 0, and may not exceed the matching replication rate when that is set, in the
  EFFECTIVE config of any broker, checked on every alter against the state it would produce;
- `leader.replication.throttled` / `follower.replication.throttled` (KIP-1009) are true/false;
- throttled replica lists are `partition:broker` items separated by commas, or the literal `*`;
  whitespace around items is ignored and an empty value throttles nothing;
- client quotas `producer_byte_rate` / `consumer_byte_rate` are B/s, integers >= 1: Kafka's
  controller refuses 0 and below ("Quota producer_byte_rate must be greater than 0",
  ClientQuotaControlManager.validateQuotaKeyValue since KAFKA-14943); a zero client quota would
  ask for an infinite delay (KIP-13's formula divides by the quota).

Values are stored normalised (`" 0:1 , 1:2"` is stored as `"0:1,1:2"`, `"TRUE"` as `"true"`), so
what `describe` shows is what the brokers apply. Every error is a `ConfigError` whose one-line
message names the accepted form, and `validate_alter` checks a whole alter before anything of it
is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from minikafka.core.log_topic_configs import (  # noqa: F401 - importable from here too
    CLEANUP_POLICY,
    DELETE_RETENTION_MS,
    LOG_TOPIC_CONFIGS,
    LONG_MAX,
    MAX_COMPACTION_LAG_MS,
    MIN_CLEANABLE_DIRTY_RATIO,
    MIN_COMPACTION_LAG_MS,
    MIN_SEGMENT_BYTES,
    RETENTION_BYTES,
    RETENTION_MS,
    SEGMENT_BYTES,
    SEGMENT_MS,
)
from minikafka.core.log_topic_configs import digits as _digits
from minikafka.errors import ConfigError
from minikafka.wire.messages import ConfigEntity

BROKERS = "brokers"
TOPICS = "topics"
CLIENTS = "clients"
ENTITY_TYPES = (BROKERS, TOPICS, CLIENTS)
DEFAULT = ""  # the entity name of the cluster default broker and of the default client
MAX_CLIENT_ID_LENGTH = 255

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REASSIGNMENT_RATE = "leader.reassignment.throttled.rate"
FOLLOWER_REASSIGNMENT_RATE = "follower.reassignment.throttled.rate"
LEADER_ALL = "leader.replication.throttled"
FOLLOWER_ALL = "follower.replication.throttled"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
MAX_MESSAGE_BYTES = "max.message.bytes"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"

SOURCE_ENTITY = "dynamic_entity"  # set on the entity itself
SOURCE_DEFAULT = "dynamic_default"  # inherited from (or set on) the default entity

REPLICAS_FORM = "expected a comma-separated list of partition:broker, e.g. 0:1,1:2, or *"

VALUE = dict(frozen=True, slots=True, kw_only=True)


# ---------------------------------------------------------------------------- values


@dataclass(**VALUE)
class ThrottledReplicas:
    """A parsed `*.replication.throttled.replicas` value: every replica (`*`) or some pairs."""

    all: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()  # (partition, broker)

    def contains(self, partition: int, broker: int) -> bool:
        return self.all or (partition, broker) in self.pairs

    def __bool__(self) -> bool:
        return self.all or bool(self.pairs)

    def __str__(self) -> str:
        """The normalised config value: `*`, or sorted `partition:broker` items, or ``""``."""
        if self.all:
            return "*"
        return ",".join(f"{p}:{b}" for p, b in sorted(self.pairs))


NO_REPLICAS = ThrottledReplicas()


@dataclass(**VALUE)
class BrokerThrottleConfig:
    """A broker's effective replication throttle settings (rates in B/s, None = no limit)."""

    leader_rate: int | None = None
    follower_rate: int | None = None
    leader_reassignment_rate: int | None = None  # KIP-542; -1 and unset both mean None
    follower_reassignment_rate: int | None = None
    leader_all: bool = False  # KIP-1009: every replica this broker leads is throttled
    follower_all: bool = False


@dataclass(**VALUE)
class ConfigSnapshot:
    """Every dynamic config of the cluster: {(entity_type, entity_name): {name: value}}.

    Immutable (read-only mappings; entities without configs are dropped). `version` grows with
    every change the controller commits, so a broker can ignore an older push.
    """

    version: int = 0
    entities: Mapping[tuple[str, str], Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        frozen = {
            (str(t), str(n)): MappingProxyType({str(k): str(v) for k, v in cfg.items()})
            for (t, n), cfg in sorted(self.entities.items())
            if cfg
        }
        object.__setattr__(self, "entities", MappingProxyType(frozen))

    def configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """A copy of one entity's own configs (empty if it has none)."""
        return dict(self.entities.get((entity_type, entity_name), {}))

    def names(self, entity_type: str) -> list[str]:
        """The names of the entities of one type that have configs, sorted (default first)."""
        return sorted(n for t, n in self.entities if t == entity_type)

    def with_entity(
        self, entity_type: str, entity_name: str, configs: Mapping[str, str], *, version: int
    ) -> ConfigSnapshot:
        """A new snapshot with one entity's configs replaced (removed when `configs` is empty)."""
        return self.with_entities({(entity_type, entity_name): configs}, version=version)

    def with_entities(
        self, changes: Mapping[tuple[str, str], Mapping[str, str]], *, version: int
    ) -> ConfigSnapshot:
        """A new snapshot with several entities' configs replaced, built once: a request
        changing K entities costs K + the snapshot, not K x the snapshot."""
        entities = dict(self.entities)
        entities.update(changes)
        return ConfigSnapshot(version=version, entities=entities)

    # -- persistence and wire

    def to_doc(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "entities": [
                {"type": t, "name": n, "configs": dict(cfg)}
                for (t, n), cfg in self.entities.items()
            ],
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> ConfigSnapshot:
        entities = {(str(e["type"]), str(e["name"])): dict(e["configs"]) for e in doc["entities"]}
        return cls(version=int(doc["version"]), entities=entities)

    def to_wire(self) -> list[ConfigEntity]:
        return [
            ConfigEntity(entity_type=t, entity_name=n, configs=dict(cfg))
            for (t, n), cfg in self.entities.items()
        ]

    @classmethod
    def from_wire(cls, entities: Iterable[ConfigEntity], version: int) -> ConfigSnapshot:
        return cls(
            version=version,
            entities={(e.entity_type, e.entity_name): dict(e.configs) for e in entities},
        )


# ---------------------------------------------------------------------------- value parsers


def _replication_rate(name: str, text: str) -> str:
    value = _digits(text)
    if value is None or value < 0:
        raise ConfigError(
            f"{name}={text!r}: expected a rate in bytes per second, an integer >= 0 "
            f"(up to {LONG_MAX})"
        )
    return str(value)


def _client_rate(name: str, text: str) -> str:
    value = _digits(text)
    if value is None or value < 1:
        raise ConfigError(
            f"{name}={text!r}: expected a rate in bytes per second, an integer >= 1 "
            f"(up to {LONG_MAX}; Kafka refuses a client quota of 0)"
        )
    return str(value)


def _reassignment_rate(name: str, text: str) -> str:
    value = _digits(text)
    if value is None or (value < 0 and value != -1):
        raise ConfigError(
            f"{name}={text!r}: expected -1 (no reassignment throttle) or a rate in bytes per "
            "second, an integer >= 0 (KIP-542)"
        )
    return str(value)


def _boolean(name: str, text: str) -> str:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{name}={text!r}: expected true or false")
    return value


def _min_insync(name: str, text: str) -> str:
    value = _digits(text)
    if value is None or value < 1:
        raise ConfigError(f"{name}={text!r}: expected an integer >= 1")
    return str(value)


def _message_bytes(name: str, text: str) -> str:
    value = _digits(text)
    if value is None or not 0 <= value <= 1 << 30:
        raise ConfigError(f"{name}={text!r}: expected a size in bytes from 0 to {1 << 30}")
    return str(value)


def parse_throttled_replicas(text: str, name: str = "throttled replicas") -> ThrottledReplicas:
    """Parse `*`, ``""`` or `partition:broker[,partition:broker...]`; ConfigError otherwise."""
    stripped = text.strip()
    if not stripped:
        return NO_REPLICAS
    if stripped == "*":
        return ThrottledReplicas(all=True)
    pairs: set[tuple[int, int]] = set()
    for item in stripped.split(","):
        partition, sep, broker = item.strip().partition(":")
        p, b = _digits(partition), _digits(broker)
        if not sep or p is None or b is None or p < 0 or b < 0:
            raise ConfigError(f"{name}={text!r}: {REPLICAS_FORM}")
        pairs.add((p, b))
    return ThrottledReplicas(pairs=frozenset(pairs))


def _replicas(name: str, text: str) -> str:
    return str(parse_throttled_replicas(text, name))


Parser = Callable[[str, str], str]

# The dynamic configs this project knows, by entity type: name -> parser (returns the
# normalised value or raises ConfigError naming the accepted form).
KNOWN_CONFIGS: Mapping[str, Mapping[str, Parser]] = MappingProxyType(
    {
        BROKERS: MappingProxyType(
            {
                LEADER_RATE: _replication_rate,
                FOLLOWER_RATE: _replication_rate,
                LEADER_REASSIGNMENT_RATE: _reassignment_rate,
                FOLLOWER_REASSIGNMENT_RATE: _reassignment_rate,
                LEADER_ALL: _boolean,
                FOLLOWER_ALL: _boolean,
            }
        ),
        # Kafka's LogConfig names; a topic's value overrides the broker's setting.
        TOPICS: MappingProxyType(
            {
                LEADER_REPLICAS: _replicas,
                FOLLOWER_REPLICAS: _replicas,
                MIN_INSYNC_REPLICAS: _min_insync,
                MAX_MESSAGE_BYTES: _message_bytes,
                UNCLEAN_LEADER_ELECTION: _boolean,
                **LOG_TOPIC_CONFIGS,
            }
        ),
        CLIENTS: MappingProxyType(
            {PRODUCER_BYTE_RATE: _client_rate, CONSUMER_BYTE_RATE: _client_rate}
        ),
    }
)

# KIP-542: a reassignment rate may not exceed the matching replication rate.
_RATE_PAIRS = ((LEADER_REASSIGNMENT_RATE, LEADER_RATE), (FOLLOWER_REASSIGNMENT_RATE, FOLLOWER_RATE))


# ---------------------------------------------------------------------------- validation


def check_entity_type(entity_type: str) -> str:
    if entity_type not in ENTITY_TYPES:
        raise ConfigError(f"entity type {entity_type!r}: expected one of {', '.join(ENTITY_TYPES)}")
    return entity_type


def normalize_entity_name(entity_type: str, entity_name: str) -> str:
    """The canonical name of an entity ("01" -> "1" for brokers); ConfigError if invalid.

    Whether a topic exists is the controller's check, not this one.
    """
    check_entity_type(entity_type)
    if entity_type == BROKERS:
        if entity_name == DEFAULT:
            return DEFAULT
        broker_id = _digits(entity_name)
        if broker_id is None or broker_id < 0 or entity_name.strip().startswith("-"):
            raise ConfigError(
                f"broker {entity_name!r}: expected a broker id (an integer >= 0) "
                "or the cluster default"
            )
        return str(broker_id)
    if entity_type == TOPICS:
        if entity_name == DEFAULT:
            raise ConfigError("topics have no default entity: expected a topic name")
        return entity_name
    if len(entity_name) > MAX_CLIENT_ID_LENGTH:
        raise ConfigError(
            f"client id {entity_name[:40]!r}...: expected a client id of 1 to "
            f"{MAX_CLIENT_ID_LENGTH} characters, or the default client"
        )
    return entity_name


def check_config_name(entity_type: str, name: str) -> Parser:
    known = KNOWN_CONFIGS[check_entity_type(entity_type)]
    parser = known.get(name)
    if parser is None:
        raise ConfigError(
            f"unknown {entity_type[:-1]} config {name!r}: expected one of {', '.join(known)}"
        )
    return parser


def validate_changes(
    entity_type: str,
    entity_name: str,
    set_configs: Mapping[str, str],
    delete_configs: Sequence[str],
) -> tuple[str, dict[str, str], list[str]]:
    """Everything that can be checked without the cluster's state.

    -> (normalised entity name, normalised values to set, names to delete), or ConfigError.
    """
    name = normalize_entity_name(entity_type, entity_name)
    both = sorted(set(set_configs) & set(delete_configs))
    if both:
        raise ConfigError(f"config {both[0]!r} is both set and deleted: expected one or the other")
    values = {k: check_config_name(entity_type, k)(k, v) for k, v in set_configs.items()}
    for k in delete_configs:
        check_config_name(entity_type, k)
    return name, values, list(dict.fromkeys(delete_configs))


def validate_alter(
    entity_type: str,
    entity_name: str,
    set_configs: Mapping[str, str],
    delete_configs: Sequence[str],
    current: ConfigSnapshot,
) -> dict[str, str]:
    """The configs an entity would have after this alter, or ConfigError (nothing is applied).

    Names and values are checked and normalised; then KIP-542's rule is checked against the
    effective config of every broker the alter affects, in the state it would produce: the
    altered broker, or for the default every broker with configs and the default itself.
    """
    name, values, deletes = validate_changes(entity_type, entity_name, set_configs, delete_configs)
    result = current.configs(entity_type, name)
    for k in deletes:
        result.pop(k, None)
    result.update(values)
    if entity_type == BROKERS:
        after = current.with_entity(entity_type, name, result, version=current.version)
        ids = [name] if name != DEFAULT else [DEFAULT, *after.names(BROKERS)]
        for broker in dict.fromkeys(ids):
            _check_reassignment_rates(after, broker)
    return result


def _check_reassignment_rates(snapshot: ConfigSnapshot, broker: str) -> None:
    merged = _merged(snapshot, BROKERS, broker)
    for reassignment, replication in _RATE_PAIRS:
        limit = _optional_rate(merged.get(replication))
        rate = _optional_rate(merged.get(reassignment))
        if limit is not None and rate is not None and rate > limit:
            who = "the cluster default" if broker == DEFAULT else f"broker {broker}"
            raise ConfigError(
                f"{reassignment}={rate} exceeds {replication}={limit} in the effective config "
                f"of {who}: expected a reassignment rate at most the replication rate (KIP-542)"
            )


# ---------------------------------------------------------------------------- effective views


def _merged(snapshot: ConfigSnapshot, entity_type: str, name: str) -> dict[str, str]:
    """The default entity's configs overlaid with the entity's own (per key)."""
    merged = snapshot.configs(entity_type, DEFAULT)
    if name != DEFAULT:
        merged.update(snapshot.configs(entity_type, name))
    return merged


def _optional_rate(value: str | None) -> int | None:
    """A stored rate as a bound: None when unset or -1 (no reassignment throttle); 0 is a
    bound (it throttles everything throttleable), not "unset"."""
    if value is None:
        return None
    rate = int(value)
    return rate if rate >= 0 else None


def effective_broker_config(snapshot: ConfigSnapshot, broker_id: int) -> BrokerThrottleConfig:
    """A broker's throttle settings: its own values over the cluster default's."""
    merged = _merged(snapshot, BROKERS, str(broker_id))
    return BrokerThrottleConfig(
        leader_rate=_optional_rate(merged.get(LEADER_RATE)),
        follower_rate=_optional_rate(merged.get(FOLLOWER_RATE)),
        leader_reassignment_rate=_optional_rate(merged.get(LEADER_REASSIGNMENT_RATE)),
        follower_reassignment_rate=_optional_rate(merged.get(FOLLOWER_REASSIGNMENT_RATE)),
        leader_all=merged.get(LEADER_ALL) == "true",
        follower_all=merged.get(FOLLOWER_ALL) == "true",
    )


def topic_throttled_replicas(
    snapshot: ConfigSnapshot, topic: str
) -> tuple[ThrottledReplicas, ThrottledReplicas]:
    """(leader list, follower list) of a topic; unset means nothing throttled."""
    own = snapshot.configs(TOPICS, topic)
    return (
        parse_throttled_replicas(own.get(LEADER_REPLICAS, ""), LEADER_REPLICAS),
        parse_throttled_replicas(own.get(FOLLOWER_REPLICAS, ""), FOLLOWER_REPLICAS),
    )


@dataclass(**VALUE)
class TopicOverrides:
    """A topic's own values of the broker settings it may override; None = the broker's."""

    min_insync_replicas: int | None = None
    max_message_bytes: int | None = None
    unclean_leader_election: bool | None = None
    # The log's life (core/log_config.py): -1 is a value here (no limit), not "unset".
    retention_ms: int | None = None
    retention_bytes: int | None = None
    segment_bytes: int | None = None
    segment_ms: int | None = None
    cleanup_policy: str | None = None
    delete_retention_ms: int | None = None
    min_compaction_lag_ms: int | None = None
    max_compaction_lag_ms: int | None = None
    min_cleanable_ratio: float | None = None


def _optional_int(value: str | None) -> int | None:
    return None if value is None else int(value)


def topic_overrides(snapshot: ConfigSnapshot, topic: str) -> TopicOverrides:
    own = snapshot.configs(TOPICS, topic)
    unclean = own.get(UNCLEAN_LEADER_ELECTION)
    return TopicOverrides(
        min_insync_replicas=_optional_rate(own.get(MIN_INSYNC_REPLICAS)),
        max_message_bytes=_optional_rate(own.get(MAX_MESSAGE_BYTES)),
        unclean_leader_election=None if unclean is None else unclean == "true",
        retention_ms=_optional_int(own.get(RETENTION_MS)),
        retention_bytes=_optional_int(own.get(RETENTION_BYTES)),
        segment_bytes=_optional_int(own.get(SEGMENT_BYTES)),
        segment_ms=_optional_int(own.get(SEGMENT_MS)),
        cleanup_policy=own.get(CLEANUP_POLICY),
        delete_retention_ms=_optional_int(own.get(DELETE_RETENTION_MS)),
        min_compaction_lag_ms=_optional_int(own.get(MIN_COMPACTION_LAG_MS)),
        max_compaction_lag_ms=_optional_int(own.get(MAX_COMPACTION_LAG_MS)),
        min_cleanable_ratio=(
            None
            if own.get(MIN_CLEANABLE_DIRTY_RATIO) is None
            else float(own[MIN_CLEANABLE_DIRTY_RATIO])
        ),
    )


def client_quota(snapshot: ConfigSnapshot, client_id: str) -> tuple[int | None, int | None]:
    """(producer_byte_rate, consumer_byte_rate) of a client id, None = unlimited (KIP-13).

    The client id's own value wins over the default client's, per quota.
    """
    merged = _merged(snapshot, CLIENTS, client_id)
    return (
        _optional_rate(merged.get(PRODUCER_BYTE_RATE)),
        _optional_rate(merged.get(CONSUMER_BYTE_RATE)),
    )


def describe_entries(
    snapshot: ConfigSnapshot, entity_type: str, entity_name: str, *, effective: bool
) -> list[tuple[str, str, str]]:
    """(name, value, source) of an entity, sorted by name.

    `effective`: a named broker or client also shows the defaults it inherits (source
    `dynamic_default`); otherwise only what is stored on the entity. The default entity's own
    configs have source `dynamic_default`.
    """
    own = snapshot.configs(entity_type, entity_name)
    own_source = SOURCE_DEFAULT if entity_name == DEFAULT else SOURCE_ENTITY
    entries = {k: (v, own_source) for k, v in own.items()}
    if effective and entity_type != TOPICS and entity_name != DEFAULT:
        for k, v in snapshot.configs(entity_type, DEFAULT).items():
            entries.setdefault(k, (v, SOURCE_DEFAULT))
    return [(k, v, src) for k, (v, src) in sorted(entries.items())]
