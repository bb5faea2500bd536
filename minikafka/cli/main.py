"""`minikafka`: run nodes, launch local clusters, and talk to them.

The commands other than a node's own are loaded when they run (click's lazy subcommands), so
`minikafka node`, what every node process of a cluster runs, does not import the tools, the
experiments and the analysis before it serves."""

from __future__ import annotations

import importlib
from pathlib import Path

import click
import trio

from minikafka.cli.common import friendly_errors
from minikafka.errors import ConfigError
from minikafka.server.config import (
    NodeConfig,
    parse_address,
    parse_roles,
    parse_routes,
    parse_settings,
)
from minikafka.testing.seeds import resolve_seed

# Each command's name, and "module:attribute" of the click command that runs it.
COMMANDS = {
    "cluster": "minikafka.cli.cluster:cluster",
    "metrics": "minikafka.cli.metrics:metrics_cmd",
    "topics": "minikafka.cli.topics:topics",
    "produce": "minikafka.cli.produce:produce_cmd",
    "consume": "minikafka.cli.consume:consume_cmd",
    "configs": "minikafka.cli.configs:configs_cmd",
    "delete-records": "minikafka.cli.delete_records:delete_records_cmd",
    "reassign": "minikafka.cli.reassign:reassign_cmd",
    "analyze": "minikafka.cli.analyze:analyze_cmd",
    "net": "minikafka.cli.net:net_cmd",
    "experiment": "minikafka.cli.experiment:experiment_cmd",
    "sim": "minikafka.cli.sim:sim_cmd",
    "proxy": "minikafka.cli.net:proxy_cmd",
    "demo": "minikafka.cli.demo:demo_cmd",
}


class LazyGroup(click.Group):
    """A group whose COMMANDS are imported the first time click asks for one (to run it, or
    to list it in --help): the pattern of click's documentation, "Lazily Loading Subcommands"."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, _, attr = COMMANDS[cmd_name].partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command), COMMANDS[cmd_name]
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="minikafka")
def main() -> None:
    """minikafka: a replicated-log mini-broker cluster modelled on Apache Kafka."""


def _node_options(fn):  # noqa: ANN001, ANN202
    for opt in reversed(
        [
            click.option("--node-id", type=int, required=True, help="This node's id."),
            click.option(
                "--listen",
                default="127.0.0.1:0",
                show_default=True,
                help="host:port to listen on (port 0: any free port).",
            ),
            click.option(
                "--controller",
                "controller_addr",
                default=None,
                help="host:port of the controller (brokers).",
            ),
            click.option(
                "--data-dir",
                type=click.Path(file_okay=False, path_type=Path),
                required=True,
                help="Data directory (LMDB, event and metrics logs).",
            ),
            click.option(
                "--seed",
                type=int,
                default=None,
                help="Seed of the node's RNG (default: $MINIKAFKA_SEED, else 0).",
            ),
            click.option(
                "--set",
                "settings",
                multiple=True,
                metavar="NAME=VALUE",
                help="A Kafka-named config, e.g. replica.fetch.max.bytes=1048576 (repeatable).",
            ),
            click.option(
                "--route",
                "routes",
                multiple=True,
                metavar="DST_HOST:DST_PORT=VIA_HOST:VIA_PORT",
                help="Dial VIA instead of the peer node DST, e.g. a fault proxy (repeatable).",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def _run_node(
    roles: str,
    node_id: int,
    listen: str,
    controller_addr: str | None,
    data_dir: Path,
    seed: int | None,
    settings: tuple[str, ...],
    routes: tuple[str, ...] = (),
) -> None:
    from minikafka.server.node import serve_until_signalled

    role_tuple = parse_roles(roles)
    host, port = parse_address(listen, "--listen")
    if controller_addr is None:
        if "controller" not in role_tuple:
            raise ConfigError(
                "--controller host:port is required for a broker without the controller role"
            )
        controller_addr = f"{host}:{port}"
    c_host, c_port = parse_address(controller_addr, "--controller")
    # The launcher always passes the cluster's seed. A node started by hand without one is
    # pinned to NodeConfig's 0 (nothing to print: the same every start) unless the
    # environment names one.
    seed = resolve_seed(seed, pinned=0)
    config = NodeConfig(
        node_id=node_id,
        roles=role_tuple,
        host=host,
        port=port,
        controller_host=c_host,
        controller_port=c_port,
        data_dir=data_dir.expanduser().absolute(),
        seed=seed,
        routes=parse_routes(routes),
    )
    config = config.with_settings(parse_settings(settings))
    if (
        "controller" in role_tuple
        and "broker" in role_tuple
        and port == 0
        and controller_addr == f"{host}:0"
    ):
        raise ConfigError("a combined broker,controller node needs a fixed --listen port")
    trio.run(serve_until_signalled, config)


@main.command()
@click.option(
    "--roles", default="broker", show_default=True, help="broker, controller or broker,controller."
)
@_node_options
@friendly_errors
def node(roles: str, **kw: object) -> None:
    """Run one node in the foreground (Ctrl-C or SIGTERM stops it)."""
    _run_node(roles, **kw)  # type: ignore[arg-type]


@main.command()
@_node_options
@friendly_errors
def broker(**kw: object) -> None:
    """Run one broker in the foreground."""
    _run_node("broker", **kw)  # type: ignore[arg-type]


@main.command()
@_node_options
@friendly_errors
def controller(**kw: object) -> None:
    """Run the controller in the foreground."""
    _run_node("controller", **kw)  # type: ignore[arg-type]
