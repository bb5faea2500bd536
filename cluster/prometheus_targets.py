"""The Prometheus scrape targets of a local cluster, as a `file_sd` file.

Prometheus' file-based service discovery (`file_sd_configs` in prometheus.yml) reads a JSON list
of target groups, `[{"targets": ["host:port"], "labels": {...}}]`, and re-reads the file when it
changes. `write_file_sd` writes one group per node that serves metrics (server/prometheus.py),
labelled `node` (its id), `role` (`broker`, `controller`, or `broker,controller`) and `cluster`
(the cluster's name), so that queries can tell the nodes apart by more than `instance`.

A node's metrics port is its spec's (`NodeSpec.metrics_port`, fixed for the cluster's life so
the file stays right across restarts) unless the cluster's node configs set `metrics.port`:
then -1 means no metrics port (no target), and 0, or a node without a fixed port, means the
port the node bound, read from its `node.json`. A node with no port known yet has no target.

The file is written atomically (a temporary file, then a rename: cluster/files.py), as
Prometheus may read it at any moment. A file that cannot be written is a `ClusterError` of one
line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minikafka.cluster.files import atomic_write_json, read_json
from minikafka.cluster.processes import READY_FILE
from minikafka.cluster.spec import ClusterSpec, NodeSpec
from minikafka.errors import ClusterError

TARGETS_FILE = "prometheus-targets.json"  # in the cluster's base_dir


def metrics_port(spec: ClusterSpec, node: NodeSpec) -> int | None:
    """The port `node` serves /metrics on, None if it serves none or it is not known yet."""
    configured = spec.node_configs.get("metrics.port")
    if configured is not None:
        try:
            fixed = int(configured)
        except ValueError:  # a node refuses it at start-up (server/config.py): no target
            return None
        if fixed < 0:
            return None
        if fixed > 0:
            return fixed
    elif node.metrics_port is not None:
        return node.metrics_port
    doc = read_json(node.data_dir / READY_FILE)
    bound = doc.get("metrics_port") if isinstance(doc, dict) else None
    return bound if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0 else None


def file_sd_groups(spec: ClusterSpec) -> list[dict[str, Any]]:
    """One file_sd target group per node of `spec` with a metrics port, by node id."""
    groups = []
    for node in sorted(spec.nodes, key=lambda n: n.node_id):
        port = metrics_port(spec, node)
        if port is None:
            continue
        labels = {"node": str(node.node_id), "role": ",".join(node.roles), "cluster": spec.name}
        groups.append({"targets": [f"{node.host}:{port}"], "labels": labels})
    return groups


def write_file_sd(path: Path | str, spec: ClusterSpec) -> list[dict[str, Any]]:
    """Write the file_sd file of `spec`'s nodes at `path` atomically; returns its groups."""
    groups = file_sd_groups(spec)
    target = Path(path)
    try:
        atomic_write_json(target, groups)
    except OSError as exc:
        raise ClusterError(
            f"cannot write the Prometheus targets file {target}: {exc.strerror or exc}"
        ) from None
    return groups
