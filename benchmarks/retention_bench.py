"""Retention by size through the LMDB store: does the data file stay bounded, at what cost?

    .venv/bin/python benchmarks/retention_bench.py [--retention-mb 64] [--batch-bytes 16384]
        [--segment-mb 8] [--factor 10] [--batches-per-append 16] [--check-every 64]
        [--max-keys 1000] [--no-sync] [--dir DIR]

One partition in a `LogStore` (sync on by default, as the broker runs it: one fsync per write
transaction, `--batches-per-append` batches each, the log writer's grouping). It appends
`--factor` x `retention.bytes` of batches of `--batch-bytes` bytes (whole batches, header
included) with `segment.bytes` = `--segment-mb`, and every `--check-every` appends runs what a
retention task would (``UnifiedLog.deleteOldSegments`` every check interval): the plan
(``log_retention.delete_old_segments`` on `store.segments`, high watermark = log end, size
only), `store.apply_retention` (at most `--max-keys` batch keys in that transaction), then
`store.purge` until nothing is left. It prints the data file's final and peak size
(`store.disk_bytes()`, pages up to the highest ever used, and the file's own size), the bytes
retained (the segments' sizes), their ratio to `retention.bytes` (the issue's target: the data
dir within 2x), the append MB/s with retention and without it (the same writes, no retention),
the deletion's own cost, the batches' bytes at the peak (what Kafka's segment files would
hold: retention.bytes + up to a segment + one check interval's writes), and the physical reference measured in the same run: raw LMDB
batched appends of the same values, as many per transaction, with sync
(benchmarks/lmdb_reference.py). `--pin-reader` holds one read transaction open throughout, to
show what a long-lived reader does to page reuse. MB are 10**6 bytes, MiB 2**20.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lmdb_reference import measure_lmdb_append_mb_per_s  # noqa: E402

from minikafka.common import TopicPartition  # noqa: E402
from minikafka.core.log_retention import delete_old_segments  # noqa: E402
from minikafka.core.records import make_batch  # noqa: E402
from minikafka.storage import AppendWrite, LogStore, StoreConfig  # noqa: E402

TP = TopicPartition("bench", 0)
MiB = 1 << 20


def batch_of(base: int, size: int, ts: int) -> bytes:
    """One native batch of exactly `size` bytes holding one record."""
    n = size - len(make_batch([(ts, None, b"")], base_offset=base))
    for value_len in range(n, max(n - 8, 0), -1):  # msgpack's bin header grows with the value
        raw = make_batch([(ts, None, b"v" * value_len)], base_offset=base)
        if len(raw) == size:
            return raw
    raise ValueError(f"no one-record batch of {size} bytes")


def run(path: str, args: argparse.Namespace, *, retention: bool) -> dict[str, float]:
    retention_bytes = args.retention_mb * MiB
    total = args.factor * retention_bytes
    n_appends = total // (args.batch_bytes * args.batches_per_append)
    config = StoreConfig(map_size_bytes=4 * total + (256 << 20), sync=not args.no_sync)
    template = batch_of(0, args.batch_bytes, 0)
    peak = peak_logical = 0
    delete_s = 0.0
    purges = 0
    with LogStore(path, config) as store:
        store.create_partition(TP)
        # --pin-reader: one read transaction open from the start (what a long-lived reader does)
        pinned = store._env.begin() if args.pin_reader else None  # noqa: SLF001
        offset = 0
        t0 = time.perf_counter()
        for i in range(n_appends):
            now = int(time.time() * 1000)
            batches = []
            for _ in range(args.batches_per_append):
                batches.append(batch_of(offset, args.batch_bytes, now) if offset == 0 else
                               _rebase(template, offset))  # fmt: skip
                offset += 1
            store.append(
                [
                    AppendWrite(
                        tp=TP, batches=batches, segment_bytes=args.segment_mb * MiB, now_ms=now
                    )
                ]
            )
            peak_logical = max(peak_logical, sum(s.size_bytes for s in store.segments(TP)))
            if retention and (i + 1) % args.check_every == 0:
                d0 = time.perf_counter()
                plan = delete_old_segments(
                    store.segments(TP),
                    high_watermark=store.log_end_offset(TP),
                    log_start_offset=store.log_start_offset(TP),
                    retention_ms=-1,
                    retention_bytes=retention_bytes,
                    now_ms=now,
                )
                if plan.deletions:
                    left = store.apply_retention(TP, plan, max_keys=args.max_keys)
                    purges += 1
                    while left:
                        left = store.purge(TP, max_keys=args.max_keys)
                        purges += 1
                delete_s += time.perf_counter() - d0
            peak = max(peak, store.disk_bytes())
        elapsed = time.perf_counter() - t0
        if pinned is not None:
            pinned.abort()
        retained = sum(s.size_bytes for s in store.segments(TP))
        final = store.disk_bytes()
        file_bytes = os.path.getsize(os.path.join(path, "data.mdb"))
        stat = store._env.stat()  # noqa: SLF001 - the page size, for the report
        info = store._env.info()  # noqa: SLF001
    written = n_appends * args.batches_per_append * args.batch_bytes
    return {
        "written": written,
        "mb_s": written / 1e6 / elapsed,
        "final": final,
        "peak": peak,
        "peak_logical": peak_logical,
        "file": file_bytes,
        "retained": retained,
        "delete_s": delete_s,
        "elapsed": elapsed,
        "deletion_txns": purges,
        "psize": stat["psize"],
        "last_pgno": info["last_pgno"],
    }


def _rebase(template: bytes, offset: int) -> bytes:
    """The template batch at another base offset (the header's first 8 bytes; the store does
    not check CRCs, and the bench must not time batch building)."""
    return offset.to_bytes(8, "big", signed=True) + template[8:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--retention-mb", type=int, default=64, help="retention.bytes, MiB")
    ap.add_argument("--batch-bytes", type=int, default=16384)
    ap.add_argument("--segment-mb", type=int, default=8, help="segment.bytes, MiB")
    ap.add_argument("--factor", type=int, default=10, help="write factor x retention.bytes")
    ap.add_argument("--batches-per-append", type=int, default=16)
    ap.add_argument("--check-every", type=int, default=64, help="appends between retention runs")
    ap.add_argument("--max-keys", type=int, default=1000)
    ap.add_argument("--no-sync", action="store_true")
    ap.add_argument("--pin-reader", action="store_true", help="hold one read txn throughout")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    r = args.retention_mb * MiB
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        ref = measure_lmdb_append_mb_per_s(
            d,
            total_bytes=min(256 * MiB, args.factor * r),
            batch_bytes=args.batch_bytes,
            batches_per_txn=args.batches_per_append,
            sync=not args.no_sync,
        )
        on = run(os.path.join(d, "retention"), args, retention=True)
        off = run(os.path.join(d, "plain"), args, retention=False)
    interval = args.check_every * args.batches_per_append * args.batch_bytes
    print(
        f"retention.bytes {args.retention_mb} MiB, segment.bytes {args.segment_mb} MiB, "
        f"batches {args.batch_bytes} B x {args.batches_per_append} per append (txn), "
        f"sync {'off' if args.no_sync else 'on'}, retention every {args.check_every} appends "
        f"({interval / MiB:.1f} MiB), max_keys {args.max_keys}, page {on['psize']} B"
    )
    print(f"written:            {on['written'] / MiB:8.1f} MiB ({args.factor}x retention.bytes)")
    print(
        f"retained (segments): {on['retained'] / MiB:7.1f} MiB = "
        f"{on['retained'] / r:.2f}x retention.bytes"
    )
    print(
        f"data.mdb final:     {on['final'] / MiB:8.1f} MiB = {on['final'] / r:.2f}x retention.bytes"
        f"  (file size {on['file'] / MiB:.1f} MiB)"
    )
    print(
        f"data.mdb peak:      {on['peak'] / MiB:8.1f} MiB = {on['peak'] / r:.2f}x retention.bytes"
    )
    print(
        f"batches at peak:    {on['peak_logical'] / MiB:8.1f} MiB (what Kafka's files would hold; "
        f"data.mdb peak / this = {on['peak'] / on['peak_logical']:.2f})"
    )
    print(f"without retention:  {off['final'] / MiB:8.1f} MiB data.mdb")
    print(
        f"append MB/s:        {on['mb_s']:8.1f} with retention, {off['mb_s']:.1f} without "
        f"(deletion {on['delete_s']:.2f} s of {on['elapsed']:.1f} s, "
        f"{on['deletion_txns']} deletion txns)"
    )
    print(f"lmdb reference:     {ref:8.1f} MB/s (raw batched append, same values and sync)")
    target = "met" if on["peak"] <= 2 * r else "NOT met"
    print(f"target (data dir within 2x retention.bytes): {target}")


if __name__ == "__main__":
    main()
