"""minikafka/storage: the LMDB log store, its snapshots, time index and data-dir lock."""
