"""The Prometheus file_sd file of a local cluster (cluster/prometheus_targets.py): one target
group per node with a metrics port, its port from the spec, the `metrics.port` config or the
node's node.json, written atomically; an unwritable path is one ClusterError line."""

from __future__ import annotations

import json

import pytest

from minikafka.cluster.prometheus_targets import (
    TARGETS_FILE,
    file_sd_groups,
    metrics_port,
    write_file_sd,
)
from minikafka.cluster.spec import BROKER, CONTROLLER, ClusterSpec, NodeSpec
from minikafka.errors import ClusterError


def spec(tmp_path, *, metrics_ports=(9100, 9101, 9102), node_configs=None) -> ClusterSpec:
    roles = [(CONTROLLER,), (BROKER,), (BROKER,)]
    nodes = [
        NodeSpec(
            node_id=i,
            roles=roles[i],
            host="127.0.0.1",
            port=9000 + i,
            data_dir=tmp_path / f"node-{i}",
            metrics_port=metrics_ports[i],
        )
        for i in range(3)
    ]
    return ClusterSpec(
        name="demo", base_dir=tmp_path, nodes=nodes, seed=1, node_configs=node_configs or {}
    )


def write_node_json(s: ClusterSpec, node_id: int, **doc: object) -> None:
    node = s.node(node_id)
    node.data_dir.mkdir(parents=True, exist_ok=True)
    (node.data_dir / "node.json").write_text(json.dumps({"node_id": node_id, **doc}))


def test_writes_one_group_per_node_with_labels(tmp_path):
    s = spec(tmp_path)
    path = tmp_path / TARGETS_FILE
    groups = write_file_sd(path, s)
    expected = [
        {
            "targets": [f"127.0.0.1:{9100 + i}"],
            "labels": {"node": str(i), "role": role, "cluster": "demo"},
        }
        for i, role in enumerate(["controller", "broker", "broker"])
    ]
    assert groups == expected and json.loads(path.read_text()) == expected
    assert [p.name for p in tmp_path.iterdir()] == [TARGETS_FILE]  # no temporary file left


def test_ports_not_fixed_by_the_spec_come_from_node_json(tmp_path):
    s = spec(tmp_path, metrics_ports=(None, None, None))
    write_node_json(s, 1, metrics_port=45678)
    write_node_json(s, 2, metrics_port=-1)  # the node serves no metrics
    # node 0 has no node.json yet: not known, no target
    assert [g["targets"] for g in file_sd_groups(s)] == [["127.0.0.1:45678"]]


def test_the_metrics_port_config_overrides_the_spec(tmp_path):
    off = spec(tmp_path, node_configs={"metrics.port": "-1"})
    assert file_sd_groups(off) == []
    fixed = spec(tmp_path, node_configs={"metrics.port": "9200"})
    assert {metrics_port(fixed, n) for n in fixed.nodes} == {9200}
    bound = spec(tmp_path, node_configs={"metrics.port": "0"})
    write_node_json(bound, 2, metrics_port=40002)
    assert [g["labels"]["node"] for g in file_sd_groups(bound)] == ["2"]


def test_combined_node_role_and_rewrite_replaces_the_file(tmp_path):
    node = NodeSpec(
        node_id=1,
        roles=(BROKER, CONTROLLER),
        host="127.0.0.1",
        port=9001,
        data_dir=tmp_path / "node-1",
        metrics_port=9101,
    )
    s = ClusterSpec(name="solo", base_dir=tmp_path, nodes=[node], seed=1)
    path = tmp_path / TARGETS_FILE
    path.write_text("stale")
    write_file_sd(path, s)
    [group] = json.loads(path.read_text())
    assert group["labels"] == {"node": "1", "role": "broker,controller", "cluster": "solo"}


def test_an_unwritable_path_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("a file, not a directory")
    with pytest.raises(ClusterError) as err:
        write_file_sd(tmp_path / "taken" / TARGETS_FILE, spec(tmp_path))
    assert str(err.value).startswith("cannot write the Prometheus targets file ")
    assert "\n" not in str(err.value)
