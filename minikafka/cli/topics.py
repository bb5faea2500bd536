"""`minikafka topics`: create, alter, delete, list and describe topics (kafka-topics.sh's
jobs). `describe` shows each partition's log start offset, high watermark and log end offset
beside its leader, replicas and ISR, and filters as kafka-topics does with
`--under-replicated-partitions` and `--unavailable-partitions`."""

from __future__ import annotations

from pathlib import Path

import click
import trio

from minikafka.cli.common import (
    bootstrap_option,
    emit,
    friendly_errors,
    json_option,
    resolve_bootstrap,
)
from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.log_offsets import log_offsets
from minikafka.common import TopicPartition
from minikafka.core.controller.topics import INTERNAL_TOPICS  # Kafka's Topic.isInternal
from minikafka.errors import ConfigError


@click.group()
def topics() -> None:
    """Create, alter, delete, list and describe topics."""


@topics.command("create")
@click.argument("name")
@click.option("-p", "--partitions", type=click.IntRange(1, 100_000), default=1, show_default=True)
@click.option(
    "-r", "--replication-factor", type=click.IntRange(1, 64), default=1, show_default=True
)
@click.option(
    "--config", "configs", multiple=True, metavar="NAME=VALUE", help="Topic config (repeatable)."
)
@bootstrap_option
@friendly_errors
def topics_create(
    name: str,
    partitions: int,
    replication_factor: int,
    configs: tuple[str, ...],
    bootstrap: str | None,
    cluster_dir: Path,
) -> None:
    """Create a topic and wait until every partition has a leader."""
    from minikafka.core.dynamic_config import KNOWN_CONFIGS, TOPICS, validate_changes
    from minikafka.server.config import parse_settings

    settings = parse_settings(configs)
    # The throttled-replica lists become the topic's dynamic configs (core/controller/topics.py):
    # checked here as `configs --alter` checks them, so a typo is one line and nothing is sent.
    lists = {k: v for k, v in settings.items() if k in KNOWN_CONFIGS[TOPICS]}
    if lists:
        validate_changes(TOPICS, name, lists, ())

    async def run() -> None:
        async with open_client(
            resolve_bootstrap(bootstrap, cluster_dir), client_id="minikafka-cli"
        ) as client:
            await Admin(client).create_topic(
                name, partitions=partitions, replication_factor=replication_factor, configs=settings
            )

    trio.run(run)
    click.echo(
        f"created topic {name} with {partitions} partitions, replication factor {replication_factor}"
    )


@topics.command("alter")
@click.argument("name")
@click.option(
    "-p",
    "--partitions",
    type=click.IntRange(1, 1_000_000),
    required=True,
    help="The new partition count (more than the topic has: partitions are never removed).",
)
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B,...",
    help="The new partitions' replicas, one colon-separated list per new partition "
    "(kafka-topics' form), else placed by the controller.",
)
@bootstrap_option
@friendly_errors
def topics_alter(
    name: str,
    partitions: int,
    replica_assignment: str | None,
    bootstrap: str | None,
    cluster_dir: Path,
) -> None:
    """Add partitions to a topic (kafka-topics --alter --partitions)."""
    assignments = None
    if replica_assignment is not None:
        try:
            assignments = [
                [int(b) for b in part.split(":")] for part in replica_assignment.split(",")
            ]
        except ValueError:
            raise ConfigError(
                f"--replica-assignment {replica_assignment!r}: expected broker ids separated by "
                "':' within a partition and ',' between partitions, e.g. 1:2,2:3"
            ) from None

    async def run() -> None:
        async with open_client(
            resolve_bootstrap(bootstrap, cluster_dir), client_id="minikafka-cli"
        ) as client:
            await Admin(client).create_partitions(name, partitions, assignments=assignments)

    trio.run(run)
    click.echo(f"topic {name} now has {partitions} partitions")


@topics.command("delete")
@click.argument("name")
@bootstrap_option
@friendly_errors
def topics_delete(name: str, bootstrap: str | None, cluster_dir: Path) -> None:
    """Delete a topic: every broker forgets it and drops its logs (a broker that is down, once
    it returns; the name can be used again then)."""

    async def run() -> None:
        async with open_client(
            resolve_bootstrap(bootstrap, cluster_dir), client_id="minikafka-cli"
        ) as client:
            await Admin(client).delete_topic(name)

    trio.run(run)
    click.echo(f"deleted topic {name}")


_exclude_internal = click.option(
    "--exclude-internal",
    is_flag=True,
    help="Leave out internal topics such as __consumer_offsets (kafka-topics' flag).",
)


@topics.command("list")
@_exclude_internal
@bootstrap_option
@json_option
@friendly_errors
def topics_list(
    exclude_internal: bool, bootstrap: str | None, cluster_dir: Path, as_json: bool
) -> None:
    """List topics with their partition counts."""
    md = trio.run(_metadata, resolve_bootstrap(bootstrap, cluster_dir))
    rows = [
        {
            "topic": t.name,
            "partitions": len(t.partitions),
            "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
        }
        for t in md.topics
        if not (exclude_internal and t.name in INTERNAL_TOPICS)
    ]
    emit(rows, ["topic", "partitions", "replication_factor"], as_json)


@topics.command("describe")
@click.argument("names", nargs=-1)
@click.option(
    "--under-replicated-partitions",
    "under_replicated",
    is_flag=True,
    help="Only partitions whose ISR is smaller than their replica set (kafka-topics' flag).",
)
@click.option(
    "--unavailable-partitions",
    "unavailable",
    is_flag=True,
    help="Only partitions whose leader is not available (kafka-topics' flag).",
)
@_exclude_internal
@bootstrap_option
@json_option
@friendly_errors
def topics_describe(
    names: tuple[str, ...],
    under_replicated: bool,
    unavailable: bool,
    exclude_internal: bool,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    """Leader, replicas and ISR of every partition, with its log start offset, high watermark
    and log end offset (the leader's; `-` where the leader cannot answer)."""
    md, offsets = trio.run(_describe, resolve_bootstrap(bootstrap, cluster_dir), list(names))
    live = {b.node_id for b in md.brokers}
    rows = []
    for t in md.topics:
        if t.error_code:
            raise ConfigError(f"unknown topic {t.name!r}")
        if exclude_internal and t.name in INTERNAL_TOPICS:
            continue
        for p in t.partitions:
            if under_replicated and len(p.isr) >= len(p.replicas):
                continue
            if unavailable and p.leader in live:
                continue
            o = offsets.get(TopicPartition(t.name, p.partition))
            rows.append(
                {
                    "topic": t.name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "epoch": p.leader_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                    "offline": p.offline_replicas,
                    "log_start_offset": o.log_start_offset if o else None,
                    "high_watermark": o.high_watermark if o else None,
                    "log_end_offset": o.log_end_offset if o else None,
                }
            )
    if as_json:
        emit(rows, [], True)
        return
    short = {"log_start_offset": "log_start", "high_watermark": "hw", "log_end_offset": "leo"}
    table_rows = [
        {short.get(k, k): ("-" if v is None and k in short else v) for k, v in r.items()}
        for r in rows
    ]
    columns = ["topic", "partition", "leader", "epoch", "replicas", "isr", "offline"]
    emit(table_rows, [*columns, *short.values()], False)


async def _metadata(bootstrap: str):  # noqa: ANN202
    async with open_client(bootstrap, client_id="minikafka-cli") as client:
        return await Admin(client).describe(None)


async def _describe(bootstrap: str, names: list[str]):  # noqa: ANN202
    """The metadata of the topics (all, if none is named) and their partitions' offsets."""
    async with open_client(bootstrap, client_id="minikafka-cli") as client:
        md = await Admin(client).describe(names or None)
        tps = [
            TopicPartition(t.name, p.partition)
            for t in md.topics
            if not t.error_code
            for p in t.partitions
        ]
        return md, await log_offsets(client, tps)
