"""Free TCP ports on the local host for the nodes of a local cluster.

Ports are picked below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, 32768
and up by default), at random from `LOW_PORT` up. A port from the ephemeral range (what binding
port 0 gives) is also what the kernel hands any outgoing connection as its source port: while a
node is down, a client of any process on the host could take its port, and the node's restart
would then fail with EADDRINUSE (seen under two test workers: a SIGKILLed broker could not come
back). Below that range only another listener can take it.

All sockets are bound at once before any is closed, so the n ports are distinct; another
listener may still bind one before the node does, which a node reports by failing at start
(cluster/start_retry.py retries on fresh ports).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

from minikafka.errors import ConfigError

MAX_PORTS = 256
LOW_PORT = 20_000  # clear of the registered ports services commonly use
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_LOW = 32_768  # Linux's default, and IANA's dynamic range starts at 49152


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The lowest port the kernel gives outgoing connections (Linux), else the default."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def free_ports(n: int, host: str = "127.0.0.1", *, rng: random.Random | None = None) -> list[int]:
    """Return n distinct ports that were free on `host` a moment ago, below the ephemeral range
    where it leaves room (else from the kernel, port 0)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_PORTS:
        raise ConfigError(f"number of ports must be an integer from 0 to {MAX_PORTS}, got {n!r}")
    rng = rng or random.Random()
    top = ephemeral_low() - 1
    sockets: list[socket.socket] = []
    try:
        tries = 0
        while len(sockets) < n:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tries += 1
            port = rng.randint(LOW_PORT, top) if top > LOW_PORT and tries <= 50 * n else 0
            try:
                sock.bind((host, port))
            except OSError:
                sock.close()
                continue
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
