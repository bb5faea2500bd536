"""Node processes: start, signal, watch and wait for the nodes of a local cluster.

A `NodeProcess` wraps either a `Popen` this process started or a pid read back from the cluster
file, because later CLI commands (`status`, `down`, fault tools) only have pids. Rules:

- nodes start in their own session (`start_new_session=True`): Ctrl-C in the CLI does not reach
  them, and signals go to the node's whole process group so helpers it spawns go with it;
- stdout and stderr are appended to `<data_dir>/node.out`, after a header line per start;
- a node is ready once `<data_dir>/node.json` exists and names the node's pid (a file left by an
  earlier run names an older pid and is ignored);
- a pid from the cluster file only counts as our node while `/proc/<pid>/cmdline` still names
  the node's data dir, so a recycled pid is never signalled;
- SIGTERM is followed by SIGCONT so a paused node can act on it; SIGKILL after the timeout.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from cluster.fault_proxy import route_args
from cluster.files import read_json, tail_lines
from cluster.spec import ClusterSpec, NodeSpec
from minikafka.errors import ClusterError

NODE_COMMAND: tuple[str, ...] = (sys.executable, "-m", "minikafka", "node")
READY_FILE = "node.json"
OUT_FILE = "node.out"
POLL_S = 0.01
KILL_WAIT_S = 5.0
NOTE_EVERY_S = 5.0
TAIL_LINES = 10

StopOutcome = Literal["stopped", "killed", "not running"]
Progress = Callable[[str], None]


def node_argv(
    spec: ClusterSpec, node: NodeSpec, node_command: Sequence[str] | None = None
) -> list[str]:
    """The full command line that starts `node` (the node contract, see the module docstring)."""
    argv = list(NODE_COMMAND if node_command is None else node_command)
    if not argv:
        raise ClusterError("the node command is empty")
    argv += ["--node-id", str(node.node_id), "--roles", ",".join(node.roles)]
    argv += ["--listen", node.address, "--controller", spec.controller_address]
    argv += ["--data-dir", str(node.data_dir), "--seed", str(spec.seed)]
    for key, value in spec.node_configs.items():
        argv += ["--set", f"{key}={value}"]
    return argv + route_args(spec, node)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class NodeProcess:
    """One node's OS process, started here (`start()`) or adopted from a recorded pid."""

    def __init__(self, node: NodeSpec, argv: Sequence[str], *, pid: int | None = None) -> None:
        self.node = node
        self.argv = tuple(argv)
        self._pid = pid
        self._popen: subprocess.Popen[bytes] | None = None
        self._out_start = 0  # where this run's output begins in node.out

    def __repr__(self) -> str:
        return f"NodeProcess(node_id={self.node.node_id}, pid={self._pid})"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def out_path(self) -> Path:
        return self.node.data_dir / OUT_FILE

    @property
    def ready_path(self) -> Path:
        return self.node.data_dir / READY_FILE

    def start(self) -> None:
        """Launch the node in its own session, output appended to node.out."""
        if self.is_alive():
            raise ClusterError(f"node {self.node.node_id} is already running (pid {self._pid})")
        self.node.data_dir.mkdir(parents=True, exist_ok=True)
        with self.out_path.open("ab") as out:
            self._out_start = out.tell()
            header = f"# minikafka: starting node {self.node.node_id} at {now_iso()}: "
            out.write((header + shlex.join(self.argv) + "\n").encode())
            out.flush()
            try:
                self._popen = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as e:
                raise ClusterError(
                    f"cannot start node {self.node.node_id}: {e.strerror or e} ({self.argv[0]})"
                ) from e
        self._pid = self._popen.pid

    def is_alive(self) -> bool:
        """True while the process exists and has not exited (a paused node is alive)."""
        if self._popen is not None:
            return self._popen.poll() is None
        if self._pid is None:
            return False
        _reap(self._pid)
        state = _proc_state(self._pid)
        if state is None:  # no /proc on this system: ask the kernel whether the pid exists
            return _pid_exists(self._pid)
        return state not in ("", "Z", "X") and _cmdline_names(self._pid, self.node.data_dir)

    def is_paused(self) -> bool:
        """True if the process is stopped by SIGSTOP (Linux only; False elsewhere)."""
        return self._pid is not None and self.is_alive() and _proc_state(self._pid) == "T"

    def exit_code(self) -> int | None:
        """The exit code if this process started the node and it has exited, else None."""
        return None if self._popen is None else self._popen.poll()

    def send_signal(self, sig: int) -> bool:
        """Signal the node's process group (or just the pid); False if it is not running."""
        if self._pid is None or not self.is_alive():
            return False
        try:
            if os.getpgid(self._pid) == self._pid:
                os.killpg(self._pid, sig)
            else:
                os.kill(self._pid, sig)
        except ProcessLookupError:
            return False
        return True

    def request_stop(self) -> bool:
        """SIGTERM, then SIGCONT so a paused node can act on it; False if it was not running."""
        if not self.send_signal(signal.SIGTERM):
            return False
        self.send_signal(signal.SIGCONT)
        return True

    def wait_exit(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the process to end; True if it has."""
        if self._popen is not None:
            try:
                self._popen.wait(timeout=max(timeout_s, 0.0))
            except subprocess.TimeoutExpired:
                return False
            return True
        return _poll_until(lambda: not self.is_alive(), timeout_s)

    def terminate(self, timeout_s: float = 10.0) -> StopOutcome:
        """SIGTERM, and SIGKILL if the node is still running after `timeout_s`."""
        if not self.request_stop():
            return "not running"
        if self.wait_exit(timeout_s):
            return "stopped"
        self.kill()
        return "killed"

    def kill(self) -> bool:
        """SIGKILL and wait until the process is gone; False if it was not running."""
        if not self.send_signal(signal.SIGKILL):
            return False
        if not self.wait_exit(KILL_WAIT_S):
            raise ClusterError(f"node {self.node.node_id} (pid {self._pid}) survived SIGKILL")
        return True

    def pause(self) -> bool:
        """SIGSTOP; returns once the process is stopped. False if it was not running."""
        if not self.send_signal(signal.SIGSTOP):
            return False
        if _proc_state(self._pid) is not None:
            _poll_until(lambda: _proc_state(self._pid) in ("T", "", "Z"), KILL_WAIT_S)
        return True

    def resume(self) -> bool:
        """SIGCONT; returns once the process runs again. False if it was not running."""
        if not self.send_signal(signal.SIGCONT):
            return False
        if _proc_state(self._pid) is not None:
            _poll_until(lambda: _proc_state(self._pid) != "T", KILL_WAIT_S)
        return True

    def ready_info(self) -> dict[str, Any] | None:
        """node.json if it names this process's pid, else None."""
        info = read_json(self.ready_path)
        if isinstance(info, dict) and self._pid is not None and info.get("pid") == self._pid:
            return info
        return None

    def wait_ready(self, timeout_s: float, progress: Progress | None = None) -> dict[str, Any]:
        """Wait for node.json with our pid; ClusterError if the node exits or times out."""
        return wait_all_ready([self], timeout_s, progress)[self.node.node_id]

    def out_tail(self, lines: int = TAIL_LINES) -> str:
        tail = tail_lines(self.out_path, lines, start=self._out_start)
        if not tail:
            return f"{self.out_path} has no output from this run"
        return f"last lines of {self.out_path}:\n" + "\n".join(f"  | {line}" for line in tail)


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


def _poll_until(done: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if `pid` is our own child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _proc_state(pid: int | None) -> str | None:
    """The state letter from /proc/<pid>/stat ('' if the pid is gone), None without /proc."""
    if pid is None:
        return ""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "" if Path("/proc/self/stat").exists() else None
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[0]


def _cmdline_names(pid: int, data_dir: Path) -> bool:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if args == [b""]:
        return True  # an exiting process has released its memory: still ours until it is gone
    return os.fsencode(str(data_dir)) in args


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
