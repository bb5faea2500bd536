"""A log's retention, rolling and compaction settings, as Kafka's LogConfig resolves them.

Each setting has a broker default, a static node config with Kafka's `log.` name, and a topic
config that overrides it (set at creation or live with IncrementalAlterConfigs: the names in
core/log_topic_configs.py). `effective` is the merge, key by key, the topic's value winning, as
Kafka's `LogConfig.fromProps(brokerDefaults, topicOverrides)` does. Pure: no I/O, no time.

| topic config | broker config | Kafka's default |
|---|---|---|
| `retention.ms` | `log.retention.ms`, else `.minutes`, else `.hours` | 168 hours |
| `retention.bytes` | `log.retention.bytes` | -1 (no limit) |
| `segment.bytes` | `log.segment.bytes` | 1 GiB (at least 1 MiB since Kafka 4.0, KIP-1030) |
| `segment.ms` | `log.roll.ms`, else `log.roll.hours` | 168 hours |
| `cleanup.policy` | `log.cleanup.policy` | delete |
| `delete.retention.ms` | `log.cleaner.delete.retention.ms` | 1 day |
| `min.compaction.lag.ms` | `log.cleaner.min.compaction.lag.ms` | 0 |
| `max.compaction.lag.ms` | `log.cleaner.max.compaction.lag.ms` | never |
| `min.cleanable.dirty.ratio` | `log.cleaner.min.cleanable.ratio` | 0.5 |

A negative `retention.ms` or `retention.bytes` means no limit (core/log_retention.py applies it).
The last four are compaction's (core/compaction.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from minikafka.core.compaction import (
    DEFAULT_DELETE_RETENTION_MS,
    DEFAULT_MAX_COMPACTION_LAG_MS,
    DEFAULT_MIN_CLEANABLE_RATIO,
    CleanerConfig,
)
from minikafka.core.dynamic_config import TopicOverrides

HOUR_MS = 3_600_000
MINUTE_MS = 60_000
DEFAULT_RETENTION_MS = 168 * HOUR_MS
DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_SEGMENT_MS = 168 * HOUR_MS
DEFAULT_CHECK_INTERVAL_MS = 300_000  # log.retention.check.interval.ms


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """The settings one partition's log follows (Kafka's LogConfig, the fields used here)."""

    retention_ms: int = DEFAULT_RETENTION_MS
    retention_bytes: int = -1
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    cleanup_policy: str = "delete"  # comma-separated, normalised: "delete", "compact", ...
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = DEFAULT_MAX_COMPACTION_LAG_MS
    min_cleanable_ratio: float = DEFAULT_MIN_CLEANABLE_RATIO

    @property
    def delete_enabled(self) -> bool:
        """Whether retention by time and size applies (`delete` in cleanup.policy)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        """Whether the cleaner compacts the log (`compact` in cleanup.policy)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def cleaner(self) -> CleanerConfig:
        return CleanerConfig(
            delete_retention_ms=self.delete_retention_ms,
            min_compaction_lag_ms=self.min_compaction_lag_ms,
            max_compaction_lag_ms=self.max_compaction_lag_ms,
            min_cleanable_ratio=self.min_cleanable_ratio,
        )


def retention_ms_of(ms: int | None, minutes: int | None, hours: int) -> int:
    """Kafka's KafkaConfig.logRetentionTimeMillis: `log.retention.ms` if set, else `.minutes`,
    else `.hours`; any negative value is -1 (no limit)."""
    if ms is not None:
        value = ms
    elif minutes is not None:
        value = minutes * MINUTE_MS
    else:
        value = hours * HOUR_MS
    return -1 if value < 0 else value


def roll_ms_of(ms: int | None, hours: int) -> int:
    """Kafka's KafkaConfig.logRollTimeMillis: `log.roll.ms` if set, else `log.roll.hours`."""
    return ms if ms is not None else hours * HOUR_MS


def effective(broker: LogConfig, topic: TopicOverrides) -> LogConfig:
    """The broker's defaults with the topic's own values over them, key by key."""
    own = {
        "retention_ms": topic.retention_ms,
        "retention_bytes": topic.retention_bytes,
        "segment_bytes": topic.segment_bytes,
        "segment_ms": topic.segment_ms,
        "cleanup_policy": topic.cleanup_policy,
        "delete_retention_ms": topic.delete_retention_ms,
        "min_compaction_lag_ms": topic.min_compaction_lag_ms,
        "max_compaction_lag_ms": topic.max_compaction_lag_ms,
        "min_cleanable_ratio": topic.min_cleanable_ratio,
    }
    changes = {k: v for k, v in own.items() if v is not None}
    return replace(broker, **changes) if changes else broker
