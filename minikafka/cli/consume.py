"""`minikafka consume`: print a topic's records (kafka-console-consumer's job), or measure how
fast it reads with `--perf` (kafka-consumer-perf-test's summary).

Where to start, as Kafka's console consumer takes it: the end by default, `--from-beginning`,
or `--partition P --offset earliest|latest|N` for one partition; with `--group G`, where G
committed (then the rest as above), committing every 5 s and at the end as Kafka's simple
consumers do (client/group_offsets.py). A position that falls out of the log (below its log
start, once retention or DeleteRecords removed it) moves as `auto.offset.reset` says: earliest
with `--from-beginning`, else latest, as kafka-console-consumer sets it, or what
`--consumer-property auto.offset.reset=earliest|latest|none` names; each reset is reported on
stderr. `--json` prints one object
per record with its partition, offset, timestamp, key and value; bytes that are not UTF-8 are
given in base64 with `"key_encoding"`/`"value_encoding": "base64"`, so nothing is lost.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import trio

from minikafka.cli.common import bootstrap_option, friendly_errors, json_option, resolve_bootstrap
from minikafka.client.cluster_client import open_client
from minikafka.client.consumer import AUTO_OFFSET_RESETS, Consumer
from minikafka.client.group_offsets import GroupOffsets
from minikafka.common import TopicPartition
from minikafka.core.records import Record
from minikafka.errors import ConfigError

AUTO_COMMIT_S = 5.0  # the console consumer's auto.commit.interval.ms


def record_json(partition: int, r: Record) -> dict[str, Any]:
    """One record for --json: text where the bytes are UTF-8, base64 (flagged) where not."""
    doc: dict[str, Any] = {
        "partition": partition,
        "offset": r.offset,
        "timestamp_ms": r.timestamp_ms,
    }
    for name, data in (("key", r.key), ("value", None if r.null_value else r.value)):
        if data is None:
            doc[name] = None
            continue
        try:
            doc[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            doc[name] = base64.b64encode(data).decode("ascii")
            doc[f"{name}_encoding"] = "base64"
    if r.headers:
        doc["headers"] = {
            k: None if v is None else v.decode("utf-8", "replace") for k, v in r.headers
        }
    return doc


def parse_reset(properties: tuple[str, ...], from_beginning: bool) -> str:
    """auto.offset.reset from `--consumer-property` items, else kafka-console-consumer's
    default: earliest with --from-beginning, latest without."""
    reset = "earliest" if from_beginning else "latest"
    for item in properties:
        name, sep, value = item.partition("=")
        if not sep or name.strip() != "auto.offset.reset":
            raise ConfigError(
                f"--consumer-property {item!r}: expected auto.offset.reset=earliest|latest|none"
            )
        reset = value.strip().lower()
        if reset not in AUTO_OFFSET_RESETS:
            raise ConfigError(
                f"--consumer-property {item!r}: expected auto.offset.reset=earliest|latest|none"
            )
    return reset


def _report_reset(tp: TopicPartition, old: int, new: int) -> None:
    click.echo(
        f"partition {tp.partition}: offset {old} is out of range, reset to {new} "
        "(auto.offset.reset)",
        err=True,
    )


def parse_offset(text: str | None) -> str | int | None:
    """--offset: earliest, latest or a non-negative offset (kafka-console-consumer's form)."""
    if text is None or text in ("earliest", "latest"):
        return text
    if text.isdigit():
        return int(text)
    raise ConfigError(f"--offset {text!r}: expected earliest, latest or a non-negative offset")


@click.command("consume")
@click.argument("topic")
@click.option(
    "--from-beginning", is_flag=True, help="Start at the log start offset instead of the end."
)
@click.option(
    "--partition",
    type=click.IntRange(0),
    default=None,
    help="Read only this partition (from its end unless --offset says otherwise).",
)
@click.option(
    "--offset",
    "offset_text",
    metavar="earliest|latest|N",
    help="Where to start in --partition (kafka-console-consumer's --offset).",
)
@click.option(
    "--max-records",
    "--max-messages",
    "max_records",
    type=click.IntRange(1),
    default=None,
    help="Stop after this many records.",
)
@click.option(
    "--timeout",
    type=float,
    default=5.0,
    show_default=True,
    help="Stop after this many seconds without new records.",
)
@click.option(
    "--group",
    help="Start where this consumer group committed, and commit as you go (every 5 s and at "
    "the end), as a simple consumer: the group must have no members.",
)
@click.option(
    "--consumer-property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="A consumer config, as kafka-console-consumer takes it: auto.offset.reset="
    "earliest|latest|none (what a position out of the log moves to; default earliest with "
    "--from-beginning, else latest).",
)
@click.option("--print-key", is_flag=True, help="Print KEY<TAB>VALUE lines (text output).")
@click.option(
    "--perf",
    is_flag=True,
    help="Print no records: a kafka-consumer-perf-test summary of the read (--json: figures).",
)
@bootstrap_option
@json_option
@friendly_errors
def consume_cmd(
    topic: str,
    from_beginning: bool,
    partition: int | None,
    offset_text: str | None,
    max_records: int | None,
    timeout: float,
    group: str | None,
    properties: tuple[str, ...],
    print_key: bool,
    perf: bool,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> None:
    """Print records (value per line, or JSON lines with partition, offset, key and value)."""
    reset = parse_reset(properties, from_beginning)
    offset = parse_offset(offset_text)
    if offset is not None and partition is None:
        raise ConfigError("--offset needs --partition (as in kafka-console-consumer)")
    if offset is not None and from_beginning:
        raise ConfigError("--from-beginning and --offset both say where to start: give one")
    if offset is not None and group is not None:
        raise ConfigError("--offset and --group both say where to start: give one")
    start: str | int = offset if offset is not None else "earliest" if from_beginning else "latest"

    def show(tp: TopicPartition, r: Record) -> None:
        if perf:
            return
        if as_json:
            click.echo(json.dumps(record_json(tp.partition, r)))
            return
        value = "null" if r.null_value else r.value.decode("utf-8", "replace")
        if print_key:
            key = "null" if r.key is None else r.key.decode("utf-8", "replace")
            value = f"{key}\t{value}"
        click.echo(value)

    started_ms = int(time.time() * 1000)
    stats = trio.run(
        _consume,
        resolve_bootstrap(bootstrap, cluster_dir),
        topic,
        partition,
        start,
        max_records,
        timeout,
        show,
        group,
        reset,
    )
    if perf:
        _print_perf(stats, started_ms, as_json)
    click.echo(f"consumed {stats['records']} records from {topic}", err=True)


async def _consume(
    bootstrap: str,
    topic: str,
    partition: int | None,
    start: str | int,
    max_records: int | None,
    timeout: float,
    show: Any,
    group: str | None = None,
    reset: str = "latest",
) -> Mapping[str, int]:
    count = size = 0
    async with open_client(bootstrap, client_id="minikafka-cli") as client:
        await client.refresh_metadata([topic])
        tps = client.partitions_of(topic)
        if not tps:
            raise ConfigError(f"unknown topic {topic!r}")
        if partition is not None:
            if partition >= len(tps):
                raise ConfigError(
                    f"--partition {partition}: topic {topic!r} has partitions 0-{len(tps) - 1}"
                )
            tps = [TopicPartition(topic, partition)]
        consumer = Consumer(
            client, max_wait_ms=200, auto_offset_reset=reset, on_reset=_report_reset
        )
        offsets = None if group is None else GroupOffsets(client, group)
        positions = await _start_positions(consumer, tps, start)
        if offsets is not None:  # committed offsets first; Kafka's auto.offset.reset for the rest
            positions.update(await offsets.committed(tps))
        last_record_ms = int(time.time() * 1000)
        idle_since = last_commit = trio.current_time()
        done = False
        while not done and trio.current_time() - idle_since < timeout:
            got = await consumer.fetch_once(positions)
            for tp, records in got.items():
                for r in records:
                    show(tp, r)
                    positions[tp] = r.offset + 1
                    count += 1
                    size += len(r.value) + (len(r.key) if r.key else 0)
                    if max_records is not None and count >= max_records:
                        done = True
                        break
                if not done:  # past every batch fetched: a compacted log's gaps too
                    positions[tp] = max(positions[tp], consumer.fetched_to.get(tp, 0))
                if records:
                    idle_since = trio.current_time()
                    last_record_ms = int(time.time() * 1000)
                if done:
                    break
            if offsets is not None and trio.current_time() - last_commit >= AUTO_COMMIT_S:
                await offsets.commit(positions)
                last_commit = trio.current_time()
        if offsets is not None:  # what was printed is consumed: the next run starts after it
            await offsets.commit(positions)
    # Kafka's perf test ends its clock at the last record, not after the idle timeout.
    return {"records": count, "bytes": size, "end_ms": last_record_ms}


async def _start_positions(
    consumer: Consumer, tps: list[TopicPartition], start: str | int
) -> dict[TopicPartition, int]:
    if isinstance(start, str):
        return await consumer.list_offsets(tps, earliest=start == "earliest")
    [tp] = tps
    low = (await consumer.list_offsets(tps, earliest=True))[tp]
    high = (await consumer.list_offsets(tps, earliest=False))[tp]
    if not low <= start <= high:
        raise ConfigError(
            f"--offset {start}: partition {tp.partition} holds offsets {low} to {high} "
            "(log start offset to high watermark)"
        )
    return {tp: start}


def _print_perf(stats: Mapping[str, int], started_ms: int, as_json: bool) -> None:
    from minikafka.tools.perf_format import consumer_perf_lines

    end_ms = max(stats["end_ms"], started_ms)
    if as_json:
        seconds = max(end_ms - started_ms, 1) / 1000
        click.echo(
            json.dumps(
                {
                    "records": stats["records"],
                    "bytes": stats["bytes"],
                    "elapsed_s": round(seconds, 3),
                    "records_per_s": round(stats["records"] / seconds, 1),
                    "mb_per_s": round(stats["bytes"] / seconds / 1e6, 2),
                }
            )
        )
        return
    header, line = consumer_perf_lines(
        start_ms=started_ms, end_ms=end_ms, records=stats["records"], bytes_read=stats["bytes"]
    )
    click.echo(header)
    click.echo(line)
