"""`minikafka delete-records`: move partitions' log start offsets (kafka-delete-records.sh's job,
KIP-107), from Kafka's offset JSON file:

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 3}]}

An offset of -1 means the high watermark. Each partition goes to its leader (client/admin.py
`Admin.delete_records`), which answers once every live replica's log start offset reached it,
with the low watermark: the table (or `--json`) shows it per partition, and the exit code is 1
if any partition answered an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
from minikafka.common import TopicPartition
from minikafka.errors import ConfigError, ErrorCode, error_name

FORM = (
    'expected {"version": 1, "partitions": [{"topic": T, "partition": P, "offset": N}, ...]} '
    "with N >= 0, or -1 for the high watermark"
)


def parse_offset_json(text: str, source: str = "--offset-json-file") -> dict[TopicPartition, int]:
    """Kafka's DeleteRecordsCommand file -> {partition: offset}; ConfigError naming the form."""
    try:
        doc = json.loads(text)
        items = doc["partitions"]
        if not isinstance(items, list) or not items:
            raise TypeError
        out: dict[TopicPartition, int] = {}
        for item in items:
            tp = TopicPartition(str(item["topic"]), int(item["partition"]))
            offset = item["offset"]
            if not isinstance(offset, int) or offset < -1 or tp.partition < 0:
                raise TypeError
            if tp in out:  # Kafka: "Offset json file contains duplicate topic partitions"
                raise ConfigError(f"{source}: {tp.topic}-{tp.partition} is given twice")
            out[tp] = offset
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"{source}: {FORM}") from None
    return out


@click.command("delete-records")
@click.option(
    "--offset-json-file",
    "offset_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    required=True,
    help="Kafka's offset JSON: the partitions and the offset each starts at after the call.",
)
@click.option(
    "--timeout-ms",
    type=click.IntRange(1),
    default=30_000,
    show_default=True,
    help="How long the leaders wait for every replica's log start to follow.",
)
@bootstrap_option
@json_option
@friendly_errors
def delete_records_cmd(
    offset_file: Path, timeout_ms: int, bootstrap: str | None, cluster_dir: Path, as_json: bool
) -> None:
    """Delete the records before the given offsets (the partitions' log start offsets move)."""
    offsets = parse_offset_json(offset_file.read_text(encoding="utf-8"))
    rows = trio.run(_delete, resolve_bootstrap(bootstrap, cluster_dir), offsets, timeout_ms)
    emit(rows, ["topic", "partition", "low_watermark", "error"], as_json)
    if any(r["error"] for r in rows):
        raise SystemExit(1)


async def _delete(
    bootstrap: str, offsets: dict[TopicPartition, int], timeout_ms: int
) -> list[dict[str, Any]]:
    async with open_client(bootstrap, client_id="minikafka-delete-records") as client:
        answers = await Admin(client).delete_records(offsets, timeout_ms=timeout_ms)
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "low_watermark": r.low_watermark,
            "error": "" if r.error_code == ErrorCode.NONE else error_name(r.error_code),
        }
        for tp, r in sorted(answers.items())
    ]
