"""OffsetForLeaderEpoch on the leader (KIP-101, KIP-320; Kafka's
KafkaApis.handleOffsetForLeaderEpochRequest -> ReplicaManager.lastOffsetForLeaderEpoch ->
Partition.lastOffsetForLeaderEpoch).

A consumer whose position carries a leader epoch asks "where does epoch E end on the leader?"
after a leader change (librdkafka's and kafka-python's position validation, KIP-320): an end
offset below its position means the log was truncated under it (an unclean election), and the
consumer resets to that end offset or reports the truncation. Per partition:

- not hosted here: NOT_LEADER_OR_FOLLOWER for a topic the metadata cache knows, else
  UNKNOWN_TOPIC_OR_PARTITION; an offline replica: KAFKA_STORAGE_ERROR (HostedPartition.Offline);
- otherwise the answer of `core.log.last_offset_for_leader_epoch`: the current-leader-epoch
  check (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), leadership, then the epoch cache's
  end offset for the asked epoch (LeaderEpochFileCache.endOffsetFor).

Served for consumers and followers alike (Kafka always asks fetchOnlyFromLeader); minikafka's
own followers learn divergence from the fetch response instead (KIP-320's diverging epoch).
"""

from __future__ import annotations

from collections.abc import Set

from minikafka.common import TopicPartition
from minikafka.core.log import last_offset_for_leader_epoch
from minikafka.errors import ErrorCode
from minikafka.server.local_partition import LocalPartition
from minikafka.wire.messages import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)


def answer_partition(
    p: LocalPartition | None, asked: OffsetForLeaderEpochPartition, known_topic: Set[str]
) -> OffsetForLeaderEpochPartitionResponse:
    def error(code: int) -> OffsetForLeaderEpochPartitionResponse:
        return OffsetForLeaderEpochPartitionResponse(
            topic=asked.topic, partition=asked.partition, error_code=code
        )

    if p is None:
        known = asked.topic in known_topic
        return error(
            ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
    if p.offline:
        return error(ErrorCode.KAFKA_STORAGE_ERROR)
    code, epoch, end = last_offset_for_leader_epoch(
        epochs=p.epochs,
        log_end_offset=p.log_end_offset,
        is_leader=p.is_leader,
        leader_epoch=p.leader_epoch,
        current_leader_epoch=asked.current_leader_epoch,
        requested_epoch=asked.leader_epoch,
    )
    return OffsetForLeaderEpochPartitionResponse(
        topic=asked.topic, partition=asked.partition, error_code=code, leader_epoch=epoch,
        end_offset=end,
    )  # fmt: skip


def handle_offset_for_leader_epoch(
    partitions: dict[TopicPartition, LocalPartition],
    req: OffsetForLeaderEpochRequest,
    known_topic: Set[str],
) -> OffsetForLeaderEpochResponse:
    """Every partition of `req`, answered from this broker's replicas (`partitions`, the
    replica manager's) in the request's order."""
    return OffsetForLeaderEpochResponse(
        partitions=[
            answer_partition(partitions.get(TopicPartition(a.topic, a.partition)), a, known_topic)
            for a in req.partitions
        ]
    )
