"""What `reassign plan` is computed from (minikafka/cli/reassign_plan.py's docstring lists the
inputs and their sources): `gather` reads the cluster, its metrics and its node configs, and
`inputs_from` (pure) turns them into `Inputs`, which prints itself with where each figure came
from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minikafka.cli.common import resolve_bootstrap
from minikafka.cli.in_process import cli_client, finish
from minikafka.cli.reassign_inputs import CLIENT_ID, local_files
from minikafka.client.admin import Admin
from minikafka.common import TopicPartition
from minikafka.server.config import NodeConfig
from minikafka.tools.reassign import assignment_files, move_size, moves, plan_input, runner
from minikafka.tools.reassign import progress as prog
from minikafka.tools.reassign.kafka_algorithm import (
    KAFKA_DEFAULTS,
    KafkaSettings,
    settings_from_configs,
)
from minikafka.tools.reassign.model import MovingPartition
from minikafka.tools.reassign.units import human_bytes, human_rate

BYTES_IN_WINDOW_S = 10.0
# Where each moving partition's inbound rate came from (`Inputs.inbound_sources`).
MEASURED_SOURCE = (
    f"{plan_input.PARTITION_BYTES_IN} (median of the last {BYTES_IN_WINDOW_S:g} s of the "
    "leaders' metrics.jsonl)"
)
SPLIT_NO_FILES = (
    f"{plan_input.INBOUND_RULE} (moving or not; no {plan_input.PARTITION_BYTES_IN} without "
    "the cluster's files)"
)
SPLIT_NO_ENTRY = (
    f"{plan_input.INBOUND_RULE} (moving or not; the last {BYTES_IN_WINDOW_S:g} s of the "
    f"leader's metrics.jsonl carry no {plan_input.PARTITION_BYTES_IN})"
)
SHOWN_PARTITIONS = 8  # measured rates listed one by one up to this many, summarised beyond
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
    traffic: Mapping[int, move_size.BrokerTraffic]
    bytes_in: Mapping[int, float]
    bytes_in_source: str
    replication_factor: int
    num_brokers: int
    configs: Mapping[str, tuple[Any, str]]  # name -> (value, "cluster.json" | "default")
    ongoing: int
    # The move model's input (plan_input.moving_partitions), where each moving partition's
    # inbound rate came from (MEASURED_SOURCE, SPLIT_NO_FILES or SPLIT_NO_ENTRY), and how
    # many partitions each broker leads (the split's denominator).
    moving: tuple[MovingPartition, ...] = ()
    inbound_sources: Mapping[TopicPartition, str] = field(default_factory=dict)
    partitions_led: Mapping[int, int] = field(default_factory=dict)
    # The cluster's quota algorithm (replication.quota.precise) and the simulation's settings.
    precise: bool = False
    kafka: KafkaSettings = KAFKA_DEFAULTS

    @property
    def inbound_source(self) -> str:
        """The moving partitions' inbound source, or how many took which when they differ."""
        kinds = sorted(set(self.inbound_sources.values()))
        if len(kinds) == 1:
            return kinds[0]
        if not kinds:
            return plan_input.INBOUND_RULE
        counts = ", ".join(
            f"{sum(v == k for v in self.inbound_sources.values())}: {k}" for k in kinds
        )
        return f"per partition (moving_partitions' inbound_source): {counts}"

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
            "replication_factor": self.replication_factor,
            "brokers": self.num_brokers,
            "configs": {k: {"value": v, "source": s} for k, (v, s) in self.configs.items()},
            "ongoing_moves_included": self.ongoing,
            "inbound_source": self.inbound_source,
            "inbound_split": {
                "rule": plan_input.INBOUND_RULE,
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
                    "inbound_source": self.inbound_sources.get(
                        TopicPartition(m.topic, m.partition), plan_input.INBOUND_RULE
                    ),
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
            f"{human_bytes(self.bytes_to_move)} to copy ({move_size.SIZE_NOTE})",
        ]
        if self.ongoing:
            out.append(f"  including {self.ongoing} moves in progress, counted whole")
        out.append(f"BytesInPerSec per broker ({self.bytes_in_source}): {ins}")
        out += self._inbound_lines()
        out.append(
            f"Replication factor {self.replication_factor}, {self.num_brokers} live brokers; {shown(QUOTA_CONFIGS)}"
        )
        algorithm = "the precise quota" if self.precise else "Kafka's algorithm"
        fetch = shown(FETCH_CONFIGS)
        if fetch:
            out.append(f"Replication quota: {algorithm}; {fetch}")
        return out

    def _inbound_lines(self) -> list[str]:
        """The model's inbound rates, one line per source."""
        out = []
        by_source: dict[str, list[MovingPartition]] = {}
        for m in self.moving:
            tp = TopicPartition(m.topic, m.partition)
            by_source.setdefault(self.inbound_sources.get(tp, plan_input.INBOUND_RULE), []).append(
                m
            )
        n = len(self.moving)
        measured = by_source.pop(MEASURED_SOURCE, [])
        if measured:
            rates = [m.inbound_bytes_per_s for m in measured]
            if len(measured) <= SHOWN_PARTITIONS:
                shown = ", ".join(
                    f"{m.topic}-{m.partition}: {human_rate(m.inbound_bytes_per_s)}"
                    for m in measured
                )
            else:
                shown = (
                    f"{human_rate(sum(rates))} in all, {human_rate(min(rates))} to "
                    f"{human_rate(max(rates))} per partition"
                )
            out.append(
                f"  for the model, {len(measured)} of the {n} moving partitions: {MEASURED_SOURCE}: "
                + shown
            )
        for source, ms in sorted(by_source.items()):
            split = ", ".join(
                f"{b}: {k} ({human_rate(self.bytes_in.get(b, 0.0) / k)} each)"
                for b, k in self.partitions_led.items()
            )
            out.append(
                f"  for the model, {len(ms)} of the {n} moving partitions: {source}: "
                f"{split or 'none led'}"
            )
        return out


def gather(
    proposed: dict, bootstrap: str | None, cluster_dir: Path, then: Callable[[Inputs], None]
) -> object:
    """Read the plan's inputs from the cluster, then `then(inputs)` (cli/in_process.py
    `finish`: now from a shell, later in-process)."""
    address = resolve_bootstrap(bootstrap, cluster_dir)

    async def go() -> tuple[runner.ClusterView, dict]:
        async with cli_client(address, CLIENT_ID) as client:
            view = await runner.read_cluster(Admin(client))
            assignment_files.validate_reassignment(
                proposed, current=view.assignment, live_brokers=view.live_brokers
            )
            planned = moves.move_map(view.assignment, proposed, view.ongoing)
            moving = [tp for tp, m in planned.items() if m.moving]
            sizes = move_size.sizes_in_bytes(await move_size.estimate_log_sizes(client, moving))
            return view, sizes

    def render(got: tuple[runner.ClusterView, dict]) -> None:
        view, sizes = got
        files = local_files(bootstrap, cluster_dir)
        lines: dict[int, list[dict]] | None = None
        if files is not None:
            bytes_in = prog.median_bytes_in(files, BYTES_IN_WINDOW_S)
            source = f"median of the last {BYTES_IN_WINDOW_S:g} s of metrics.jsonl"
            lines = {
                b: prog.recent_snapshots(path, BYTES_IN_WINDOW_S)
                for b, path in sorted(files.metrics.items())
            }
        else:
            bytes_in, source = {}, "unknown without the cluster's files: taken as 0"
        inputs = inputs_from(
            view,
            proposed,
            sizes,
            bytes_in=bytes_in,
            bytes_in_source=source,
            node_configs=files.node_configs if files is not None else {},
            metrics_lines=lines,
        )
        then(inputs)

    return finish(go, render, bad_input=runner.BAD_INPUT_CODES)


def inputs_from(
    view: runner.ClusterView,
    proposed: Mapping[Any, Any],
    sizes: Mapping[Any, int],
    *,
    bytes_in: Mapping[int, float],
    bytes_in_source: str,
    node_configs: Mapping[str, str],
    metrics_lines: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> Inputs:
    """The plan's inputs from what `gather` read (pure). `metrics_lines`: each broker's
    metrics.jsonl lines of the last BYTES_IN_WINDOW_S seconds (None: the cluster's files are not
    at hand), whose PartitionBytesInRate gives each partition's inbound rate on its leader
    (plan_input.inbound; one it does not name was at 0 B/s); a leader without the gauge in
    its lines gives its partitions the split of BytesInPerSec."""
    planned = moves.move_map(view.assignment, proposed, view.ongoing)
    names = {**QUOTA_CONFIGS, **FETCH_CONFIGS}
    ours = {k: v for k, v in node_configs.items() if k in names}
    typed = NodeConfig(node_id=0).with_settings(ours)
    configs = {
        name: (getattr(typed, attr), "cluster.json" if name in ours else "default")
        for name, attr in names.items()
    }
    measured = (
        None
        if metrics_lines is None
        else plan_input.partition_bytes_in(metrics_lines, view.leaders)
    )
    inbound = plan_input.inbound(bytes_in, view.leaders, measured=measured)
    moving = tuple(
        plan_input.moving_partitions(
            planned,
            assignment=view.assignment,
            proposed=proposed,
            leaders=view.leaders,
            sizes=sizes,
            inbound=inbound.rates,
        )
    )
    fallback = SPLIT_NO_FILES if metrics_lines is None else SPLIT_NO_ENTRY
    sources = {
        tp: MEASURED_SOURCE if tp in inbound.measured else fallback
        for tp in (TopicPartition(m.topic, m.partition) for m in moving)
    }
    return Inputs(
        moved=sum(m.moving for m in planned.values()),
        total=len(view.assignment),
        bytes_to_move=sum(sizes.get(tp, 0) * len(m.destinations) for tp, m in planned.items()),
        traffic=move_size.traffic_per_broker(planned, sizes, view.leaders),
        bytes_in=bytes_in,
        bytes_in_source=bytes_in_source,
        replication_factor=max(len(r) for r in proposed.values()),
        num_brokers=len(view.live_brokers),
        configs=configs,
        ongoing=len(view.ongoing),
        moving=moving,
        inbound_sources=sources,
        partitions_led=plan_input.partitions_led(view.leaders),
        precise=typed.replication_quota_precise,
        kafka=settings_from_configs(ours),
    )
