"""replicas.jsonl: every replica's state on this broker, sampled once per metrics interval.

One line per interval: `{"ts", "node", "replicas": [[topic, partition, leader_epoch, is_leader,
log_end_offset, high_watermark, isr or null], ...]}` (the ISR only where this broker leads).
It exists for the experiment checker's cross-node invariant "the HW never passes an in-sync
replica's LEO" (minikafka/experiment/invariants.py): a leader's sample says what it committed
and who it counted as in sync, and each follower's own later samples say what it holds. Rows are
compact lists because a broker leads up to hundreds of partitions and samples every second.

A replica the controller has not yet given a state (its LeaderAndIsr is still being applied: a
new partition being created, one loaded from disk after a restart) has no leader epoch yet
(UNDEFINED_EPOCH) and no role, so it has no row: there is nothing the invariant could check of it, and
the checker refuses an epoch below 0 (measured: a 500-partition topic is still being created on
its brokers ~0.2 s after the controller reports every ISR full, so the first sample of each
broker held ~145 such replicas).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

import trio

from minikafka.server.jsonl import DEFAULT_ROTATION, JsonlFile, Rotation
from minikafka.server.local_partition import LocalPartition
from minikafka.server.metrics import Metrics


def replica_rows(partitions: Iterable[LocalPartition]) -> list[list[object]]:
    rows: list[list[object]] = []
    for p in partitions:
        if p.state is None:  # not yet a replica in any epoch (module docstring)
            continue
        leader = p.leader
        rows.append(
            [
                p.tp.topic,
                p.tp.partition,
                p.leader_epoch,
                leader is not None,
                p.log_end_offset,
                p.high_watermark,
                list(leader.isr) if leader is not None else None,
            ]
        )
    return rows


async def run_replica_state_log(
    partitions: dict,
    path: Path,
    *,
    node_id: int,
    interval_ms: int,
    metrics: Metrics | None = None,
    rotation: Rotation = DEFAULT_ROTATION,
) -> None:
    """Append one line per interval with the rows of `partitions` (the replica manager's map)."""
    # A failed write never stops the node, and the file rolls over at its cap (server/jsonl.py).
    out = JsonlFile(path, metrics=metrics, rotation=rotation)
    try:
        while True:
            await trio.sleep(interval_ms / 1000)
            line = {
                "ts": round(time.time(), 3),
                "node": node_id,
                "replicas": replica_rows(partitions.values()),
            }
            out.write_line(json.dumps(line, separators=(",", ":")))
    finally:
        out.close()
