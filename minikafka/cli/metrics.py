"""`minikafka metrics`: the nodes' latest per-second metrics (KIP-73's names among them)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from minikafka.cli.common import dir_option, emit, friendly_errors, json_option
from minikafka.server.jsonl import jsonl_parts

COLUMNS = [
    ("node", "node"),
    ("bytes_in/s", "bytes_in_per_s"),
    ("bytes_out/s", "bytes_out_per_s"),
    ("repl_in/s", "replication_bytes_in_per_s"),
    ("repl_out/s", "replication_bytes_out_per_s"),
    ("leader_throttled/s", "LeaderReplicationThrottledRate"),
    ("follower_throttled/s", "FollowerReplicationThrottledRate"),
    ("SumReplicaLag", "SumReplicaLag"),
    ("urp", "under_replicated_partitions"),
    ("isr_shrinks", "isr_shrinks"),
    ("isr_expands", "isr_expands"),
]


def latest_snapshot(path: Path) -> dict[str, object] | None:
    """The last complete line of a metrics.jsonl (reads only the file's tail); in the newest
    rotated part if the file has just rolled over and holds none yet (server/jsonl.py)."""
    for part in reversed(jsonl_parts(path)):
        try:
            with open(part, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - (1 << 20)))
                lines = f.read().splitlines()
        except FileNotFoundError:
            continue  # rolled away since the listing
        for line in reversed(lines):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


@click.command("metrics")
@click.option("--node", "node_ids", type=int, multiple=True, help="Only these nodes (repeatable).")
@dir_option
@json_option
@friendly_errors
def metrics_cmd(node_ids: tuple[int, ...], cluster_dir: Path, as_json: bool) -> None:
    """Show each node's latest metrics snapshot (written every second to metrics.jsonl);
    --json prints the whole snapshots, per-partition and per-client figures included."""
    from minikafka.cluster import LocalCluster

    lc = LocalCluster.load(cluster_dir)
    ids = list(node_ids) or [n.node_id for n in lc.spec.nodes if n.is_broker]
    snaps = []
    for node_id in ids:
        snap = latest_snapshot(lc.log_path(node_id, "metrics")) or {"node": node_id}
        snaps.append(snap)
    if as_json:
        click.echo(json.dumps(snaps))
        return
    rows = [{label: _fmt(s.get(key)) for label, key in COLUMNS} for s in snaps]
    emit(rows, [label for label, _ in COLUMNS], False)


def _fmt(value: object) -> object:
    if isinstance(value, float):
        return f"{value:,.0f}"
    return value
