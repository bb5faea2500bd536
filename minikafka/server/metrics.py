"""Node metrics: monotonic counters and gauges, snapshotted every interval to metrics.jsonl.

Counters only go up (`bytes_in`, `isr_shrinks`, ...); each snapshot line carries the totals and
the per-second rate over the last interval, so a reader needs no state to plot either. Gauges are
callables read at snapshot time (partitions led, under-replicated partitions, SumReplicaLag).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import trio

from minikafka.clock import now_ms
from minikafka.server.jsonl import DEFAULT_ROTATION, JsonlFile, Rotation


class Metrics:
    def __init__(self) -> None:
        self.counters: dict[str, int] = {}
        self.gauges: dict[str, Callable[[], object]] = {}

    def inc(self, name: str, amount: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + amount

    def inc_all(self, amounts: dict[str, int]) -> None:
        for name, amount in amounts.items():
            self.inc(name, amount)

    def gauge(self, name: str, read: Callable[[], object]) -> None:
        self.gauges[name] = read

    def snapshot(self) -> dict[str, object]:
        out: dict[str, object] = dict(self.counters)
        for name, read in self.gauges.items():
            out[name] = read()
        return out


async def run_metrics_log(
    metrics: Metrics,
    path: Path,
    *,
    node_id: int,
    interval_ms: int,
    rotation: Rotation = DEFAULT_ROTATION,
    wall_clock: Callable[[], float] = time.time,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Append one JSON line per interval: totals, and rates (`<counter>_per_s`) since the last;
    `ts` is `wall_clock()`."""
    task_status.started()
    # A failed write never stops the node, and the file rolls over at its cap (server/jsonl.py).
    out = JsonlFile(path, metrics=metrics, rotation=rotation)
    last = dict(metrics.counters)
    last_ms = now_ms()
    try:
        while True:
            await trio.sleep(interval_ms / 1000)
            t = now_ms()
            snap = metrics.snapshot()
            elapsed_s = max(t - last_ms, 1) / 1000
            rates = {
                f"{k}_per_s": round((v - last.get(k, 0)) / elapsed_s, 1)
                for k, v in metrics.counters.items()
            }
            line = {"ts": round(wall_clock(), 3), "mono_ms": t, "node": node_id, **snap, **rates}
            out.write_line(json.dumps(line, separators=(",", ":")))
            last, last_ms = dict(metrics.counters), t
    finally:
        out.close()
