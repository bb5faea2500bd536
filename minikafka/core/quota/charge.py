"""What one fetch response costs a leader's replication quota (KIP-73), as Kafka counts it.

Kafka's leader, after building the response to a follower's fetch, records into its leader
quota the wire size of a Fetch response made of the throttled partitions alone:

    KafkaApis.handleFetchRequest:  quotas.leader.record(sizeOfThrottledPartitions(...))
    sizeOfThrottledPartitions   =  FetchResponse.sizeOf(version, partitions p of the response
                                                        with quota.isThrottled(p))
    FetchResponse.sizeOf        =  4 + FetchResponseData.size(version)

Every throttled partition of the response counts, in-sync followers' and empty ones included,
with its headers; the 4 is the size prefix of the frame. So the charge of a response is never
zero: a fetch that returns no data still pays the response header and one partition header per
throttled partition, and a tiny throttle can be used up by headers alone (the seed article's
"set the throttle to 1": a fetch without data still costs the leader ~18 KB, and the move
stalls on the leader side). The follower side charges record bytes only
(`ReplicaFetcherThread.processPartitionData`: `quota.record(records.sizeInBytes)`), so it has
no counterpart here.

Our wire format is msgpack, not Kafka's; what is charged is the size of the Kafka Fetch response
of **version 12** (the first flexible version, Kafka 2.7+; later versions differ only by
topic ids, v13+) that would carry the same partitions. From `FetchResponse.json` v12, with
flexible versions' compact encodings (unsigned varint lengths holding N + 1, null as 0) and an
empty tagged-field section (one byte, 0) at the end of each struct:

    response   = 4 (sizeOf's frame size)
               + ThrottleTimeMs int32 4 + ErrorCode int16 2 + SessionId int32 4
               + Responses: varint(topics + 1) + topics + tagged fields 1
               = 15 + varint(topics + 1) + topics                       RESPONSE_OVERHEAD = 15
    topic      = Topic: varint(len + 1) + len (UTF-8)
               + Partitions: varint(partitions + 1) + partitions + tagged fields 1
    partition  = PartitionIndex int32 4 + ErrorCode int16 2 + HighWatermark int64 8
               + LastStableOffset int64 8 + LogStartOffset int64 8
               + AbortedTransactions null: varint 0, 1 (a follower reads uncommitted)
               + PreferredReadReplica int32 4
               + Records: varint(size + 1) + size
               + tagged fields: 1, or with a DivergingEpoch (tag 0): 1 + varint tag 1
                 + varint size 1 + (Epoch int32 4 + EndOffset int64 8 + tagged fields 1)
               = 36 + varint(size + 1) + size                          PARTITION_OVERHEAD = 36
                 (+ 15 with a diverging epoch)

An empty throttled partition therefore costs 37 bytes and a response of P empty partitions of
one short-named topic about 37 P + 25. Kafka groups a response's partitions into topics as they
come, a new topic entry whenever the topic differs from the previous partition's
(`FetchResponse.toMessage`), so the same topic may appear twice in one response; so here.

Fetch sessions (KIP-227): an incremental response leaves out the partitions that have no news
(no records, error, diverging epoch, new HW or new log start offset: core/fetch_session.py
`must_respond`, Kafka's `CachedPartition.maybeUpdateResponseData`), and a partition left out is
not charged, as in Kafka, where the charge is computed over the response actually sent:
`LeaderThrottle.record` in server/fetch_read.py skips them. Replica fetchers use sessions unless
`replica.fetch.session.enable=false` (server/fetch_sessions.py); a full fetch (the first of a
session, or any fetch with sessions off) charges every throttled partition it carries, so the
header cost above is that of a sessionless fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from minikafka.core.quota.classes import QuotaSide, ThrottleClass

__all__ = [
    "DIVERGING_EPOCH_BYTES",
    "PARTITION_OVERHEAD",
    "RESPONSE_OVERHEAD",
    "ChargedPartition",
    "kafka_fetch_response_size",
    "kafka_fetch_response_size_of_runs",
    "varint_size",
]

RESPONSE_OVERHEAD = 4 + 4 + 2 + 4 + 1  # size prefix, throttle, error, session, tagged fields
PARTITION_OVERHEAD = 4 + 2 + 8 + 8 + 8 + 1 + 4 + 1  # fixed fields, null aborted txns, tagged
DIVERGING_EPOCH_BYTES = 1 + 1 + (4 + 8 + 1)  # tag, size, EpochEndOffset struct


@dataclass(frozen=True, slots=True)
class Charge:
    """What one fetch costs one sensor (core/quota/planner.py): `bytes` recorded into it, of
    which `exempt` the record bytes of in-sync replicas (counted, never held back) and
    `overhead` Kafka's response headers (Kafka's mode, leader side only)."""

    side: QuotaSide
    throttle_class: ThrottleClass
    bytes: int
    exempt: int = 0
    overhead: int = 0

    def counters(self) -> dict[str, int]:
        """The metrics counters it adds to (`<side>_<class>_throttled_bytes`, `_exempt_bytes`,
        `_overhead_bytes`), the ones with something to add."""
        name = f"{self.side.value}_{self.throttle_class.value}"
        out = {
            f"{name}_throttled_bytes": self.bytes,
            f"{name}_exempt_bytes": self.exempt,
            f"{name}_overhead_bytes": self.overhead,
        }
        return {k: v for k, v in out.items() if v}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChargedPartition:
    """One partition of a response as the charge sees it: its topic, the bytes of its record
    set, and whether it carries a diverging epoch (a tagged field). Its index names it in
    `LeaderFetchPlan` and in tests; the size does not depend on it (an INT32 on the wire)."""

    topic: str
    records_bytes: int = 0
    diverging: bool = False
    partition: int = -1


def varint_size(value: int) -> int:
    """Bytes of `value` as an unsigned varint (Kafka's ByteUtils.sizeOfUnsignedVarint)."""
    if value < 0:
        raise ValueError(f"an unsigned varint cannot hold {value}")
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def kafka_fetch_response_size(partitions: Iterable[ChargedPartition]) -> int:
    """`FetchResponse.sizeOf(12, partitions)`: the bytes a leader records for these partitions
    (module docstring). `partitions` in response order; none gives the empty response (16)."""
    return kafka_fetch_response_size_of_runs(
        (p.topic, p.records_bytes, p.diverging, 1) for p in partitions
    )


def kafka_fetch_response_size_of_runs(runs: Iterable[tuple[str, int, bool, int]]) -> int:
    """The same size for partitions given as runs `(topic, records_bytes, diverging, count)`:
    `count` consecutive partitions alike, in response order. One run stands for any number of
    partitions, so a model that charges hundreds of alike partitions per response
    (tools/reassign/kafka_algorithm.py) pays per run, not per partition."""
    topics: list[list] = []  # [topic, partitions, their bytes]
    for topic, records_bytes, diverging, count in runs:
        if count <= 0:
            continue
        size = PARTITION_OVERHEAD + varint_size(records_bytes + 1) + records_bytes
        if diverging:
            size += DIVERGING_EPOCH_BYTES
        if topics and topics[-1][0] == topic:
            topics[-1][1] += count
            topics[-1][2] += count * size
        else:
            topics.append([topic, count, count * size])
    total = RESPONSE_OVERHEAD + varint_size(len(topics) + 1)
    for name, count, size in topics:
        encoded = len(name.encode("utf-8"))
        total += varint_size(encoded + 1) + encoded + varint_size(count + 1) + size + 1
    return total
