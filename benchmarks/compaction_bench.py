"""A compaction pass through the LMDB store: how fast, how much it frees, what the loop feels.

    .venv/bin/python benchmarks/compaction_bench.py [--log-mb 64] [--keys 1000]
        [--value-bytes 100] [--records-per-batch 100] [--segment-mb 8] [--dir DIR]

One partition in a `LogStore` (sync on, as the broker runs it) gets `--log-mb` of RecordBatch
v2 batches (Kafka's clients' format) of `--records-per-batch` records, each key one of
`--keys`, each value `--value-bytes`, in segments of `--segment-mb`, one segment left active.
Then one cleaning pass runs as server/log_cleaner.py runs it: the offset map, then windows of
500 batches cleaned in a worker thread (`trio.to_thread`) and each window's changes written in
one store transaction, from a Trio loop in which a ticker task sleeps 1 ms at a time and
records how late each wake-up is (the loop's lag while the pass runs; the same ticker without
a pass is measured first). It prints the pass's time and MB/s of log read, the records and
bytes it removed, and the physical reference measured in the same run: raw LMDB batched
appends with sync (benchmarks/lmdb_reference.py). MB are 10**6 bytes, MiB 2**20.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lmdb_reference import measure_lmdb_append_mb_per_s  # noqa: E402

from minikafka.common import TopicPartition  # noqa: E402
from minikafka.core import compaction  # noqa: E402
from minikafka.core import record_batch_v2 as v2  # noqa: E402
from minikafka.server.log_cleaner import _clean_window, _offset_map  # noqa: E402
from minikafka.storage import AppendWrite, LogStore, StoreConfig  # noqa: E402

TP = TopicPartition("bench", 0)
MiB = 1 << 20
T0 = 1_700_000_000_000


def fill(store: LogStore, args: argparse.Namespace) -> int:
    """The log; -> its bytes."""
    written, offset, n = 0, 0, 0
    value = b"v" * args.value_bytes
    while written < args.log_mb * MiB:
        appends = []
        for _ in range(16):  # batches per transaction, as the writer groups them
            records = [
                (T0 + offset + i, b"key-%d" % ((n * args.records_per_batch + i) % args.keys), value)
                for i in range(args.records_per_batch)
            ]
            raw = v2.build(records, base_offset=offset)
            appends.append(raw)
            offset += args.records_per_batch
            n += 1
            written += len(raw)
        store.append(
            [AppendWrite(tp=TP, batches=appends, segment_bytes=args.segment_mb * MiB, now_ms=T0)]
        )
    # one more batch far later in record time rolls the last full segment: it becomes cleanable
    last = v2.build([(T0 + 10**9, b"key-0", value)], base_offset=offset)
    store.append(
        [AppendWrite(tp=TP, batches=[last], segment_bytes=1 << 30, segment_ms=1, now_ms=T0)]
    )
    return written + len(last)


async def _ticker(lags: list[float], stop: trio.Event) -> None:
    while not stop.is_set():
        before = time.perf_counter()
        await trio.sleep(0.001)
        lags.append(time.perf_counter() - before - 0.001)


async def _pass(store: LogStore) -> dict[str, float]:
    segments = store.segments(TP)
    todo = compaction.cleanable(
        segments,
        checkpoint=None,
        log_start_offset=0,
        high_watermark=store.log_end_offset(TP),
        now_ms=T0,
        config=compaction.CleanerConfig(min_cleanable_ratio=0.0),
    )
    started = time.perf_counter()
    offset_map, end = await trio.to_thread.run_sync(
        _offset_map, store, TP, todo.first_dirty, todo.clean_end
    )
    mapped = time.perf_counter()
    removed = before = after = 0
    at = 0
    cc = compaction.CleanerConfig()
    while at < end:
        n, changes, at = await trio.to_thread.run_sync(
            _clean_window, store, TP, at, end, offset_map, T0, cc
        )
        if n is None:
            break
        assert await trio.to_thread.run_sync(store.apply_cleaning, TP, changes)
        removed += n
        before += sum(len(b) for b, _a in changes)
        after += sum(len(a or b"") for _b, a in changes)
    await trio.to_thread.run_sync(lambda: store.apply_cleaning(TP, [], checkpoint=end))
    return {
        "map_s": mapped - started,
        "pass_s": time.perf_counter() - started,
        "records_removed": removed,
        "bytes_removed": before - after,
        "clean_end": end,
        "keys": len(offset_map),
    }


async def measure(store: LogStore) -> tuple[list[float], list[float], dict[str, float]]:
    idle: list[float] = []
    busy: list[float] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_ticker, idle, stop)
        await trio.sleep(1.0)
        stop.set()
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_ticker, busy, stop)
        result = await _pass(store)
        stop.set()
    return idle, busy, result


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log-mb", type=int, default=64)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--records-per-batch", type=int, default=100)
    p.add_argument("--segment-mb", type=int, default=8)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        with LogStore(Path(tmp) / "log", StoreConfig(map_size_bytes=8 << 30)) as store:
            store.create_partition(TP)
            total = fill(store, args)
            idle, busy, r = trio.run(measure, store)
            left = sum(s.size_bytes for s in store.segments(TP))
        ref = measure_lmdb_append_mb_per_s(tmp, total_bytes=128 << 20)
    print(f"log:               {total / MiB:8.1f} MiB, {args.keys} keys, "
          f"{args.records_per_batch} records of {args.value_bytes} B per batch")  # fmt: skip
    print(
        f"offset map:        {r['map_s']:8.2f} s ({r['keys']:.0f} keys, clean end {r['clean_end']:.0f})"
    )
    print(f"pass:              {r['pass_s']:8.2f} s = {total / r['pass_s'] / 1e6:.1f} MB/s of log")
    print(f"removed:           {r['records_removed']:8.0f} records, {r['bytes_removed'] / MiB:.1f} MiB "
          f"(log now {left / MiB:.2f} MiB)")  # fmt: skip
    print(f"loop lag, 1 ms ticks: idle p50 {pct(idle, 0.5):.2f} / p99 {pct(idle, 0.99):.2f} / "
          f"max {max(idle) * 1000:.2f} ms; during the pass p50 {pct(busy, 0.5):.2f} / "
          f"p99 {pct(busy, 0.99):.2f} / max {max(busy) * 1000:.2f} ms ({len(busy)} ticks)")  # fmt: skip
    print(f"lmdb reference:    {ref:8.1f} MB/s (raw batched append with sync)")


if __name__ == "__main__":
    main()
