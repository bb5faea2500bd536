"""What DescribeConfigs lists for a topic config the topic does not set
(server/kafka_apis.py `topic_config_defaults`): the broker's own value, and where it comes from."""

from __future__ import annotations

from minikafka.core.dynamic_config import KNOWN_CONFIGS, TOPICS
from minikafka.kafka.admin import DEFAULT_CONFIG, STATIC_BROKER_CONFIG
from minikafka.server.config import NodeConfig
from minikafka.server.kafka_apis import topic_config_defaults


def test_every_honoured_topic_config_has_kafkas_default():
    got = topic_config_defaults(NodeConfig(node_id=1))
    assert set(got) == set(KNOWN_CONFIGS[TOPICS])  # a config we accept is one we describe
    assert got == {
        "leader.replication.throttled.replicas": ("", DEFAULT_CONFIG),
        "follower.replication.throttled.replicas": ("", DEFAULT_CONFIG),
        "min.insync.replicas": ("1", DEFAULT_CONFIG),
        "max.message.bytes": ("1048588", DEFAULT_CONFIG),  # Kafka's message.max.bytes
        "unclean.leader.election.enable": ("false", DEFAULT_CONFIG),
        "retention.ms": ("604800000", DEFAULT_CONFIG),  # log.retention.hours=168
        "retention.bytes": ("-1", DEFAULT_CONFIG),
        "segment.bytes": ("1073741824", DEFAULT_CONFIG),
        "segment.ms": ("604800000", DEFAULT_CONFIG),  # log.roll.hours=168
        "cleanup.policy": ("delete", DEFAULT_CONFIG),
        "delete.retention.ms": ("86400000", DEFAULT_CONFIG),  # one day
        "min.compaction.lag.ms": ("0", DEFAULT_CONFIG),
        "max.compaction.lag.ms": ("9223372036854775807", DEFAULT_CONFIG),  # Long.MAX_VALUE
        "min.cleanable.dirty.ratio": ("0.5", DEFAULT_CONFIG),
    }


def test_a_broker_setting_is_a_static_broker_config():
    config = NodeConfig(node_id=1).with_settings(
        {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    )
    got = topic_config_defaults(config)
    assert got["min.insync.replicas"] == ("2", STATIC_BROKER_CONFIG)
    assert got["unclean.leader.election.enable"] == ("true", STATIC_BROKER_CONFIG)
    assert got["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)


def test_a_log_setting_under_any_of_its_names_is_a_static_broker_config():
    config = NodeConfig(node_id=1).with_settings(
        {"log.retention.minutes": "10", "log.roll.ms": "5000", "log.segment.bytes": "2097152"}
    )
    got = topic_config_defaults(config)
    assert got["retention.ms"] == ("600000", STATIC_BROKER_CONFIG)
    assert got["segment.ms"] == ("5000", STATIC_BROKER_CONFIG)
    assert got["segment.bytes"] == ("2097152", STATIC_BROKER_CONFIG)
    assert got["retention.bytes"] == ("-1", DEFAULT_CONFIG)
