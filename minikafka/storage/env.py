"""The LMDB environment of a node's data dir, and the errors of the storage package.

LMDB forbids opening one environment twice in a process, so the environment of a directory is
opened once and shared by `LogStore` (storage/log_store.py) and `MetadataStore`
(storage/metadata_store.py) through `EnvLease`, reference-counted: the last lease closes it. A
second open with another `StoreConfig` is refused rather than silently getting the first one's.

Errors: a failure of the disk or of LMDB inside a transaction is a `LogDirError` (Kafka's
KafkaStorageException, which takes the replicas it hit offline); a refusal of the store's own
rules is a plain `StorageError`. Either way nothing of the operation was written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import lmdb

from minikafka.errors import MiniKafkaError


class StorageError(MiniKafkaError):
    """A storage operation failed or was refused; nothing of it was written."""


class LogDirError(StorageError):
    """The disk or the LMDB environment failed (MDB_MAP_FULL, ENOSPC, EIO ...): Kafka's
    KafkaStorageException, which takes the replicas it hit offline (log-dir failure). A refusal
    of the store's own rules (an append off the log end) is a plain StorageError instead."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig:
    map_size_bytes: int = 1 << 36  # 64 GiB address space, sparse
    sync: bool = True  # LMDB sync/metasync: the durability policy
    max_partitions: int = 8192


class EnvLease:
    """A reference to the process-wide LMDB environment of one directory; `close()` releases it."""

    _lock = threading.Lock()
    _open: dict[str, list[Any]] = {}  # realpath -> [env, config, refcount]
    # The simulation's disk faults (sim/cluster.py `disk_full`, `fail_write`): realpath -> the
    # OSError write transactions there get (ENOSPC while the disk is full; EIO once for a
    # failed write); reads still work.
    _full: dict[str, OSError] = {}
    _fail_once: dict[str, OSError] = {}

    def __init__(self, path: str | os.PathLike[str], config: StoreConfig) -> None:
        os.makedirs(path, exist_ok=True)
        key = os.path.realpath(path)
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                try:
                    env = lmdb.open(
                        key,
                        map_size=config.map_size_bytes,
                        max_dbs=config.max_partitions + 8,
                        max_readers=512,
                        sync=config.sync,
                        metasync=config.sync,
                        writemap=False,
                        readahead=False,
                    )
                except lmdb.Error as exc:
                    raise StorageError(f"cannot open LMDB environment {path}: {exc}") from exc
                entry = self._open[key] = [env, config, 0]
            elif entry[1] != config:
                raise StorageError(f"{path} is already open with {entry[1]}, not {config}")
            entry[2] += 1
        self._key: str | None = key  # only once the lease is counted
        self.env: lmdb.Environment = entry[0]

    def close(self) -> None:
        """Release this lease (idempotent); the last lease closes the environment."""
        with self._lock:
            if self._key is None:
                return
            entry = self._open[self._key]
            entry[2] -= 1
            if entry[2] == 0:
                del self._open[self._key]
                entry[0].close()
            self._key = None

    @property
    def closed(self) -> bool:
        return self._key is None

    @classmethod
    def set_full(cls, path: str | os.PathLike[str], full: bool) -> None:
        """Make write transactions on `path`'s environment fail with ENOSPC, or work again
        (`full=False` also drops a pending `fail_next_write`)."""
        key = os.path.realpath(path)
        with cls._lock:
            if full:
                cls._full[key] = OSError(28, "No space left on device (simulated)")
            else:
                cls._full.pop(key, None)
                cls._fail_once.pop(key, None)  # a healthy disk again: no write pending failure

    @classmethod
    def fail_next_write(cls, path: str | os.PathLike[str]) -> None:
        """Make the next write transaction on `path`'s environment fail with EIO, once."""
        with cls._lock:
            cls._fail_once[os.path.realpath(path)] = OSError(5, "Input/output error (simulated)")

    @classmethod
    def copy_open(cls, path: str | os.PathLike[str], dest: str | os.PathLike[str]) -> bool:
        """Copy the environment of `path`, if this process has it open, to the empty folder
        `dest` as one consistent snapshot (LMDB's mdb_env_copy, a read transaction): what a
        disk had made durable at this instant (the simulation's writeback, sim/cluster.py).
        False when it is not open here."""
        with cls._lock:
            entry = cls._open.get(os.path.realpath(path))
            if entry is None:
                return False
            os.makedirs(dest, exist_ok=True)
            entry[0].copy(os.fspath(dest))
            return True

    @contextmanager
    def txn(self, *, write: bool) -> Iterator[lmdb.Transaction]:
        """One transaction: committed on success, aborted on any exception (lmdb's and the OS's
        -> LogDirError)."""
        if self._key is None:
            raise StorageError("the store is closed")
        if write and (self._full or self._fail_once):
            error = self._full.get(self._key) or self._fail_once.pop(self._key, None)
            if error is not None:
                raise LogDirError(f"LMDB: {error}")
        try:
            with self.env.begin(write=write, buffers=not write) as txn:
                yield txn
        except (lmdb.Error, OSError) as exc:
            raise LogDirError(f"LMDB: {exc}") from exc
