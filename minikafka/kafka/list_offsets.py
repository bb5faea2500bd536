"""Kafka's ListOffsets (v1-7) on the Kafka listener, translated both ways. Pure.

A consumer resets its position with it (auto.offset.reset): timestamp -1 is the latest offset
(for a consumer the high watermark, which is also the last stable offset: no transactions),
-2 the earliest. Any other timestamp (KIP-79: `offsetsForTimes`, `kcat -Q`; -3 MAX_TIMESTAMP,
KIP-734) is answered as the broker answers it natively (server/list_offsets.py): the offset and
timestamp of the first record at or after it, or -1 and -1 when there is none. Both requests'
isolation levels read up to the high watermark (no transactions: the last stable offset is
the HW).

Leader epochs (KIP-320, v4+): each answer carries the broker's, the epoch of the record found or,
for LATEST, the partition's leader epoch, for EARLIEST the first cached epoch covering the log
start (Kafka's Partition.fetchOffsetForTimestamp and UnifiedLog.fetchOffsetByTimestamp); a
consumer keeps it with its position and validates it with OffsetForLeaderEpoch. A request's
`current_leader_epoch` (v4+) is checked here against this broker's metadata, whose leader epoch
is the replica's own (both come from the controller's LeaderAndIsr): an older one is
FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (Partition.localLogWithEpochOrThrow), and
only the other partitions are asked of the broker.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from minikafka.errors import ErrorCode
from minikafka.kafka import codec
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

Fenced = dict[tuple[str, int], ErrorCode]


def fenced(request: Any, leader_epoch: Callable[[str, int], int | None]) -> Fenced:
    """The partitions whose `current_leader_epoch` (v4+; -1: not given) is not this broker's
    `leader_epoch(topic, partition)` (None: unknown here, left to the broker to answer), with
    Kafka's error for each (Partition.checkCurrentLeaderEpoch)."""
    out: Fenced = {}
    for t in request.topics:
        for p in t.partitions:
            asked = int(getattr(p, "current_leader_epoch", -1))
            ours = leader_epoch(str(t.name), int(p.partition_index))
            if asked < 0 or ours is None or asked == ours:
                continue
            key = (str(t.name), int(p.partition_index))
            out[key] = (
                ErrorCode.FENCED_LEADER_EPOCH if ours > asked else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
    return out


def to_native(request: Any, refused: Fenced | None = None) -> ListOffsetsRequest:
    """A consumer's request (a replica id is a follower's, which the Kafka listener never
    serves: it is asked as a consumer), without the `refused` partitions (`fenced`)."""
    refused = refused or {}
    return ListOffsetsRequest(
        partitions=[
            ListOffsetsPartition(
                topic=str(t.name), partition=int(p.partition_index), timestamp=int(p.timestamp)
            )
            for t in request.topics
            for p in t.partitions
            if (str(t.name), int(p.partition_index)) not in refused
        ],
        replica_id=CONSUMER_REPLICA_ID,
    )


def with_refused(answer: ListOffsetsResponse, refused: Fenced) -> ListOffsetsResponse:
    """The broker's answer and the `refused` partitions' errors, in one response."""
    if not refused:
        return answer
    return ListOffsetsResponse(
        partitions=[
            *answer.partitions,
            *(
                ListOffsetsPartitionResponse(topic=t, partition=p, error_code=code)
                for (t, p), code in refused.items()
            ),
        ],
        throttle_time_ms=answer.throttle_time_ms,
    )


def to_kafka(version: int, answer: ListOffsetsResponse) -> Any:
    mod = codec.response_module(codec.LIST_OFFSETS, version)
    names = mod.ListOffsetsPartitionResponse.__dataclass_fields__
    topics: dict[str, list[Any]] = {}
    for p in answer.partitions:
        code = p.error_code
        if code == ErrorCode.OFFSET_NOT_AVAILABLE and version < 5:
            code = ErrorCode.LEADER_NOT_AVAILABLE  # KafkaApis: v0-4 predate OFFSET_NOT_AVAILABLE
        fields: dict[str, Any] = {
            "partition_index": i32(p.partition),
            "error_code": KafkaErrorCode(int(code)),
            "timestamp": i64(p.timestamp),
            "offset": i64(p.offset),
        }
        if "leader_epoch" in names:
            fields["leader_epoch"] = i32(p.leader_epoch)
        topics.setdefault(p.topic, []).append(mod.ListOffsetsPartitionResponse(**fields))
    kwargs: dict[str, Any] = {
        "topics": tuple(
            mod.ListOffsetsTopicResponse(name=TopicName(t), partitions=tuple(ps))
            for t, ps in topics.items()
        )
    }
    if "throttle_time" in mod.ListOffsetsResponse.__dataclass_fields__:
        kwargs["throttle_time"] = timedelta(milliseconds=answer.throttle_time_ms)
    return mod.ListOffsetsResponse(**kwargs)
