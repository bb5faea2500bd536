"""A log's settings (core/log_config.py): Kafka's precedence of broker names, the topic's
override key by key, and the topic configs' accepted forms (core/log_topic_configs.py)."""

from __future__ import annotations

import pytest

from minikafka.core.dynamic_config import (
    TOPICS,
    ConfigSnapshot,
    TopicOverrides,
    topic_overrides,
    validate_alter,
)
from minikafka.core.log_config import (
    DEFAULT_RETENTION_MS,
    LogConfig,
    effective,
    retention_ms_of,
    roll_ms_of,
)
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig


@pytest.mark.parametrize(
    ("ms", "minutes", "hours", "expected"),
    [
        (None, None, 168, DEFAULT_RETENTION_MS),
        (None, 5, 168, 300_000),  # minutes over hours
        (1234, 5, 1, 1234),  # ms over both
        (-1, None, 168, -1),
        (None, -1, 168, -1),
        (None, None, -5, -1),  # any negative: no limit
        (0, None, 168, 0),
    ],
)
def test_retention_ms_takes_ms_then_minutes_then_hours(ms, minutes, hours, expected):
    assert retention_ms_of(ms, minutes, hours) == expected


def test_roll_ms_takes_ms_then_hours():
    assert roll_ms_of(None, 2) == 7_200_000
    assert roll_ms_of(500, 2) == 500


def test_a_node_config_gives_the_brokers_log_defaults():
    config = NodeConfig(node_id=1).with_settings(
        {
            "log.retention.hours": "1",
            "log.retention.bytes": "5000000",
            "log.segment.bytes": "2097152",
            "log.roll.hours": "2",
        }
    )
    assert config.log_config == LogConfig(
        retention_ms=3_600_000,
        retention_bytes=5_000_000,
        segment_bytes=2_097_152,
        segment_ms=7_200_000,
    )
    assert NodeConfig(node_id=1).log_config == LogConfig()


@pytest.mark.parametrize(
    ("name", "value", "form"),
    [
        ("log.segment.bytes", "1048575", "expected an integer from 1048576"),  # KIP-1030's floor
        ("log.retention.ms", "-2", "expected an integer from -1"),
        ("log.roll.ms", "0", "expected an integer from 1"),
        ("log.retention.check.interval.ms", "0", "expected an integer from 1"),
        ("log.cleanup.policy", "forever", "expected compact, delete or compact,delete"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "expected a ratio from 0 to 1"),
        ("log.cleaner.backoff.ms", "0", "expected an integer from 1"),
    ],
)
def test_a_bad_node_log_config_names_the_accepted_form(name, value, form):
    with pytest.raises(ConfigError, match=form):
        NodeConfig(node_id=1).with_settings({name: value})


def test_a_topics_value_wins_key_by_key():
    broker = LogConfig(retention_ms=1000, retention_bytes=2000, segment_bytes=3 << 20)
    assert effective(broker, TopicOverrides()) is broker
    topic = TopicOverrides(retention_bytes=-1, segment_ms=50)
    assert effective(broker, topic) == LogConfig(
        retention_ms=1000, retention_bytes=-1, segment_bytes=3 << 20, segment_ms=50
    )


def test_topic_configs_are_normalised_and_read_back_as_overrides():
    configs = validate_alter(
        TOPICS,
        "t",
        {
            "retention.ms": " 60000 ",
            "retention.bytes": "-1",
            "segment.bytes": "1048576",
            "segment.ms": "10",
            "cleanup.policy": " Delete ",
        },
        [],
        ConfigSnapshot(),
    )
    assert configs == {
        "retention.ms": "60000",
        "retention.bytes": "-1",
        "segment.bytes": "1048576",
        "segment.ms": "10",
        "cleanup.policy": "delete",
    }
    snapshot = ConfigSnapshot(version=1, entities={(TOPICS, "t"): configs})
    assert topic_overrides(snapshot, "t") == TopicOverrides(
        retention_ms=60_000,
        retention_bytes=-1,
        segment_bytes=1 << 20,
        segment_ms=10,
        cleanup_policy="delete",
    )
    assert topic_overrides(snapshot, "other") == TopicOverrides()


@pytest.mark.parametrize(
    ("name", "value", "form"),
    [
        ("retention.ms", "soon", "expected -1 (no limit) or an integer >= 0"),
        ("retention.bytes", "-2", "expected -1 (no limit) or an integer >= 0"),
        ("segment.bytes", "1048575", "expected a size in bytes from 1048576 to 2147483647"),
        ("segment.bytes", "2147483648", "expected a size in bytes from 1048576 to 2147483647"),
        ("segment.ms", "0", "expected a time in ms, an integer >= 1"),
        ("cleanup.policy", "compact,forever", "expected compact, delete or compact,delete"),
        ("cleanup.policy", "", "expected compact, delete or compact,delete"),
        ("min.cleanable.dirty.ratio", "half", "expected a ratio from 0 to 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "expected a ratio from 0 to 1"),
        ("delete.retention.ms", "-1", "expected a time in ms, an integer >= 0"),
        ("min.compaction.lag.ms", "x", "expected a time in ms, an integer >= 0"),
        ("max.compaction.lag.ms", "0", "expected a time in ms, an integer >= 1"),
    ],
)
def test_a_bad_topic_log_config_names_the_accepted_form(name, value, form):
    with pytest.raises(ConfigError, match=form.replace("(", r"\(").replace(")", r"\)")):
        validate_alter(TOPICS, "t", {name: value}, [], ConfigSnapshot())


def test_delete_and_compact_are_enabled_by_the_policy():
    assert LogConfig().delete_enabled and not LogConfig().compact_enabled
    assert not LogConfig(cleanup_policy="compact").delete_enabled
    assert LogConfig(cleanup_policy="compact").compact_enabled
    both = LogConfig(cleanup_policy="compact,delete")
    assert both.delete_enabled and both.compact_enabled


def test_the_cleaners_settings_come_from_topic_over_broker():
    broker = (
        NodeConfig(node_id=1)
        .with_settings(
            {"log.cleaner.delete.retention.ms": "1000", "log.cleaner.min.cleanable.ratio": "0.1"}
        )
        .log_config
    )
    topic = TopicOverrides(cleanup_policy="compact", min_cleanable_ratio=0.25)
    cleaner = effective(broker, topic).cleaner
    assert (cleaner.delete_retention_ms, cleaner.min_cleanable_ratio) == (1000, 0.25)
    assert cleaner.min_compaction_lag_ms == 0
