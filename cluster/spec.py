"""Cluster layouts: which nodes a local cluster has, their roles, ports and data dirs.

Pure planning and validation; nothing here starts a process. Rules:

- exactly one node has the controller role; by default it is node 0 in its own process and the
  brokers are nodes 1..N; with a combined controller node 1 runs `broker,controller` and there is
  no node 0 (Kafka's KRaft "combined mode");
- every node listens on its own port of one host and owns `base_dir/node-<id>`;
- node configs are Kafka-style dotted names (`leader.replication.throttled.rate`) with string
  values, passed to every node as `--set name=value`;
- with a fault proxy (`plan_cluster(..., fault_proxy=True)`), node-to-node connections go
  through one proxy process on ports of the same host (cluster/fault_proxy.py).

Bad input raises `ConfigError` with a one-line message naming what is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from minikafka.cluster.fault_proxy import FaultProxySpec, check_fault_proxy, talking_pairs
from minikafka.cluster.ports import MAX_PORTS, free_ports
from minikafka.errors import ConfigError
from minikafka.faults.config import ProxyConfig, ProxyLink

BROKER = "broker"
CONTROLLER = "controller"
ROLES = (BROKER, CONTROLLER)
MAX_BROKERS = 64
MAX_SEED = 2**63 - 1
_CONFIG_NAME = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSpec:
    """One node of a cluster: id, roles (`broker`, `controller` or both), address, data dir."""

    node_id: int
    roles: tuple[str, ...]
    host: str
    port: int
    data_dir: Path
    # A broker's Kafka-protocol listener (`kafka.listen`), fixed for the cluster's life so that
    # a restarted broker keeps the address Kafka clients bootstrap from; None: a free port at
    # each start (or none, for the controller).
    kafka_port: int | None = None
    # Its Prometheus metrics port (`metrics.port`), fixed for the same reason: a scrape target
    # (the file_sd file `cluster up` writes) stays valid across restarts. None: a free port.
    metrics_port: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.node_id, bool) or not isinstance(self.node_id, int) or self.node_id < 0:
            raise ConfigError(f"node id must be a non-negative integer, got {self.node_id!r}")
        if not self.roles or any(role not in ROLES for role in self.roles):
            raise ConfigError(
                f"node {self.node_id} roles must be broker, controller or both, got {self.roles!r}"
            )
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise ConfigError(f"node {self.node_id} port must be an integer, got {self.port!r}")
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"node {self.node_id} port must be 1..65535, got {self.port}")
        for what, port in (("Kafka", self.kafka_port), ("metrics", self.metrics_port)):
            if port is not None and (
                isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535
            ):
                raise ConfigError(f"node {self.node_id} {what} port must be 1..65535, got {port!r}")
        object.__setattr__(self, "roles", tuple(self.roles))
        object.__setattr__(self, "data_dir", Path(self.data_dir))

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """A whole local cluster: its nodes, the seed every node gets, and the shared node configs."""

    name: str
    base_dir: Path
    nodes: tuple[NodeSpec, ...]
    seed: int
    node_configs: Mapping[str, str] = field(default_factory=dict)
    fault_proxy: FaultProxySpec | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_seed(self.seed)
        object.__setattr__(self, "base_dir", Path(self.base_dir))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        configs = validate_node_configs(self.node_configs)
        object.__setattr__(self, "node_configs", MappingProxyType(configs))
        ids = [node.node_id for node in self.nodes]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"node ids must be distinct, got {ids}")
        addresses = [node.address for node in self.nodes] + [
            f"{node.host}:{port}"
            for node in self.nodes
            for port in (node.kafka_port, node.metrics_port)
            if port is not None
        ]
        if len(set(addresses)) != len(addresses):
            raise ConfigError(
                f"node addresses (Kafka and metrics ports too) must be distinct, got {addresses}"
            )
        controllers = [node.node_id for node in self.nodes if node.is_controller]
        if len(controllers) != 1:
            raise ConfigError(f"a cluster needs exactly one controller node, got {controllers}")
        if not any(node.is_broker for node in self.nodes):
            raise ConfigError("a cluster needs at least one broker node")
        if self.fault_proxy is not None:
            check_fault_proxy(self.fault_proxy, self.nodes)

    @property
    def controller(self) -> NodeSpec:
        return next(node for node in self.nodes if node.is_controller)

    @property
    def brokers(self) -> tuple[NodeSpec, ...]:
        return tuple(node for node in self.nodes if node.is_broker)

    @property
    def controller_address(self) -> str:
        return self.controller.address

    @property
    def bootstrap(self) -> str:
        """Comma-separated broker addresses, the form clients take as `--bootstrap`."""
        return ",".join(node.address for node in self.brokers)

    def node(self, node_id: int) -> NodeSpec:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        known = ", ".join(str(node.node_id) for node in self.nodes)
        raise ConfigError(f"no node {node_id!r} in cluster {self.name} (nodes: {known})")


def plan_cluster(
    *,
    base_dir: Path | str,
    brokers: int,
    seed: int,
    combined_controller: bool = False,
    node_configs: Mapping[str, str] | None = None,
    name: str | None = None,
    host: str = "127.0.0.1",
    fault_proxy: bool = False,
    ports: Callable[[int, str], list[int]] | None = None,
) -> ClusterSpec:
    """Lay out a cluster of `brokers` brokers plus a controller, on fresh ports of `host`
    (`ports(n, host)`: n of them; `free_ports` by default, the simulation's own the same in
    every run).

    With `fault_proxy`, also a proxy control port and one port per talking pair of nodes.
    """
    if isinstance(brokers, bool) or not isinstance(brokers, int) or not 1 <= brokers <= MAX_BROKERS:
        raise ConfigError(f"brokers must be an integer from 1 to {MAX_BROKERS}, got {brokers!r}")
    base = Path(base_dir).absolute()
    if base.exists() and not base.is_dir():
        raise ConfigError(f"cluster directory {base} exists and is not a directory")
    if combined_controller:
        layout = [(1, (BROKER, CONTROLLER))] + [(i, (BROKER,)) for i in range(2, brokers + 1)]
    else:
        layout = [(0, (CONTROLLER,))] + [(i, (BROKER,)) for i in range(1, brokers + 1)]
    pairs = talking_pairs(layout) if fault_proxy else []
    kafka = [node_id for node_id, roles in layout if BROKER in roles]  # a Kafka port each
    wanted = 2 * len(layout) + len(kafka) + (1 + len(pairs) if fault_proxy else 0)
    if wanted > MAX_PORTS:
        raise ConfigError(
            f"a fault proxy needs {wanted} ports for {brokers} brokers (node, metrics, Kafka "
            f"and proxy ports), at most {MAX_PORTS}; "
            "use fewer brokers"
        )
    ports = (ports or free_ports)(wanted, host)
    kafka_ports = dict(zip(kafka, ports[len(layout) : len(layout) + len(kafka)], strict=True))
    metrics_ports = ports[len(layout) + len(kafka) : 2 * len(layout) + len(kafka)]
    proxy_ports = ports[2 * len(layout) + len(kafka) :]
    ports = ports[: len(layout)]
    nodes = tuple(
        NodeSpec(
            node_id=node_id,
            roles=roles,
            host=host,
            port=port,
            data_dir=base / f"node-{node_id}",
            kafka_port=kafka_ports.get(node_id),
            metrics_port=metrics_port,
        )
        for (node_id, roles), port, metrics_port in zip(layout, ports, metrics_ports, strict=True)
    )
    return ClusterSpec(
        name=name if name is not None else (base.name or "minikafka"),
        base_dir=base,
        nodes=nodes,
        seed=seed,
        node_configs=dict(node_configs or {}),
        fault_proxy=(
            FaultProxySpec(
                host=host,
                control_port=proxy_ports[0],
                links=dict(zip(pairs, proxy_ports[1:], strict=True)),
            )
            if fault_proxy
            else None
        ),
    )


def validate_node_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Check node configs are dotted names with string values; return a plain copy."""
    if not isinstance(configs, Mapping):
        raise ConfigError(f"node configs must be a mapping of name to value, got {configs!r}")
    checked: dict[str, str] = {}
    for key, value in configs.items():
        if not isinstance(key, str) or not _CONFIG_NAME.fullmatch(key):
            raise ConfigError(
                f"node config name {key!r} is not a dotted lowercase name "
                "like leader.replication.throttled.rate"
            )
        if not isinstance(value, str):
            raise ConfigError(
                f"node config {key} must have a string value, got {type(value).__name__} {value!r}"
            )
        if "\n" in value or "\0" in value:
            raise ConfigError(f"node config {key} value must be one line without NUL bytes")
        checked[key] = value
    return checked


def parse_node_configs(items: Iterable[str]) -> dict[str, str]:
    """Parse `name=value` strings (the CLI's repeated `--set`) into validated node configs."""
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects name=value, got {item!r}")
        key = key.strip()
        if key in configs:
            raise ConfigError(f"node config {key} is set twice")
        configs[key] = value
    return validate_node_configs(configs)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _CLUSTER_NAME.fullmatch(name):
        raise ConfigError(
            f"cluster name must be letters, digits, '.', '_' or '-' (not first), got {name!r}"
        )


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed must be an integer from 0 to 2**63-1, got {seed!r}")


def proxy_config(spec: ClusterSpec) -> ProxyConfig:
    """What the proxy process serves for `spec` (the spec file it is started with)."""
    proxy = spec.fault_proxy
    if proxy is None:
        raise ConfigError(f"cluster {spec.name} has no fault proxy")
    return ProxyConfig(
        host=proxy.host,
        control_port=proxy.control_port,
        links=tuple(
            ProxyLink(
                src=src,
                dst=dst,
                port=port,
                target_host=spec.node(dst).host,
                target_port=spec.node(dst).port,
            )
            for (src, dst), port in proxy.links.items()
        ),
    )


def node_routes(spec: ClusterSpec, node: NodeSpec) -> dict[tuple[str, int], tuple[str, int]]:
    """{peer's address: the proxy port that carries `node`'s connections to it}: one per link
    it opens, none without a proxy (NodeConfig.routes)."""
    proxy = spec.fault_proxy
    if proxy is None:
        return {}
    return {
        (spec.node(dst).host, spec.node(dst).port): (proxy.host, port)
        for (src, dst), port in proxy.links.items()
        if src == node.node_id
    }


def route_args(spec: ClusterSpec, node: NodeSpec) -> list[str]:
    """The `--route DST=VIA` options of `node` (`node_routes`)."""
    args = []
    for (host, port), (via_host, via_port) in node_routes(spec, node).items():
        args += ["--route", f"{host}:{port}={via_host}:{via_port}"]
    return args
