"""minikafka/storage: the only package that imports lmdb (partition logs, checkpoints, metadata)."""

from minikafka.storage.dir_lock import DataDirInUse, DataDirLock, lock_data_dir
from minikafka.storage.env import EnvLease, LogDirError, StorageError, StoreConfig
from minikafka.storage.log_store import AppendWrite, LoadedPartition, LogStore, ReadSpec
from minikafka.storage.metadata_store import MetadataStore

__all__ = [
    "AppendWrite",
    "DataDirInUse",
    "DataDirLock",
    "EnvLease",
    "LoadedPartition",
    "LogDirError",
    "LogStore",
    "MetadataStore",
    "ReadSpec",
    "StorageError",
    "StoreConfig",
    "lock_data_dir",
]
