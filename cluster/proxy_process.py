"""The fault proxy's OS process: start it, find it again from its pid, stop it.

A `ProxyProcess` is a `ManagedProcess`, so it follows the same rules as a node (they live in
cluster/managed.py): it runs in its own session with output appended to
`<base_dir>/fault-proxy/proxy.out`; SIGTERM (plus SIGCONT) stops it, SIGKILL after the timeout.
What is the proxy's own:

- `start()` first writes its spec file (`links.json`), and the proxy's command line names that
  file, so the spec file is also the marker: a pid read back from the cluster file only counts
  while its command line still names it (so a recycled pid is never signalled);
- it is ready once `proxy.json` beside its spec file names its pid.

`LocalCluster` starts it before the nodes (their routes point at it) and stops it after them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minikafka.cluster.files import atomic_write_json
from minikafka.cluster.managed import POLL_S, ManagedProcess, Progress, StopOutcome
from minikafka.errors import ClusterError
from minikafka.faults.config import ProxyConfig

PROXY_COMMAND: tuple[str, ...] = (sys.executable, "-m", "minikafka", "proxy")
SPEC_FILE = "links.json"
READY_FILE = "proxy.json"  # written by the proxy (minikafka/faults/proxy.py write_ready_file)
OUT_FILE = "proxy.out"


class ProxyProcess(ManagedProcess):
    """The proxy serving `config`, with its files in `directory`; started here or adopted."""

    def __init__(
        self,
        directory: Path,
        config: ProxyConfig,
        *,
        pid: int | None = None,
        command: Sequence[str] = PROXY_COMMAND,
    ) -> None:
        directory = Path(directory)
        spec_path = directory / SPEC_FILE
        super().__init__(
            [*command, "--spec-file", str(spec_path)],
            label="the fault proxy",
            marker=spec_path,
            out_path=directory / OUT_FILE,
            ready_path=directory / READY_FILE,
            pid=pid,
        )
        self.directory = directory
        self.config = config
        self.command = tuple(command)
        self.spec_path = spec_path

    def __repr__(self) -> str:
        return f"ProxyProcess({self.directory}, pid={self._pid})"

    def _prepare_start(self) -> None:
        atomic_write_json(self.spec_path, self.config.to_json())

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
        """What `LocalCluster` calls: `terminate()`, the same stop as a node's."""
        return self.terminate(timeout_s)
