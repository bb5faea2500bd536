"""The pure parts of `produce` and `consume`: keyed lines as Kafka's console producer
reads them, the partition each record goes to, lossless JSON for binary records, --offset, and
Kafka's `--bootstrap-server` accepted wherever `--bootstrap` is."""

from __future__ import annotations

import base64

import click
import pytest

from minikafka.cli.consume import parse_offset, parse_reset, record_json
from minikafka.cli.main import main
from minikafka.cli.produce import (
    assign_partitions,
    batch_chunks,
    parse_properties,
    split_lines,
)
from minikafka.core.partitioner import partition_for_key
from minikafka.core.records import Record
from minikafka.errors import ConfigError


def test_properties_default_to_kafkas_and_refuse_unknown_names() -> None:
    assert parse_properties([]) == {"parse.key": "false", "key.separator": "\t", "null.marker": ""}
    assert parse_properties(["parse.key=true", "key.separator=:", "null.marker=NULL"]) == {
        "parse.key": "true",
        "key.separator": ":",
        "null.marker": "NULL",
    }
    with pytest.raises(ConfigError, match="expected NAME=VALUE with NAME one of parse.key"):
        parse_properties(["ignore.error=true"])
    with pytest.raises(ConfigError, match="expected true or false"):
        parse_properties(["parse.key=yes"])
    with pytest.raises(ConfigError, match="must not be empty"):
        parse_properties(["key.separator="])


def test_lines_split_at_the_first_separator_only() -> None:
    lines = [b"user1:a:b", b":empty key", b"k:"]
    assert split_lines(lines, separator=b":", key=None) == [
        (b"user1", b"a:b"),
        (b"", b"empty key"),
        (b"k", b""),
    ]
    assert split_lines([b"v1", b"v2"], separator=None, key=b"K") == [(b"K", b"v1"), (b"K", b"v2")]
    assert split_lines([b"v"], separator=None, key=None) == [(None, b"v")]


def test_a_value_equal_to_the_null_marker_is_a_null_value() -> None:
    """KIP-810's null.marker: a tombstone from a line (`k:NULL`), any other value as it is."""
    lines = [b"k:NULL", b"k:NULLS", b"k:"]
    got = split_lines(lines, separator=b":", key=None, null_marker=b"NULL")
    assert got == [(b"k", None), (b"k", b"NULLS"), (b"k", b"")]


def test_a_line_without_the_separator_names_its_number() -> None:
    with pytest.raises(ConfigError, match=r"line 2 has no key separator ':'.*nothing was produced"):
        split_lines([b"a:1", b"no separator", b"c:3"], separator=b":", key=None)


def test_keyed_records_go_to_kafkas_partition_unkeyed_round_robin() -> None:
    records = [(b"foobar", b"1"), (None, b"2"), (b"foobar", b"3"), (None, b"4"), (None, b"5")]
    assert assign_partitions(records, 10, None) == [6, 0, 6, 1, 2]  # murmur2("foobar") % 10 = 6
    assert assign_partitions(records, 10, 3) == [3] * 5
    keys = [f"user-{i}".encode() for i in range(50)]
    spread = assign_partitions([(k, b"") for k in keys], 4, None)
    assert spread == [partition_for_key(k, 4) for k in keys] and set(spread) == {0, 1, 2, 3}


def test_record_json_is_lossless_for_binary_and_plain_for_text() -> None:
    text = Record(offset=7, timestamp_ms=1, key=b"k", value="h\u00e9".encode())
    assert record_json(2, text) == {
        "partition": 2, "offset": 7, "timestamp_ms": 1, "key": "k", "value": "h\u00e9",
    }  # fmt: skip
    raw = bytes(range(250, 256)) + b"\x00"
    binary = Record(offset=8, timestamp_ms=1, key=None, value=raw, headers=(("h", b"x"),))
    doc = record_json(0, binary)
    assert doc["key"] is None and doc["value_encoding"] == "base64"
    assert base64.b64decode(doc["value"]) == raw
    assert doc["headers"] == {"h": "x"}
    tombstone = Record(offset=9, timestamp_ms=1, key=b"k", value=b"", null_value=True)
    assert record_json(0, tombstone)["value"] is None


def test_offset_takes_kafkas_forms() -> None:
    assert [parse_offset(t) for t in (None, "earliest", "latest", "42")] == [
        None, "earliest", "latest", 42,
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="expected earliest, latest or a non-negative offset"):
        parse_offset("-1")


def _commands(group: click.Group, prefix: str = ""):  # noqa: ANN202 - generator
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the lazy ones too (cli/main.py LazyGroup)
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_stdin_lines_are_cut_into_batches_of_batch_bytes() -> None:
    """Every line used to go out in one batch per partition, whatever --batch-bytes said: 30,000
    lines were one 1.1 MB batch, refused as MESSAGE_TOO_LARGE."""
    records = [(1, None, b"x" * 84)] * 10  # 100 bytes each with the overhead
    assert [len(c) for c in batch_chunks(records, 250)] == [2, 2, 2, 2, 2]
    assert [len(c) for c in batch_chunks(records, 1000)] == [10]
    assert [len(c) for c in batch_chunks([(1, b"k", b"v" * 500)], 100)] == [1]  # alone
    assert [r for c in batch_chunks(records, 250) for r in c] == records  # in order


def test_auto_offset_reset_defaults_as_the_console_consumer_sets_it() -> None:
    assert parse_reset((), from_beginning=False) == "latest"
    assert parse_reset((), from_beginning=True) == "earliest"
    assert parse_reset(("auto.offset.reset=NONE",), from_beginning=True) == "none"
    for bad in ("auto.offset.reset=smallest", "group.id=x", "auto.offset.reset"):
        with pytest.raises(ConfigError, match="expected auto.offset.reset=earliest|latest|none"):
            parse_reset((bad,), from_beginning=False)


def test_every_command_with_a_bootstrap_takes_kafkas_spelling_too() -> None:
    with_bootstrap = {
        name: param.opts
        for name, cmd in _commands(main)
        for param in cmd.params
        if param.name == "bootstrap"
    }
    assert {"produce", "consume", "topics describe", "configs"} <= set(with_bootstrap)
    assert all(
        set(opts) == {"--bootstrap", "--bootstrap-server"} for opts in with_bootstrap.values()
    )


def test_producing_to_an_internal_topic_is_refused_before_connecting() -> None:
    """One line naming the topic, exit 2, before any connection (the broker refuses it too:
    INVALID_TOPIC_EXCEPTION), instead of 'unknown topic: create it first', which cannot be."""
    from click.testing import CliRunner

    from tests.cli.reassign_support import refused

    result = CliRunner().invoke(
        main, ["produce", "__consumer_offsets", "--bootstrap-server", "127.0.0.1:1"], input="x\n"
    )
    refused(result, "__consumer_offsets is an internal topic")
