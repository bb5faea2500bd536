"""Kafka's ListOffsets (v1-7) on the Kafka listener, translated both ways. Pure.

A consumer resets its position with it (auto.offset.reset): timestamp -1 is the latest offset
(for a consumer the high watermark, which is also the last stable offset: no transactions),
-2 the earliest. Any other timestamp (KIP-79: `offsetsForTimes`, `kcat -Q`; -3 MAX_TIMESTAMP,
KIP-734) is answered as the broker answers it natively (server/list_offsets.py): the offset and
timestamp of the first record at or after it, or -1 and -1 when there is none. Both requests'
isolation levels read up to the high watermark (no transactions: the last stable offset is
the HW). Leader epochs go out as -1, as in Metadata (minikafka/kafka/apis.py says why).
"""

from __future__ import annotations

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
    ListOffsetsRequest,
    ListOffsetsResponse,
)


def to_native(request: Any) -> ListOffsetsRequest:
    """A consumer's request (a replica id is a follower's, which the Kafka listener never
    serves: it is asked as a consumer)."""
    return ListOffsetsRequest(
        partitions=[
            ListOffsetsPartition(
                topic=str(t.name), partition=int(p.partition_index), timestamp=int(p.timestamp)
            )
            for t in request.topics
            for p in t.partitions
        ],
        replica_id=CONSUMER_REPLICA_ID,
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
            fields["leader_epoch"] = i32(-1)
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
