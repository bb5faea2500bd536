"""The log's topic configs (Kafka's LogConfig names): retention, segments, cleanup policy and
compaction, and the form each accepts. Pure. core/dynamic_config.py validates and stores them
with the other dynamic configs; core/log_config.py resolves a topic's values over the broker's
`log.*` defaults. Every parser takes (name, text) and returns the normalised value, or raises
a ConfigError whose one line names the accepted form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from minikafka.errors import ConfigError

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
CLEANUP_POLICY = "cleanup.policy"
DELETE_RETENTION_MS = "delete.retention.ms"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"

LONG_MAX = 2**63 - 1


def digits(text: str) -> int | None:
    """A decimal integer within Java's long, or None (no sign but `-`, no spaces inside)."""
    s = text.strip()
    body = s[1:] if s.startswith("-") else s
    if not body.isascii() or not body.isdigit():
        return None
    value = int(s)
    return value if -LONG_MAX - 1 <= value <= LONG_MAX else None


def _retention(name: str, text: str) -> str:
    value = digits(text)
    if value is None or value < -1:
        raise ConfigError(f"{name}={text!r}: expected -1 (no limit) or an integer >= 0")
    return str(value)


# Kafka 4.0's floor for segment.bytes (KIP-1030: 1 MiB; it was 14 bytes before), as an int.
MIN_SEGMENT_BYTES = 1 << 20
INT_MAX = 2**31 - 1


def _segment_bytes(name: str, text: str) -> str:
    value = digits(text)
    if value is None or not MIN_SEGMENT_BYTES <= value <= INT_MAX:
        raise ConfigError(
            f"{name}={text!r}: expected a size in bytes from {MIN_SEGMENT_BYTES} to {INT_MAX}"
        )
    return str(value)


# What cleanup.policy may name, alone or both, comma-separated (Kafka's LogConfig).
CLEANUP_POLICIES = ("compact", "delete")


def cleanup_policy(name: str, text: str) -> str:
    """`compact`, `delete` or both (any order, normalised to `compact,delete`)."""
    items = [i.strip().lower() for i in text.split(",") if i.strip()]
    if not items or any(i not in CLEANUP_POLICIES for i in items):
        raise ConfigError(f"{name}={text!r}: expected compact, delete or compact,delete")
    return ",".join(sorted(set(items)))


def _time_ms(minimum: int) -> Callable[[str, str], str]:
    """A time in ms, an integer >= `minimum`."""

    def parse(name: str, text: str) -> str:
        value = digits(text)
        if value is None or value < minimum:
            raise ConfigError(f"{name}={text!r}: expected a time in ms, an integer >= {minimum}")
        return str(value)

    return parse


def dirty_ratio(name: str, text: str) -> str:
    """A ratio from 0 to 1 (Kafka's min.cleanable.dirty.ratio, a double in [0, 1])."""
    try:
        value = float(text.strip())
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name}={text!r}: expected a ratio from 0 to 1, e.g. 0.5")
    return repr(value)


LOG_TOPIC_CONFIGS: Mapping[str, Callable[[str, str], str]] = MappingProxyType(
    {
        RETENTION_MS: _retention,
        RETENTION_BYTES: _retention,
        SEGMENT_BYTES: _segment_bytes,
        SEGMENT_MS: _time_ms(1),
        CLEANUP_POLICY: cleanup_policy,
        DELETE_RETENTION_MS: _time_ms(0),
        MIN_COMPACTION_LAG_MS: _time_ms(0),
        MAX_COMPACTION_LAG_MS: _time_ms(1),
        MIN_CLEANABLE_DIRTY_RATIO: dirty_ratio,
    }
)
