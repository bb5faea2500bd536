"""What a node reaches outside itself for, as one argument: `Edges`.

A node's code decides with `now_ms` (Trio's clock) and its seeded RNG; everything else it needs
from the world comes through here: the connections it opens (to the controller, to leaders),
the sockets it listens on, the thread it runs a blocking LMDB call in, the wall-clock time its
logs carry, and the random bytes of its incarnation id and its groups' member ids. The defaults are the machine's; the simulation
(minikafka/sim) passes its own, so that the node's code runs unchanged in simulated time.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import trio

from minikafka.client.connection import Connection, open_connection
from minikafka.clock import RunSync
from minikafka.server.listener import Listen, open_listeners

# open_connection's signature: (host, port, *, client_id, credential, ...) -> Connection block
Connect = Callable[..., AbstractAsyncContextManager[Connection]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Edges:
    connect: Connect = open_connection
    listen: Listen = open_listeners
    run_sync: RunSync = trio.to_thread.run_sync
    wall_clock: Callable[[], float] = time.time
    # incarnation ids and group member ids (the simulation's come from its seed)
    token_bytes: Callable[[int], bytes] = secrets.token_bytes

    def uuid4(self) -> str:
        """A random UUID (version 4) from `token_bytes`: uuid.uuid4() on the machine."""
        return str(uuid.UUID(bytes=self.token_bytes(16), version=4))


MACHINE = Edges()
