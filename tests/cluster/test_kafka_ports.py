"""Each broker of a local cluster keeps one Kafka-protocol port for the cluster's life
(cluster/spec.py, clusterfile.py, processes.py): a restarted broker is found again by the Kafka
clients that bootstrapped from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minikafka.cluster.clusterfile import ClusterRecord, read_record, record_to_json, write_record
from minikafka.cluster.processes import node_argv
from minikafka.cluster.spec import ClusterSpec, NodeSpec, plan_cluster
from minikafka.errors import ConfigError


def test_every_broker_gets_its_own_kafka_port_and_the_controller_none(tmp_path: Path):
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=3, seed=1)
    kafka = {n.node_id: n.kafka_port for n in spec.nodes}
    assert kafka[0] is None and all(kafka[b] for b in (1, 2, 3))
    native = {n.port for n in spec.nodes}
    assert len({kafka[b] for b in (1, 2, 3)} | native) == 7  # all distinct


def test_the_node_command_fixes_the_kafka_port(tmp_path: Path):
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=1, seed=1)
    broker = spec.node(1)
    argv = node_argv(spec, broker)
    assert f"kafka.listen=127.0.0.1:{broker.kafka_port}" in argv
    assert not any(a.startswith("kafka.listen") for a in node_argv(spec, spec.node(0)))
    own = ClusterSpec(
        name="c", base_dir=spec.base_dir, nodes=spec.nodes, seed=1,
        node_configs={"kafka.listen": "127.0.0.1:0"},
    )  # fmt: skip
    assert node_argv(own, own.node(1)).count("kafka.listen=127.0.0.1:0") == 1  # the user's wins


def test_the_cluster_file_keeps_the_kafka_ports_and_reads_old_files(tmp_path: Path):
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=2, seed=1)
    spec.base_dir.mkdir(parents=True)
    record = ClusterRecord(
        spec=spec, node_command=("x",), pids={n.node_id: None for n in spec.nodes},
        state="stopped", created_at="now", cluster_id="c-1",
    )  # fmt: skip
    write_record(record)
    assert read_record(spec.base_dir).spec.node(2).kafka_port == spec.node(2).kafka_port
    old = record_to_json(record)
    for node in old["nodes"]:
        del node["kafka_port"]
    (spec.base_dir / "cluster.json").write_text(json.dumps(old))
    assert read_record(spec.base_dir).spec.node(2).kafka_port is None


def test_a_kafka_port_taken_by_another_node_is_refused(tmp_path: Path):
    a = NodeSpec(node_id=0, roles=("controller",), host="h", port=10, data_dir=tmp_path)
    b = NodeSpec(node_id=1, roles=("broker",), host="h", port=11, data_dir=tmp_path, kafka_port=10)
    with pytest.raises(ConfigError, match="distinct"):
        ClusterSpec(name="c", base_dir=tmp_path, nodes=(a, b), seed=1)
    with pytest.raises(ConfigError, match="Kafka port"):
        NodeSpec(node_id=1, roles=("broker",), host="h", port=11, data_dir=tmp_path, kafka_port=0)


@pytest.mark.parametrize(("brokers", "factor"), [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_the_offsets_topic_gets_at_most_as_many_replicas_as_brokers(tmp_path, brokers, factor):
    """Kafka's default of 3 would refuse __consumer_offsets, so every consumer group, on a
    smaller cluster; `cluster up` sets min(3, brokers) unless the user chose."""
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=brokers, seed=1)
    assert f"offsets.topic.replication.factor={factor}" in node_argv(spec, spec.node(1))
    assert not any("offsets.topic" in a for a in node_argv(spec, spec.node(0)))  # controller
    own = ClusterSpec(
        name="c", base_dir=spec.base_dir, nodes=spec.nodes, seed=1,
        node_configs={"offsets.topic.replication.factor": "1"},
    )  # fmt: skip
    argv = node_argv(own, own.node(1))
    assert [a for a in argv if a.startswith("offsets.topic")] == [
        "offsets.topic.replication.factor=1"
    ]
