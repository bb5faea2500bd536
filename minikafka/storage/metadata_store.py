"""The controller's metadata document, persisted in the node's LMDB environment.

Owns the named database `controller-metadata`, which holds one msgpack document under one key.
The environment is shared with the node's `LogStore` through `EnvLease` (one environment per
data dir). `save` replaces the whole document in one transaction; `load` reads it back.
"""

from __future__ import annotations

import os
from typing import Any

import msgpack

from minikafka.storage.env import EnvLease, StorageError, StoreConfig

_DB_NAME = b"controller-metadata"
_DOC_KEY = b"doc"
_DEFAULT_CONFIG = StoreConfig()  # frozen: safe to share as a default


class MetadataStore:
    """The controller's durable state: one msgpack document, replaced whole on each save."""

    def __init__(self, path: str | os.PathLike[str], config: StoreConfig = _DEFAULT_CONFIG) -> None:
        self._lease = EnvLease(path, config)
        try:
            with self._lease.txn(write=True) as txn:
                self._db = self._lease.env.open_db(_DB_NAME, txn=txn, create=True)
        except BaseException:
            self._lease.close()
            raise

    def load(self) -> dict[str, Any] | None:
        """The last saved document, or None if nothing was ever saved."""
        with self._lease.txn(write=False) as txn:
            raw = txn.get(_DOC_KEY, db=self._db)
            if raw is None:
                return None
            return msgpack.unpackb(raw, raw=False, strict_map_key=False)

    def save(self, doc: dict[str, Any]) -> None:
        """Replace the document (one transaction; durable per the config's sync policy)."""
        try:
            packed = msgpack.packb(doc, use_bin_type=True)
        except (TypeError, ValueError) as exc:
            raise StorageError(f"controller metadata is not serialisable: {exc}") from exc
        with self._lease.txn(write=True) as txn:
            txn.put(_DOC_KEY, packed, db=self._db)

    def close(self) -> None:
        """Release the environment (idempotent)."""
        self._lease.close()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
