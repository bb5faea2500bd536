"""Managed processes: start, find again, signal and stop the OS processes of a local cluster.

`ManagedProcess` is what a node (cluster/processes.py) and the fault proxy
(cluster/proxy_process.py) have in common. It wraps either a `Popen` this process started or a
pid read back from the cluster file, because later CLI commands (`status`, `down`, fault tools)
only have pids. Rules:

- a process starts in its own session (`start_new_session=True`): Ctrl-C in the CLI does not
  reach it, and signals go to its whole process group so helpers it spawns go with it;
- stdout and stderr are appended to its out file, after a header line per start naming the time
  and the command line; `out_tail()` shows only this run's part of it;
- a pid from the cluster file only counts as ours while `/proc/<pid>/cmdline` still names the
  process's marker path (a node's data dir, the proxy's spec file), so a recycled pid is never
  signalled; without /proc we can only ask the kernel whether the pid exists;
- it is ready once its ready file (written by the process) names its pid: a file left by an
  earlier run names an older pid and is ignored;
- SIGTERM is followed by SIGCONT so a paused process can act on it; SIGKILL after the timeout.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from minikafka.cluster.files import read_json, tail_lines
from minikafka.errors import ClusterError

POLL_S = 0.01
KILL_WAIT_S = 5.0
TAIL_LINES = 10

StopOutcome = Literal["stopped", "killed", "not running"]
Progress = Callable[[str], None]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class ManagedProcess:
    """One OS process, started here (`start()`) or adopted from a recorded pid.

    `label` names it in messages ("node 1", "the fault proxy"); `marker` is the path its
    command line must name for an adopted pid to count as ours.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        label: str,
        marker: Path,
        out_path: Path,
        ready_path: Path,
        pid: int | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.label = label
        self.marker = marker
        self.out_path = out_path
        self.ready_path = ready_path
        self._pid = pid
        self._popen: subprocess.Popen[bytes] | None = None
        self._out_start = 0  # where this run's output begins in the out file

    @property
    def pid(self) -> int | None:
        return self._pid

    def start(self) -> None:
        """Launch the process in its own session, output appended to its out file."""
        if self.is_alive():
            raise ClusterError(f"{self.label} is already running (pid {self._pid})")
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        self._prepare_start()
        with self.out_path.open("ab") as out:
            self._out_start = out.tell()
            header = f"# minikafka: starting {self.label} at {now_iso()}: "
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
                    f"cannot start {self.label}: {e.strerror or e} ({self.argv[0]})"
                ) from e
        self._pid = self._popen.pid

    def _prepare_start(self) -> None:
        """Called by `start()` once the process is known not to run, before it is launched."""

    def is_alive(self) -> bool:
        """True while the process exists and has not exited (a paused process is alive)."""
        if self._popen is not None:
            return self._popen.poll() is None
        if self._pid is None:
            return False
        reap(self._pid)
        state = proc_state(self._pid)
        if state is None:  # no /proc on this system: ask the kernel whether the pid exists
            return pid_exists(self._pid)
        return state not in ("", "Z", "X") and cmdline_names(self._pid, self.marker)

    def exit_code(self) -> int | None:
        """The exit code if this process started it and it has exited, else None."""
        return None if self._popen is None else self._popen.poll()

    def ready_info(self) -> dict[str, Any] | None:
        """The ready file if it names this process's pid, else None."""
        info = read_json(self.ready_path)
        if isinstance(info, dict) and self._pid is not None and info.get("pid") == self._pid:
            return info
        return None

    def send_signal(self, sig: int) -> bool:
        """Signal the process group (or just the pid); False if the process is not running."""
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
        """SIGTERM, then SIGCONT so a paused process can act on it; False if it was not running."""
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
        return poll_until(lambda: not self.is_alive(), timeout_s)

    def terminate(self, timeout_s: float = 10.0) -> StopOutcome:
        """SIGTERM, and SIGKILL if the process is still running after `timeout_s`."""
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
            raise ClusterError(f"{self.label} (pid {self._pid}) survived SIGKILL")
        return True

    def out_tail(self, lines: int = TAIL_LINES) -> str:
        tail = tail_lines(self.out_path, lines, start=self._out_start)
        if not tail:
            return f"{self.out_path} has no output from this run"
        return f"last lines of {self.out_path}:\n" + "\n".join(f"  | {line}" for line in tail)


def poll_until(done: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `done` every `POLL_S` until it is true (True) or `timeout_s` has passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def reap(pid: int) -> None:
    """Collect the exit status if `pid` is our own child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def proc_state(pid: int | None) -> str | None:
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


def cmdline_names(pid: int, marker: Path) -> bool:
    """True if `pid`'s command line has `marker` as one of its arguments."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if args == [b""]:
        return True  # an exiting process has released its memory: still ours until it is gone
    return os.fsencode(str(marker)) in args


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
