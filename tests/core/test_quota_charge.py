"""Kafka's leader charge (core/quota/charge.py): FetchResponse.sizeOf(12, ...) byte for byte.

The expected sizes come from an independent encoder below that writes a v12 FetchResponse field
by field (FetchResponse.json; compact arrays and strings as unsigned varints of N + 1, null as 0,
an empty tagged-field section as one 0 byte) and measures the bytes; the module under test sums
constants instead. Hand arithmetic for the article's case is in the comments.
"""

from __future__ import annotations

import struct

import pytest

from minikafka.core.dynamic_config import BrokerThrottleConfig, ThrottledReplicas
from minikafka.core.quota.charge import (
    PARTITION_OVERHEAD,
    RESPONSE_OVERHEAD,
    ChargedPartition,
    kafka_fetch_response_size,
    kafka_fetch_response_size_of_runs,
    varint_size,
)
from minikafka.core.quota.classes import (
    ThrottleClass,
    leader_charge_class,
    leader_throttle_class,
)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_v12(parts: list[ChargedPartition]) -> bytes:
    """A FetchResponse v12 body with these partitions (topics grouped as they come)."""
    topics: list[tuple[str, list[ChargedPartition]]] = []
    for p in parts:
        if topics and topics[-1][0] == p.topic:
            topics[-1][1].append(p)
        else:
            topics.append((p.topic, [p]))
    body = struct.pack(">ihi", 0, 0, 0)  # ThrottleTimeMs, ErrorCode, SessionId
    body += uvarint(len(topics) + 1)
    for index, (name, partitions) in enumerate(topics):
        raw = name.encode()
        body += uvarint(len(raw) + 1) + raw + uvarint(len(partitions) + 1)
        for k, p in enumerate(partitions):
            body += struct.pack(">ihqqq", index * 100 + k, 0, 10**6, 10**6, 0)
            body += uvarint(0)  # AbortedTransactions: null
            body += struct.pack(">i", -1)  # PreferredReadReplica
            body += uvarint(p.records_bytes + 1) + b"r" * p.records_bytes
            if p.diverging:  # one tagged field: tag 0, size, EpochEndOffset {Epoch, EndOffset}
                field = struct.pack(">iq", 3, 42) + uvarint(0)
                body += uvarint(1) + uvarint(0) + uvarint(len(field)) + field
            else:
                body += uvarint(0)
        body += uvarint(0)  # topic's tagged fields
    body += uvarint(0)  # response's tagged fields
    return body


def sizeof(parts: list[ChargedPartition]) -> int:
    """FetchResponse.sizeOf: 4 + the message's size."""
    return 4 + len(encode_v12(parts))


@pytest.mark.parametrize(
    "parts",
    [
        [],
        [ChargedPartition(topic="t")],
        [ChargedPartition(topic="t", records_bytes=126)],  # varint(127) is one byte
        [ChargedPartition(topic="t", records_bytes=127)],  # varint(128) is two
        [ChargedPartition(topic="t", records_bytes=1 << 20)],
        [ChargedPartition(topic="events", diverging=True)],
        [ChargedPartition(topic="a"), ChargedPartition(topic="b"), ChargedPartition(topic="a")],
        [ChargedPartition(topic="ünïcode", records_bytes=5)],  # length in UTF-8 bytes
        [ChargedPartition(topic="t", records_bytes=k * 1000) for k in range(130)],
    ],
    ids=lambda parts: f"{len(parts)}-partitions",
)
def test_size_matches_an_encoded_v12_response(parts):
    assert kafka_fetch_response_size(parts) == sizeof(parts)


def test_runs_of_alike_partitions_cost_what_the_partitions_cost():
    """A run (topic, bytes, diverging, count) is `count` consecutive alike partitions; runs of
    one topic continue its entry, an empty run is no partition."""
    runs = [("t", 4000, False, 50), ("t", 0, False, 0), ("t", 16, True, 3), ("u", 7, False, 2)]
    parts = [
        ChargedPartition(topic=t, records_bytes=b, diverging=d)
        for t, b, d, n in runs
        for _ in range(n)
    ]
    assert kafka_fetch_response_size_of_runs(runs) == sizeof(parts)
    assert kafka_fetch_response_size_of_runs([]) == 16


def test_an_empty_partition_costs_37_bytes_and_the_empty_response_16():
    # 4 (sizeOf) + 4 + 2 + 4 (throttle, error, session) + 1 (no topics: varint 1) + 1 (tags)
    assert kafka_fetch_response_size([]) == RESPONSE_OVERHEAD + 1 == 16
    one = kafka_fetch_response_size([ChargedPartition(topic="t")])
    two = kafka_fetch_response_size([ChargedPartition(topic="t")] * 2)
    assert two - one == PARTITION_OVERHEAD + 1 == 37


def test_the_articles_18_kb_fetch_without_data():
    """500 empty throttled partitions of topic "t": 15 + varint(2) + [varint(2) + 1 + varint(501)
    + 500 * 37 + 1] = 15 + 1 + 1 + 1 + 2 + 18 500 + 1 = 18 521 bytes per fetch: the seed
    article's "a fetch without data usually returns 18k"; two fetches a second (Kafka's
    replica.fetch.wait.max.ms = 500) are its "about 36k of data per second"."""
    assert kafka_fetch_response_size([ChargedPartition(topic="t")] * 500) == 18_521


def test_records_count_once_with_their_length_prefix():
    empty = kafka_fetch_response_size([ChargedPartition(topic="t")])
    full = kafka_fetch_response_size([ChargedPartition(topic="t", records_bytes=1 << 20)])
    assert full - empty == (1 << 20) + varint_size((1 << 20) + 1) - 1  # 3-byte varint: +2


@pytest.mark.parametrize(
    ("value", "size"), [(0, 1), (127, 1), (128, 2), (16_383, 2), (16_384, 3), (2**31, 5)]
)
def test_varint_size(value, size):
    assert varint_size(value) == size == len(uvarint(value))


def test_varint_size_refuses_negative_values():
    with pytest.raises(ValueError, match="unsigned varint"):
        varint_size(-1)


# ------------------------------------------------------------------- which sensor is charged

LISTED = ThrottledReplicas(pairs=frozenset({(0, 1)}))


@pytest.mark.parametrize(
    ("config", "topic_list", "adding", "expected"),
    [
        # Kafka's isThrottled is the list alone: charged with or without a rate.
        (BrokerThrottleConfig(), LISTED, (), ThrottleClass.REPLICATION),
        (BrokerThrottleConfig(leader_rate=10), LISTED, (), ThrottleClass.REPLICATION),
        (BrokerThrottleConfig(leader_all=True), ThrottledReplicas(), (), ThrottleClass.REPLICATION),
        (BrokerThrottleConfig(leader_rate=10), ThrottledReplicas(), (), None),
        # KIP-542: an adding replica with the reassignment rate set has its own sensor.
        (
            BrokerThrottleConfig(leader_reassignment_rate=10),
            LISTED,
            (2,),
            ThrottleClass.REASSIGNMENT,
        ),
        (BrokerThrottleConfig(leader_reassignment_rate=10), ThrottledReplicas(), (3,), None),
    ],
)
def test_leader_charge_class(config, topic_list, adding, expected):
    throttle_class = leader_throttle_class(
        partition=0,
        local_id=1,
        follower_id=2,
        adding_replicas=adding,
        topic_leader_list=topic_list,
        config=config,
    )
    got = leader_charge_class(
        throttle_class, partition=0, local_id=1, topic_leader_list=topic_list, config=config
    )
    assert got is expected
