"""Kafka's OffsetForLeaderEpoch (v2-3) on the Kafka listener, translated both ways. Pure.

A consumer validates its position after a leader change (KIP-320: librdkafka's
rd_kafka_offset_validate, kafka-python's Fetcher.maybe_validate_positions, the Java client's
OffsetsForLeaderEpochUtils): it asks the leader where the epoch of its position ends, and an end
offset below the position means the log was truncated under it (an unclean election). The
broker answers from its leader-epoch cache (server/offset_for_leader_epoch.py,
core/log.py `last_offset_for_leader_epoch`, Kafka's Partition.lastOffsetForLeaderEpoch),
fencing a stale `current_leader_epoch` (v2+) with FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH.

Versions: kio carries v2-4 (Kafka 4.0 removed v0-1, KIP-896) and v4 is flexible; v3 adds
`replica_id` (a follower's; -1 a consumer's, and v2's requests are DEBUGGING_REPLICA_ID, -2, as
Kafka's OffsetsForLeaderEpochRequest reads them). The answer is the same for every replica id:
Kafka serves followers and consumers alike from the leader (fetchOnlyFromLeader).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from minikafka.kafka import codec
from minikafka.wire.messages import (
    DEBUGGING_REPLICA_ID,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)


def to_native(request: Any) -> OffsetForLeaderEpochRequest:
    return OffsetForLeaderEpochRequest(
        replica_id=int(getattr(request, "replica_id", DEBUGGING_REPLICA_ID)),
        partitions=[
            OffsetForLeaderEpochPartition(
                topic=str(t.topic),
                partition=int(p.partition),
                current_leader_epoch=int(p.current_leader_epoch),
                leader_epoch=int(p.leader_epoch),
            )
            for t in request.topics
            for p in t.partitions
        ],
    )


def failed(request: OffsetForLeaderEpochRequest, code: int, message: str = "") -> Any:
    """Every partition of `request` answered with `code` (the broker could not be asked)."""
    return OffsetForLeaderEpochResponse(
        partitions=[
            OffsetForLeaderEpochPartitionResponse(
                topic=p.topic, partition=p.partition, error_code=code
            )
            for p in request.partitions
        ]
    )


def to_kafka(version: int, answer: OffsetForLeaderEpochResponse) -> Any:
    """Partitions grouped by topic, topics in the order they first appear (Kafka's
    OffsetForLeaderEpochResponseData lists a topic once)."""
    mod = codec.response_module(codec.OFFSET_FOR_LEADER_EPOCH, version)
    topics: dict[str, list[Any]] = {}
    for p in answer.partitions:
        topics.setdefault(p.topic, []).append(
            mod.EpochEndOffset(
                error_code=KafkaErrorCode(int(p.error_code)),
                partition=i32(p.partition),
                leader_epoch=i32(p.leader_epoch),
                end_offset=i64(p.end_offset),
            )
        )
    return mod.OffsetForLeaderEpochResponse(
        throttle_time=timedelta(0),
        topics=tuple(
            mod.OffsetForLeaderTopicResult(topic=TopicName(t), partitions=tuple(ps))
            for t, ps in topics.items()
        ),
    )
