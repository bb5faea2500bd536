"""Physical reference: raw LMDB batched-append throughput on this machine.

Plain lmdb, no minikafka code: one environment, one named database, 8-byte big-endian keys,
`append=True` puts of `batch_bytes`-sized values, `batches_per_txn` puts per write transaction
(the same shape as `LogStore.append` under follower catch-up). Other benchmarks print this figure
beside their own so a reader can tell the cost of minikafka from the cost of the disk.

MB are 10**6 bytes. Run: `python benchmarks/lmdb_reference.py [--total-mb N]`.
"""

from __future__ import annotations

import argparse
import os
import struct
import tempfile
import time

import lmdb

_KEY = struct.Struct(">Q")


def measure_lmdb_append_mb_per_s(
    tmpdir: str | os.PathLike[str],
    *,
    total_bytes: int = 256 << 20,
    batch_bytes: int = 100_000,
    batches_per_txn: int = 100,
    sync: bool = True,
) -> float:
    """Append `total_bytes` in `batch_bytes` values, `batches_per_txn` per txn; return MB/s.

    The clock covers every transaction including its commit (and fsync when `sync`), not the
    environment's open/close. A fresh environment is created in a new directory under `tmpdir`.
    """
    if total_bytes <= 0 or batch_bytes <= 0 or batches_per_txn <= 0:
        raise ValueError("total_bytes, batch_bytes and batches_per_txn must be positive")
    value = os.urandom(batch_bytes)
    n_batches = max(1, total_bytes // batch_bytes)
    path = tempfile.mkdtemp(prefix="lmdb-ref-", dir=tmpdir)
    env = lmdb.open(
        path,
        map_size=2 * n_batches * batch_bytes + (64 << 20),
        max_dbs=2,
        sync=sync,
        metasync=sync,
        readahead=False,
    )
    try:
        db = env.open_db(b"log/bench/0")
        start = time.perf_counter()
        for first in range(0, n_batches, batches_per_txn):
            with env.begin(write=True) as txn:
                for offset in range(first, min(first + batches_per_txn, n_batches)):
                    txn.put(_KEY.pack(offset), value, append=True, db=db)
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return n_batches * batch_bytes / 1e6 / elapsed


def measure_lmdb_commit_latency_ms(
    tmpdir: str | os.PathLike[str], *, commits: int = 200, value_bytes: int = 100, sync: bool = True
) -> list[float]:
    """Milliseconds of each of `commits` write transactions of ONE `value_bytes` value, commit
    (and fsync when `sync`) included, sorted: the floor of a single-record acks=all produce,
    which waits for one such commit on the leader and then one on the follower."""
    if commits <= 0 or value_bytes <= 0:
        raise ValueError("commits and value_bytes must be positive")
    value = os.urandom(value_bytes)
    path = tempfile.mkdtemp(prefix="lmdb-lat-", dir=tmpdir)
    env = lmdb.open(path, map_size=64 << 20, max_dbs=2, sync=sync, metasync=sync)
    out = []
    try:
        db = env.open_db(b"log/bench/0")
        for offset in range(commits):
            start = time.perf_counter()
            with env.begin(write=True) as txn:
                txn.put(_KEY.pack(offset), value, append=True, db=db)
            out.append((time.perf_counter() - start) * 1000)
    finally:
        env.close()
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=256, help="MiB appended per run")
    parser.add_argument("--batch-bytes", type=int, default=100_000)
    parser.add_argument("--batches-per-txn", type=int, default=100)
    parser.add_argument("--dir", default=None, help="where to create the environments")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmpdir:
        for sync in (True, False):
            rate = measure_lmdb_append_mb_per_s(
                tmpdir,
                total_bytes=args.total_mb << 20,
                batch_bytes=args.batch_bytes,
                batches_per_txn=args.batches_per_txn,
                sync=sync,
            )
            print(
                f"lmdb append reference: sync={'on' if sync else 'off'}  {rate:8.1f} MB/s  "
                f"({args.total_mb} MiB, {args.batch_bytes} B values, "
                f"{args.batches_per_txn} per txn)"
            )


if __name__ == "__main__":
    main()
