"""`minikafka cluster`: launch a local multi-process cluster on 127.0.0.1 and control its
nodes (up, status, down, kill/pause/resume/stop/start/restart, logs)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from minikafka.cli.common import dir_option, emit, friendly_errors, json_option
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig, parse_settings
from minikafka.testing.seeds import resolve_seed


@click.group()
def cluster() -> None:
    """Launch and control a local multi-process cluster on 127.0.0.1."""


@cluster.command("up")
@click.option("-n", "--brokers", type=int, default=3, show_default=True, help="Number of brokers.")
@click.option(
    "--combined",
    is_flag=True,
    help="Run the controller inside broker 1 instead of its own process.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed for every random choice (default: $MINIKAFKA_SEED, else random; printed).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help="Node config for every node (repeatable).",
)
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds to wait for the nodes to be ready.",
)
@click.option(
    "--fault-proxy",
    is_flag=True,
    help="Route node-to-node links through a fault proxy (see `minikafka net`).",
)
@dir_option
@json_option
@friendly_errors
def cluster_up(
    brokers: int,
    combined: bool,
    seed: int | None,
    settings: tuple[str, ...],
    timeout: float,
    fault_proxy: bool,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    """Start a controller and N brokers, wait until ready, and print them.

    On the directory of a stopped cluster (`cluster down` without --wipe), start that cluster
    again as it was, with its data; the options that shape a new cluster are refused then."""
    from minikafka.cluster import LocalCluster, plan_cluster
    from minikafka.cluster.clusterfile import read_record

    progress = None if as_json else (lambda msg: click.echo(msg, err=True))
    if read_record(cluster_dir.absolute()) is not None:
        ctx = click.get_current_context()
        shaping = [
            f"--{name.replace('_', '-')}"
            for name in ("brokers", "combined", "seed", "settings", "fault_proxy")
            if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
        ]
        if shaping:
            raise ConfigError(
                f"{cluster_dir} holds a cluster already: `cluster up` starts it again as it "
                f"was, so {', '.join(shaping).replace('--settings', '--set')} cannot apply; "
                "`minikafka cluster down --wipe` it first for a new one"
            )
        lc = LocalCluster.up_again(cluster_dir, ready_timeout_s=timeout, progress=progress)
        _print_status(lc, as_json)
        return
    configs = parse_settings(settings)
    NodeConfig(node_id=0).with_settings(configs)  # validate before starting anything
    seed = resolve_seed(seed)
    spec = plan_cluster(
        base_dir=cluster_dir,
        brokers=brokers,
        seed=seed,
        combined_controller=combined,
        node_configs=configs,
        fault_proxy=fault_proxy,
    )
    lc = LocalCluster.up(spec, ready_timeout_s=timeout, progress=progress)
    _print_status(lc, as_json, seed=seed)


@cluster.command("status")
@dir_option
@json_option
@friendly_errors
def cluster_status(cluster_dir: Path, as_json: bool) -> None:
    """Show the nodes of the local cluster and whether they are alive."""
    from minikafka.cluster import LocalCluster

    _print_status(LocalCluster.load(cluster_dir), as_json)


def _print_status(lc, as_json: bool, seed: int | None = None) -> None:  # noqa: ANN001
    rows = [
        {
            "node": s.node_id,
            "role": ",".join(s.roles),
            "address": s.address,
            "kafka": s.kafka_address or "-",
            "metrics": s.metrics_address or "-",
            "pid": s.pid,
            "state": "paused" if s.paused else ("up" if s.alive else "down"),
            "data_dir": str(s.data_dir),
        }
        for s in lc.status()
    ]
    proxy = lc.proxy_status()
    proxy_row = None
    if proxy is not None:
        proxy_row = {
            "control": proxy.control,
            "links": proxy.links,
            "pid": proxy.pid,
            "state": "up" if proxy.alive else "down",
        }
    if as_json:
        for row in rows:  # the ports alone too, for scripts (null: not listening)
            for key in ("kafka", "metrics"):
                address = row[key]
                row[key] = None if address == "-" else address
                row[f"{key}_port"] = None if address == "-" else int(address.rsplit(":", 1)[1])
        click.echo(
            json.dumps(
                {
                    "bootstrap": lc.bootstrap(),
                    "kafka_bootstrap": lc.kafka_bootstrap(),
                    "controller": lc.controller_address,
                    "seed": lc.spec.seed,
                    "nodes": rows,
                    "fault_proxy": proxy_row,
                }
            )
        )
        return
    emit(rows, ["node", "role", "address", "kafka", "metrics", "pid", "state", "data_dir"], False)
    click.echo(
        f"\nbootstrap: {lc.bootstrap()}   controller: {lc.controller_address}   seed: {lc.spec.seed}"
    )
    if kafka := lc.kafka_bootstrap():
        click.echo(f"Kafka clients: bootstrap.servers={kafka}")
    if proxy_row is not None:
        click.echo(
            f"fault proxy: control {proxy_row['control']}, {proxy_row['links']} links, "
            f"pid {proxy_row['pid']} ({proxy_row['state']})"
        )


@cluster.command("down")
@click.option("--wipe", is_flag=True, help="Also delete the data directories.")
@dir_option
@json_option
@friendly_errors
def cluster_down(wipe: bool, cluster_dir: Path, as_json: bool) -> None:
    """Stop every node (SIGTERM, then SIGKILL after 10 s)."""
    from minikafka.cluster import LocalCluster

    lc = LocalCluster.load(cluster_dir)
    outcomes = lc.down(wipe=wipe)
    rows = [{"node": node_id, "stopped": str(how)} for node_id, how in outcomes]
    if lc.last_proxy_stop is not None:
        rows.append({"node": "proxy", "stopped": lc.last_proxy_stop})
    emit(rows, ["node", "stopped"], as_json)


_NODE_ACTIONS = {
    "kill": "SIGKILL one node: a crash, no clean shutdown.",
    "pause": "SIGSTOP one node: it keeps its sockets and answers nothing until resumed.",
    "resume": "SIGCONT a paused node.",
    "stop": "SIGTERM one node (a clean shutdown; SIGKILL after 10 s).",
    "start": "Start a stopped or killed node again with its data; wait until it is ready.",
    "restart": "Stop a node, start it again with its data, and wait until it is ready.",
}


_PAST = {
    "kill": "killed",
    "pause": "paused",
    "resume": "resumed",
    "stop": "stopped",
    "start": "started",
    "restart": "restarted",
}


def _node_command(action: str) -> click.Command:
    @click.argument("node_id", metavar="NODE", type=int)
    @click.option(
        "--timeout",
        type=float,
        default=30.0,
        show_default=True,
        help="Seconds to wait for a started node to be ready.",
    )
    @dir_option
    @json_option
    @friendly_errors
    def command(node_id: int, timeout: float, cluster_dir: Path, as_json: bool) -> None:
        from minikafka.cluster import LocalCluster

        lc = LocalCluster.load(cluster_dir)
        progress = None if as_json else (lambda msg: click.echo(msg, err=True))
        row: dict[str, object] = {"node": node_id, "action": action}
        if action == "kill":
            lc.kill(node_id)
        elif action == "pause":
            lc.pause(node_id)
        elif action == "resume":
            lc.resume(node_id)
        elif action == "stop":
            row["stopped"] = str(lc.stop(node_id))
        else:
            start = lc.start if action == "start" else lc.restart
            row["pid"] = start(node_id, ready_timeout_s=timeout, progress=progress)
        if as_json:
            click.echo(json.dumps(row))
        else:
            detail = f" (pid {row['pid']})" if "pid" in row else ""
            if row.get("stopped") == "killed":
                detail = " (SIGKILL: it did not stop within 10 s of SIGTERM)"
            click.echo(f"node {node_id} {_PAST[action]}{detail}")

    command.__doc__ = _NODE_ACTIONS[action]
    return cluster.command(action)(command)


for _action in _NODE_ACTIONS:
    _node_command(_action)


@cluster.command("logs")
@click.option("--node", "node_ids", type=int, multiple=True, help="Only these nodes (repeatable).")
@click.option(
    "--kind", type=click.Choice(["events", "metrics", "out"]), default="events", show_default=True
)
@click.option("-n", "--lines", type=click.IntRange(0), default=20, show_default=True)
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Then print new lines as they are written, across log rotations, until Ctrl-C.",
)
@dir_option
@friendly_errors
def cluster_logs(
    node_ids: tuple[int, ...], kind: str, lines: int, follow: bool, cluster_dir: Path
) -> None:
    """Print the last lines of the nodes' event, metrics or output logs."""
    import time

    from minikafka.cluster import LocalCluster
    from minikafka.cluster.follow import follow as follow_logs

    lc = LocalCluster.load(cluster_dir)
    ids = list(node_ids) or [n.node_id for n in lc.spec.nodes]
    if not follow:
        for line in lc.tail_logs(ids, kind, lines=lines):
            click.echo(line)
        return
    paths = {f"[node {node_id}]": lc.log_path(node_id, kind) for node_id in ids}
    try:
        for line in follow_logs(paths, backlog=lines, sleep=time.sleep):
            click.echo(line)
    except KeyboardInterrupt:  # how a follow ends, as with `tail -f`
        pass
