"""Partition requests to the controller: AlterPartitionReassignments, ListPartitionReassignments
and AlterPartition.

Reassignments are core/controller/reassign.py's (KIP-455), AlterPartition's validation is
core/controller/alter.py's (KRaft's ReplicationControlManager.alterPartition); here their
results are applied to the partition table and turned into effects (`_effects`,
core/controller/base.py).
"""

from collections.abc import Sequence

from minikafka.common import TopicPartition
from minikafka.core.controller.alter import alter_one
from minikafka.core.controller.base import ControllerBase
from minikafka.core.controller.model import Effect, Event
from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    AlterPartitionItem,
    AlterPartitionItemResponse,
    ConfigEntity,
    OngoingPartitionReassignment,
    ReassignablePartition,
    ReassignablePartitionResponse,
)


class PartitionRequests(ControllerBase):
    # ------------------------------------------------------------------------ reassignments

    def alter_partition_reassignments(
        self,
        items: Sequence[ReassignablePartition],
        throttle_configs: Sequence[ConfigEntity] = (),
    ) -> tuple[int, str | None, list[ReassignablePartitionResponse], list[Effect]]:
        """-> (error_code, error_message, per-partition responses, effects).

        AlterPartitionReassignments (KIP-455, core/controller/reassign.py): start, replace or
        cancel (replicas None) the move of each partition. Bad `throttle_configs` refuse the
        whole request (INVALID_CONFIG) and change nothing.
        """
        result = self._reassign.alter(
            self._partitions,
            items,
            throttle_configs,
            registered=self._brokers,
            live=set(self._live_ids()),
            max_per_broker=self.config.max_partitions_per_broker,
        )
        if result.error_code != ErrorCode.NONE:
            return result.error_code, result.error_message, [], []
        events: list[Event] = []
        changed = self._apply(result.changes, events)
        events += result.events
        effects = self._effects(events, changed, broker_list_changed=False)
        return ErrorCode.NONE, None, result.responses, effects

    def list_partition_reassignments(
        self, topics: Sequence[str] | None = None
    ) -> list[OngoingPartitionReassignment]:
        """The partitions being moved (of `topics`, or all), sorted."""
        return self._reassign.listing(self._partitions, topics)

    # ------------------------------------------------------------------------ AlterPartition

    def alter_partition(
        self, *, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> tuple[int, list[AlterPartitionItemResponse], list[Effect]]:
        """-> (error_code, per-item responses, effects). KRaft's alterPartition validation."""
        broker = self._brokers.get(broker_id)
        if broker is None or broker.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, [], []
        live = set(self._live_ids())
        responses: list[AlterPartitionItemResponse] = []
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        for item in items:
            tp = TopicPartition(item.topic, item.partition)
            response, change = alter_one(self._partitions.get(tp), broker_id, item, live=live)
            responses.append(response)
            if change is not None:
                self._apply([change], events)
                changed.add(tp)
        if not changed:
            return ErrorCode.NONE, responses, []
        effects = self._effects(events, changed, leader_and_isr=False, broker_list_changed=False)
        return ErrorCode.NONE, responses, effects
