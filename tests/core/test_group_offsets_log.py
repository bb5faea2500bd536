"""__consumer_offsets records (core/group/offsets_log.py, load.py): Kafka's partitioning of
group ids, its offset-commit and group-metadata keys and values, written and replayed; what
cannot be read is reported and skipped."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from minikafka.core.group import GroupRecord, MemberRecord, OffsetAndMetadata
from minikafka.core.group.load import replay
from minikafka.core.group.offsets_log import (
    commit_records,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_commit,
    read_record,
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


def numbered(records):
    return [(i, k, v) for i, (k, v) in enumerate(records)]


def test_replay_last_commit_wins_and_tombstones_remove():
    a1 = OffsetAndMetadata(offset=1, metadata="", commit_timestamp_ms=1)
    a2 = OffsetAndMetadata(offset=5, metadata="x", commit_timestamp_ms=2)
    b1 = OffsetAndMetadata(offset=9, metadata="", commit_timestamp_ms=3)
    records = [
        *commit_records("g", {("t", 0): a1, ("t", 1): a1}),
        *commit_records("h", {("u", 0): b1}),
        *commit_records("g", {("t", 0): a2}),
        (offset_commit_key("g", "t", 1), None),
        (None, b"no key: skipped"),
        (offset_commit_key("g", "t", 2), b"\x00\x03garbage"),  # reported, skipped
    ]
    loaded = replay(numbered(records))
    assert loaded.offsets == {"g": {("t", 0): a2}, "h": {("u", 0): b1}}
    assert [offset for offset, _ in loaded.unreadable] == [6]
    assert loaded.group_ids == {"g", "h"}


RECORD = GroupRecord(
    group_id="g",
    protocol_type="consumer",
    generation_id=4,
    protocol="range",
    leader="m1",
    state_timestamp_ms=1234,
    members=(
        MemberRecord(
            member_id="m1",
            client_id="c1",
            client_host="/10.0.0.1",
            rebalance_timeout_ms=30_000,
            session_timeout_ms=10_000,
            subscription=b"sub-1",
            assignment=b"as-1",
        ),
        MemberRecord(
            member_id="m2",
            client_id="c2",
            client_host="/10.0.0.2",
            rebalance_timeout_ms=30_000,
            session_timeout_ms=10_000,
            subscription=b"sub-2",
            assignment=b"",
        ),
    ),
)


def s16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s)) + s.encode()


def test_group_metadata_is_kafkas_bytes_and_reads_back():
    assert group_metadata_key("g") == struct.pack(">hh1s", 2, 1, b"g")
    value = group_metadata_value(RECORD)
    head = struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m1")
    head += struct.pack(">qi", 1234, 2)
    m1 = s16("m1") + s16(None) + s16("c1") + s16("/10.0.0.1") + struct.pack(">ii", 30_000, 10_000)
    m1 += struct.pack(">i", 5) + b"sub-1" + struct.pack(">i", 4) + b"as-1"
    assert value.startswith(head + m1)
    assert read_record(group_metadata_key("g"), value) == ("g", RECORD)
    assert read_record(group_metadata_key("g"), None) == ("g", None)  # a tombstone


def test_group_metadata_value_versions_0_to_2_read():
    """v0: no rebalance timeout (the session timeout stands in), no state timestamp; v1 adds
    the rebalance timeout; v2 the state timestamp (GroupMetadataValue.json)."""
    member = s16("m1") + s16("c1") + s16("h")
    tail = struct.pack(">i", 2) + b"su" + struct.pack(">i", 1) + b"a"
    v0 = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m1")
    v0 += struct.pack(">i", 1) + member + struct.pack(">i", 7000) + tail
    _, rec = read_record(group_metadata_key("g"), v0)
    assert rec.state_timestamp_ms == -1
    assert (rec.members[0].rebalance_timeout_ms, rec.members[0].session_timeout_ms) == (7000, 7000)
    v2 = struct.pack(">h", 2) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m1")
    v2 += struct.pack(">qi", 99, 1) + member + struct.pack(">ii", 9000, 7000) + tail
    _, rec = read_record(group_metadata_key("g"), v2)
    assert rec.state_timestamp_ms == 99 and rec.members[0].rebalance_timeout_ms == 9000
    assert rec.members[0].subscription == b"su" and rec.members[0].assignment == b"a"


def test_offset_commit_value_versions_0_to_2_read():
    v1 = struct.pack(">hq", 1, 42) + s16("m") + struct.pack(">qq", 7, 99)
    assert read_commit(offset_commit_key("g", "t", 0), v1)[2] == OffsetAndMetadata(
        offset=42, metadata="m", commit_timestamp_ms=7
    )


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        (b"\x00", b"\x00", "unpack"),  # one junk byte
        (b"", b"", "unpack"),
        (struct.pack(">h", 7) + s16("g"), b"x", "unknown key version 7"),
        (struct.pack(">h", -1), b"x", "unknown key version -1"),
        (offset_commit_key("g", "t", 0)[:-2], None, "unpack"),  # truncated key
        (offset_commit_key("g", "t", 0), struct.pack(">hq", 4, 1), "OffsetCommitValue version 4"),
        (offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(offset=1))[:-3], ""),
        (group_metadata_key("g"), group_metadata_value(RECORD)[:-1], "unpack"),
        (group_metadata_key("g"), group_metadata_value(RECORD)[:-8], "past the record"),
        (group_metadata_key("g"), struct.pack(">h", 4), "GroupMetadataValue version 4"),
        (group_metadata_key("g"), struct.pack(">h", 3) + b"\xff\xfe", ""),
        (struct.pack(">h", 2) + b"\x00\x02\xff\xfe", None, "utf-8"),  # bad UTF-8 group id
    ],
)
def test_what_cannot_be_read_is_a_value_error(key, value, why):
    with pytest.raises(ValueError, match=f"unreadable.*{why}"):
        read_record(key, value)


def test_members_without_a_leader_or_protocol_cannot_be_used():
    for change in ({"leader": "nobody"}, {"protocol": None}, {"leader": None}):
        value = group_metadata_value(dataclasses.replace(RECORD, **change))
        with pytest.raises(ValueError, match="no protocol, leader"):
            read_record(group_metadata_key("g"), value)


def test_replay_skips_and_reports_what_it_cannot_read_and_loads_the_rest():
    good = OffsetAndMetadata(offset=5, metadata="", commit_timestamp_ms=1)
    records = [
        (0, b"\x00", b"\x00"),
        *[(i + 1, k, v) for i, (k, v) in enumerate(commit_records("g", {("t", 0): good}))],
        (2, struct.pack(">h", 9) + s16("g"), b""),  # a key version this broker does not read
        (3, group_metadata_key("g"), group_metadata_value(RECORD)[:10]),  # truncated
        (4, group_metadata_key("gone"), None),  # a tombstone for a group never seen
        (5, group_metadata_key("h"), group_metadata_value(RECORD)),
        (6, group_metadata_key("dead"), group_metadata_value(RECORD)),
        (7, group_metadata_key("dead"), None),  # removed again
    ]
    loaded = replay(records)
    assert [o for o, _ in loaded.unreadable] == [0, 2, 3]
    assert loaded.offsets == {"g": {("t", 0): good}}
    assert loaded.groups == {"h": dataclasses.replace(RECORD, group_id="h")}
    assert loaded.group_ids == {"g", "h"}


def test_unreadable_record_is_a_value_error():
    with pytest.raises(ValueError, match="unreadable"):
        read_commit(struct.pack(">hh", 1, 40) + b"short", b"")
    with pytest.raises(ValueError, match="unreadable"):
        read_commit(struct.pack(">hh1s", 2, 1, b"g") + b"", b"group metadata: junk")
    with pytest.raises(ValueError, match="unreadable"):
        read_commit(offset_commit_key("g", "t", 0), struct.pack(">h", 3) + b"\x00")
