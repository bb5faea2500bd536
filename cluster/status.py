"""What `minikafka cluster status` shows of a local cluster: a row per node (NodeStatus), one for
the fault proxy (ProxyStatus), and the listeners a node reports in its node.json once it is up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from minikafka.cluster.spec import NodeSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeStatus:
    """One row of `minikafka cluster status`."""

    node_id: int
    roles: tuple[str, ...]
    address: str
    pid: int | None
    alive: bool
    paused: bool
    data_dir: Path
    kafka_address: str | None = None  # its Kafka-protocol listener (brokers), once it is up
    metrics_address: str | None = None  # its Prometheus endpoint (GET /metrics), once it is up


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyStatus:
    """The fault proxy's line in `minikafka cluster status`."""

    control: str
    links: int
    pid: int | None
    alive: bool


def bound_address(node: NodeSpec, key: str) -> str | None:
    """host:port of a listener the node reports in its node.json (`kafka_port`,
    `metrics_port`), None if it has none or has not written the file yet."""
    try:
        doc = json.loads((node.data_dir / "node.json").read_text())
    except (OSError, ValueError):
        return None
    port = doc.get(key, -1)
    return f"{node.host}:{port}" if isinstance(port, int) and port > 0 else None
