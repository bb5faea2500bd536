"""`minikafka experiment list|run`: Jepsen-style fault-injection experiments.

`run NAME` runs a catalog experiment (every variant of it); `run` without a name runs a custom
one built from the options (faults drawn from --seed). The exit code is the verdict's: 0 valid,
1 invalid (an anomaly, or an expectation that did not hold), 2 unknown (something could not be
checked); with several variants, the worst of them. Bad options exit 2 before anything starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from minikafka.cli.common import emit as emit_rows
from minikafka.cli.common import fail, friendly_errors, json_option
from minikafka.errors import ConfigError, MiniKafkaError

DEFAULT_OUT = Path("runs/experiments")


@click.group("experiment")
def experiment_cmd() -> None:
    """Fault-injection experiments: a workload, a fault schedule, and a checker."""


@experiment_cmd.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """The catalog: each experiment, its variants and the question it answers."""
    from minikafka.experiment.catalog import CATALOG, variants

    rows = [
        {
            "name": e.name,
            "variants": ",".join(s.name for s in variants(e.name, seed=1)),
            "question": e.question,
        }
        for e in CATALOG.values()
    ]
    emit_rows(rows, ["name", "variants", "question"], as_json)


def _parse_sets(items: tuple[str, ...]) -> dict[str, str]:
    from minikafka.cluster import parse_node_configs

    return parse_node_configs(items)


@experiment_cmd.command("run")
@click.argument("name", required=False)
@click.option("--brokers", type=click.IntRange(1, 64), help="Brokers (custom runs; default 3).")
@click.option("--partitions", type=int, help="Partitions of the topic (default 6).")
@click.option("--replication-factor", type=int, help="Replicas per partition (default 3).")
@click.option("--duration", type=float, help="Seconds of workload and faults (default 30).")
@click.option("--rate", type=float, help="Records per second over all producers (default 2000).")
@click.option("--producers", type=int, help="Concurrent producers (default 4).")
@click.option("--consumers", type=int, help="Concurrent consumers (default 2).")
@click.option("--batch", type=int, help="Records per send (default 10).")
@click.option("--record-bytes", type=int, help="Bytes per record (default 100).")
@click.option("--acks", type=click.Choice(["all", "1", "0"]), help="Producer acks (default all).")
@click.option("--retries/--no-retries", default=None,
              help="Producers retry each send until acknowledged, as applications do (default: one attempt).")  # fmt: skip
@click.option("--idempotence/--no-idempotence", default=None,
              help="With --retries: the idempotent producer, KIP-98 (default on; needs acks all).")  # fmt: skip
@click.option("--faults", default="kill", show_default=True,
              help="Custom runs: comma list of kill,pause,restart,wipe,partition,latency,bandwidth or all.")  # fmt: skip
@click.option("--targets", default="random", show_default=True,
              help="Custom runs: comma list of broker:N, controller, leader:P, follower:P, random.")  # fmt: skip
@click.option("--interval", type=float, default=5.0, show_default=True,
              help="Custom runs: seconds of quiet, then of fault, alternately.")  # fmt: skip
@click.option("--latency-ms", type=int, default=200, show_default=True, help="For latency faults.")
@click.option("--bandwidth", type=int, default=256 * 1024, show_default=True,
              help="For bandwidth faults: bytes per second per direction.")  # fmt: skip
@click.option(
    "--seed", help="Seeds the schedule and targets (default $MINIKAFKA_SEED, else random; printed)."
)
@click.option(
    "--set", "sets", multiple=True, metavar="NAME=VALUE", help="Extra node config (repeatable)."
)
@click.option("--dir", "cluster_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Use the running cluster in this directory instead of starting one (custom runs; "
                   "its own node configs apply, and replica logs are not read from disk).")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_OUT,
              show_default=True, help="Where run folders are created.")  # fmt: skip
@click.option("--keep-data", is_flag=True, help="Keep the cluster's data dirs in the run folder.")
@click.option("--no-report", is_flag=True,
              help="Skip the PySpark report (a throttle bound, which it judges, is then not "
                   "judged: such a run is at best unknown).")  # fmt: skip
@json_option
@friendly_errors
def run_cmd(name: str | None, **opts: Any) -> None:
    """Run catalog experiment NAME (see `experiment list`), or a custom one from the options."""
    from minikafka.experiment.runner import run_experiment
    from minikafka.testing.seeds import resolve_seed, seed_line

    if opts["cluster_dir"] is not None and name is not None:
        raise ConfigError(
            "--dir (a running cluster) is for custom runs; catalog runs start their own"
        )
    opts["seed"] = resolve_seed(opts["seed"])
    specs = _specs(name, opts)
    outcomes = []
    for spec in specs:
        what = spec.description or "custom experiment"
        click.echo(f"== {spec.name} ({seed_line(spec.seed)}): {what}", err=True)
        try:
            outcome = run_experiment(
                spec, opts["out"], cluster_dir=opts["cluster_dir"], keep_data=opts["keep_data"],
                report=not opts["no_report"], progress=lambda m: click.echo(f"  {m}", err=True),
            )  # fmt: skip
        except MiniKafkaError as exc:  # no verdict (the cluster would not start, ...): unknown
            fail(f"{spec.name}: {exc}", 2)
        outcomes.append(outcome)
        if not opts["as_json"]:
            click.echo(f"{spec.name}: {outcome.results['summary']}")
            report = outcome.results.get("report", {})
            if "produce_latency" in report:
                lat = report["produce_latency"]
                click.echo(f"  acks latency p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, "
                           f"max {lat['max_ms']} ms")  # fmt: skip
            if report:
                click.echo(f"  report: {report.get('path') or report.get('error')}")
            click.echo(f"  folder: {outcome.path}")
    if opts["as_json"]:
        click.echo(json.dumps([{"path": str(o.path), **o.results} for o in outcomes], default=str))
    codes = {o.exit_code for o in outcomes}
    sys.exit(1 if 1 in codes else 2 if 2 in codes else 0)


def _specs(name: str | None, opts: dict[str, Any]) -> list:
    from minikafka.experiment.catalog import variants, with_overrides
    from minikafka.experiment.schedule import parse_kinds, parse_target, plan_schedule
    from minikafka.experiment.spec import ExperimentSpec

    acks = {"all": -1, "1": 1, "0": 0}.get(opts["acks"]) if opts["acks"] else None
    common = {
        "producers": opts["producers"], "consumers": opts["consumers"],
        "records_per_s": opts["rate"], "batch_records": opts["batch"],
        "record_bytes": opts["record_bytes"], "acks": acks,
        "producer_retries": opts["retries"], "idempotence": opts["idempotence"],
    }  # fmt: skip
    if name is not None:
        specs = variants(name, seed=opts["seed"], duration_s=opts["duration"])
        extra = _parse_sets(opts["sets"])
        return [
            with_overrides(s, **common, node_configs={**s.node_configs, **extra} if extra else None)
            for s in specs
        ]
    broker_ids = tuple(range(1, (opts["brokers"] or 3) + 1))
    if opts["cluster_dir"] is not None:  # the running cluster's brokers are the targets
        from minikafka.cluster import LocalCluster

        broker_ids = tuple(n.node_id for n in LocalCluster.load(opts["cluster_dir"]).spec.brokers)
    brokers = len(broker_ids)
    duration = opts["duration"] or 30.0
    kinds = parse_kinds(opts["faults"])
    targets = [parse_target(t) for t in opts["targets"].split(",") if t.strip()]
    for t in targets:
        if t.role == "broker" and t.number not in broker_ids:
            raise ConfigError(f"--targets {t}: no such broker (brokers: {list(broker_ids)})")
    if not targets:
        fail(
            "--targets: expected a comma list of broker:N, controller, leader:P, follower:P, random"
        )
    faults = plan_schedule(
        kinds=kinds, targets=targets, duration_s=duration, interval_s=opts["interval"],
        seed=opts["seed"], brokers=broker_ids,
        latency_ms=opts["latency_ms"], bandwidth_bps=opts["bandwidth"],
    )  # fmt: skip
    spec = ExperimentSpec(
        name="custom", brokers=brokers, duration_s=duration, seed=opts["seed"],
        faults=tuple(faults), node_configs=_parse_sets(opts["sets"]),
        **{k: v for k, v in {
            "partitions": opts["partitions"],
            "replication_factor": opts["replication_factor"] or min(3, brokers),
            **common,
        }.items() if v is not None},
    )  # fmt: skip
    return [spec]
