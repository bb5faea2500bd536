"""A local cluster's fault proxy as planned: ports, links, the nodes' `--route` options, the
proxy spec file, and the round trip through cluster.json. Pure planning, no processes."""

from __future__ import annotations

import dataclasses

import pytest

from minikafka.cluster import LocalCluster, node_argv, plan_cluster
from minikafka.cluster.clusterfile import (
    ClusterRecord,
    read_record,
    record_from_json,
    record_to_json,
    write_record,
)
from minikafka.cluster.fault_proxy import FaultProxySpec, talking_pairs
from minikafka.cluster.spec import proxy_config
from minikafka.errors import ClusterError, ConfigError
from minikafka.faults.control import FaultProxyClient
from minikafka.server.config import parse_routes


def routes_in(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--route"]


def test_plan_allocates_a_control_port_and_one_port_per_talking_pair(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=3, seed=1, fault_proxy=True)
    proxy = spec.fault_proxy
    assert proxy is not None and proxy.host == "127.0.0.1"
    # Controller 0 and brokers 1..3: every ordered pair of distinct nodes.
    assert sorted(proxy.links) == [(a, b) for a in range(4) for b in range(4) if a != b]
    ports = [proxy.control_port, *proxy.links.values(), *(n.port for n in spec.nodes)]
    assert len(set(ports)) == len(ports) == 1 + 12 + 4


def test_combined_controller_has_no_link_to_itself(tmp_path):
    spec = plan_cluster(
        base_dir=tmp_path, brokers=3, seed=1, combined_controller=True, fault_proxy=True
    )
    assert sorted(spec.fault_proxy.links) == [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]


def test_only_pairs_with_a_broker_talk():
    layout = [(0, ("controller",)), (1, ("broker",)), (2, ("broker", "controller"))]
    assert talking_pairs(layout) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    assert talking_pairs([(0, ("controller",)), (5, ("controller",))]) == []


def test_no_proxy_by_default_and_no_routes(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=2, seed=1)
    assert spec.fault_proxy is None
    assert routes_in(node_argv(spec, spec.node(1))) == []


def test_each_node_routes_its_outgoing_links_to_the_proxy(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=3, seed=1, fault_proxy=True)
    proxy = spec.fault_proxy
    for node in spec.nodes:
        routes = parse_routes(routes_in(node_argv(spec, node)))  # what the node command parses
        expected = {
            (spec.node(dst).host, spec.node(dst).port): ("127.0.0.1", port)
            for (src, dst), port in proxy.links.items()
            if src == node.node_id
        }
        assert routes == expected and len(routes) == 3
    # Broker 1 reaches the controller and broker 2 through their links' ports.
    routes = parse_routes(routes_in(node_argv(spec, spec.node(1))))
    assert routes[(spec.controller.host, spec.controller.port)][1] == proxy.links[(1, 0)]
    assert routes[(spec.node(2).host, spec.node(2).port)][1] == proxy.links[(1, 2)]


def test_proxy_spec_file_targets_the_real_node_addresses(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=2, seed=1, fault_proxy=True)
    config = proxy_config(spec)
    assert config.control_port == spec.fault_proxy.control_port
    by_link = {link.link: link for link in config.links}
    assert by_link[(1, 2)].target == spec.node(2).address
    assert by_link[(2, 0)].target == spec.controller.address
    assert by_link[(1, 2)].port == spec.fault_proxy.links[(1, 2)]


def test_too_many_brokers_for_the_proxy_is_one_line(tmp_path):
    # 16 node ports, 15 Kafka ports, the control port and 15 x 16 links: 272
    with pytest.raises(ConfigError, match="a fault proxy needs 288 ports for 15 brokers"):
        plan_cluster(base_dir=tmp_path, brokers=15, seed=1, fault_proxy=True)


def test_cluster_spec_checks_the_proxy_links_and_ports(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=2, seed=1, fault_proxy=True)
    proxy = spec.fault_proxy
    missing = dict(proxy.links)
    del missing[(1, 2)]
    with pytest.raises(ConfigError, match="one link per talking pair"):
        dataclasses.replace(spec, fault_proxy=dataclasses.replace(proxy, links=missing))
    clash = {**proxy.links, (1, 2): proxy.control_port}
    with pytest.raises(ConfigError, match="distinct and not used by a node"):
        dataclasses.replace(spec, fault_proxy=dataclasses.replace(proxy, links=clash))
    node_port = {**proxy.links, (1, 2): spec.node(1).port}
    with pytest.raises(ConfigError, match="distinct and not used by a node"):
        dataclasses.replace(spec, fault_proxy=dataclasses.replace(proxy, links=node_port))


def _record(spec, proxy_pid=None) -> ClusterRecord:
    return ClusterRecord(
        spec=spec,
        node_command=("python", "-m", "minikafka", "node"),
        pids={node.node_id: None for node in spec.nodes},
        state="running",
        created_at="2024-01-01T00:00:00.000+00:00",
        proxy_pid=proxy_pid,
    )


def test_cluster_file_round_trip_keeps_the_proxy(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=3, seed=1, fault_proxy=True)
    record = _record(spec, proxy_pid=4242)
    data = record_to_json(record)
    assert data["fault_proxy"]["control"] == spec.fault_proxy.control_address
    assert data["fault_proxy"]["pid"] == 4242
    back = record_from_json(data, tmp_path / "cluster.json")
    assert back == record
    assert isinstance(back.spec.fault_proxy, FaultProxySpec)
    assert list(back.spec.fault_proxy.links.items()) == list(spec.fault_proxy.links.items())


def test_cluster_file_without_proxy_key_loads_as_no_proxy(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=1, seed=1)
    data = record_to_json(_record(spec))
    assert data["fault_proxy"] is None
    del data["fault_proxy"]  # a file written before the proxy existed
    assert record_from_json(data, tmp_path / "cluster.json").spec.fault_proxy is None


def test_damaged_proxy_record_is_a_cluster_error(tmp_path):
    spec = plan_cluster(base_dir=tmp_path, brokers=1, seed=1, fault_proxy=True)
    data = record_to_json(_record(spec))
    del data["fault_proxy"]["links"]
    with pytest.raises(ClusterError, match="is damaged"):
        record_from_json(data, tmp_path / "cluster.json")


def test_loaded_cluster_gives_the_proxy_client(tmp_path):
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=2, seed=1, fault_proxy=True)
    write_record(_record(spec))
    lc = LocalCluster.load(tmp_path / "c")
    assert read_record(tmp_path / "c").spec == spec
    client = lc.fault_proxy()
    assert isinstance(client, FaultProxyClient)
    assert (
        (client.host, client.port)
        == lc.fault_proxy_address
        == ("127.0.0.1", spec.fault_proxy.control_port)
    )
    status = lc.proxy_status()
    assert status is not None and status.links == 6 and not status.alive


def test_cluster_without_proxy_says_how_to_get_one(tmp_path):
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=1, seed=1)
    write_record(_record(spec))
    lc = LocalCluster.load(tmp_path / "c")
    assert lc.fault_proxy_address is None and lc.proxy_status() is None
    with pytest.raises(ClusterError, match="cluster up --fault-proxy"):
        lc.fault_proxy()
