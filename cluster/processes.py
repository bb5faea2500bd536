"""Node processes: start, pause, resume and wait for the nodes of a local cluster.

A `NodeProcess` is a `ManagedProcess` (cluster/managed.py owns the rules shared with the fault
proxy: own session, out file with a header per start, adopting a recorded pid only while its
command line names the marker, SIGTERM plus SIGCONT then SIGKILL). What is a node's own:

- the command line is `node_argv` (the node contract) and its marker is the node's data dir, so
  a recycled pid whose command line does not name that dir is never signalled; it names the
  cluster id and the secret file's path, never the secret;
- stdout and stderr are appended to `<data_dir>/node.out`;
- a node is ready once `<data_dir>/node.json` exists and names the node's pid (a file left by an
  earlier run names an older pid and is ignored); `wait_all_ready` waits for several at once and
  fails fast when one exits;
- a node can be paused (SIGSTOP) and resumed (SIGCONT), and both return only once /proc shows
  the new state, so a fault tool's next step sees the node stopped or running.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from minikafka.cluster.managed import (
    KILL_WAIT_S,
    POLL_S,
    ManagedProcess,
    Progress,
    StopOutcome,
    poll_until,
    proc_state,
)
from minikafka.cluster.secret import secret_path
from minikafka.cluster.spec import ClusterSpec, NodeSpec, route_args
from minikafka.errors import ClusterError

NODE_COMMAND: tuple[str, ...] = (sys.executable, "-m", "minikafka", "node")
READY_FILE = "node.json"
OUT_FILE = "node.out"
NOTE_EVERY_S = 5.0


def node_argv(
    spec: ClusterSpec,
    node: NodeSpec,
    node_command: Sequence[str] | None = None,
    *,
    cluster_id: str = "",
) -> list[str]:
    """The full command line that starts `node` (the node contract, see the module docstring).

    With a `cluster_id`, the node also gets it and the path of the cluster's secret file (never
    the secret itself: command lines are public, cluster/secret.py)."""
    argv = list(NODE_COMMAND if node_command is None else node_command)
    if not argv:
        raise ClusterError("the node command is empty")
    argv += ["--node-id", str(node.node_id), "--roles", ",".join(node.roles)]
    argv += ["--listen", node.address, "--controller", spec.controller_address]
    argv += ["--data-dir", str(node.data_dir), "--seed", str(spec.seed)]
    for key, value in node_settings(spec, node, cluster_id=cluster_id).items():
        argv += ["--set", f"{key}={value}"]
    return argv + route_args(spec, node)


def node_settings(spec: ClusterSpec, node: NodeSpec, *, cluster_id: str = "") -> dict[str, str]:
    """The Kafka-named settings `node` starts with (its `--set` options): the cluster's node
    configs and what a local cluster adds. The simulation (minikafka/sim) starts its nodes with
    the same."""
    settings = dict(spec.node_configs)
    if node.is_broker and "kafka.listen" not in spec.node_configs:
        # Every broker of a local cluster speaks Kafka's protocol too, on the port its spec
        # fixes (a free one if it has none); node.json's kafka_port says which it bound.
        settings["kafka.listen"] = f"{node.host}:{node.kafka_port or 0}"
    if "metrics.port" not in spec.node_configs:
        # The Prometheus port its spec fixes, so the targets in prometheus-targets.json stay
        # valid across restarts (a free one if it has none).
        settings["metrics.port"] = str(node.metrics_port or 0)
    if node.is_broker and "offsets.topic.replication.factor" not in spec.node_configs:
        # Kafka's default (3) refuses __consumer_offsets, so every consumer group, on a cluster
        # of fewer brokers; its own config/server.properties sets 1 for local use. Ours: as
        # many replicas as Kafka's default allows on this cluster.
        settings["offsets.topic.replication.factor"] = str(min(3, len(spec.brokers)))
    if cluster_id:
        settings["cluster.id"] = cluster_id
        settings["cluster.secret.file"] = str(secret_path(spec.base_dir))
    return settings


class NodeProcess(ManagedProcess):
    """One node's OS process, started here (`start()`) or adopted from a recorded pid."""

    def __init__(self, node: NodeSpec, argv: Sequence[str], *, pid: int | None = None) -> None:
        super().__init__(
            argv,
            label=f"node {node.node_id}",
            marker=node.data_dir,
            out_path=node.data_dir / OUT_FILE,
            ready_path=node.data_dir / READY_FILE,
            pid=pid,
        )
        self.node = node

    def __repr__(self) -> str:
        return f"NodeProcess(node_id={self.node.node_id}, pid={self._pid})"

    def is_paused(self) -> bool:
        """True if the process is stopped by SIGSTOP (Linux only; False elsewhere)."""
        return self._pid is not None and self.is_alive() and proc_state(self._pid) == "T"

    def pause(self) -> bool:
        """SIGSTOP; returns once the process is stopped. False if it was not running."""
        if not self.send_signal(signal.SIGSTOP):
            return False
        if proc_state(self._pid) is not None:
            poll_until(lambda: proc_state(self._pid) in ("T", "", "Z"), KILL_WAIT_S)
        return True

    def resume(self) -> bool:
        """SIGCONT; returns once the process runs again. False if it was not running."""
        if not self.send_signal(signal.SIGCONT):
            return False
        if proc_state(self._pid) is not None:
            poll_until(lambda: proc_state(self._pid) != "T", KILL_WAIT_S)
        return True

    def wait_ready(self, timeout_s: float, progress: Progress | None = None) -> dict[str, Any]:
        """Wait for node.json with our pid; ClusterError if the node exits or times out."""
        return wait_all_ready([self], timeout_s, progress)[self.node.node_id]


def wait_all_ready(
    procs: Sequence[NodeProcess], timeout_s: float, progress: Progress | None = None
) -> dict[int, dict[str, Any]]:
    """Wait until every node wrote its node.json; fail fast when one exits, or at the timeout.

    Returns each node's node.json by node id.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    next_note = start + NOTE_EVERY_S
    pending: dict[int, NodeProcess] = {p.node.node_id: p for p in procs}
    ready: dict[int, dict[str, Any]] = {}
    while pending:
        for node_id, proc in list(pending.items()):
            info = proc.ready_info()
            if info is not None:
                ready[node_id] = info
                del pending[node_id]
                _note(progress, f"node {node_id} ready on {proc.node.address} (pid {proc.pid})")
            elif not proc.is_alive():
                code = proc.exit_code()
                how = "exited" if code is None else f"exited with code {code}"
                raise ClusterError(f"node {node_id} {how} before it was ready; {proc.out_tail()}")
        now = time.monotonic()
        if pending and now >= deadline:
            first = next(iter(pending.values()))
            ids = ", ".join(str(i) for i in pending)
            raise ClusterError(
                f"node {ids} not ready after {timeout_s:g}s (no {READY_FILE} with its pid); "
                f"node {first.node.node_id}: {first.out_tail()}"
            )
        if pending and now >= next_note:
            ids = ", ".join(str(i) for i in pending)
            _note(progress, f"waiting for node {ids} ({now - start:.0f}s of {timeout_s:g}s)")
            next_note = now + NOTE_EVERY_S
        if pending:
            time.sleep(POLL_S)
    return ready


def stop_processes(procs: Sequence[NodeProcess], timeout_s: float) -> list[tuple[int, StopOutcome]]:
    """SIGTERM all at once, wait up to `timeout_s` in total, then SIGKILL the stragglers."""
    outcomes: dict[int, StopOutcome] = {}
    signalled = []
    for proc in procs:
        if proc.request_stop():
            signalled.append(proc)
        else:
            outcomes[proc.node.node_id] = "not running"
    deadline = time.monotonic() + timeout_s
    for proc in signalled:
        if proc.wait_exit(deadline - time.monotonic()):
            outcomes[proc.node.node_id] = "stopped"
    for proc in signalled:
        if proc.node.node_id not in outcomes:
            proc.kill()
            outcomes[proc.node.node_id] = "killed"
    return [(proc.node.node_id, outcomes[proc.node.node_id]) for proc in procs]


def _note(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
