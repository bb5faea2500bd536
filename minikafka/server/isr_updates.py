"""ISR changes on the leader: Kafka's isr-expiration task and the AlterPartition round trip.

The decisions are the replica machine's (core/replica.py): a follower's fetch may propose an
expansion, `on_deadline` a shrink, and each comes here as a ProposeIsr effect (`send`). This
module batches proposals into AlterPartition requests to the controller and hands each answer
back to the machine (`on_alter_partition_result`); a proposal takes effect only when accepted
(KIP-497), until then the HW waits for the larger of the two ISRs. A refused or lost proposal is
dropped and proposed again by the next check.

The expiration task runs every `replica.lag.time.max.ms / 2`, as Kafka schedules its
isr-expiration task (ReplicaManager.startup), and asks only the partitions whose deadline
(`next_deadline_ms`) has passed. It looks only at the partitions led here (the replica index,
server/replica_index.py): a follower's machine has no deadline, and with thousands of hosted
partitions the scan of all of them was the cost of an idle broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import trio

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.core.replica_effects import Effect, ProposeIsr, ReplicaEvent
from minikafka.errors import ErrorCode, MiniKafkaError
from minikafka.server.config import NodeConfig
from minikafka.server.eventlog import EventLog
from minikafka.server.local_partition import LocalPartition
from minikafka.server.metrics import Metrics
from minikafka.server.replica_index import ReplicaIndex
from minikafka.wire.messages import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from minikafka.wire.request import R, Request


class ControllerLinkLike(Protocol):
    """What the ISR updates (and the replica manager) need of the broker's controller link
    (server/broker.py ControllerLink)."""

    broker_epoch: int

    async def request(self, body: Request[R], *, timeout_s: float) -> R: ...


class IsrUpdates:
    def __init__(
        self,
        *,
        config: NodeConfig,
        events: EventLog,
        metrics: Metrics,
        partitions: Mapping[TopicPartition, LocalPartition],
        controller: ControllerLinkLike,
        execute: Callable[[LocalPartition, list[Effect]], None],
        index: ReplicaIndex,
    ) -> None:
        self.config = config
        self.events = events
        self.metrics = metrics
        self.partitions = partitions  # the replica manager's, live
        self.controller = controller
        self.execute = execute  # the replica manager's effect runner
        self.index = index  # the partitions led here
        self._send, self._recv = trio.open_memory_channel[TopicPartition](10_000)

    def send(self, p: LocalPartition, proposal: ProposeIsr) -> None:
        """Queue `p`'s proposal (now in flight in its machine) for the next AlterPartition."""
        try:
            self._send.send_nowait(p.tp)
        except trio.WouldBlock:
            self.execute(p, p.replica.on_proposal_dropped())

    async def run_expiration(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2."""
        task_status.started()
        lag_max = self.config.replica_lag_time_max_ms
        while True:
            await trio.sleep(max(lag_max // 2, 1) / 1000)
            t = now_ms()
            self.index.refresh()
            for p in list(self.index.led.values()):
                self.execute(p, p.replica.on_deadline(t))  # nothing unless its deadline is due

    async def run_sender(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Batches pending ISR proposals into AlterPartition requests to the controller."""
        task_status.started()
        async for first in self._recv:
            # In the order they were queued, each once: a set's order would follow Python's
            # per-process string hash, and the controller decides in the order it is sent.
            tps = {first: None}
            while True:
                try:
                    tps[self._recv.receive_nowait()] = None
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
        answers = {(a.topic, a.partition): a for a in resp.partitions}
        for item in items:
            p = self.partitions.get(TopicPartition(item.topic, item.partition))
            if p is None:
                continue
            a = answers.get((item.topic, item.partition))
            ok = (
                resp.error_code == ErrorCode.NONE
                and a is not None
                and a.error_code == ErrorCode.NONE
            )
            if ok:
                assert a is not None
                effects = p.replica.on_alter_partition_result(
                    leader_epoch=item.leader_epoch,
                    accepted=True,
                    isr=a.isr,
                    partition_epoch=a.partition_epoch,
                )
            else:
                effects = p.replica.on_alter_partition_result(
                    leader_epoch=item.leader_epoch,
                    accepted=False,
                    error_code=a.error_code if a is not None else resp.error_code,
                )
            for e in effects:  # Kafka's IsrShrinksPerSec / IsrExpandsPerSec
                if isinstance(e, ReplicaEvent) and e.name in ("isr_shrink", "isr_expand"):
                    self.metrics.inc(f"{e.name}s")
            self.execute(p, effects)
