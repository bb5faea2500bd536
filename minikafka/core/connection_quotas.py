"""Who may hold a connection to a node: Kafka's ConnectionQuotas, decided without I/O.

A node has two listeners, minikafka's own (`native`: the cluster's nodes and minikafka's
clients) and Kafka's (`kafka`: Kafka's clients). Clients' connections are limited three ways,
as Kafka's `SocketServer.ConnectionQuotas` limits them:

- `max.connections`: all client connections of the node, over both listeners;
- `listener.name.<listener>.max.connections`: one listener's (KIP-402);
- `max.connections.per.ip`: one client address's, over both listeners.

The cluster's own nodes are never locked out by strangers. KIP-402 lets connections on the
inter-broker listener past the broker-wide limit; here nodes share the native listener with
clients, so a connection is a node's once it has proven membership (core/cluster_auth.py),
not by the listener it came in on. A client connection that proves membership moves out of
the client counts (`to_member`), and a connection that arrives when a limit is full is
admitted on probation on the native listener, if one of `max_probation` places is free: it
may only prove membership, at its first try and within a short deadline (the listener
enforces both), and is counted as a node's if it does, else closed.

Pure: counts and decisions only; server/listener.py calls it around each connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NATIVE = "native"
KAFKA = "kafka"
LISTENERS = (NATIVE, KAFKA)


@dataclass(slots=True, kw_only=True)
class ConnectionQuotas:
    """One node's client connection counts and limits (all listeners)."""

    max_connections: int
    max_connections_per_ip: int
    listener_max_connections: dict[str, int] = field(default_factory=dict)
    open: int = 0  # client connections, all listeners
    members: int = 0  # connections proven to be the cluster's own nodes
    per_listener: dict[str, int] = field(default_factory=dict)
    per_ip: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    # Connections over the limits, waiting to prove they are nodes' (at most max_probation:
    # a stranger's flood of them must not hold the node's file descriptors).
    on_probation: int = 0
    max_probation: int = 64

    def full(self, listener: str, ip: str) -> str | None:
        """Why a new client connection from `ip` on `listener` may not be admitted, or None."""
        if self.per_ip.get(ip, 0) >= self.max_connections_per_ip:
            return f"max.connections.per.ip={self.max_connections_per_ip} reached for {ip}"
        limit = self.listener_max_connections.get(listener)
        if limit is not None and self.per_listener.get(listener, 0) >= limit:
            return f"listener.name.{listener}.max.connections={limit} reached"
        if self.open >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        return None

    def admit(self, listener: str, ip: str) -> str | None:
        """Count a client connection and return None, or count a refusal and say why."""
        reason = self.full(listener, ip)
        if reason is not None:
            self.refused += 1
            return reason
        self.open += 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return None

    def release(self, listener: str, ip: str) -> None:
        """A client connection closed."""
        self.open -= 1
        self.per_listener[listener] -= 1
        left = self.per_ip[ip] - 1
        if left:
            self.per_ip[ip] = left
        else:
            del self.per_ip[ip]  # the table holds only addresses with connections open

    def try_probation(self) -> bool:
        """Take one of the probation places for a connection over the limits (False: none
        is left, close it at once)."""
        if self.on_probation >= self.max_probation:
            return False
        self.on_probation += 1
        return True

    def end_probation(self) -> None:
        self.on_probation -= 1

    def to_member(self, listener: str, ip: str) -> None:
        """A client connection proved membership: from now on it is a node's."""
        self.release(listener, ip)
        self.members += 1

    def member_admitted(self) -> None:
        """A connection on probation proved membership."""
        self.members += 1

    def member_closed(self) -> None:
        self.members -= 1
