"""Static node configs (server/config.py): Kafka names, defaults, one-line refusals."""

from __future__ import annotations

import pytest

from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig


def test_partition_order_defaults_to_kip73s_shuffle_and_takes_kafkas_rotation():
    base = NodeConfig(node_id=1)
    assert base.replica_fetch_partition_order == "random"
    rotated = base.with_settings({"replica.fetch.partition.order": " rotate "})
    assert rotated.replica_fetch_partition_order == "rotate"
    assert rotated.settings()["replica.fetch.partition.order"] == "rotate"


@pytest.mark.parametrize("value", ["", "fifo", "round-robin", "random,rotate"])
def test_bad_partition_order_is_one_line_naming_the_accepted_values(value):
    with pytest.raises(ConfigError) as err:
        NodeConfig(node_id=1).with_settings(
            {"replica.fetch.partition.order": value, "num.partitions": "3"}
        )
    message = str(err.value)
    assert message == f"replica.fetch.partition.order={value!r}: expected random or rotate"
    assert "\n" not in message


def test_message_and_fetch_caps_default_to_kafkas():
    config = NodeConfig(node_id=1)
    assert config.message_max_bytes == 1048588
    assert config.fetch_max_bytes == 57671680  # 55 MiB


@pytest.mark.parametrize(
    "settings",
    [
        {"message.max.bytes": str(64 << 20)},  # a batch as large as a frame: never fetchable
        {"socket.max.frame.bytes": str(8 << 20)},  # fetch.max.bytes (55 MiB) no longer fits
        {
            "socket.max.frame.bytes": str(8 << 20),
            "fetch.max.bytes": str(4 << 20),
            "replica.fetch.response.max.bytes": str(1 << 20),
            "message.max.bytes": str((7 << 20) + 1),
        },
    ],
)
def test_a_cap_that_cannot_fit_in_a_frame_is_refused_in_one_line(settings):
    with pytest.raises(ConfigError) as err:
        NodeConfig(node_id=1).with_settings(settings)
    message = str(err.value)
    assert "does not fit in a frame: expected at most socket.max.frame.bytes" in message
    assert "\n" not in message


def test_caps_that_fit_in_a_frame_are_taken():
    config = NodeConfig(node_id=1).with_settings(
        {
            "socket.max.frame.bytes": str(8 << 20),
            "fetch.max.bytes": str(4 << 20),
            "replica.fetch.response.max.bytes": str(1 << 20),
            "message.max.bytes": str(7 << 20),  # exactly the frame minus the 1 MiB headroom
        }
    )
    assert config.message_max_bytes == 7 << 20
