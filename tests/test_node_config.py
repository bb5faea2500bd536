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
