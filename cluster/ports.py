"""Free TCP ports on the local host for the nodes of a local cluster.

All sockets are bound at once before any is closed, so the n ports are distinct; the OS may
still hand one out again before the node binds it, which a node reports by failing at start.
"""

from __future__ import annotations

import socket

from minikafka.errors import ConfigError

MAX_PORTS = 256


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Return n distinct ports that were free on `host` a moment ago."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_PORTS:
        raise ConfigError(f"number of ports must be an integer from 0 to {MAX_PORTS}, got {n!r}")
    sockets: list[socket.socket] = []
    try:
        for _ in range(n):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
