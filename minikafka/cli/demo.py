"""`minikafka demo`: what minikafka is for, in about a minute (tools/demo.py runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from minikafka.cli.common import friendly_errors
from minikafka.tools.demo_move import (
    DEFAULT_THROTTLE,
    THROTTLE_MAX,
    THROTTLE_MIN,
    parse_throttle,
)


@click.command("demo")
@click.option(
    "--records",
    type=click.IntRange(1),
    default=None,
    help="Records of 1000 B written before the move (default: sized for a ~20 s move at the "
    "throttle).",
)
@click.option(
    "--throttle",
    metavar="B/S",
    default=None,
    help=f"The move's replication throttle in bytes/s, {THROTTLE_MIN}..{THROTTLE_MAX} "
    f"(default {DEFAULT_THROTTLE}).",
)
@click.option(
    "--dir",
    "cluster_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".minikafka/demo"),
    show_default=True,
    help="The demo's cluster and its run folder (made again at each run).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the figures as one JSON object on stdout (the lines go to stderr).",
)
@friendly_errors
def demo_cmd(records: int | None, throttle: str | None, cluster_dir: Path, as_json: bool) -> None:
    """Start a 3-broker cluster, move replicas onto a new broker under a KIP-73 throttle while
    a producer runs (the throttled rate against the limit, once a second; a plot in the run
    folder), then read everything back and check nothing acknowledged was lost."""
    from minikafka.tools.demo import run_demo

    rate = DEFAULT_THROTTLE if throttle is None else parse_throttle(throttle)
    # With --json, stdout holds the final JSON object only; the lines go to stderr.
    result = run_demo(
        cluster_dir,
        records=records,
        throttle=rate,
        say=lambda msg: click.echo(f"demo: {msg}", err=as_json),
    )
    if as_json:
        click.echo(json.dumps(result))
    if not result["ok"]:
        raise SystemExit(1)
