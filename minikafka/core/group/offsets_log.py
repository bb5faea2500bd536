"""What a group coordinator writes to `__consumer_offsets`, and reads back (pure).

The records are Kafka's own (GroupCoordinatorRecordSerde; the schemas OffsetCommitKey and
OffsetCommitValue in group-coordinator/src/main/resources/common/message): the key is
version 1, group id, topic, partition; the value is version 3, offset, leader epoch, metadata,
commit timestamp. So the partition's contents read the same as a Kafka broker's.

A group's offsets live in partition `abs(groupId.hashCode) % offsets.topic.num.partitions`
(GroupMetadataManager.partitionFor, with Java's String.hashCode), so the group's coordinator is
that partition's leader, and moves with it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from minikafka.core.group.messages import OffsetAndMetadata, TopicPartitionKey
from minikafka.core.partitioner import java_string_hash

OFFSETS_TOPIC = "__consumer_offsets"  # Topic.GROUP_METADATA_TOPIC_NAME

OFFSET_COMMIT_KEY_VERSION = 1  # 0 and 1 are offset commits; 2 is group metadata (not written)
OFFSET_COMMIT_VALUE_VERSION = 3  # KIP-320: carries the leader epoch
NO_LEADER_EPOCH = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqi")  # version, offset, leader epoch
_I64 = struct.Struct(">q")


def partition_for(group_id: str, num_partitions: int) -> int:
    """GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % partitions (Utils.abs
    maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(group_id)
        + _string(topic)
        + _I32.pack(partition)
    )


def offset_commit_value(o: OffsetAndMetadata) -> bytes:
    return (
        _VALUE_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, o.offset, NO_LEADER_EPOCH)
        + _string(o.metadata)
        + _I64.pack(o.commit_timestamp_ms)
    )


def commit_records(
    group_id: str, offsets: dict[TopicPartitionKey, OffsetAndMetadata]
) -> list[tuple[bytes, bytes]]:
    """The (key, value) records of one OffsetCommit, as Kafka's storeOffsets writes them."""
    return [
        (offset_commit_key(group_id, topic, partition), offset_commit_value(o))
        for (topic, partition), o in offsets.items()
    ]


class _Reader:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.pos = 0

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        out = fmt.unpack_from(self.raw, self.pos)
        self.pos += fmt.size
        return out

    def string(self) -> str:
        (n,) = self.unpack(_I16)
        if n < 0 or self.pos + n > len(self.raw):
            raise ValueError("bad string length")
        s = self.raw[self.pos : self.pos + n].decode()
        self.pos += n
        return s


def read_commit(
    key: bytes, value: bytes | None
) -> tuple[str, TopicPartitionKey, OffsetAndMetadata | None] | None:
    """(group, (topic, partition), offset) of an offset-commit record, offset None for a
    tombstone; None for any other record (group metadata, a version we do not write).
    Raises ValueError for bytes that do not parse."""
    try:
        k = _Reader(key)
        (version,) = k.unpack(_I16)
        if version not in (0, 1):
            return None
        group, topic = k.string(), k.string()
        (partition,) = k.unpack(_I32)
        if value is None:
            return group, (topic, partition), None
        v = _Reader(value)
        (vversion,) = v.unpack(_I16)
        if vversion != OFFSET_COMMIT_VALUE_VERSION:
            return None
        (offset,) = v.unpack(_I64)
        v.unpack(_I32)  # leader epoch
        metadata = v.string()
        (ts,) = v.unpack(_I64)
    except (struct.error, ValueError) as exc:  # ValueError: a bad length, bad UTF-8
        raise ValueError(f"unreadable __consumer_offsets record: {exc}") from exc
    return (
        group,
        (topic, partition),
        OffsetAndMetadata(offset=offset, metadata=metadata, commit_timestamp_ms=ts),
    )


def replay(
    records: Iterable[tuple[bytes | None, bytes | None]],
) -> tuple[dict[str, dict[TopicPartitionKey, OffsetAndMetadata]], int]:
    """Every group's offsets after these records, in log order (the last commit of a partition
    wins; a tombstone removes it): GroupMetadataManager.doLoadGroupsAndOffsets. Also the count
    of records that did not parse, which are skipped: one bad record must not cost a group its
    other offsets (only the coordinator writes here; the Kafka listener refuses clients' writes
    to internal topics)."""
    groups: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
    unreadable = 0
    for key, value in records:
        if key is None:
            continue
        try:
            read = read_commit(key, value)
        except ValueError:
            unreadable += 1
            continue
        if read is None:
            continue
        group, tp, offset = read
        if offset is None:
            groups.get(group, {}).pop(tp, None)
        else:
            groups.setdefault(group, {})[tp] = offset
    return groups, unreadable
