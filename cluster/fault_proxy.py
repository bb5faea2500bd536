"""The fault proxy of a local cluster, as planned: its control port and one port per link.

Pure planning and validation (the process is cluster/proxy_process.py, the proxy itself
minikafka/faults; what a cluster spec makes of it, its proxy config and its nodes' routes, is in
cluster/spec.py). A directed link (src, dst) exists for every pair of distinct nodes that talk:
broker -> broker (replica fetchers), broker -> controller (registration, heartbeats,
AlterPartition, forwarded admin requests) and controller -> broker (LeaderAndIsr,
UpdateMetadata, StopReplica). A combined controller+broker node has no link to itself. Node src
reaches dst through the proxy because its command line carries `--route dst=proxy_host:port`;
clients get no routes, so they keep talking to the brokers directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from minikafka.errors import ConfigError
from minikafka.faults.links import LinkId

PROXY_DIR = "fault-proxy"  # under the cluster's base dir: spec file, ready file, output


class _Node(Protocol):
    """What the checks read of a node (cluster/spec.py NodeSpec), named here so that this
    module needs nothing of spec.py, which builds on it."""

    node_id: int
    roles: tuple[str, ...]
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultProxySpec:
    """Where the proxy listens: its control port and, per link (src, dst), a port of `host`."""

    host: str
    control_port: int
    links: Mapping[LinkId, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", MappingProxyType(dict(self.links)))

    @property
    def control_address(self) -> str:
        return f"{self.host}:{self.control_port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "control_port": self.control_port,
            "control": self.control_address,
            "links": [
                {"src": src, "dst": dst, "port": port} for (src, dst), port in self.links.items()
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FaultProxySpec:
        """The inverse of to_json; KeyError/TypeError on a damaged record (the caller words it)."""
        links: dict[LinkId, int] = {}
        for item in data["links"]:
            links[(item["src"], item["dst"])] = item["port"]
        return cls(host=data["host"], control_port=data["control_port"], links=links)


def talking_pairs(layout: Iterable[tuple[int, Sequence[str]]]) -> list[LinkId]:
    """Every directed (src, dst) pair of distinct nodes that open connections to each other,
    from (node id, roles) pairs: broker <-> broker and broker <-> controller."""
    nodes = list(layout)
    return [
        (src, dst)
        for src, src_roles in nodes
        for dst, dst_roles in nodes
        if src != dst and ("broker" in src_roles or "broker" in dst_roles)
    ]


def check_fault_proxy(proxy: FaultProxySpec, nodes: Sequence[_Node]) -> None:
    """ConfigError unless the proxy's links are exactly the talking pairs, on distinct ports."""
    if not isinstance(proxy, FaultProxySpec):
        raise ConfigError(f"fault_proxy must be a FaultProxySpec or None, got {proxy!r}")
    expected = talking_pairs((node.node_id, node.roles) for node in nodes)
    if sorted(proxy.links) != sorted(expected):
        got = ", ".join(f"{s}->{d}" for s, d in proxy.links)
        raise ConfigError(
            f"the fault proxy needs one link per talking pair of nodes "
            f"({', '.join(f'{s}->{d}' for s, d in expected)}), got {got or 'none'}"
        )
    ports = [proxy.control_port, *proxy.links.values()]
    for port in ports:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ConfigError(f"fault proxy ports must be 1..65535, got {port!r}")
    taken = {(node.host, node.port) for node in nodes}
    if len(set(ports)) != len(ports) or any((proxy.host, p) in taken for p in ports):
        raise ConfigError("fault proxy ports must be distinct and not used by a node")
