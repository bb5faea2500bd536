"""The controller's metadata records, persisted in the node's LMDB environment.

Owns the named database `controller-metadata`: one msgpack value per record key (the keys and
what they hold are the controller's, core/controller/records.py). The environment is shared
with the node's `LogStore` through `EnvLease` (one environment per data dir).

A save writes only the records that changed (`write`: puts and deletes in ONE
transaction, so a save is all or nothing); `read` returns every record. The store used to hold
one whole document under the key `doc`; `read` returns it like any record, and the controller
rewrites it as records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import msgpack

from minikafka.storage.env import EnvLease, StorageError, StoreConfig

_DB_NAME = b"controller-metadata"
_DEFAULT_CONFIG = StoreConfig()  # frozen: safe to share as a default


class MetadataStore:
    """The controller's durable state: records by key, changed a few at a time."""

    def __init__(self, path: str | os.PathLike[str], config: StoreConfig = _DEFAULT_CONFIG) -> None:
        self._lease = EnvLease(path, config)
        try:
            with self._lease.txn(write=True) as txn:
                self._db = self._lease.env.open_db(_DB_NAME, txn=txn, create=True)
        except BaseException:
            self._lease.close()
            raise

    def read(self) -> dict[str, Any]:
        """Every record, by key ({} if nothing was ever saved)."""
        with self._lease.txn(write=False) as txn:
            return {
                bytes(key).decode(): msgpack.unpackb(value, raw=False, strict_map_key=False)
                for key, value in txn.cursor(db=self._db).iternext(keys=True, values=True)
            }

    def write(self, puts: Mapping[str, Any], deletes: Iterable[str] = ()) -> None:
        """Put and delete records in one transaction (durable per the config's sync policy);
        if anything fails, nothing is written."""
        try:
            packed = [
                (key.encode(), msgpack.packb(value, use_bin_type=True))
                for key, value in puts.items()
            ]
        except (TypeError, ValueError) as exc:
            raise StorageError(f"controller metadata is not serialisable: {exc}") from exc
        with self._lease.txn(write=True) as txn:
            for key in deletes:
                txn.delete(key.encode(), db=self._db)
            with txn.cursor(db=self._db) as cur:
                cur.putmulti(packed)

    def close(self) -> None:
        """Release the environment (idempotent)."""
        self._lease.close()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
