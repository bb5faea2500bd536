"""A listener's dispatch table: each request type, the one handler that answers it.

Each component (the controller, the broker, the group offsets API) names the requests it serves
in a `routes` table of its own, built once when it is made; the node registers them as the
components start, and its listener finds a request's handler by the request's type, one lookup
(Kafka's KafkaApis.handle matches on the API key the same way). The first component to register
a type keeps it: on a combined node the controller starts first, so it answers Metadata and the
admin APIs itself, as a dedicated controller does, instead of the broker forwarding them to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.server.listener import Ordering


@dataclass(frozen=True, slots=True)
class Call:
    """What a handler knows of a request besides its body. `client_id`: the client quotas are
    per client id (KIP-13). `internal`: the broker's own request (the group coordinator creating
    `__consumer_offsets`), never a client's. `order`: a Kafka connection's ordering
    (server/listener.py `Ordering`), released by a produce once its batches are queued."""

    client_id: str = ""
    internal: bool = False
    order: Ordering | None = None


Handler = Callable[[Any, Call], Awaitable[object]]
Routes = Mapping[type, Handler]


class RouteTable:
    """The handlers of one listener, by request type; see the module's docstring."""

    def __init__(self, *routes: Routes) -> None:
        self._handlers: dict[type, Handler] = {}
        for table in routes:
            self.register(table)

    def register(self, routes: Routes) -> None:
        """Add a component's routes; a type already served keeps its first handler."""
        for kind, handler in routes.items():
            self._handlers.setdefault(kind, handler)

    def handler(self, body: object) -> Handler | None:
        return self._handlers.get(type(body))

    def serves(self) -> frozenset[type]:
        return frozenset(self._handlers)

    async def answer(self, body: object, call: Call = Call()) -> object:  # noqa: B008 - frozen
        """The handler's answer, or NotImplemented if no component serves this request."""
        handler = self._handlers.get(type(body))
        if handler is None:
            return NotImplemented
        return await handler(body, call)
