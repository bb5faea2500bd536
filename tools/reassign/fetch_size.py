"""The bytes a Kafka leader charges its replication quota for one fetch response, for the
simulation of tools/reassign/kafka_algorithm.py, pure, and independent of the brokers' own
count (minikafka/core/quota/charge.py): the prediction must not share the code it judges.

Kafka's leader records `FetchResponse.sizeOf(version, throttled partitions)` into its leader
quota (`KafkaApis.handleFetchRequest`, `sizeOfThrottledPartitions`), which is
`4 + FetchResponseData.size(version)` of a response made of those partitions alone: the 4 is
the frame's size prefix. Counted here for version 12 (Kafka 2.7+, the first flexible version;
13+ replace the topic name by a 16-byte id), field by field from `FetchResponse.json`, with the
flexible encodings (compact string / array / records: an unsigned varint of length + 1, null as
0; every struct ends with its tagged-field count, one byte 0 when it has none). A partition of a
follower's fetch carries no aborted transactions (null: read uncommitted) and no tagged field.
tests/tools/test_reassign_kafka_rate.py checks the sum against the bytes `kio` serializes for the
same partitions.

Kafka groups a response's partitions into topics as they come (`FetchResponse.toMessage`: a new
topic entry whenever the topic differs from the previous partition's), so here: `runs` are
(topic, record bytes, count) for `count` consecutive partitions alike, in response order.
"""

from __future__ import annotations

from collections.abc import Iterable

# FetchResponse v12, top level: ThrottleTimeMs int32, ErrorCode int16, SessionId int32,
# Responses (compact array), then the tagged fields (none: NodeEndpoints is v16+).
RESPONSE_FIXED = 4 + 2 + 4
# FetchableTopicResponse v12: Topic (compact string), Partitions (compact array), tagged fields.
# PartitionData v12: PartitionIndex int32, ErrorCode int16, HighWatermark int64,
# LastStableOffset int64, LogStartOffset int64, AbortedTransactions (null compact array: 0),
# PreferredReadReplica int32, Records (compact records), tagged fields (none set: 0).
PARTITION_FIXED = 4 + 2 + 8 + 8 + 8 + 1 + 4 + 1
FRAME_PREFIX = 4  # FetchResponse.sizeOf: 4 + data.size(version)


def uvarint_bytes(n: int) -> int:
    """ByteUtils.sizeOfUnsignedVarint: 7 bits per byte."""
    if n < 0:
        raise ValueError(f"an unsigned varint cannot hold {n}")
    return max(1, (n.bit_length() + 6) // 7)


def fetch_response_v12_size(runs: Iterable[tuple[str, int, int]]) -> int:
    """`FetchResponse.sizeOf(12, partitions)` for partitions given as runs (module docstring);
    no partition: the empty response, 16 bytes."""
    topics: list[tuple[str, int, int]] = []  # (name, partitions, their bytes)
    for topic, records_bytes, count in runs:
        if count <= 0:
            continue
        one = PARTITION_FIXED + uvarint_bytes(records_bytes + 1) + records_bytes
        if topics and topics[-1][0] == topic:
            _, n, size = topics[-1]
            topics[-1] = (topic, n + count, size + count * one)
        else:
            topics.append((topic, count, count * one))
    total = FRAME_PREFIX + RESPONSE_FIXED + uvarint_bytes(len(topics) + 1) + 1
    for name, n, size in topics:
        raw = len(name.encode("utf-8"))
        total += uvarint_bytes(raw + 1) + raw + uvarint_bytes(n + 1) + size + 1
    return total


EMPTY_RESPONSE_BYTES = fetch_response_v12_size(())
