"""CLI commands that talk to a running cluster: topics, produce, consume."""

from __future__ import annotations

import json
import sys
import time
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
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer, ProducerConfig
from minikafka.core.records import make_batch
from minikafka.core.types import TopicPartition
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


@topics.command("list")
@bootstrap_option
@json_option
@friendly_errors
def topics_list(bootstrap: str | None, cluster_dir: Path, as_json: bool) -> None:
    """List topics with their partition counts."""
    md = trio.run(_describe, resolve_bootstrap(bootstrap, cluster_dir), None)
    rows = [
        {
            "topic": t.name,
            "partitions": len(t.partitions),
            "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
        }
        for t in md.topics
    ]
    emit(rows, ["topic", "partitions", "replication_factor"], as_json)


@topics.command("describe")
@click.argument("names", nargs=-1)
@bootstrap_option
@json_option
@friendly_errors
def topics_describe(
    names: tuple[str, ...], bootstrap: str | None, cluster_dir: Path, as_json: bool
) -> None:
    """Leader, replicas and ISR of every partition."""
    md = trio.run(_describe, resolve_bootstrap(bootstrap, cluster_dir), list(names) or None)
    rows = []
    for t in md.topics:
        if t.error_code:
            raise click.ClickException(f"unknown topic {t.name!r}")
        for p in t.partitions:
            rows.append(
                {
                    "topic": t.name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "epoch": p.leader_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                    "offline": p.offline_replicas,
                }
            )
    emit(rows, ["topic", "partition", "leader", "epoch", "replicas", "isr", "offline"], as_json)


async def _describe(bootstrap: str, names: list[str] | None):  # noqa: ANN202
    async with open_client(bootstrap, client_id="minikafka-cli") as client:
        return await Admin(client).describe(names)


@click.command("produce")
@click.argument("topic")
@click.option(
    "--num-records",
    type=click.IntRange(1),
    default=None,
    help="Generate this many records instead of reading stdin lines.",
)
@click.option(
    "--record-size",
    type=click.IntRange(1, 64 << 20),
    default=100,
    show_default=True,
    help="Bytes per generated record.",
)
@click.option(
    "--throughput",
    type=float,
    default=-1,
    show_default=True,
    help="Target records/s for generated load (-1: as fast as possible).",
)
@click.option(
    "--batch-bytes",
    type=click.IntRange(1),
    default=100_000,
    show_default=True,
    help="Bytes per record batch.",
)
@click.option(
    "--acks", type=click.Choice(["0", "1", "-1", "all"]), default="all", show_default=True
)
@click.option(
    "--idempotence/--no-idempotence",
    default=None,
    help="The idempotent producer, KIP-98: retries never store a batch twice "
    "[default: on with acks all, off otherwise; it needs acks all].",
)
@click.option(
    "--in-flight",
    type=click.IntRange(1, 1024),
    default=8,
    show_default=True,
    help="Produce requests in flight.",
)
@bootstrap_option
@json_option
@friendly_errors
def produce_cmd(
    topic: str,
    num_records: int | None,
    record_size: int,
    throughput: float,
    batch_bytes: int,
    acks: str,
    idempotence: bool | None,
    in_flight: int,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    """Produce stdin lines (one record each), or generated load with --num-records."""
    from minikafka.tools.perf import PerfSpec, run_produce_perf

    acks_value = -1 if acks == "all" else int(acks)
    if idempotence and acks_value != -1:
        raise ConfigError(
            f"--idempotence with --acks {acks}: the idempotent producer needs --acks all"
            " (Kafka's enable.idempotence does too); use --no-idempotence"
        )
    address = resolve_bootstrap(bootstrap, cluster_dir)
    if num_records is None:
        values = [line.rstrip(b"\n") for line in sys.stdin.buffer]
        report = trio.run(_produce_lines, address, topic, values, acks_value, idempotence)
        click.echo(
            json.dumps(report) if as_json else f"produced {report['records']} records to {topic}"
        )
        return
    spec = PerfSpec(
        topic=topic,
        num_records=num_records,
        record_size=record_size,
        throughput=throughput,
        batch_bytes=batch_bytes,
        acks=acks_value,
        in_flight=in_flight,
        idempotence=idempotence,
    )
    progress = None if as_json else (lambda line: click.echo(line, err=True))
    report = trio.run(run_produce_perf, address, spec, progress)
    click.echo(json.dumps(report) if as_json else report["summary"])


async def _produce_lines(
    bootstrap: str, topic: str, values: list[bytes], acks: int, idempotence: bool | None = None
) -> dict[str, object]:
    async with open_client(bootstrap, client_id="minikafka-cli") as client:
        await client.refresh_metadata([topic])
        tps = client.partitions_of(topic)
        if not tps:
            raise click.ClickException(f"unknown topic {topic!r}")
        now = int(time.time() * 1000)
        per_tp: dict[TopicPartition, list] = {}
        for i, value in enumerate(values):
            per_tp.setdefault(tps[i % len(tps)], []).append((now, None, value))
        producer = Producer(client, ProducerConfig(acks=acks, enable_idempotence=idempotence))
        batches = [(tp, make_batch(recs), len(recs)) for tp, recs in per_tp.items()]
        results = await producer.send_batches(batches) if batches else []
        return {"records": len(values), "partitions": {str(r.tp): r.base_offset for r in results}}


@click.command("consume")
@click.argument("topic")
@click.option(
    "--from-beginning", is_flag=True, help="Start at the log start offset instead of the end."
)
@click.option(
    "--max-records", type=click.IntRange(1), default=None, help="Stop after this many records."
)
@click.option(
    "--timeout",
    type=float,
    default=5.0,
    show_default=True,
    help="Stop after this many seconds without new records.",
)
@bootstrap_option
@json_option
@friendly_errors
def consume_cmd(
    topic: str,
    from_beginning: bool,
    max_records: int | None,
    timeout: float,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    """Print records (value per line, or JSON lines with partition and offset)."""

    async def run() -> int:
        count = 0
        async with open_client(
            resolve_bootstrap(bootstrap, cluster_dir), client_id="minikafka-cli"
        ) as client:
            await client.refresh_metadata([topic])
            tps = client.partitions_of(topic)
            if not tps:
                raise click.ClickException(f"unknown topic {topic!r}")
            consumer = Consumer(client, max_wait_ms=200)
            positions = await consumer.list_offsets(tps, earliest=from_beginning)
            idle_since = trio.current_time()
            while trio.current_time() - idle_since < timeout:
                got = await consumer.fetch_once(positions)
                for tp, records in got.items():
                    for r in records:
                        if as_json:
                            click.echo(
                                json.dumps(
                                    {
                                        "partition": tp.partition,
                                        "offset": r.offset,
                                        "timestamp_ms": r.timestamp_ms,
                                        "key": r.key.decode("utf-8", "replace") if r.key else None,
                                        "value": r.value.decode("utf-8", "replace"),
                                    }
                                )
                            )
                        else:
                            click.echo(r.value.decode("utf-8", "replace"))
                        count += 1
                        if max_records is not None and count >= max_records:
                            return count
                    if records:
                        positions[tp] = records[-1].offset + 1
                        idle_since = trio.current_time()
        return count

    count = trio.run(run)
    click.echo(f"consumed {count} records from {topic}", err=True)
