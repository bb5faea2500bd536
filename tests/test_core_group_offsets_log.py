"""__consumer_offsets records (core/group/offsets_log.py): Kafka's partitioning of group ids and
its offset-commit key and value bytes, written and replayed."""

from __future__ import annotations

import struct

import pytest

from minikafka.core.group import OffsetAndMetadata
from minikafka.core.group.offsets_log import (
    commit_records,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_commit,
    replay,
)


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),  # Java: "hello".hashCode()
        ("polygenelubricants", -(1 << 31)),  # Java's famous Integer.MIN_VALUE string
        ("é", 233),  # one UTF-16 unit
        ("😀", 1772899),  # a surrogate pair: 0xD83D * 31 + 0xDE00
    ],
)
def test_java_string_hash(s: str, h: int):
    assert java_string_hash(s) == h


def test_partition_for_matches_kafka():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    neg = next(g for g in (f"consumer-group-{i}" for i in range(1000)) if java_string_hash(g) < 0)
    assert partition_for(neg, 7) == abs(java_string_hash(neg)) % 7


def test_key_and_value_are_kafkas_bytes():
    key = offset_commit_key("g", "t", 3)
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    value = offset_commit_value(OffsetAndMetadata(offset=42, metadata="m", commit_timestamp_ms=7))
    assert value == struct.pack(">hqih1sq", 3, 42, -1, 1, b"m", 7)


def test_replay_last_commit_wins_and_tombstones_remove():
    a1 = OffsetAndMetadata(offset=1, metadata="", commit_timestamp_ms=1)
    a2 = OffsetAndMetadata(offset=5, metadata="x", commit_timestamp_ms=2)
    b1 = OffsetAndMetadata(offset=9, metadata="", commit_timestamp_ms=3)
    records = [
        *commit_records("g", {("t", 0): a1, ("t", 1): a1}),
        *commit_records("h", {("u", 0): b1}),
        (struct.pack(">hh1s", 2, 1, b"g"), b"group metadata: skipped"),
        *commit_records("g", {("t", 0): a2}),
        (offset_commit_key("g", "t", 1), None),
        (None, b"no key: skipped"),
        (offset_commit_key("g", "t", 2), b"\x00\x03garbage"),  # counted, skipped
    ]
    assert replay(records) == ({"g": {("t", 0): a2}, "h": {("u", 0): b1}}, 1)


def test_unreadable_record_is_a_value_error():
    with pytest.raises(ValueError, match="unreadable"):
        read_commit(struct.pack(">hh", 1, 40) + b"short", b"")
    with pytest.raises(ValueError, match="unreadable"):
        read_commit(offset_commit_key("g", "t", 0), struct.pack(">h", 3) + b"\x00")
