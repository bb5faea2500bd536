"""`minikafka proxy` (the fault proxy process) and `minikafka net ...` (its control, for people).

`net` commands find the proxy of the cluster in `--dir` (started with `cluster up
--fault-proxy`), or take `--proxy HOST:PORT`. Links are directed: SRC -> DST carries the
connections node SRC opens to node DST (and their answers). `latency`, `bandwidth` and `reset`
act on both directions unless `--one-way`. Every command prints the links it changed, or JSON
with `--json`; a refused request changes nothing and exits 2 with the proxy's one-line reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import trio

from minikafka.cli.common import dir_option, emit, friendly_errors, json_option
from minikafka.errors import ConfigError
from minikafka.faults.control import BlockingFaultProxyClient, FaultProxyClient, both_ways
from minikafka.faults.links import LinkId
from minikafka.server.config import parse_address

COLUMNS = [
    "link",
    "blocked",
    "latency_ms",
    "bandwidth_bps",
    "bytes_to_dst",
    "bytes_to_src",
    "conns_open",
    "conns_total",
    "listen",
    "target",
]


@click.command("proxy")
@click.option(
    "--spec-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSON: host, control_port, links of src, dst, port, target (cluster up writes it).",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Written once serving: pid and control port (default: proxy.json beside the spec).",
)
@friendly_errors
def proxy_cmd(spec_file: Path, ready_file: Path | None) -> None:
    """Run a fault-injecting TCP proxy for a cluster's links (SIGTERM or Ctrl-C stops it)."""
    from minikafka.faults.config import load_proxy_config
    from minikafka.faults.proxy import serve_proxy_until_signalled

    config = load_proxy_config(spec_file)
    ready = ready_file if ready_file is not None else spec_file.with_name("proxy.json")
    trio.run(serve_proxy_until_signalled, config, ready.absolute())


@click.group("net")
def net_cmd() -> None:
    """Partition nodes, slow links, cap bandwidth (clusters started with --fault-proxy)."""


def _proxy_options(fn):  # noqa: ANN001, ANN202
    fn = json_option(fn)
    fn = click.option(
        "--proxy", "proxy_addr", help="host:port of the proxy's control port (default: --dir's)."
    )(fn)
    return dir_option(fn)


def _client(cluster_dir: Path, proxy_addr: str | None) -> BlockingFaultProxyClient:
    if proxy_addr:
        return FaultProxyClient(*parse_address(proxy_addr, "--proxy")).blocking()
    from minikafka.cluster import LocalCluster

    return LocalCluster.load(cluster_dir).fault_proxy().blocking()


def _links(src: int, dst: int, one_way: bool) -> list[LinkId]:
    return [(src, dst)] if one_way else both_ways([(src, dst)])


def _print_rows(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(rows))
        return
    shown = [
        {
            **row,
            "link": f"{row['src']}->{row['dst']}",
            "blocked": "yes" if row["blocked"] else "",
            "latency_ms": row["latency_ms"] or "",
            "conns_open": row["connections_open"],
            "conns_total": row["connections_total"],
        }
        for row in rows
    ]
    emit(shown, COLUMNS, False)


def _print_links(key: str, links: list[LinkId], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({key: [list(link) for link in links]}))
        return
    names = ", ".join(f"{s}->{d}" for s, d in links) or "none"
    click.echo(f"{key}: {names}")


def _one_way_option(fn):  # noqa: ANN001, ANN202
    return click.option("--one-way", is_flag=True, help="Only SRC -> DST (default: both ways).")(fn)


@net_cmd.command("show")
@_proxy_options
@friendly_errors
def net_show(cluster_dir: Path, proxy_addr: str | None, as_json: bool) -> None:
    """Every link: its faults, bytes delivered each way, connections."""
    _print_rows(_client(cluster_dir, proxy_addr).show(), as_json)


@net_cmd.command("partition")
@click.argument("groups", nargs=-1, required=True, metavar="GROUP GROUP...")
@_proxy_options
@friendly_errors
def net_partition(
    groups: tuple[str, ...], cluster_dir: Path, proxy_addr: str | None, as_json: bool
) -> None:
    """Cut every link between groups of node ids, e.g. `partition 1 2,3` (both ways).

    Nodes in no group keep their links. Partitions add up until `net heal`."""
    parsed = [_node_ids(group) for group in groups]
    blocked = _client(cluster_dir, proxy_addr).partition(parsed)
    _print_links("blocked", blocked, as_json)


@net_cmd.command("heal")
@_proxy_options
@friendly_errors
def net_heal(cluster_dir: Path, proxy_addr: str | None, as_json: bool) -> None:
    """Clear every fault (blocks, latency, bandwidth caps) on every link."""
    _print_links("healed", _client(cluster_dir, proxy_addr).heal(), as_json)


@net_cmd.command("latency")
@click.argument("src", type=int)
@click.argument("dst", type=int)
@click.argument("ms", type=int)
@_one_way_option
@_proxy_options
@friendly_errors
def net_latency(
    src: int,
    dst: int,
    ms: int,
    one_way: bool,
    cluster_dir: Path,
    proxy_addr: str | None,
    as_json: bool,
) -> None:
    """Delay every chunk on SRC<->DST by MS milliseconds (0 clears), in both directions
    unless --one-way (a round trip then takes 2 x MS more)."""
    client = _client(cluster_dir, proxy_addr)
    _print_rows(client.set_links(_links(src, dst, one_way), latency_ms=ms), as_json)


@net_cmd.command("bandwidth")
@click.argument("src", type=int)
@click.argument("dst", type=int)
@click.argument("rate", metavar="BYTES_PER_S")
@_one_way_option
@_proxy_options
@friendly_errors
def net_bandwidth(
    src: int,
    dst: int,
    rate: str,
    one_way: bool,
    cluster_dir: Path,
    proxy_addr: str | None,
    as_json: bool,
) -> None:
    """Cap SRC<->DST at BYTES_PER_S in each direction (`off` clears), both directions unless
    --one-way. Bursts are at most 50 ms worth (64 KiB at most)."""
    client = _client(cluster_dir, proxy_addr)
    links = _links(src, dst, one_way)
    _print_rows(client.set_links(links, bandwidth_bps=_rate(rate)), as_json)


@net_cmd.command("reset")
@click.argument("src", type=int)
@click.argument("dst", type=int)
@_one_way_option
@_proxy_options
@friendly_errors
def net_reset(
    src: int, dst: int, one_way: bool, cluster_dir: Path, proxy_addr: str | None, as_json: bool
) -> None:
    """Close the current connections on SRC<->DST (both directions unless --one-way); the
    nodes reconnect on their own."""
    closed = _client(cluster_dir, proxy_addr).reset(_links(src, dst, one_way))
    click.echo(json.dumps({"closed": closed}) if as_json else f"closed {closed} connections")


def _node_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"a group is comma-separated node ids like 1,2; got {text!r}") from None
    return ids


def _rate(text: str) -> int | None:
    if text.strip().lower() in ("off", "none"):
        return None
    try:
        rate = int(text.replace("_", ""))
    except ValueError:
        rate = 0
    if rate <= 0:
        raise ConfigError(f"BYTES_PER_S must be a positive integer or off, got {text!r}")
    return rate
