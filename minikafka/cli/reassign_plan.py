"""`minikafka reassign plan`: KIP-73's operator arithmetic (REFERENCE.md section 6) for a
reassignment file, from the live cluster. Stores nothing.

    minikafka reassign plan --reassignment-json-file moves.json --throttle 2000000 \\
        [--network-bytes-per-s 125000000]
    minikafka reassign plan --reassignment-json-file moves.json --deadline-s 600 \\
        --network-bytes-per-s 125000000 --max-fraction 0.3

Inputs, each printed with where it came from: the bytes each broker copies in and sends out
(estimated log sizes x the move map, runner.traffic_per_broker; moves already in progress are
counted whole, since they share the throttle); BytesInPerSec per broker (the median of
`bytes_in_per_s` over the last 10 s of each broker's metrics.jsonl, 0 when the cluster's files
are not at hand); the replication factor (the largest in the file); and the node configs
`replica.fetch.response.max.bytes`, `replication.quota.window.num` and
`replication.quota.window.size.seconds` (cluster.json's node configs, else Kafka's defaults).
The arithmetic is tools/reassign/plan.py's. A plan whose checks fail still exits 0: it is a
report (`ok` in --json says whether everything passed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from minikafka.cli.common import resolve_bootstrap, table
from minikafka.cli.reassign import (
    CLIENT_ID,
    human_bytes,
    human_rate,
    human_seconds,
    local_files,
    parse_positive,
    parse_throttle,
    read_reassignment,
)
from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig
from tools.reassign import moves, plan, runner
from tools.reassign import progress as prog

FORM = (
    "expected --throttle B/s [--network-bytes-per-s N], or --deadline-s Y "
    "--network-bytes-per-s N --max-fraction X"
)
BYTES_IN_WINDOW_S = 10.0
HUGE_NETWORK = 1e30  # "no network given": the N rules cannot fail, and are reported unchecked
QUOTA_CONFIGS = {
    "replica.fetch.response.max.bytes": "replica_fetch_response_max_bytes",
    "replication.quota.window.num": "replication_quota_window_num",
    "replication.quota.window.size.seconds": "replication_quota_window_size_seconds",
}


def check_plan_options(
    path: str | None,
    throttle: str | None,
    deadline: str | None,
    network: str | None,
    fraction: str | None,
) -> None:
    if path is None:
        raise ConfigError("plan needs --reassignment-json-file FILE")
    if (throttle is None) == (deadline is None):
        raise ConfigError(
            f"give --throttle or --deadline-s, not {'both' if throttle else 'neither'}: {FORM}"
        )
    if throttle is not None and fraction is not None:
        raise ConfigError(f"--max-fraction goes with --deadline-s: {FORM}")
    if deadline is not None and (network is None or fraction is None):
        raise ConfigError(f"--deadline-s needs --network-bytes-per-s and --max-fraction: {FORM}")


def run_plan(
    path: str | None,
    throttle_text: str | None,
    deadline_text: str | None,
    network_text: str | None,
    fraction_text: str | None,
    *,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    check_plan_options(path, throttle_text, deadline_text, network_text, fraction_text)
    assert path is not None
    proposed = read_reassignment(path)
    throttle = None if throttle_text is None else parse_throttle(throttle_text)
    deadline = (
        None
        if deadline_text is None
        else parse_positive(deadline_text, "--deadline-s", example="600")
    )
    network = (
        None
        if network_text is None
        else parse_positive(network_text, "--network-bytes-per-s", example="125000000")
    )
    fraction = None
    if fraction_text is not None:
        fraction = parse_positive(fraction_text, "--max-fraction", example="0.3")
        if fraction > 1:
            raise ConfigError(
                f"--max-fraction {fraction_text!r}: expected a fraction in (0, 1], e.g. 0.3"
            )
    inputs = gather(proposed, bootstrap, cluster_dir)
    if throttle is not None:
        doc, lines = at_throttle(inputs, throttle, network)
    else:
        assert deadline is not None and network is not None and fraction is not None
        doc, lines = for_deadline(inputs, deadline, network, fraction)
    if as_json:
        click.echo(json.dumps({"inputs": inputs.to_json(), **doc}, default=str))
        return
    for line in inputs.lines() + lines:
        click.echo(line)


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
    configs: Mapping[str, tuple[int, str]]  # name -> (value, "cluster.json" | "default")
    ongoing: int

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
        }

    def lines(self) -> list[str]:
        ins = ", ".join(f"{b}: {human_rate(v)}" for b, v in self.bytes_in.items()) or "none"
        cfg = ", ".join(f"{k}={v} ({s})" for k, (v, s) in self.configs.items())
        out = [
            f"Move: {self.moved} of the {self.total} partitions in the cluster change replicas "
            f"(MoveRatio {self.moved / max(self.total, 1):.2f}), "
            f"{human_bytes(self.bytes_to_move)} to copy ({runner.SIZE_NOTE})",
        ]
        if self.ongoing:
            out.append(f"  including {self.ongoing} moves in progress, counted whole")
        out += [
            f"BytesInPerSec per broker ({self.bytes_in_source}): {ins}",
            f"Replication factor {self.rf}, {self.num_brokers} live brokers; {cfg}",
        ]
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
    planned = moves.move_map(view.assignment, proposed, view.ongoing)
    files = local_files(bootstrap, cluster_dir)
    if files is not None:
        bytes_in = prog.median_bytes_in(files, BYTES_IN_WINDOW_S)
        source = f"median of the last {BYTES_IN_WINDOW_S:g} s of metrics.jsonl"
    else:
        bytes_in, source = {}, "unknown without the cluster's files: taken as 0"
    node_configs = files.node_configs if files is not None else {}
    typed = NodeConfig(node_id=0).with_settings(
        {k: v for k, v in node_configs.items() if k in QUOTA_CONFIGS}
    )
    configs = {
        name: (getattr(typed, attr), "cluster.json" if name in node_configs else "default")
        for name, attr in QUOTA_CONFIGS.items()
    }
    return Inputs(
        moved=sum(m.moving for m in planned.values()),
        total=len(view.assignment),
        bytes_to_move=sum(sizes.get(tp, 0) * len(m.destinations) for tp, m in planned.items()),
        traffic=runner.traffic_per_broker(planned, sizes, view.leaders),
        bytes_in=bytes_in,
        bytes_in_source=source,
        rf=max(len(r) for r in proposed.values()),
        num_brokers=len(view.live_brokers),
        configs=configs,
        ongoing=len(view.ongoing),
    )


def _quota_kwargs(inputs: Inputs) -> dict[str, Any]:
    c = inputs.configs
    return {
        "fetch_response_max_bytes": c["replica.fetch.response.max.bytes"][0],
        "window_num": c["replication.quota.window.num"][0],
        "window_size_s": float(c["replication.quota.window.size.seconds"][0]),
        "num_brokers": inputs.num_brokers,
    }


def burst_bytes(inputs: Inputs, throttle: float) -> float:
    """What a replication quota admits at once: its SimpleRate treats the first window as
    full-sized, so an idle sensor lets T x window size through before it reads "exceeded"
    (REFERENCE.md sections 2 "Overshoot" and 3). A broker with no more than that to move may
    finish at full speed: B / T is then only an upper bound."""
    return throttle * float(inputs.configs["replication.quota.window.size.seconds"][0])


def in_first_window(inputs: Inputs, prediction: plan.MovePrediction) -> list[int]:
    burst = burst_bytes(inputs, prediction.throttle)
    return [b.broker for b in prediction.brokers if 0 < b.bytes_to_move <= burst]


def _window_total(inputs: Inputs) -> float:
    c = inputs.configs
    return c["replication.quota.window.num"][0] * c["replication.quota.window.size.seconds"][0]


def _broker_table(inputs: Inputs, prediction: plan.MovePrediction) -> list[str]:
    seconds = {b.broker: b.seconds for b in prediction.brokers}
    bursts = in_first_window(inputs, prediction)

    def shown(b: int) -> str:
        s = seconds.get(b, 0.0)
        return "never" if s is None else ("<= " if b in bursts else "") + human_seconds(s)

    rows = [
        {
            "broker": b,
            "copies_in": human_bytes(t.copies_in),
            "sends_out": human_bytes(t.sends_out),
            "bytes_in/s": human_rate(inputs.bytes_in.get(b, 0.0)),
            "seconds": shown(b),
        }
        for b, t in inputs.traffic.items()
    ]
    lines = table(rows, ["broker", "copies_in", "sends_out", "bytes_in/s", "seconds"]).splitlines()
    if bursts:
        burst = human_bytes(burst_bytes(inputs, prediction.throttle))
        lines.append(
            f"<=: at most throttle x window size = {burst} to move, which the quota admits at "
            "once in its first window (REFERENCE.md section 2, Overshoot): likely sooner"
        )
    return lines


def _predict(inputs: Inputs, throttle: float) -> plan.MovePrediction:
    return plan.predict_move_time(
        bytes_to_move_per_broker={b: t.bytes for b, t in inputs.traffic.items()},
        throttle=throttle,
        bytes_in_per_broker=inputs.bytes_in,
    )


def _summary(inputs: Inputs, prediction: plan.MovePrediction) -> str:
    t = human_rate(prediction.throttle)
    if not prediction.finishes:
        return (
            f"At {t} the move never finishes: the throttle is not above max BytesInPerSec "
            f"{human_rate(prediction.max_bytes_in)}"
        )
    slowest = "" if prediction.slowest is None else f" (broker {prediction.slowest} is the slowest)"
    bound = "at most " if prediction.slowest in in_first_window(inputs, prediction) else ""
    return f"At {t} the move takes {bound}{human_seconds(prediction.max_seconds)}{slowest}"


def at_throttle(
    inputs: Inputs, throttle: int, network: float | None
) -> tuple[dict[str, Any], list[str]]:
    prediction = _predict(inputs, throttle)
    check = plan.check_throttle(
        throttle=throttle,
        bytes_in_per_broker=inputs.bytes_in or {b: 0.0 for b in inputs.traffic},
        network_bytes_per_s=network if network is not None else HUGE_NETWORK,
        replication_factor=inputs.rf,
        **_quota_kwargs(inputs),
    )
    lines = [
        *_broker_table(inputs, prediction),
        "Each broker's time = max(copies in, sends out) / (throttle - max(BytesInPerSec)): its "
        "follower and leader throttles work in parallel [KIP-73 MoveTime, both sides]",
        _summary(inputs, prediction),
        f"(Assumes the brokers' replication quotas saw no throttled traffic in the last "
        f"{_window_total(inputs):g} s, their window: traffic within it lets a new move burst "
        "ahead of the throttle)",
    ]
    check_doc = check.to_json()
    if network is None:
        check_doc["network_bytes_per_s"] = None
        check_doc["unchecked"] = [plan.RULE_CLIENT_ROOM, plan.RULE_WINDOW_NETWORK]
        if check.ok:
            lines.append(
                f"Checks: {plan.RULE_PROGRESS} on every broker and {plan.RULE_WINDOW} pass"
            )
        else:
            lines += [f"[{f.rule}] {f.message}" for f in check.failures]
        lines.append(
            f"Not checked without --network-bytes-per-s: {plan.RULE_CLIENT_ROOM}, "
            f"{plan.RULE_WINDOW_NETWORK}"
        )
    else:
        lines += check.lines()
    doc = {
        "prediction": {
            **prediction.to_json(),
            "burst_bytes": burst_bytes(inputs, throttle),
            "within_first_window": in_first_window(inputs, prediction),
        },
        "check": check_doc,
        "ok": check.ok,
    }
    return doc, lines


def for_deadline(
    inputs: Inputs, deadline: float, network: float, fraction: float
) -> tuple[dict[str, Any], list[str]]:
    result = plan.throttle_for_deadline(
        bytes_per_broker={b: t.bytes for b, t in inputs.traffic.items()},
        deadline_s=deadline,
        bytes_in_per_broker=inputs.bytes_in or {b: 0.0 for b in inputs.traffic},
        network_bytes_per_s=network,
        max_fraction=fraction,
        replication_factor=inputs.rf,
        **_quota_kwargs(inputs),
    )
    lines = [*_broker_table(inputs, result.at_required), *result.lines()]
    return {"plan": result.to_json(), "ok": result.ok}, lines
