"""Which broker addresses the controller accepts at registration.

A registered host ends up in every UpdateMetadata and is resolved by the controller and by
every broker and client that connects to it, so a name the resolver cannot even encode must be
refused when it arrives, not found when the first connection to it raises (a 64-character DNS
label made Python's idna codec raise UnicodeError out of the controller service). Kafka checks a
registration's listeners in ClusterControlManager.registerBroker and answers
INVALID_REGISTRATION; this testbed answers INVALID_REQUEST, as for a negative broker id.

Accepted: an IPv4 or IPv6 literal, or a host name of ASCII letters, digits, '-' and '_' in
dot-separated labels of 1..63 characters (RFC 1035 section 2.3.4; '_' because container
networks use it and Python's resolver accepts it), at most 253 characters in all, optionally
ending with a dot. Ports are 1..65535.
"""

from __future__ import annotations

import ipaddress
import re

from minikafka.core.controller.model import Event

MAX_HOST_CHARS = 253
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\Z")


def address_error(host: str, port: int) -> str | None:
    """Why host:port cannot be a broker's address (one line), or None if it can."""
    if not 1 <= port <= 65535:
        return f"port {port} is outside 1..65535"
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not name or len(name) > MAX_HOST_CHARS:
        return f"host name of {len(host)} characters: accepted 1..{MAX_HOST_CHARS}"
    for label in name.split("."):
        if not _LABEL.match(label):
            return (
                f"host {host[:80]!r}: label {label[:80]!r} is not 1..63 ASCII letters, digits, "
                "'-' or '_' (not starting or ending with '-')"
            )
    return None


def registration_refused(broker_id: int, host: str, port: int) -> Event | None:
    """The event logging a refused BrokerRegistration (nothing is stored), or None if its
    address is usable."""
    error = address_error(host, port)
    if error is None:
        return None
    return Event(
        name="broker_registration_refused", fields={"broker_id": broker_id, "error": error}
    )
