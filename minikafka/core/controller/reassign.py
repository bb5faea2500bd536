"""Partition reassignment (KIP-455): start, progress, completion and cancellation, pure.

Mirrors Kafka's PartitionReassignmentReplicas / PartitionReassignmentRevert (KRaft) and the ZK
controller's ReplicaAssignment.reassignTo, which keeps the *original* replicas of a move:

- Start, with target T and original replicas O (the replicas when the first reassignment of
  this move started; a new target for a partition already moving replaces T and keeps O):
  replicas = `T ++ (O -- T)`, adding = `T -- O`, removing = `O -- T`; the ISR and leader stay
  (a replica an earlier target was adding and this one drops leaves at once and is stopped).
  The partition epoch is bumped and every replica of the union gets LeaderAndIsr: the new ones
  become followers and fetch (KIP-542 throttles them as `adding`).
- Progress: whenever a partition's ISR changes (AlterPartition, fencing, unfencing) the
  controller asks `progress`; once every target replica is in the ISR the move completes:
  replicas = T, ISR = ISR ∩ T, adding = removing = (); a leader outside T (or out of the ISR)
  is replaced by the first live replica of T in the ISR, leader epoch + 1 (Kafka's
  ReassignPartitionLeaderElectionStrategy: clean only). A target already in sync at start
  (a reorder or a shrink) completes at once.
- Cancel: replicas = O, ISR = ISR ∩ O, the adding replicas leave; the leader is re-elected if
  it was one of them. A cancel (or a new target) that would leave no in-sync replica is
  refused with INVALID_REPLICA_ASSIGNMENT (Kafka would restart the ISR uncleanly from the
  original replicas; losing the only in-sync copies on an admin action is worse than a refusal).
- Every replica that leaves is sent StopReplica(delete=True); a fenced one when it is back
  (`stops` is persisted, and skipped if the broker has become a replica again meanwhile).

Throttles (beyond Kafka, core/controller/throttles.py): the `throttle_configs` of a request
become a throttle group that its moving partitions belong to; a partition given a new target
with new throttles joins the new group. When the last partition of a group completes or is
cancelled, the group's claims are released, and the keys nobody claims any more wait in
`take_unclaimed` for the controller to remove.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

from minikafka.common import NO_LEADER, TopicPartition
from minikafka.core.controller.changes import PartitionChange
from minikafka.core.controller.model import VALUE, Event, PartitionRecord, SendStopReplica
from minikafka.core.controller.throttles import ThrottleClaims, ThrottleKey, normalise_throttles
from minikafka.core.controller.topics import replica_list_error
from minikafka.core.election import elect_leader
from minikafka.errors import ConfigError, ErrorCode, bounded_message
from minikafka.wire.messages import (
    ConfigEntity,
    OngoingPartitionReassignment,
    ReassignablePartition,
    ReassignablePartitionResponse,
)


@dataclass(**VALUE)
class Reassignment:
    """An ongoing move of one partition."""

    original: tuple[int, ...]
    target: tuple[int, ...]
    throttle_id: int | None = None


@dataclass(**VALUE)
class ReassignResult:
    """What a request (or a progress check) did; the controller applies `changes`."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    responses: list[ReassignablePartitionResponse] = field(default_factory=list)
    changes: list[PartitionChange] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def target_error(
    replicas: Sequence[int], *, registered: Container[int], live: Container[int]
) -> str | None:
    """KRaft's validateManualPartitionAssignment messages, plus fenced brokers."""
    error = replica_list_error(replicas, registered)
    if error is not None:
        return error
    for broker in replicas:
        if broker not in live:
            return (
                f"The manual partition assignment includes broker {broker}, but it is fenced: "
                "expected registered, unfenced brokers."
            )
    return None


def reshape(
    before: PartitionRecord,
    *,
    replicas: tuple[int, ...],
    adding: tuple[int, ...] = (),
    removing: tuple[int, ...] = (),
    live: Set[int],
) -> PartitionRecord | None:
    """`before` with a new replica set: ISR ∩ replicas, the leader kept if it is still in it,
    else a clean election in replica order. None when no ISR member would remain."""
    isr = tuple(r for r in before.isr if r in replicas)
    if not isr:
        return None
    leader = before.leader
    if leader not in isr:
        result = elect_leader(replicas=replicas, isr=isr, live=live, unclean_allowed=False)
        leader, isr = result.leader, tuple(result.isr)
    return replace(
        before,
        replicas=replicas,
        isr=isr,
        leader=leader,
        adding=adding,
        removing=removing,
        leader_epoch=before.leader_epoch + (1 if leader != before.leader else 0),
        partition_epoch=before.partition_epoch + 1,
    )


class Reassignments:
    """The controller's ongoing reassignments, throttle claims and pending StopReplicas."""

    def __init__(self) -> None:
        self.ongoing: dict[TopicPartition, Reassignment] = {}
        self.throttles = ThrottleClaims()
        self.stops: dict[int, dict[TopicPartition, int]] = {}  # broker -> tp -> leader epoch
        self._unclaimed: dict[ThrottleKey, str] = {}  # released, for the controller to remove
        # The request being applied: replicas per broker, and the cap (see `alter`).
        self._hosted: Counter[int] | None = None
        self._max_per_broker: int | None = None

    # ------------------------------------------------------------------------ requests

    def alter(
        self,
        partitions: Mapping[TopicPartition, PartitionRecord],
        items: Sequence[ReassignablePartition],
        throttle_configs: Sequence[ConfigEntity],
        *,
        registered: Container[int],
        live: Set[int],
        max_per_broker: int | None = None,
    ) -> ReassignResult:
        """AlterPartitionReassignments: one response per item, in order; items are independent
        except that a partition named twice is refused (INVALID_REQUEST) both times. A move
        that would give a broker more than `max_per_broker` replicas (moving ones count on both
        sides, as at creation) is refused with POLICY_VIOLATION (as KIP-578 proposed)."""
        self._hosted = (
            Counter(b for p in partitions.values() for b in p.replicas)
            if max_per_broker is not None
            else None
        )
        self._max_per_broker = max_per_broker
        try:
            throttles = normalise_throttles(throttle_configs)
        except ConfigError as exc:
            return ReassignResult(
                error_code=ErrorCode.INVALID_CONFIG, error_message=bounded_message(str(exc))
            )
        group = self.throttles.record(throttles) if throttles else None
        counts = Counter((i.topic, i.partition) for i in items)
        result = ReassignResult()
        for item in items:  # each partition at most once: they do not interact
            tp = TopicPartition(item.topic, item.partition)
            if counts[tp] > 1:
                code = ErrorCode.INVALID_REQUEST
                message = f"partition {tp} appears more than once: expected one entry per partition"
            else:
                code, message = self._alter_one(
                    partitions.get(tp), tp, item.replicas, group, registered, live, result
                )
            result.responses.append(
                ReassignablePartitionResponse(
                    topic=item.topic,
                    partition=item.partition,
                    error_code=code,
                    error_message=bounded_message(message),
                )
            )
        if group is not None:
            self._maybe_release(group)
        self._hosted = None
        return result

    def _alter_one(
        self,
        before: PartitionRecord | None,
        tp: TopicPartition,
        replicas: list[int] | None,
        group: int | None,
        registered: Container[int],
        live: Set[int],
        result: ReassignResult,
    ) -> tuple[ErrorCode, str | None]:
        if before is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (
                f"unknown partition {tp}: expected an existing topic and partition"
            )
        current = self.ongoing.get(tp)
        if replicas is None:
            if current is None:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {tp} to cancel"
            return self._cancel(tp, before, current, live, result)
        problem = target_error(replicas, registered=registered, live=live)
        if problem is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        target = tuple(replicas)
        if current is None and target == before.replicas:
            return ErrorCode.NONE, None  # nothing to move (Kafka writes no record either)
        if current is not None and target == current.target:
            if group is not None and current.throttle_id != group:  # now under the new throttles
                self.ongoing[tp] = replace(current, throttle_id=group)
                self._maybe_release(current.throttle_id)
            return ErrorCode.NONE, None
        original = current.original if current is not None else before.replicas
        return self._start(tp, before, current, original, target, group, live, result)

    def _over_cap(self, tp: TopicPartition, new: set[int]) -> str | None:
        """Why adding replicas on `new` breaks the per-broker cap, or None (then counted)."""
        hosted, cap = self._hosted, self._max_per_broker
        if hosted is None or cap is None:
            return None
        for broker in sorted(new):
            if hosted[broker] + 1 > cap:
                return (
                    f"moving {tp} would give broker {broker} {hosted[broker] + 1} partition "
                    f"replicas; the controller allows at most {cap} (max.broker.partitions)"
                )
        hosted.update(new)
        return None

    def _start(
        self,
        tp: TopicPartition,
        before: PartitionRecord,
        current: Reassignment | None,
        original: tuple[int, ...],
        target: tuple[int, ...],
        group: int | None,
        live: Set[int],
        result: ReassignResult,
    ) -> tuple[ErrorCode, str | None]:
        adding = tuple(r for r in target if r not in original)
        removing = tuple(r for r in original if r not in target)
        # Nothing to move (a reorder) or the target already in sync (a shrink): done at once.
        done = not (adding or removing) or set(target) <= set(before.isr)
        if done:
            after = reshape(before, replicas=target, live=live)
        else:
            union = target + removing
            after = reshape(before, replicas=union, adding=adding, removing=removing, live=live)
        if after is None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"reassigning {tp} to {list(target)} would leave no in-sync replica "
                f"(ISR {list(before.isr)}): expected a target that keeps one"
            )
        over = self._over_cap(tp, set(after.replicas) - set(before.replicas))
        if over is not None:
            return ErrorCode.POLICY_VIOLATION, over
        previous = None if current is None else current.throttle_id
        throttle_id = group if group is not None else previous
        result.events.append(
            _event(
                "reassignment_started",
                tp,
                after,
                original=list(original),
                target=list(target),
                adding=list(adding),
                removing=list(removing),
                previous_target=None if current is None else list(current.target),
                throttle_id=throttle_id,
            )
        )
        removed = self._replace(tp, before, after, "reassignment_started", result)
        if done:
            self.ongoing.pop(tp, None)
            result.events.append(
                _event(
                    "reassignment_completed",
                    tp,
                    after,
                    original=list(original),
                    removed=list(removed),
                    throttle_id=throttle_id,
                )
            )
        else:
            self.ongoing[tp] = Reassignment(
                original=original, target=target, throttle_id=throttle_id
            )
        self._maybe_release(previous)  # if it moved to the new group, or is done
        return ErrorCode.NONE, None

    def _cancel(
        self,
        tp: TopicPartition,
        before: PartitionRecord,
        current: Reassignment,
        live: Set[int],
        result: ReassignResult,
    ) -> tuple[ErrorCode, str | None]:
        after = reshape(before, replicas=current.original, live=live)
        if after is None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"cannot cancel the reassignment of {tp}: none of its original replicas "
                f"{list(current.original)} is in sync (ISR {list(before.isr)}); expected the "
                "move to complete, or an original replica back in sync"
            )
        removed = self._replace(tp, before, after, "reassignment_cancelled", result)
        del self.ongoing[tp]
        result.events.append(
            _event(
                "reassignment_cancelled",
                tp,
                after,
                target=list(current.target),
                removed=list(removed),
                throttle_id=current.throttle_id,
            )
        )
        self._maybe_release(current.throttle_id)
        return ErrorCode.NONE, None

    def _replace(
        self,
        tp: TopicPartition,
        before: PartitionRecord,
        after: PartitionRecord,
        reason: str,
        result: ReassignResult,
    ) -> tuple[int, ...]:
        """Record the change; the replicas that left get StopReplica(delete). -> those."""
        result.changes.append(PartitionChange(tp=tp, before=before, after=after, reason=reason))
        removed = tuple(r for r in before.replicas if r not in after.replicas)
        for broker in removed:
            self.stops.setdefault(broker, {})[tp] = after.leader_epoch
        for broker in after.replicas:  # a replica again before its stop went out: keep it
            pending = self.stops.get(broker, {})
            pending.pop(tp, None)
            if not pending:
                self.stops.pop(broker, None)
        return removed

    # ------------------------------------------------------------------------ progress

    def progress(
        self,
        partitions: Mapping[TopicPartition, PartitionRecord],
        changed: Set[TopicPartition],
        *,
        live: Set[int],
    ) -> ReassignResult:
        """Complete every reassignment among `changed` whose target replicas are all in sync."""
        result = ReassignResult()
        for tp in sorted(self.ongoing.keys() & changed):
            current, before = self.ongoing[tp], partitions[tp]
            if not set(current.target) <= set(before.isr):
                continue
            after = reshape(before, replicas=current.target, live=live)
            assert after is not None  # the target is in the ISR
            removed = self._replace(tp, before, after, "reassignment_completed", result)
            del self.ongoing[tp]
            result.events.append(
                _event(
                    "reassignment_completed",
                    tp,
                    after,
                    original=list(current.original),
                    removed=list(removed),
                    throttle_id=current.throttle_id,
                )
            )
            self._maybe_release(current.throttle_id)
        return result

    def queue_stop(self, broker: int, tp: TopicPartition, leader_epoch: int) -> None:
        """StopReplica(delete) for `broker`'s copy of `tp`, sent when it is live (a deleted
        topic's replicas go this way too)."""
        self.stops.setdefault(broker, {})[tp] = leader_epoch

    def topics_being_deleted(self) -> set[str]:
        """Topics some broker has yet to drop a copy of (a deleted topic's name cannot be
        reused until then: a returning broker would keep its old log as the new topic's)."""
        return {tp.topic for tps in self.stops.values() for tp in tps}

    def take_stops(
        self, live_epochs: Mapping[int, int], partitions: Mapping[TopicPartition, PartitionRecord]
    ) -> list[SendStopReplica]:
        """StopReplica(delete) to every live broker with replicas to drop; a broker that became
        a replica again meanwhile keeps its copy. Fenced brokers wait for their return."""
        effects = []
        for broker in sorted(self.stops):
            if broker not in live_epochs:
                continue
            pending = self.stops.pop(broker)
            items = tuple(
                (tp.topic, tp.partition, epoch)
                for tp, epoch in sorted(pending.items())
                if tp not in partitions or broker not in partitions[tp].replicas
            )
            if items:
                effects.append(
                    SendStopReplica(
                        broker_id=broker,
                        broker_epoch=live_epochs[broker],
                        partitions=items,
                        delete=True,
                    )
                )
        return effects

    # ------------------------------------------------------------------------ throttles

    def _maybe_release(self, group: int | None) -> None:
        """A group none of whose partitions is still moving gives up its claims."""
        if group is None or any(r.throttle_id == group for r in self.ongoing.values()):
            return
        self._unclaimed.update(self.throttles.release(group))

    def take_unclaimed(self) -> dict[ThrottleKey, str]:
        """The throttle keys no reassignment claims any more, with their recorded values."""
        out, self._unclaimed = self._unclaimed, {}
        return out

    # ------------------------------------------------------------------------ queries

    def listing(
        self,
        partitions: Mapping[TopicPartition, PartitionRecord],
        topics: Sequence[str] | None = None,
    ) -> list[OngoingPartitionReassignment]:
        wanted = None if topics is None else set(topics)
        return [
            OngoingPartitionReassignment(
                topic=tp.topic,
                partition=tp.partition,
                replicas=list(partitions[tp].replicas),
                adding_replicas=list(partitions[tp].adding),
                removing_replicas=list(partitions[tp].removing),
            )
            for tp in sorted(self.ongoing)
            if wanted is None or tp.topic in wanted
        ]

    # ------------------------------------------------------------------------ persistence

    def to_doc(self) -> dict[str, Any]:
        return {
            "ongoing": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "original": list(r.original),
                    "target": list(r.target),
                    "throttle_id": r.throttle_id,
                }
                for tp, r in sorted(self.ongoing.items())
            ],
            "throttles": self.throttles.to_doc(),
            "stops": [
                {
                    "broker_id": broker,
                    "partitions": [[tp.topic, tp.partition, e] for tp, e in sorted(tps.items())],
                }
                for broker, tps in sorted(self.stops.items())
            ],
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Reassignments:
        book = cls()
        for r in doc["ongoing"]:
            throttle_id = r["throttle_id"]
            book.ongoing[TopicPartition(str(r["topic"]), int(r["partition"]))] = Reassignment(
                original=tuple(int(b) for b in r["original"]),
                target=tuple(int(b) for b in r["target"]),
                throttle_id=None if throttle_id is None else int(throttle_id),
            )
        book.throttles = ThrottleClaims.from_doc(doc["throttles"])
        for s in doc["stops"]:
            book.stops[int(s["broker_id"])] = {
                TopicPartition(str(t), int(p)): int(e) for t, p, e in s["partitions"]
            }
        return book


def _event(name: str, tp: TopicPartition, after: PartitionRecord, **fields: Any) -> Event:
    return Event(
        name=name,
        fields={
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(after.replicas),
            "leader": after.leader,
            "leader_epoch": after.leader_epoch,
            "isr": list(after.isr),
            "partition_epoch": after.partition_epoch,
            "offline": after.leader == NO_LEADER,
            **fields,
        },
    )
