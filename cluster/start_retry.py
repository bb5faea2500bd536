"""Starting a local cluster again on new ports when one of its ports was taken.

`free_ports` (cluster/ports.py) picks ports that were free a moment ago; another process may bind
one of them before the node does. The node then dies at start with EADDRINUSE, and
`LocalCluster.up` stops what it started and raises a ClusterError whose text carries the end of
that node's output. `up_retrying_ports` plans a fresh spec (new ports, a dir of its own) and
starts again, at most `attempts` times in all. Rules:

- only a taken port is retried (`port_taken`): a ClusterError naming the OS's message for
  EADDRINUSE, as a node's traceback prints it (`OSError: [Errno 98] Address already in use`)
  or the fault proxy's line says it (`cannot listen on host:port: Address already in use`).
  Every other failure (a bad config, a node that crashes, a timeout) is raised at once, as is;
- every attempt gets its spec from `plan(attempt)`, so the caller decides where each one lives;
  the failed attempts' dirs are left as they are (their `node.out` shows what happened);
- after the last attempt, a ClusterError says that every attempt found a port taken, with the
  last attempt's error (chained as its cause).

Kept out of `LocalCluster.up` on purpose: `up` starts one spec, and picking ports again means
planning a new spec, which is the caller's (the pytest plugin's) business.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Sequence

from minikafka.cluster.local import LocalCluster
from minikafka.cluster.managed import Progress
from minikafka.cluster.spec import ClusterSpec
from minikafka.errors import ClusterError, ConfigError

DEFAULT_ATTEMPTS = 3
# The OS's text for EADDRINUSE ("Address already in use" on Linux and macOS): a node's OSError
# prints it after "[Errno N] ", the fault proxy after "cannot listen on host:port: ".
ADDRESS_IN_USE = os.strerror(errno.EADDRINUSE)
_IN_USE = re.compile(
    rf"\[Errno {errno.EADDRINUSE}\] {re.escape(ADDRESS_IN_USE)}"
    rf"|cannot listen on \S+: {re.escape(ADDRESS_IN_USE)}"
)


def port_taken(exc: BaseException) -> bool:
    """True if `exc` is a cluster start that failed because a node could not bind its port."""
    return isinstance(exc, ClusterError) and _IN_USE.search(str(exc)) is not None


def up_retrying_ports(
    plan: Callable[[int], ClusterSpec],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    ready_timeout_s: float = 30.0,
    node_command: Sequence[str] | None = None,
    progress: Progress | None = None,
    on_retry: Progress | None = None,
) -> LocalCluster:
    """`LocalCluster.up(plan(n))` for n = 1, 2, ... until one starts or `attempts` found a port
    taken (module docstring). `plan(n)` must pick fresh ports and a dir not used before.

    `progress` gets `up`'s notes; `on_retry` (default: `progress`) the line saying why a start
    is tried again."""
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ConfigError(f"attempts must be a positive integer, got {attempts!r}")
    for attempt in range(1, attempts + 1):
        spec = plan(attempt)
        try:
            return LocalCluster.up(
                spec, node_command=node_command, ready_timeout_s=ready_timeout_s, progress=progress
            )
        except ClusterError as exc:
            if not port_taken(exc):
                raise
            if attempt == attempts:
                raise ClusterError(
                    f"no cluster started: at each of {attempts} attempts, on newly picked ports "
                    "every time, another process took a port before its node bound it; "
                    f"the last attempt ({spec.base_dir}): {exc}"
                ) from exc
            note = progress if on_retry is None else on_retry
            if note is not None:
                note(
                    f"a port of cluster {spec.name!r} was taken before its node bound it; "
                    f"starting again on new ports (attempt {attempt + 1} of {attempts}): {exc}"
                )
    raise AssertionError("unreachable")  # the loop returns or raises
