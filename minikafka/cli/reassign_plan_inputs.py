"""What `reassign plan` is computed from (minikafka/cli/reassign_plan.py's docstring lists the
inputs and their sources): `gather` reads the cluster, its metrics and its node configs, and
`inputs_from` (pure) turns them into `Inputs`, which prints itself with where each figure came
from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.cli.common import resolve_bootstrap
from minikafka.cli.reassign import CLIENT_ID, local_files
from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.server.config import NodeConfig
from tools.reassign import moves, plan_model, runner
from tools.reassign import progress as prog
from tools.reassign.model import KAFKA_DEFAULTS, KafkaSettings, MovingPartition
from tools.reassign.units import human_bytes, human_rate

BYTES_IN_WINDOW_S = 10.0
QUOTA_CONFIGS = {
    "replica.fetch.response.max.bytes": "replica_fetch_response_max_bytes",
    "replication.quota.window.num": "replication_quota_window_num",
    "replication.quota.window.size.seconds": "replication_quota_window_size_seconds",
}
# What the simulation of Kafka's algorithm reads besides QUOTA_CONFIGS, and whether it applies.
FETCH_CONFIGS = {
    "replication.quota.precise": "replication_quota_precise",
    "replica.fetch.max.bytes": "replica_fetch_max_bytes",
    "replica.fetch.wait.max.ms": "replica_fetch_wait_max_ms",
    "replica.fetch.backoff.ms": "replica_fetch_backoff_ms",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """What the plan is computed from, with where each figure came from."""

    moved: int  # partitions whose replica set changes (in progress ones included)
    total: int  # partitions in the cluster
    bytes_to_move: int  # estimated, every new replica counted
    traffic: Mapping[int, runner.BrokerTraffic]
    bytes_in: Mapping[int, float]
    bytes_in_source: str
    rf: int
    num_brokers: int
    configs: Mapping[str, tuple[Any, str]]  # name -> (value, "cluster.json" | "default")
    ongoing: int
    # The move model's input (plan_model.moving_partitions) and how the inbound was split.
    moving: tuple[MovingPartition, ...] = ()
    partitions_led: Mapping[int, int] = field(default_factory=dict)
    # The cluster's quota algorithm (replication.quota.precise) and the simulation's settings.
    precise: bool = False
    kafka: KafkaSettings = KAFKA_DEFAULTS

    def to_json(self) -> dict[str, Any]:
        return {
            "moved_partitions": self.moved,
            "cluster_partitions": self.total,
            "bytes_to_move": self.bytes_to_move,
            "bytes_estimated": True,
            "traffic": {
                b: {"copies_in": t.copies_in, "sends_out": t.sends_out}
                for b, t in self.traffic.items()
            },
            "bytes_in_per_broker": self.bytes_in,
            "bytes_in_source": self.bytes_in_source,
            "replication_factor": self.rf,
            "brokers": self.num_brokers,
            "configs": {k: {"value": v, "source": s} for k, (v, s) in self.configs.items()},
            "ongoing_moves_included": self.ongoing,
            "inbound_split": {
                "rule": plan_model.INBOUND_RULE,
                "partitions_led": self.partitions_led,
            },
            "moving_partitions": [
                {
                    "topic": m.topic,
                    "partition": m.partition,
                    "leader": m.leader,
                    "replicas": list(m.replicas),
                    "destinations": list(m.destinations),
                    "size_bytes": m.size_bytes,
                    "inbound_bytes_per_s": round(m.inbound_bytes_per_s, 1),
                }
                for m in self.moving
            ],
        }

    def lines(self) -> list[str]:
        ins = ", ".join(f"{b}: {human_rate(v)}" for b, v in self.bytes_in.items()) or "none"

        def shown(names: Mapping[str, str]) -> str:
            return ", ".join(
                f"{k}={str(v).lower() if isinstance(v, bool) else v} ({s})"
                for k, (v, s) in self.configs.items()
                if k in names
            )

        out = [
            f"Move: {self.moved} of the {self.total} partitions in the cluster change replicas "
            f"(MoveRatio {self.moved / max(self.total, 1):.2f}), "
            f"{human_bytes(self.bytes_to_move)} to copy ({runner.SIZE_NOTE})",
        ]
        if self.ongoing:
            out.append(f"  including {self.ongoing} moves in progress, counted whole")
        out.append(f"BytesInPerSec per broker ({self.bytes_in_source}): {ins}")
        if self.partitions_led and any(self.bytes_in.values()):
            split = ", ".join(
                f"{b}: {n} ({human_rate(self.bytes_in.get(b, 0.0) / n)} each)"
                for b, n in self.partitions_led.items()
            )
            out.append(f"  for the model, {plan_model.INBOUND_RULE} (moving or not): {split}")
        out.append(
            f"Replication factor {self.rf}, {self.num_brokers} live brokers; {shown(QUOTA_CONFIGS)}"
        )
        algorithm = "the precise quota" if self.precise else "Kafka's algorithm"
        fetch = shown(FETCH_CONFIGS)
        if fetch:
            out.append(f"Replication quota: {algorithm}; {fetch}")
        return out


def gather(proposed: dict, bootstrap: str | None, cluster_dir: Path) -> Inputs:
    address = resolve_bootstrap(bootstrap, cluster_dir)

    async def go() -> tuple[runner.ClusterView, dict]:
        async with open_client(address, client_id=CLIENT_ID) as client:
            view = await runner.read_cluster(Admin(client))
            moves.validate_reassignment(
                proposed, current=view.assignment, live_brokers=view.live_brokers
            )
            planned = moves.move_map(view.assignment, proposed, view.ongoing)
            moving = [tp for tp, m in planned.items() if m.moving]
            sizes = runner.sizes_in_bytes(await runner.estimate_log_sizes(client, moving))
            return view, sizes

    view, sizes = runner.run(go)
    files = local_files(bootstrap, cluster_dir)
    if files is not None:
        bytes_in = prog.median_bytes_in(files, BYTES_IN_WINDOW_S)
        source = f"median of the last {BYTES_IN_WINDOW_S:g} s of metrics.jsonl"
    else:
        bytes_in, source = {}, "unknown without the cluster's files: taken as 0"
    return inputs_from(
        view,
        proposed,
        sizes,
        bytes_in=bytes_in,
        bytes_in_source=source,
        node_configs=files.node_configs if files is not None else {},
    )


def inputs_from(
    view: runner.ClusterView,
    proposed: Mapping[Any, Any],
    sizes: Mapping[Any, int],
    *,
    bytes_in: Mapping[int, float],
    bytes_in_source: str,
    node_configs: Mapping[str, str],
) -> Inputs:
    """The plan's inputs from what `gather` read (pure)."""
    planned = moves.move_map(view.assignment, proposed, view.ongoing)
    names = {**QUOTA_CONFIGS, **FETCH_CONFIGS}
    ours = {k: v for k, v in node_configs.items() if k in names}
    typed = NodeConfig(node_id=0).with_settings(ours)
    configs = {
        name: (getattr(typed, attr), "cluster.json" if name in ours else "default")
        for name, attr in names.items()
    }
    return Inputs(
        moved=sum(m.moving for m in planned.values()),
        total=len(view.assignment),
        bytes_to_move=sum(sizes.get(tp, 0) * len(m.destinations) for tp, m in planned.items()),
        traffic=runner.traffic_per_broker(planned, sizes, view.leaders),
        bytes_in=bytes_in,
        bytes_in_source=bytes_in_source,
        rf=max(len(r) for r in proposed.values()),
        num_brokers=len(view.live_brokers),
        configs=configs,
        ongoing=len(view.ongoing),
        moving=tuple(
            plan_model.moving_partitions(
                planned,
                assignment=view.assignment,
                proposed=proposed,
                leaders=view.leaders,
                sizes=sizes,
                inbound=plan_model.inbound_per_partition(bytes_in, view.leaders),
            )
        ),
        partitions_led=plan_model.partitions_led(view.leaders),
        precise=typed.replication_quota_precise,
        kafka=plan_model.kafka_settings(ours),
    )
