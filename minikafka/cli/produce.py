"""`minikafka produce`: stdin lines as records (kafka-console-producer's job), or generated load
with `--num-records` (kafka-producer-perf-test's, whose summary line it prints too).

Keys as Kafka's console producer takes them: `--property parse.key=true --property
key.separator=:` (or the short `--key-separator :`) splits each line at its first separator
into key and value; `--key K` gives every record the key K. A keyed record goes to Kafka's
partition for its key (murmur2, core/partitioner.py), unless `--partition` names one; unkeyed
records go round-robin. Every line is checked before anything is sent: a line without the
separator is refused with its number, and nothing is produced. `--property null.marker=M`
(KIP-810) sends a value equal to M as null: a tombstone, which deletes its key from a compacted
topic (docs/log-life.md).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import click
import trio

from minikafka.cli.common import bootstrap_option, friendly_errors, json_option, resolve_bootstrap
from minikafka.client.cluster_client import open_client
from minikafka.client.producer import Producer, ProducerConfig
from minikafka.common import TopicPartition
from minikafka.core.controller.topics import INTERNAL_TOPICS  # Kafka's Topic.isInternal
from minikafka.core.partitioner import partition_for_key
from minikafka.core.records import make_batch
from minikafka.errors import ConfigError

# kafka-console-producer's --property names that this command honours, and their defaults
# (LineMessageReader: key.separator is a tab; null.marker is unset, "" here).
PROPERTIES = {"parse.key": "false", "key.separator": "\t", "null.marker": ""}


def parse_properties(items: Iterable[str]) -> dict[str, str]:
    """`NAME=VALUE` pairs of the console producer's properties we honour; one-line errors."""
    props = dict(PROPERTIES)
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in PROPERTIES:
            raise ConfigError(
                f"--property {item!r}: expected NAME=VALUE with NAME one of "
                f"{', '.join(PROPERTIES)} (kafka-console-producer's)"
            )
        props[name] = value
    if props["parse.key"].lower() not in ("true", "false"):
        raise ConfigError(f"--property parse.key={props['parse.key']!r}: expected true or false")
    if props["key.separator"] == "":
        raise ConfigError("--property key.separator= : the separator must not be empty")
    return props


def split_lines(
    lines: Iterable[bytes],
    *,
    separator: bytes | None,
    key: bytes | None,
    null_marker: bytes | None = None,
) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) per line: split at the first `separator` when there is one, else `key`
    for every line; a value equal to `null_marker` is None (null). A line without the
    separator is a ConfigError naming its number."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for number, line in enumerate(lines, 1):
        if separator is None:
            k, v = key, line
        else:
            k, sep, v = line.partition(separator)
            if not sep:
                raise ConfigError(
                    f"line {number} has no key separator {separator.decode(errors='replace')!r} "
                    "(parse.key=true needs KEY<separator>VALUE on every line); nothing was "
                    "produced"
                )
        out.append((k, None if null_marker is not None and v == null_marker else v))
    return out


def assign_partitions(
    records: list[tuple[bytes | None, bytes | None]], partitions: int, partition: int | None
) -> list[int]:
    """Each record's partition: `partition` if given, Kafka's for its key, else round-robin."""
    if partition is not None:
        return [partition] * len(records)
    out, next_unkeyed = [], 0
    for key, _value in records:
        if key is not None:
            out.append(partition_for_key(key, partitions))
        else:
            out.append(next_unkeyed % partitions)
            next_unkeyed += 1
    return out


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
@click.option("--key", help="The key of every record (stdin lines).")
@click.option(
    "--key-separator",
    metavar="SEP",
    help="Lines are KEY<SEP>VALUE (short for --property parse.key=true key.separator=SEP).",
)
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="kafka-console-producer's parse.key, key.separator and null.marker (repeatable).",
)
@click.option(
    "--partition",
    type=click.IntRange(0),
    default=None,
    help="Send every line to this partition (default: by key, else round-robin).",
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
    key: str | None,
    key_separator: str | None,
    properties: tuple[str, ...],
    partition: int | None,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    """Produce stdin lines (one record each, keyed if asked), or generated load with
    --num-records (its summary also in kafka-producer-perf-test's format)."""
    from minikafka.tools.perf import PerfSpec, run_produce_perf

    if topic in INTERNAL_TOPICS:  # the broker refuses it too (INVALID_TOPIC_EXCEPTION)
        raise ConfigError(
            f"{topic} is an internal topic: only the brokers' group coordinators write it"
        )
    acks_value = -1 if acks == "all" else int(acks)
    if idempotence and acks_value != -1:
        raise ConfigError(
            f"--idempotence with --acks {acks}: the idempotent producer needs --acks all"
            " (Kafka's enable.idempotence does too); use --no-idempotence"
        )
    props = parse_properties(properties)
    if key_separator is not None:
        props.update({"parse.key": "true", "key.separator": key_separator})
    keyed = props["parse.key"].lower() == "true"
    if keyed and key is not None:
        raise ConfigError("--key gives every record one key; with parse.key the lines carry them")
    address = resolve_bootstrap(bootstrap, cluster_dir)
    if num_records is None:
        separator = props["key.separator"].encode() if keyed else None
        lines = (line.rstrip(b"\n").removesuffix(b"\r") for line in sys.stdin.buffer)
        marker = props["null.marker"].encode() or None
        records = split_lines(
            lines,
            separator=separator,
            key=None if key is None else key.encode(),
            null_marker=marker,
        )
        report = trio.run(
            _produce_lines, address, topic, records, acks_value, idempotence, partition, batch_bytes
        )
        click.echo(
            json.dumps(report) if as_json else f"produced {report['records']} records to {topic}"
        )
        return
    if key is not None or keyed or partition is not None:
        raise ConfigError(
            "--key, --key-separator, --property and --partition apply to stdin lines, "
            "not to generated load (--num-records)"
        )
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
    if as_json:
        click.echo(json.dumps(report))
    else:
        click.echo(report["summary"])
        click.echo(report["kafka_summary"])


RECORD_OVERHEAD = 16  # about a record's length, attributes and deltas in a batch


def batch_chunks(
    records: list[tuple[int, bytes | None, bytes | None]], batch_bytes: int
) -> list[list[tuple[int, bytes | None, bytes | None]]]:
    """Records in order, cut into batches of about `batch_bytes` (--batch-bytes, as Kafka's
    batch.size bounds a producer's batches); a record larger than that is a batch alone."""
    out: list[list[tuple[int, bytes | None, bytes | None]]] = []
    current: list[tuple[int, bytes | None, bytes | None]] = []
    size = 0
    for record in records:
        n = len(record[2] or b"") + len(record[1] or b"") + RECORD_OVERHEAD
        if current and size + n > batch_bytes:
            out.append(current)
            current, size = [], 0
        current.append(record)
        size += n
    if current:
        out.append(current)
    return out


async def _produce_lines(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None]],
    acks: int,
    idempotence: bool | None = None,
    partition: int | None = None,
    batch_bytes: int = 100_000,
) -> Mapping[str, object]:
    async with open_client(bootstrap, client_id="minikafka-cli") as client:
        await client.refresh_metadata([topic])
        tps = client.partitions_of(topic)
        if not tps:
            raise ConfigError(f"unknown topic {topic!r}: create it first (minikafka topics create)")
        if partition is not None and partition >= len(tps):
            raise ConfigError(
                f"--partition {partition}: topic {topic!r} has partitions 0-{len(tps) - 1}"
            )
        now = int(time.time() * 1000)
        per_tp: dict[TopicPartition, list] = {}
        for (key, value), p in zip(
            records, assign_partitions(records, len(tps), partition), strict=True
        ):
            per_tp.setdefault(TopicPartition(topic, p), []).append((now, key, value))
        producer = Producer(client, ProducerConfig(acks=acks, enable_idempotence=idempotence))
        batches = [
            (tp, make_batch(chunk), len(chunk))
            for tp, recs in per_tp.items()
            for chunk in batch_chunks(recs, batch_bytes)
        ]
        results = await producer.send_batches(batches) if batches else []
        return {
            "records": len(records),
            "partitions": {str(r.tp): r.base_offset for r in results},
        }
