"""ISR changes on the leader: Kafka's isr-expiration task and the AlterPartition round trip.

Every `replica.lag.time.max.ms / 2` each led partition checks for followers out of sync
(core/partition.py `shrink_proposal`); a follower's fetch checks for expansion. A proposal goes
to the controller as AlterPartition (batched) and takes effect only when accepted (KIP-497):
until then the HW waits for the larger of the two ISRs. A refused or failed proposal is dropped
and proposed again by the next check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import trio

from minikafka.core.types import TopicPartition
from minikafka.errors import ErrorCode, MiniKafkaError
from minikafka.server.clock import now_ms
from minikafka.server.config import NodeConfig
from minikafka.server.eventlog import EventLog
from minikafka.server.local_partition import LocalPartition
from minikafka.server.metrics import Metrics
from minikafka.wire.messages import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
)


class ControllerLinkLike(Protocol):
    """What the ISR updates (and the replica manager) need of the broker's controller link
    (server/broker.py ControllerLink)."""

    broker_epoch: int

    async def request(self, body: object, *, timeout_s: float) -> object: ...


class IsrUpdates:
    def __init__(
        self,
        *,
        config: NodeConfig,
        events: EventLog,
        metrics: Metrics,
        partitions: Mapping[TopicPartition, LocalPartition],
        controller: ControllerLinkLike,
    ) -> None:
        self.config = config
        self.events = events
        self.metrics = metrics
        self.partitions = partitions  # the replica manager's, live
        self.controller = controller
        self._send, self._recv = trio.open_memory_channel[TopicPartition](10_000)

    def maybe_expand(self, p: LocalPartition) -> None:
        if p.leader is None:
            return
        proposal = p.leader.expand_proposal()
        if proposal is not None:
            self._propose(p, proposal, "expand")

    def _propose(self, p: LocalPartition, new_isr: list[int], why: str) -> None:
        assert p.leader is not None
        p.leader.propose_isr(new_isr)
        self.events.emit(
            "isr_change_proposed",
            topic=p.tp.topic,
            partition=p.tp.partition,
            why=why,
            isr=sorted(p.leader.isr),
            proposed=sorted(new_isr),
        )
        try:
            self._send.send_nowait(p.tp)
        except trio.WouldBlock:
            p.leader.on_alter_partition_result(accepted=False)

    async def run_expiration(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2."""
        task_status.started()
        lag_max = self.config.replica_lag_time_max_ms
        while True:
            await trio.sleep(max(lag_max // 2, 1) / 1000)
            t = now_ms()
            for p in list(self.partitions.values()):
                if p.leader is None:
                    continue
                proposal = p.leader.shrink_proposal(t, lag_max)
                if proposal is not None:
                    self._propose(p, proposal, "shrink")

    async def run_sender(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Batches pending ISR proposals into AlterPartition requests to the controller."""
        task_status.started()
        async for first in self._recv:
            tps = {first}
            while True:
                try:
                    tps.add(self._recv.receive_nowait())
                except trio.WouldBlock:
                    break
            await self._send_alter_partition(
                [self.partitions[tp] for tp in tps if tp in self.partitions]
            )

    async def _send_alter_partition(self, parts: list[LocalPartition]) -> None:
        items = []
        for p in parts:
            if p.leader is None or p.leader.pending_isr is None:
                continue
            items.append(
                AlterPartitionItem(
                    topic=p.tp.topic,
                    partition=p.tp.partition,
                    leader_epoch=p.leader.leader_epoch,
                    new_isr=sorted(p.leader.pending_isr),
                    partition_epoch=p.leader.partition_epoch,
                )
            )
        if not items:
            return
        try:
            resp = await self.controller.request(
                AlterPartitionRequest(
                    broker_id=self.config.node_id,
                    broker_epoch=self.controller.broker_epoch,
                    partitions=items,
                ),
                timeout_s=10,
            )
        except MiniKafkaError as exc:
            self.events.emit("alter_partition_failed", error=str(exc))
            resp = AlterPartitionResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(resp, AlterPartitionResponse)
        answers = {(a.topic, a.partition): a for a in resp.partitions}
        for item in items:
            p = self.partitions.get(TopicPartition(item.topic, item.partition))
            if p is None or p.leader is None or p.leader.leader_epoch != item.leader_epoch:
                continue
            a = answers.get((item.topic, item.partition))
            ok = (
                resp.error_code == ErrorCode.NONE
                and a is not None
                and a.error_code == ErrorCode.NONE
            )
            old_isr = sorted(p.leader.isr)
            if ok:
                assert a is not None
                advanced = p.leader.on_alter_partition_result(
                    accepted=True, isr=list(a.isr), partition_epoch=a.partition_epoch
                )
                shrink = len(a.isr) < len(old_isr)
                self.metrics.inc("isr_shrinks" if shrink else "isr_expands")
                self.events.emit(
                    "isr_shrink" if shrink else "isr_expand",
                    topic=item.topic,
                    partition=item.partition,
                    old_isr=old_isr,
                    isr=sorted(a.isr),
                    partition_epoch=a.partition_epoch,
                )
                if advanced:
                    p.high_watermark = p.leader.high_watermark
                p.notify()
            else:
                code = a.error_code if a is not None else resp.error_code
                p.leader.on_alter_partition_result(accepted=False)
                self.events.emit(
                    "isr_change_rejected",
                    topic=item.topic,
                    partition=item.partition,
                    error_code=int(code),
                )
