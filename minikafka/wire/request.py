"""A request that names its response type: `Connection.request(body)` returns that type.

Every request message derives from `Request[ItsResponse]` (the registry, wire/messages.py
`API`, pairs them for the codec); the type parameter is for readers and type checkers alone,
so a caller gets a `FetchResponse` from a `FetchRequest` without an isinstance at each call.
"""

from __future__ import annotations

from typing import Generic, TypeVar

R = TypeVar("R", covariant=True)


class Request(Generic[R]):
    __slots__ = ()
