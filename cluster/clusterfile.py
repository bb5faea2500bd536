"""The cluster file, `<base_dir>/cluster.json`: how later commands find a running cluster.

It records the spec, the node command, each node's pid, the cluster state
(`starting` -> `running` -> `stopped`) and when the cluster was created, plus derived fields for
people and other tools (addresses, controller, bootstrap). A cluster with a fault proxy also has
`fault_proxy` (control address, link ports, pid); older files without the key have none. Writes are atomic, and updates are
read-modify-write under an flock on `<base_dir>/.cluster.lock`, so two commands changing
different nodes (say a nemesis restarting one node while a user pauses another) both land.
`cluster_id` is the cluster's identity (cluster/secret.py; its secret is in another file, mode
0600: cluster.json stays readable by everyone).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from minikafka.cluster.fault_proxy import FaultProxySpec
from minikafka.cluster.files import atomic_write_json, read_json
from minikafka.cluster.spec import ClusterSpec, NodeSpec
from minikafka.errors import ClusterError, ConfigError

CLUSTER_FILE = "cluster.json"
LOCK_FILE = ".cluster.lock"
FORMAT_VERSION = 1
STATES = ("starting", "running", "stopped")

ClusterState = Literal["starting", "running", "stopped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterRecord:
    """What cluster.json holds: the spec, how nodes are started, their pids and the state."""

    spec: ClusterSpec
    node_command: tuple[str, ...]
    pids: Mapping[int, int | None]
    state: ClusterState
    created_at: str
    proxy_pid: int | None = None  # the fault proxy's process, if the spec has one
    cluster_id: str = ""  # every node gets it (cluster/secret.py); "" in older files

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_command", tuple(self.node_command))
        object.__setattr__(self, "pids", MappingProxyType(dict(self.pids)))
        if self.state not in STATES:
            raise ClusterError(f"cluster state must be one of {', '.join(STATES)}")

    def with_pid(self, node_id: int, pid: int | None) -> ClusterRecord:
        return dataclasses.replace(self, pids={**self.pids, node_id: pid})

    def with_state(self, state: ClusterState) -> ClusterRecord:
        return dataclasses.replace(self, state=state)

    def with_proxy_pid(self, pid: int | None) -> ClusterRecord:
        return dataclasses.replace(self, proxy_pid=pid)


def cluster_file(base_dir: Path) -> Path:
    return Path(base_dir) / CLUSTER_FILE


def write_record(record: ClusterRecord) -> None:
    with _locked(record.spec.base_dir):
        atomic_write_json(cluster_file(record.spec.base_dir), record_to_json(record))


def read_record(base_dir: Path) -> ClusterRecord | None:
    """The record in `base_dir`, None if there is none; ClusterError if it is unreadable."""
    path = cluster_file(base_dir)
    if not path.exists():
        return None
    data = read_json(path)
    if data is None:
        raise ClusterError(f"cluster file {path} is not valid JSON; remove it or fix it")
    return record_from_json(data, path)


def update_record(
    base_dir: Path, change: Callable[[ClusterRecord], ClusterRecord]
) -> ClusterRecord:
    """Re-read cluster.json under the lock, apply `change`, write it back; the new record."""
    with _locked(base_dir):
        current = read_record(base_dir)
        if current is None:
            raise ClusterError(f"no cluster in {base_dir} (run `minikafka cluster up`)")
        new = change(current)
        atomic_write_json(cluster_file(base_dir), record_to_json(new))
        return new


def remove_record(base_dir: Path) -> None:
    with _locked(base_dir):
        cluster_file(base_dir).unlink(missing_ok=True)
    (Path(base_dir) / LOCK_FILE).unlink(missing_ok=True)


def record_to_json(record: ClusterRecord) -> dict[str, Any]:
    spec = record.spec
    return {
        "format": FORMAT_VERSION,
        "name": spec.name,
        "state": record.state,
        "created_at": record.created_at,
        "cluster_id": record.cluster_id,
        "base_dir": str(spec.base_dir),
        "seed": spec.seed,
        "node_configs": dict(spec.node_configs),
        "node_command": list(record.node_command),
        "controller": spec.controller_address,
        "bootstrap": spec.bootstrap,
        "nodes": [
            {
                "node_id": node.node_id,
                "roles": list(node.roles),
                "host": node.host,
                "port": node.port,
                "kafka_port": node.kafka_port,
                "metrics_port": node.metrics_port,
                "address": node.address,
                "data_dir": str(node.data_dir),
                "pid": record.pids.get(node.node_id),
            }
            for node in spec.nodes
        ],
        "fault_proxy": (
            None
            if spec.fault_proxy is None
            else {**spec.fault_proxy.to_json(), "pid": record.proxy_pid}
        ),
    }


def record_from_json(data: Any, path: Path) -> ClusterRecord:
    try:
        if data.get("format") != FORMAT_VERSION:
            raise ClusterError(
                f"cluster file {path} has format {data.get('format')!r}, "
                f"this minikafka reads format {FORMAT_VERSION}"
            )
        nodes = tuple(_node_from_json(item) for item in data["nodes"])
        proxy = data.get("fault_proxy")
        spec = ClusterSpec(
            name=data["name"],
            base_dir=Path(data["base_dir"]),
            nodes=nodes,
            seed=data["seed"],
            node_configs=data["node_configs"],
            fault_proxy=None if proxy is None else FaultProxySpec.from_json(proxy),
        )
        return ClusterRecord(
            spec=spec,
            node_command=tuple(str(arg) for arg in data["node_command"]),
            pids={item["node_id"]: _pid(item.get("pid")) for item in data["nodes"]},
            state=data["state"],
            created_at=str(data["created_at"]),
            proxy_pid=None if proxy is None else _pid(proxy.get("pid")),
            cluster_id=str(data.get("cluster_id") or ""),
        )
    except (KeyError, TypeError, AttributeError, ConfigError) as e:
        raise ClusterError(f"cluster file {path} is damaged ({type(e).__name__}: {e})") from e


def _node_from_json(item: Mapping[str, Any]) -> NodeSpec:
    return NodeSpec(
        node_id=item["node_id"],
        roles=tuple(item["roles"]),
        host=item["host"],
        port=item["port"],
        data_dir=Path(item["data_dir"]),
        kafka_port=item.get("kafka_port"),  # absent from files written before it existed
        metrics_port=item.get("metrics_port"),  # the same
    )


def _pid(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TypeError(f"pid must be a positive integer, got {value!r}")
    return value


@contextmanager
def _locked(base_dir: Path) -> Iterator[None]:
    """An exclusive flock on `<base_dir>/.cluster.lock` for one read-modify-write."""
    path = Path(base_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
