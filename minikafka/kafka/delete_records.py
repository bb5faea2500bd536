"""Kafka's DeleteRecords (v0-1) on the Kafka listener, translated both ways. Pure.

An admin client (kafka-python's KafkaAdminClient.delete_records, the Java Admin.deleteRecords,
`kafka-delete-records.sh`) sends each partition's request to its leader with the new log start
offset (-1: the high watermark, KIP-107). The broker serves it natively
(server/delete_records.py, Kafka's ReplicaManager.deleteRecords): the answer is each
partition's low watermark once every live replica has moved its log start there, or
REQUEST_TIMED_OUT when the request's timeout passed first; a partition this broker does not
lead is NOT_LEADER_OR_FOLLOWER, and the client retries it at the leader.

minikafka's error codes are Kafka's numbers, so they go out as they are; v2 is flexible and
not served (Kafka 4.0 serves 0-2).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from minikafka.kafka import codec
from minikafka.wire.messages import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)


def to_native(request: Any) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        partitions=[
            DeleteRecordsPartition(
                topic=str(t.name), partition=int(p.partition_index), offset=int(p.offset)
            )
            for t in request.topics
            for p in t.partitions
        ],
        timeout_ms=max(0, int(request.timeout / timedelta(milliseconds=1))),
    )


def failed(request: DeleteRecordsRequest, code: int, message: str = "") -> DeleteRecordsResponse:
    """Every partition of `request` answered with `code` (the broker could not be asked)."""
    return DeleteRecordsResponse(
        partitions=[
            DeleteRecordsPartitionResponse(topic=p.topic, partition=p.partition, error_code=code)
            for p in request.partitions
        ]
    )


def to_kafka(version: int, answer: DeleteRecordsResponse) -> Any:
    """Partitions grouped by topic, topics in the order they first appear (Kafka's
    DeleteRecordsResponseData lists a topic once)."""
    mod = codec.response_module(codec.DELETE_RECORDS, version)
    topics: dict[str, list[Any]] = {}
    for p in answer.partitions:
        topics.setdefault(p.topic, []).append(
            mod.DeleteRecordsPartitionResult(
                partition_index=i32(p.partition),
                low_watermark=i64(p.low_watermark),
                error_code=KafkaErrorCode(int(p.error_code)),
            )
        )
    return mod.DeleteRecordsResponse(
        throttle_time=timedelta(milliseconds=answer.throttle_time_ms),
        topics=tuple(
            mod.DeleteRecordsTopicResult(name=TopicName(t), partitions=tuple(ps))
            for t, ps in topics.items()
        ),
    )
