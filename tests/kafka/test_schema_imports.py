"""kio's schemas are imported lazily on two threads, the event loop and the schema preload
(minikafka/kafka/codec.py): every such import must hold KIO_IMPORTS, or two threads importing
modules of one kio package can deadlock on Python's per-module import locks, and importlib's
_DeadlockError crashed a node in CI."""

from __future__ import annotations

import kio.index

from minikafka.kafka import KIO_IMPORTS, codec


def test_every_lazy_schema_load_holds_the_import_lock(monkeypatch) -> None:
    held: list[bool] = []
    real_request, real_response = kio.index.load_request_schema, kio.index.load_response_schema

    def request(key: int, version: int) -> type:
        held.append(KIO_IMPORTS._is_owned())  # an RLock: owned by this thread
        return real_request(key, version)

    def response(key: int, version: int) -> type:
        held.append(KIO_IMPORTS._is_owned())
        return real_response(key, version)

    monkeypatch.setattr(kio.index, "load_request_schema", request)
    monkeypatch.setattr(kio.index, "load_response_schema", response)
    codec.request_schema.cache_clear()
    codec.response_schema.cache_clear()
    try:
        codec.preload_schemas(((18, 0), (3, 9)))
    finally:
        codec.request_schema.cache_clear()
        codec.response_schema.cache_clear()
    assert held == [True] * 4
