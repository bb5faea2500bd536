"""AlterPartition: a partition leader asks the controller to change its ISR.

Mirrors KRaft `ReplicationControlManager.alterPartition` / `validateAlterPartitionData`, in
its order: unknown partition -> UNKNOWN_TOPIC_OR_PARTITION; sender not the leader ->
NOT_LEADER_OR_FOLLOWER; leader epoch differs -> FENCED_LEADER_EPOCH; partition epoch differs ->
INVALID_UPDATE_VERSION (the leader acted on a state the controller has since changed); an ISR
that is not a duplicate-free subset of the replicas or lacks the leader -> INVALID_REQUEST
(`Replicas.validateIsr`); a replica added to the ISR while fenced (or unknown) ->
INELIGIBLE_REPLICA. Shrinking, or keeping a member, is always allowed.

An accepted item replaces the ISR and bumps partition_epoch; an ISR equal to the current one is
accepted without a change, as KRaft does when the builder produces no record. The response
carries the resulting state either way. The broker-epoch check is the caller's, for the whole
request (STALE_BROKER_EPOCH).
"""

from __future__ import annotations

from collections.abc import Set

from minikafka.common import TopicPartition
from minikafka.core.controller.changes import PartitionChange, changed_record
from minikafka.core.controller.model import PartitionRecord
from minikafka.errors import ErrorCode
from minikafka.wire.messages import AlterPartitionItem, AlterPartitionItemResponse


def alter_error(
    record: PartitionRecord | None, broker_id: int, item: AlterPartitionItem, *, live: Set[int]
) -> ErrorCode:
    """The first rule `item` breaks, or ErrorCode.NONE."""
    if record is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if record.leader != broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if item.leader_epoch != record.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if item.partition_epoch != record.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    new_isr = item.new_isr
    replicas = set(record.replicas)
    if len(set(new_isr)) != len(new_isr) or not replicas.issuperset(new_isr):
        return ErrorCode.INVALID_REQUEST
    if record.leader not in new_isr:
        return ErrorCode.INVALID_REQUEST
    current = set(record.isr)
    if any(r not in live for r in new_isr if r not in current):
        return ErrorCode.INELIGIBLE_REPLICA
    return ErrorCode.NONE


def alter_one(
    record: PartitionRecord | None, broker_id: int, item: AlterPartitionItem, *, live: Set[int]
) -> tuple[AlterPartitionItemResponse, PartitionChange | None]:
    """The response for one item, and the change to apply if the ISR changes."""
    code = alter_error(record, broker_id, item, live=live)
    if code != ErrorCode.NONE or record is None:
        return AlterPartitionItemResponse(
            topic=item.topic, partition=item.partition, error_code=code
        ), None
    after = changed_record(record, leader=record.leader, isr=tuple(item.new_isr))
    change = None
    if after is not None:
        change = PartitionChange(
            tp=TopicPartition(item.topic, item.partition),
            before=record,
            after=after,
            reason="alter_partition",
        )
    final = after if after is not None else record
    response = AlterPartitionItemResponse(
        topic=item.topic,
        partition=item.partition,
        error_code=ErrorCode.NONE,
        leader=final.leader,
        leader_epoch=final.leader_epoch,
        isr=list(final.isr),
        partition_epoch=final.partition_epoch,
    )
    return response, change
