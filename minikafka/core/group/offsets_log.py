"""What a group coordinator writes to `__consumer_offsets`, and reads back (pure): the bytes.

The records are Kafka's own (GroupCoordinatorRecordSerde; the schemas in
group-coordinator/src/main/resources/common/message), so the partition's contents read the same
as a Kafka broker's. The key's version says what the record is:
- 0 and 1, OffsetCommitKey (group, topic, partition): its value, OffsetCommitValue, is written
  at version 3 (offset, leader epoch, metadata, commit timestamp); 0-2 are read too.
- 2, GroupMetadataKey (group): its value, GroupMetadataValue, is written at version 3
  (protocol type, generation, protocol, leader, current state timestamp, members with their
  subscription and assignment); 0-2 are read too.
A null value is a tombstone. Version 4 of either value (KIP-915, flexible) is not read: only
minikafka's coordinators write this partition, and they write 3. Anything else is refused with a
ValueError, which the loader (core/group/load.py) counts and skips.

A group's records live in partition `abs(groupId.hashCode) % offsets.topic.num.partitions`
(GroupMetadataManager.partitionFor, with Java's String.hashCode), so the group's coordinator is
that partition's leader, and moves with it.
"""

from __future__ import annotations

import struct

from minikafka.core.group.messages import (
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    TopicPartitionKey,
)
from minikafka.core.partitioner import java_string_hash

OFFSETS_TOPIC = "__consumer_offsets"  # Topic.GROUP_METADATA_TOPIC_NAME

OFFSET_COMMIT_KEY_VERSION = 1  # 0 and 1 are offset commits
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3  # KIP-320: carries the leader epoch
GROUP_METADATA_VALUE_VERSION = 3  # KIP-345: members carry a group instance id
NO_LEADER_EPOCH = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def partition_for(group_id: str, num_partitions: int) -> int:
    """GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % partitions (Utils.abs
    maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ---------------------------------------------------------------------------- writing


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(group_id)
        + _string(topic)
        + _I32.pack(partition)
    )


def offset_commit_value(o: OffsetAndMetadata) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _I64.pack(o.offset)
        + _I32.pack(NO_LEADER_EPOCH)
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


def group_metadata_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


def group_metadata_value(g: GroupRecord) -> bytes:
    """GroupMetadataValue v3 (GroupMetadataManager.groupMetadataValue)."""
    out = [
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(g.protocol_type),
        _I32.pack(g.generation_id),
        _string(g.protocol),
        _string(g.leader),
        _I64.pack(g.state_timestamp_ms),
        _I32.pack(len(g.members)),
    ]
    for m in g.members:
        out += [
            _string(m.member_id),
            _string(None),  # group instance id: no static members (KIP-345 not served)
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(out)


# ---------------------------------------------------------------------------- reading


class _Reader:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.pos = 0

    def int(self, fmt: struct.Struct) -> int:
        (out,) = fmt.unpack_from(self.raw, self.pos)
        self.pos += fmt.size
        return int(out)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.raw):
            raise ValueError(f"a field of {n} bytes runs past the record")
        out = self.raw[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ValueError("a null string where Kafka's schema has none")
        return s

    def nullable_string(self) -> str | None:
        n = self.int(_I16)
        return None if n == -1 else self._take(n).decode()

    def bytes(self) -> bytes:
        return self._take(self.int(_I32))


CommitRead = tuple[str, TopicPartitionKey, OffsetAndMetadata | None]
GroupRead = tuple[str, GroupRecord | None]


def read_record(key: bytes, value: bytes | None) -> CommitRead | GroupRead:
    """One record of the partition: (group, (topic, partition), offset or None for a tombstone)
    for an offset commit, (group, GroupRecord or None for a tombstone) for group metadata.
    ValueError, naming why, for anything else: bytes that do not parse, a version this does
    not read, a group whose members have no protocol or leader."""
    try:
        k = _Reader(key)
        version = k.int(_I16)
        if version in (0, 1):
            group, topic = k.string(), k.string()
            partition = k.int(_I32)
            offset = None if value is None else _offset_value(value)
            return group, (topic, partition), offset
        if version == GROUP_METADATA_KEY_VERSION:
            group = k.string()
            return group, None if value is None else _group_value(group, value)
    except (struct.error, ValueError) as exc:  # ValueError: a bad length, bad UTF-8
        raise ValueError(f"unreadable __consumer_offsets record: {exc}") from exc
    raise ValueError(f"unreadable __consumer_offsets record: unknown key version {version}")


def read_commit(key: bytes, value: bytes | None) -> CommitRead | None:
    """read_record for an offset commit; None for a group metadata record."""
    read = read_record(key, value)
    return read if len(read) == 3 else None  # type: ignore[return-value]


def _offset_value(value: bytes) -> OffsetAndMetadata:
    """OffsetCommitValue v0-3 (GroupMetadataManager.readOffsetMessageValue)."""
    v = _Reader(value)
    version = v.int(_I16)
    if not 0 <= version <= 3:
        raise ValueError(f"OffsetCommitValue version {version}")
    offset = v.int(_I64)
    if version >= 3:
        v.int(_I32)  # leader epoch: fetches answer -1 (kafka/groups.py)
    metadata = v.string()
    ts = v.int(_I64)
    if version == 1:
        v.int(_I64)  # expire timestamp: pre-KIP-211 per-commit retention, not honoured
    return OffsetAndMetadata(offset=offset, metadata=metadata, commit_timestamp_ms=ts)


def _group_value(group_id: str, value: bytes) -> GroupRecord:
    """GroupMetadataValue v0-3 (GroupMetadataManager.readGroupMessageValue): v0 has no
    rebalance timeout (the session timeout stands in, as in Kafka), v2 adds the current state
    timestamp, v3 the members' group instance id (ignored: no static members)."""
    v = _Reader(value)
    version = v.int(_I16)
    if not 0 <= version <= 3:
        raise ValueError(f"GroupMetadataValue version {version}")
    protocol_type = v.string()
    generation = v.int(_I32)
    protocol, leader = v.nullable_string(), v.nullable_string()
    state_ts = v.int(_I64) if version >= 2 else -1
    count = v.int(_I32)
    if count < 0:
        raise ValueError(f"{count} members")
    members = []
    for _ in range(count):
        member_id = v.string()
        if version >= 3:
            v.nullable_string()
        client_id, client_host = v.string(), v.string()
        rebalance = v.int(_I32) if version >= 1 else None
        session = v.int(_I32)
        members.append(
            MemberRecord(
                member_id=member_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=session if rebalance is None else rebalance,
                session_timeout_ms=session,
                subscription=v.bytes(),
                assignment=v.bytes(),
            )
        )
    ids = [m.member_id for m in members]
    if members and (protocol is None or leader not in ids or len(set(ids)) != len(ids)):
        raise ValueError(f"group {group_id!r} has members but no protocol, leader or unique ids")
    return GroupRecord(
        group_id=group_id,
        protocol_type=protocol_type,
        generation_id=generation,
        protocol=protocol,
        leader=leader,
        state_timestamp_ms=state_ts,
        members=tuple(members),
    )

