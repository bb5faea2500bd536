"""Kafka's hash-based placements: Java's `String.hashCode` (which Kafka uses to place a group
on an `__consumer_offsets` partition and a partition on a replica fetcher), and the default
partitioner's murmur2 for keyed records.

`partition_for_key(key, n)` is `Utils.toPositive(Utils.murmur2(key)) % n`, as Kafka's
`BuiltInPartitioner.partitionForKey` (and librdkafka's `murmur2_random`) compute it, so a key
lands on the same partition whether a minikafka tool or a Kafka client produced it. Records
without a key are spread by the caller (Kafka's producers use a sticky partition per batch).
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode as a signed 32-bit int (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: MurmurHash2, 32 bits, seed 0x9747b28c, as a signed int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[whole:]
    if tail:  # the Java switch falls through from the highest remaining byte down
        for shift, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * shift)
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's partition for a keyed record: `toPositive(murmur2(key)) % num_partitions`."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
