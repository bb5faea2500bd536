"""`LocalCluster`: a multi-process cluster on this machine, launched here or found again.

`LocalCluster.up(spec)` starts the controller, waits until it is ready, then starts the brokers
together and waits for all of them; on any failure (including Ctrl-C) it stops what it started
and raises. The cluster file (`cluster.json`, see `minikafka.cluster.clusterfile`) records the pids from
the first start on, so `LocalCluster.load(base_dir)` in a later command can report status, stop
the cluster, inject faults (kill, pause, resume, restart) and tail the node logs. `down` stops
brokers before the controller, as Kafka's controlled shutdown expects, and keeps the data dirs
unless asked to wipe them.

`LocalCluster.up_again(base_dir)` starts a stopped cluster again as it was, with its data.
Both write `prometheus-targets.json` in the cluster dir: Prometheus' file_sd list of the nodes'
metrics endpoints (cluster/prometheus_targets.py).

Each `up` gives the cluster a fresh identity (cluster/secret.py): a cluster id, recorded in the
cluster file and passed to every node, and a secret in `<base_dir>/cluster.secret` (mode 0600)
that the nodes read, so that only they can send each other control-plane requests.

A spec with a fault proxy (`plan_cluster(..., fault_proxy=True)`) gets its proxy process started
before the nodes (their routes point at it) and stopped after them; `fault_proxy()` is the
client of its control port (partitions, latency, bandwidth, resets: minikafka/faults).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from minikafka.cluster.clusterfile import (
    ClusterRecord,
    ClusterState,
    cluster_file,
    read_record,
    remove_record,
    update_record,
    write_record,
)
from minikafka.cluster.fault_proxy import PROXY_DIR
from minikafka.cluster.files import strictly_inside, tail_log
from minikafka.cluster.managed import Progress, StopOutcome, now_iso
from minikafka.cluster.processes import (
    NODE_COMMAND,
    OUT_FILE,
    NodeProcess,
    node_argv,
    stop_processes,
    wait_all_ready,
)
from minikafka.cluster.prometheus_targets import TARGETS_FILE, write_file_sd
from minikafka.cluster.proxy_process import ProxyProcess
from minikafka.cluster.secret import (
    new_cluster_id,
    remove_cluster_secret,
    secret_path,
    write_cluster_secret,
)
from minikafka.cluster.spec import ClusterSpec, NodeSpec, proxy_config
from minikafka.cluster.status import NodeStatus, ProxyStatus, bound_address
from minikafka.errors import ClusterError, ConfigError
from minikafka.faults.control import FaultProxyClient

LogKind = Literal["events", "metrics", "out"]
LOG_FILES: dict[str, str] = {"events": "events.jsonl", "metrics": "metrics.jsonl", "out": OUT_FILE}
CLEANUP_TIMEOUT_S = 5.0


class LocalCluster:
    """A local cluster: its spec, its node processes and its cluster file.

    Build one with `up` or `load`. Usable as a context manager that calls `down()` on exit.
    """

    def __init__(self, record: ClusterRecord, *, home: Path | None = None) -> None:
        self._record = record
        # Where the cluster file was found: `down(wipe=True)` deletes nothing outside it.
        self._home = Path(record.spec.base_dir if home is None else home).absolute()
        self._procs: dict[int, NodeProcess] = {
            node.node_id: NodeProcess(node, self._argv(node), pid=record.pids.get(node.node_id))
            for node in record.spec.nodes
        }
        spec = record.spec
        self._proxy: ProxyProcess | None = None
        if spec.fault_proxy is not None:
            self._proxy = ProxyProcess(
                spec.base_dir / PROXY_DIR, proxy_config(spec), pid=record.proxy_pid
            )
        self.last_proxy_stop: StopOutcome | None = None  # what `down` did to the proxy

    def __repr__(self) -> str:
        return f"LocalCluster({self.base_dir}, state={self.state})"

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def up(
        cls,
        spec: ClusterSpec,
        *,
        node_command: Sequence[str] | None = None,
        ready_timeout_s: float = 30.0,
        progress: Progress | None = None,
    ) -> LocalCluster:
        """Start every node of `spec` (after its fault proxy, if any) and wait until all are ready.

        `ready_timeout_s` applies to each phase (the proxy, the controller, then the brokers).
        """
        command = tuple(NODE_COMMAND if node_command is None else node_command)
        if not command:
            raise ConfigError("node command must not be empty")
        if ready_timeout_s <= 0:
            raise ConfigError(f"ready timeout must be positive, got {ready_timeout_s!r}")
        _refuse_if_running(spec.base_dir)
        spec.base_dir.mkdir(parents=True, exist_ok=True)
        write_cluster_secret(spec.base_dir)  # mode 0600; nodes get its path, never its content
        record = ClusterRecord(
            spec=spec,
            node_command=command,
            pids={node.node_id: None for node in spec.nodes},
            state="starting",
            created_at=now_iso(),
            cluster_id=new_cluster_id(spec.name),
        )
        write_record(record)
        cluster = cls(record)
        try:
            cluster._start_all(ready_timeout_s, progress)
        except BaseException:
            remove_record(spec.base_dir)
            remove_cluster_secret(spec.base_dir)
            raise
        return cluster

    @classmethod
    def up_again(
        cls,
        base_dir: Path | str,
        *,
        ready_timeout_s: float = 30.0,
        progress: Progress | None = None,
    ) -> LocalCluster:
        """Start a stopped cluster again as it was: the same nodes, ports, configs, cluster id
        and data (`cluster up` on the directory of a cluster that `down` stopped, or whose
        nodes all died). Refused while any of its processes runs; a failed start stops what it
        started and leaves the cluster stopped."""
        if ready_timeout_s <= 0:
            raise ConfigError(f"ready timeout must be positive, got {ready_timeout_s!r}")
        base = Path(base_dir).absolute()
        _refuse_if_running(base)
        cluster = cls.load(base)
        if not secret_path(cluster.base_dir).exists():  # deleted by hand: the nodes need one
            write_cluster_secret(cluster.base_dir)
        cluster._set_state("starting")
        try:
            cluster._start_all(ready_timeout_s, progress)
        except BaseException:
            cluster._set_state("stopped")
            raise
        return cluster

    @classmethod
    def load(cls, base_dir: Path | str) -> LocalCluster:
        """The cluster recorded in `base_dir` (running or stopped)."""
        base = Path(base_dir).absolute()
        record = read_record(base)
        if record is None:
            raise ClusterError(f"no cluster in {base} (run `minikafka cluster up`)")
        return cls(record, home=base)

    # -- inspection -------------------------------------------------------------------------

    @property
    def spec(self) -> ClusterSpec:
        return self._record.spec

    @property
    def base_dir(self) -> Path:
        return self._record.spec.base_dir

    @property
    def state(self) -> ClusterState:
        return self._record.state

    @property
    def created_at(self) -> str:
        return self._record.created_at

    @property
    def cluster_id(self) -> str:
        """The cluster's id, made by `up` (its secret is in `cluster.secret`, mode 0600)."""
        return self._record.cluster_id

    @property
    def cluster_file(self) -> Path:
        return cluster_file(self.base_dir)

    @property
    def controller_address(self) -> str:
        return self.spec.controller_address

    def bootstrap(self) -> str:
        """Broker addresses as "host:port,host:port", the form clients take as bootstrap."""
        return self.spec.bootstrap

    def kafka_bootstrap(self) -> str:
        """The brokers' Kafka-protocol listeners as "host:port,host:port" (Kafka clients'
        `bootstrap.servers`); empty when none has one."""
        addresses = (bound_address(p.node, "kafka_port") for p in self._procs.values())
        return ",".join(a for a in addresses if a is not None)

    def pid(self, node_id: int) -> int | None:
        return self._proc(node_id).pid

    @property
    def fault_proxy_address(self) -> tuple[str, int] | None:
        """The fault proxy's control (host, port), None if the cluster has no proxy."""
        proxy = self.spec.fault_proxy
        return None if proxy is None else (proxy.host, proxy.control_port)

    def fault_proxy(self, *, timeout_s: float = 10.0) -> FaultProxyClient:
        """The client of the fault proxy's control port (`.blocking()` for synchronous calls)."""
        address = self.fault_proxy_address
        if address is None:
            raise ClusterError(
                f"the cluster in {self.base_dir} has no fault proxy "
                "(start it with `minikafka cluster up --fault-proxy`)"
            )
        return FaultProxyClient(*address, timeout_s=timeout_s)

    def proxy_status(self) -> ProxyStatus | None:
        proxy = self.spec.fault_proxy
        if proxy is None or self._proxy is None:
            return None
        return ProxyStatus(
            control=proxy.control_address,
            links=len(proxy.links),
            pid=self._proxy.pid,
            alive=self._proxy.is_alive(),
        )

    def status(self) -> list[NodeStatus]:
        rows = []
        for node_id, proc in self._procs.items():
            alive = proc.is_alive()
            rows.append(
                NodeStatus(
                    node_id=node_id,
                    roles=proc.node.roles,
                    address=proc.node.address,
                    pid=proc.pid,
                    alive=alive,
                    paused=alive and proc.is_paused(),
                    data_dir=proc.node.data_dir,
                    kafka_address=bound_address(proc.node, "kafka_port") if alive else None,
                    metrics_address=bound_address(proc.node, "metrics_port") if alive else None,
                )
            )
        return rows

    def log_path(self, node_id: int, kind: LogKind | str) -> Path:
        """The path of a node's `events`, `metrics` (JSON lines) or `out` (stdout+stderr) log:
        the live file (`minikafka.server.jsonl.jsonl_parts` lists it with its rotated parts)."""
        if kind not in LOG_FILES:
            raise ConfigError(f"log kind must be one of {', '.join(LOG_FILES)}; got {kind!r}")
        return self._proc(node_id).node.data_dir / LOG_FILES[kind]

    def tail_logs(
        self, node_ids: Iterable[int] | None = None, kind: LogKind | str = "events", lines: int = 20
    ) -> list[str]:
        """The last `lines` lines of each node's log (across its rotated parts), each prefixed
        with `[node <id>] `."""
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 0:
            raise ConfigError(f"lines must be a non-negative integer, got {lines!r}")
        ids = list(self._procs) if node_ids is None else list(node_ids)
        out = []
        for node_id in ids:
            path = self.log_path(node_id, kind)
            out += [f"[node {node_id}] {line}" for line in tail_log(path, lines)]
        return out

    # -- control ----------------------------------------------------------------------------

    def down(self, timeout_s: float = 10.0, *, wipe: bool = False) -> list[tuple[int, StopOutcome]]:
        """Stop brokers, then the controller (SIGTERM; SIGKILL after `timeout_s`), then the
        fault proxy if there is one (its outcome goes to `last_proxy_stop`).

        Marks the cluster file stopped; with `wipe` removes it and the node data dirs instead.
        Returns (node id, "stopped" | "killed" | "not running") in the order nodes were stopped.
        A wipe deletes only dirs inside the directory the cluster file was found in: a cluster
        file naming any other data dir gets a ClusterError, before anything is stopped or deleted.
        """
        if wipe:
            self._check_wipe_targets()
        self._adopt_recorded_pids()
        procs = list(self._procs.values())
        outcomes = stop_processes([p for p in procs if not p.node.is_controller], timeout_s)
        outcomes += stop_processes([p for p in procs if p.node.is_controller], timeout_s)
        if self._proxy is not None:
            self.last_proxy_stop = self._proxy.stop(timeout_s)
        if wipe:
            for proc in procs:
                shutil.rmtree(proc.node.data_dir, ignore_errors=True)
            if self._proxy is not None:
                shutil.rmtree(self._proxy.directory, ignore_errors=True)
            remove_record(self.base_dir)
            remove_cluster_secret(self.base_dir)
            (self.base_dir / TARGETS_FILE).unlink(missing_ok=True)
            _rmdir_if_empty(self.base_dir)
            self._record = self._record.with_state("stopped")
        else:
            self._set_state("stopped")
        return outcomes

    def _check_wipe_targets(self) -> None:
        home = self._home
        if self.base_dir.resolve() != home.resolve():
            raise ClusterError(
                f"refusing to wipe: {cluster_file(home)} names base_dir {self.base_dir}, not "
                f"{home}; nothing deleted (fix base_dir, or delete the dirs by hand)"
            )
        for proc in self._procs.values():
            if not strictly_inside(proc.node.data_dir, home):
                raise ClusterError(
                    f"refusing to wipe: node {proc.node.node_id}'s data dir {proc.node.data_dir} "
                    f"is not inside the cluster dir {home}; nothing deleted (a wipe deletes only "
                    "data dirs inside the cluster dir)"
                )

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (a crash: no clean shutdown) and wait until it is gone."""
        if not self._proc(node_id).kill():
            raise ClusterError(f"node {node_id} is not running")

    def pause(self, node_id: int) -> None:
        """SIGSTOP one node: it keeps its sockets but answers nothing until resumed."""
        if not self._proc(node_id).pause():
            raise ClusterError(f"node {node_id} is not running")

    def resume(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        if not self._proc(node_id).resume():
            raise ClusterError(f"node {node_id} is not running")

    def stop(self, node_id: int, timeout_s: float = 10.0) -> StopOutcome:
        """SIGTERM one node (a clean shutdown), SIGKILL after `timeout_s`; how it stopped."""
        outcome = self._proc(node_id).terminate(timeout_s)
        if outcome == "not running":
            raise ClusterError(f"node {node_id} is not running")
        return outcome

    def start(
        self, node_id: int, *, ready_timeout_s: float = 30.0, progress: Progress | None = None
    ) -> int:
        """Start a stopped (or killed) node again with its spec and data; wait ready; its pid."""
        if self._proc(node_id).is_alive():
            raise ClusterError(f"node {node_id} is already running")
        return self.restart(node_id, ready_timeout_s=ready_timeout_s, progress=progress)

    def restart(
        self,
        node_id: int,
        *,
        ready_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        progress: Progress | None = None,
    ) -> int:
        """Stop the node if it runs, start it again with the same spec, wait ready; new pid."""
        if self.state == "stopped":
            raise ClusterError(
                f"the cluster in {self.base_dir} is stopped; run `minikafka cluster up`"
            )
        old = self._proc(node_id)
        verb = "restarting" if old.is_alive() else "starting"
        old.terminate(stop_timeout_s)
        new = NodeProcess(old.node, self._argv(old.node))
        _note(progress, f"{verb} node {node_id} on {old.node.address}")
        new.start()
        self._procs[node_id] = new
        self._record = update_record(self.base_dir, lambda r: r.with_pid(node_id, new.pid))
        try:
            wait_all_ready([new], ready_timeout_s, progress)
        except BaseException:
            new.terminate(CLEANUP_TIMEOUT_S)
            raise
        assert new.pid is not None
        return new.pid

    # -- internals --------------------------------------------------------------------------

    def _adopt_recorded_pids(self) -> None:
        """Take the pids the cluster file holds now: another command (`minikafka cluster
        restart 1`, a second LocalCluster) may have started a node since this object read it,
        and `down` must stop that process, not the one it replaced."""
        record = read_record(self._home)
        if record is None:
            return
        for node_id, pid in record.pids.items():
            proc = self._procs.get(node_id)
            if proc is not None and pid is not None and pid != proc.pid:
                self._procs[node_id] = NodeProcess(proc.node, proc.argv, pid=pid)

    def _start_all(self, timeout_s: float, progress: Progress | None) -> None:
        """The proxy, then the controller, then the brokers together, each phase waited for;
        on any failure (Ctrl-C too) stop what was started, then raise."""
        try:
            self._start_proxy(timeout_s, progress)
            controller = [p for p in self._procs.values() if p.node.is_controller]
            others = [p for p in self._procs.values() if not p.node.is_controller]
            self._start_phase(controller, timeout_s, progress)
            self._start_phase(others, timeout_s, progress)
        except BaseException:
            _note(progress, "start-up failed; stopping the nodes already started")
            stop_processes(list(self._procs.values()), CLEANUP_TIMEOUT_S)
            if self._proxy is not None:
                self._proxy.stop(CLEANUP_TIMEOUT_S)
            raise
        self._set_state("running")
        spec = self.spec
        # Prometheus' file_sd (cluster/prometheus_targets.py): the nodes' metrics endpoints. A
        # file that cannot be written is said, not a failed start: the cluster itself runs.
        try:
            write_file_sd(spec.base_dir / TARGETS_FILE, spec)
        except ClusterError as exc:
            _note(progress, f"warning: {exc}")
        _note(
            progress, f"cluster {spec.name!r} is up in {spec.base_dir}; bootstrap {spec.bootstrap}"
        )

    def _start_phase(
        self, procs: list[NodeProcess], timeout_s: float, progress: Progress | None
    ) -> None:
        if not procs:
            return
        ids = ", ".join(str(p.node.node_id) for p in procs)
        roles = ",".join(procs[0].node.roles)
        _note(progress, f"starting node {ids} ({roles})")
        for proc in procs:
            proc.start()
            self._record = self._record.with_pid(proc.node.node_id, proc.pid)
            write_record(self._record)  # from now on `down` can find it even if we crash
        wait_all_ready(procs, timeout_s, progress)

    def _start_proxy(self, timeout_s: float, progress: Progress | None) -> None:
        if self._proxy is None:
            return
        _note(progress, f"starting the fault proxy ({len(self._proxy.config.links)} links)")
        self._proxy.start()
        self._record = self._record.with_proxy_pid(self._proxy.pid)
        write_record(self._record)  # from now on `down` can find it even if we crash
        self._proxy.wait_ready(timeout_s, progress)

    def _set_state(self, state: ClusterState) -> None:
        self._record = update_record(self.base_dir, lambda r: r.with_state(state))

    def _proc(self, node_id: int) -> NodeProcess:
        if node_id not in self._procs:
            self.spec.node(node_id)  # raises the one-line "no node N" ConfigError
        return self._procs[node_id]

    def _argv(self, node: NodeSpec) -> list[str]:
        record = self._record
        return node_argv(record.spec, node, record.node_command, cluster_id=record.cluster_id)


def _refuse_if_running(base_dir: Path) -> None:
    record = read_record(base_dir)
    if record is None:
        return
    cluster = LocalCluster(record)
    procs: list[NodeProcess | ProxyProcess] = list(cluster._procs.values())
    if cluster._proxy is not None:
        procs.append(cluster._proxy)
    live = [proc.pid for proc in procs if proc.pid is not None and proc.is_alive()]
    if live:
        pids = ", ".join(str(pid) for pid in live)
        raise ClusterError(
            f"a cluster is already running in {base_dir} (pids {pids}); "
            "run `minikafka cluster down` first"
        )


def _rmdir_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _note(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
