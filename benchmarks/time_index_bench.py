"""ListOffsets by time (KIP-79): a lookup through the time index vs a scan of the log.

    .venv/bin/python benchmarks/time_index_bench.py [--batches 100000] [--records 1] [--v2]

Builds one partition of N batches (increasing timestamps with jitter, so timestamps are not
monotonic inside the log) in a LogStore in a temporary directory (sync off), then times, for
targets spread over the log, `LogStore.find_timestamp` (one index `set_range`, one batch) and
the same answer found without the index, as a store without one would: every batch read from
the first one on until one reaches the target (core/time_index.py `search_batches` over a cursor
of the whole log). Prints the median of each and the reads the index lookup made.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

from minikafka.common import TopicPartition
from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import make_batch
from minikafka.core.time_index import search_batches
from minikafka.storage import AppendWrite, LogStore, ReadSpec, StoreConfig

TP = TopicPartition("bench", 0)


def build(store: LogStore, n: int, records: int, use_v2: bool) -> int:
    rng = random.Random(79)
    ts, base, chunk = 1_700_000_000_000, 0, []
    for _ in range(n):
        ts += rng.randint(0, 4)
        stamps = [ts - rng.randint(0, 20) for _ in range(records)]
        recs = [(t, None, b"x" * 100) for t in stamps]
        chunk.append((v2.build if use_v2 else make_batch)(recs, base_offset=base))
        base += records
        if len(chunk) == 1000:
            store.append([AppendWrite(tp=TP, batches=chunk)])
            chunk = []
    if chunk:
        store.append([AppendWrite(tp=TP, batches=chunk)])
    return ts


def scan(store: LogStore, target: int):  # noqa: ANN201
    """The answer without an index: read the batches from the first on (one read txn)."""
    with store._lease.txn(write=False) as txn, txn.cursor(db=store._dbs[TP]) as cur:
        cur.first()
        return search_batches(map(bytes, cur.iternext(keys=False, values=True)), target, 0)


def median_ms(fn, targets: list[int]) -> float:  # noqa: ANN001
    times = []
    for target in targets:
        t0 = time.perf_counter()
        fn(target)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--records", type=int, default=1, help="records per batch")
    ap.add_argument("--v2", action="store_true", help="RecordBatch v2 instead of native batches")
    ap.add_argument("--lookups", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, LogStore(d, StoreConfig(sync=False)) as store:
        store.create_partition(TP)
        t0 = time.perf_counter()
        last = build(store, args.batches, args.records, args.v2)
        built_s = time.perf_counter() - t0
        first = 1_700_000_000_000
        targets = [first + (last - first) * i // (args.lookups - 1) for i in range(args.lookups)]
        for target in targets:  # the two agree
            got, want = store.find_timestamp(TP, target, 0).found, scan(store, target)
            assert got == want, (target, got, want)
        probe = store.find_timestamp(TP, targets[len(targets) // 2], 0)
        indexed = median_ms(lambda t: store.find_timestamp(TP, t, 0), targets)
        scanned = median_ms(lambda t: scan(store, t), targets)
        size = len(store.read([ReadSpec(tp=TP, fetch_offset=0, max_offset=1 << 62,
                                        partition_max_bytes=1 << 40)], 1 << 40)[0])  # fmt: skip
    kind = "RecordBatch v2" if args.v2 else "native"
    print(f"{args.batches} {kind} batches of {args.records} record(s), {size / 1e6:.1f} MB, "
          f"appended in {built_s:.1f} s")  # fmt: skip
    print(f"index lookup: median {indexed:.3f} ms over {args.lookups} targets "
          f"({probe.index_entries_read} index entry, {probe.batches_read} batch read)")  # fmt: skip
    print(f"full scan:    median {scanned:.3f} ms (batches from the first until the target)")
    print(f"speed-up:     {scanned / indexed:.0f} x")


if __name__ == "__main__":
    main()
