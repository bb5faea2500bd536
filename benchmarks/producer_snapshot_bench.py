"""What the producer-state snapshot costs a broker with many idempotent producers.

One in-process broker (testing/memory_node.py `MemoryBroker`, real LMDB under a temporary
directory, storage calls in Trio's worker threads as in a node, the real clock) follows
`--partitions` partitions holding `--producers` producer ids between them. The producer states
are filled directly (`ProducerStateManager.apply`, what a produce or a fetched batch does), at
offsets inside each partition's log: a million real produce requests would take minutes and
measure the produce path, not the snapshot.

Then `--cycles` HW-checkpoint rounds (the body of the 5 s
`run_hw_checkpoints` loop), in two scenarios:

- `all changed`: every partition's HW moved and one of its producers wrote one batch;
- `one changed`: every partition's HW moved (records without a producer id), and one
  partition's producer wrote;
- `all due`: as `all changed`, but each log grew by as many records as its state has
  producers, so every snapshot is due again (core/producer_state.py `snapshot_due`).

For each: the wall time of one round, the longest time the event loop did not run (a task that
sleeps 1 ms and records the largest gap between its wake-ups), and the snapshot bytes written.
Last, the expiry task's two checks that stamp and then expire every producer, with the same
loop watch.

    .venv/bin/python benchmarks/producer_snapshot_bench.py [--producers 1000000]
        [--partitions 100] [--cycles 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

from minikafka.common import TopicPartition
from minikafka.core.producer_state import ProducerBatch
from minikafka.core.records import make_batch
from minikafka.server.config import NodeConfig
from minikafka.server.producer_state_tasks import run_producer_expiration
from minikafka.storage import AppendWrite, StoreConfig
from minikafka.testing.memory_node import MemoryBroker, partition_state

TOPIC = "t"


class LoopWatch:
    """The longest gap between the wake-ups of a task sleeping 1 ms: how long the loop stalled."""

    def __init__(self) -> None:
        self.worst_s = 0.0

    async def run(self) -> None:
        last = time.perf_counter()
        while True:
            await trio.sleep(0.001)
            now = time.perf_counter()
            self.worst_s = max(self.worst_s, now - last)
            last = now


async def _append(broker: MemoryBroker, tps: list[TopicPartition], records: int) -> None:
    """`records` more records (no producer id) in each partition, and its HW at the new end."""
    writes = []
    for tp in tps:
        p = broker.partition(TOPIC, tp.partition)
        batch = make_batch([(0, None, b"v")] * records, base_offset=p.log_end_offset)
        writes.append(AppendWrite(tp=tp, batches=[batch]))
    await broker.writer.append(writes)
    for tp in tps:
        p = broker.partition(TOPIC, tp.partition)
        p.replica.on_leader_high_watermark(p.log_end_offset)


def _write_one(broker: MemoryBroker, tp: TopicPartition, producer_id: int, seq: int) -> None:
    """Producer `producer_id` wrote one batch at this partition's last offset."""
    p = broker.partition(TOPIC, tp.partition)
    p.producers.apply(
        ProducerBatch(
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=seq,
            base_offset=p.log_end_offset - 1,
            count=1,
        )
    )


async def _round(broker: MemoryBroker, watch: LoopWatch) -> tuple[float, float, int]:
    """One checkpoint round: (wall s, worst loop stall s, snapshot bytes written)."""
    before = _snapshot_bytes(broker)
    watch.worst_s = 0.0
    await trio.sleep(0.01)  # the watch's first wake-up
    t0 = time.perf_counter()
    rm = broker.replica_manager  # the body of run_hw_checkpoints, every partition moved
    moved = {tp: p.high_watermark for tp, p in rm.partitions.items()}
    await rm.writer.checkpoint(moved, await rm.producer_snapshots.take(moved))
    rm.producer_snapshots.written()
    wall = time.perf_counter() - t0
    await trio.sleep(0.01)
    return wall, watch.worst_s, _snapshot_bytes(broker) - before


def _snapshot_bytes(broker: MemoryBroker) -> int:
    return broker.store.producer_snapshot_bytes_written  # type: ignore[attr-defined]


async def run(args: argparse.Namespace, data_dir: Path) -> dict[str, object]:
    config = NodeConfig(node_id=1, host="broker-1", port=9001)
    store = StoreConfig(map_size_bytes=1 << 35, sync=False)
    broker = MemoryBroker(config, data_dir, store_config=store, run_sync=trio.to_thread.run_sync)
    _count_snapshot_bytes(broker)
    tps = [TopicPartition(TOPIC, i) for i in range(args.partitions)]
    per = args.producers // args.partitions
    out: dict[str, object] = {"producers": per * args.partitions, "partitions": args.partitions}
    async with broker.running(), trio.open_nursery() as nursery:
        await broker.apply(
            [
                partition_state(TOPIC, i, leader=2, isr=[1, 2], replicas=[1, 2])
                for i in range(args.partitions)
            ]
        )
        await _append(broker, tps, per)
        t0 = time.perf_counter()
        for tp in tps:
            p = broker.partition(TOPIC, tp.partition)
            base = tp.partition * per
            for i in range(per):
                p.producers.apply(
                    ProducerBatch(
                        producer_id=base + i,
                        producer_epoch=0,
                        base_sequence=0,
                        base_offset=i,
                        count=1,
                    )
                )
        out["fill_s"] = round(time.perf_counter() - t0, 2)
        watch = LoopWatch()
        nursery.start_soon(watch.run)
        first = await _round(broker, watch)  # every partition's first snapshot
        seq = 1
        out["first_round"] = _figures([first])
        scenarios = (("all_changed", tps, 1), ("one_changed", tps[:1], 1), ("all_due", tps, per))
        for scenario, changed, grown in scenarios:
            rounds = []
            for _ in range(args.cycles):
                await _append(broker, tps, grown)
                for tp in changed:
                    _write_one(broker, tp, tp.partition * per, seq)
                seq += 1
                rounds.append(await _round(broker, watch))
            out[scenario] = _figures(rounds)
        out["expiry"] = await _expire_all(broker, watch)
        nursery.cancel_scope.cancel()
    return out


async def _expire_all(broker: MemoryBroker, watch: LoopWatch) -> dict[str, float]:
    """The expiry task (server/producer_state_tasks.py) with producer.id.expiration.ms = 1: its
    first check stamps every producer, its second forgets them all."""
    rm = broker.replica_manager
    done = trio.Event()
    watch.worst_s = 0.0
    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            partial(
                run_producer_expiration,
                rm.partitions.values,
                expiration_ms=1,
                interval_ms=1,
                on_expired=lambda _n: done.set(),
            )
        )
        await done.wait()
        nursery.cancel_scope.cancel()
    left = sum(len(p.producers.entries) for p in rm.partitions.values())
    return {
        "two_checks_s": round(time.perf_counter() - t0, 3),
        "loop_stall_s_max": round(watch.worst_s, 3),
        "producers_left": left,
    }


def _figures(rounds: list[tuple[float, float, int]]) -> dict[str, float]:
    return {
        "round_s_max": round(max(r[0] for r in rounds), 3),
        "loop_stall_s_max": round(max(r[1] for r in rounds), 3),
        "snapshot_mb_per_round": round(max(r[2] for r in rounds) / 1e6, 1),
    }


def _count_snapshot_bytes(broker: MemoryBroker) -> None:
    """Count the bytes `save_producer_snapshots` is handed (wrapping the store's method)."""
    from minikafka.storage import producer_snapshots

    store = broker.store
    store.producer_snapshot_bytes_written = 0  # type: ignore[attr-defined]
    real_put = producer_snapshots.put

    def put(txn, db, key, offset, doc):  # noqa: ANN001, ANN202
        real_put(txn, db, key, offset, doc)
        written = len(txn.get(key, db=db))
        store.producer_snapshot_bytes_written += written  # type: ignore[attr-defined]

    producer_snapshots.put = put  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="producer-snapshot-bench-") as tmp:
        out = trio.run(run, args, Path(tmp))
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"{out['producers']:,} producers over {out['partitions']} partitions "
        f"(filled in {out['fill_s']} s)"
    )
    for name in ("first_round", "all_changed", "one_changed", "all_due"):
        f = out[name]
        print(
            f"{name:12} round {f['round_s_max']:7.3f} s"
            f"   loop stalled {f['loop_stall_s_max']:7.3f} s"
            f"   snapshots written {f['snapshot_mb_per_round']:7.1f} MB"
        )
    e = out["expiry"]
    print(
        f"expiry       two checks {e['two_checks_s']:.3f} s (stamp all, expire all)"
        f"   loop stalled {e['loop_stall_s_max']:.3f} s   producers left {e['producers_left']}"
    )


if __name__ == "__main__":
    main()
