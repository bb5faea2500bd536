"""The fault proxy's OS process: start it, find it again from its pid, stop it.

The same contract as a node's (cluster/processes.py): it runs in its own session with output
appended to `<base_dir>/fault-proxy/proxy.out`; it is ready once `proxy.json` beside its spec
file names its pid; a pid read back from the cluster file only counts while its command line
still names the spec file (so a recycled pid is never signalled); SIGTERM stops it, SIGKILL
after the timeout. `LocalCluster` starts it before the nodes and stops it after them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.files import atomic_write_json, read_json, tail_lines
from cluster.processes import (
    POLL_S,
    TAIL_LINES,
    Progress,
    StopOutcome,
    _cmdline_names,
    _poll_until,
    _proc_state,
    _reap,
    now_iso,
)
from minikafka.errors import ClusterError
from minikafka.faults.config import ProxyConfig

PROXY_COMMAND: tuple[str, ...] = (sys.executable, "-m", "minikafka", "proxy")
SPEC_FILE = "links.json"
READY_FILE = "proxy.json"  # written by the proxy (minikafka/faults/proxy.py write_ready_file)
OUT_FILE = "proxy.out"


class ProxyProcess:
    """The proxy serving `config`, with its files in `directory`; started here or adopted."""

    def __init__(
        self,
        directory: Path,
        config: ProxyConfig,
        *,
        pid: int | None = None,
        command: Sequence[str] = PROXY_COMMAND,
    ) -> None:
        self.directory = Path(directory)
        self.config = config
        self.command = tuple(command)
        self._pid = pid
        self._popen: subprocess.Popen[bytes] | None = None
        self._out_start = 0

    def __repr__(self) -> str:
        return f"ProxyProcess({self.directory}, pid={self._pid})"

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def spec_path(self) -> Path:
        return self.directory / SPEC_FILE

    @property
    def ready_path(self) -> Path:
        return self.directory / READY_FILE

    @property
    def out_path(self) -> Path:
        return self.directory / OUT_FILE

    @property
    def argv(self) -> list[str]:
        return [*self.command, "--spec-file", str(self.spec_path)]

    def start(self) -> None:
        """Write the spec file and launch the proxy in its own session."""
        if self.is_alive():
            raise ClusterError(f"the fault proxy is already running (pid {self._pid})")
        atomic_write_json(self.spec_path, self.config.to_json())
        with self.out_path.open("ab") as out:
            self._out_start = out.tell()
            out.write(f"# minikafka: starting the fault proxy at {now_iso()}\n".encode())
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
                raise ClusterError(f"cannot start the fault proxy: {e.strerror or e}") from e
        self._pid = self._popen.pid

    def is_alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        if self._pid is None:
            return False
        _reap(self._pid)
        state = _proc_state(self._pid)
        if state is None:  # no /proc: trust the recorded pid
            return True
        return state not in ("", "Z", "X") and _cmdline_names(self._pid, self.spec_path)

    def ready_info(self) -> dict[str, Any] | None:
        info = read_json(self.ready_path)
        if isinstance(info, dict) and self._pid is not None and info.get("pid") == self._pid:
            return info
        return None

    def wait_ready(self, timeout_s: float, progress: Progress | None = None) -> dict[str, Any]:
        """Wait for proxy.json with our pid; ClusterError if the proxy exits or times out."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.ready_info()
            if info is not None:
                if progress is not None:
                    progress(
                        f"fault proxy ready, control on {self.config.host}:"
                        f"{self.config.control_port} (pid {self._pid})"
                    )
                return info
            if not self.is_alive():
                raise ClusterError(f"the fault proxy exited before it was ready; {self.out_tail()}")
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"the fault proxy is not ready after {timeout_s:g}s; {self.out_tail()}"
                )
            time.sleep(POLL_S)

    def stop(self, timeout_s: float = 10.0) -> StopOutcome:
        """SIGTERM (plus SIGCONT), SIGKILL after `timeout_s`; what happened."""
        if not self._signal(signal.SIGTERM):
            return "not running"
        self._signal(signal.SIGCONT)
        if self._wait_exit(timeout_s):
            return "stopped"
        self._signal(signal.SIGKILL)
        self._wait_exit(timeout_s)
        return "killed"

    def out_tail(self, lines: int = TAIL_LINES) -> str:
        tail = tail_lines(self.out_path, lines, start=self._out_start)
        if not tail:
            return f"{self.out_path} has no output from this run"
        return f"last lines of {self.out_path}:\n" + "\n".join(f"  | {line}" for line in tail)

    def _signal(self, sig: int) -> bool:
        if self._pid is None or not self.is_alive():
            return False
        try:
            os.kill(self._pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _wait_exit(self, timeout_s: float) -> bool:
        if self._popen is not None:
            try:
                self._popen.wait(timeout=max(timeout_s, 0.0))
            except subprocess.TimeoutExpired:
                return False
            return True
        return _poll_until(lambda: not self.is_alive(), timeout_s)
