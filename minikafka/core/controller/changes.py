"""Partition transitions the controller makes on its own: when a broker is fenced or returns.

Pure functions from the partition table to a list of `PartitionChange`s; the controller
(core/controller/state.py) applies them, logs them and turns them into requests.

Fencing mirrors KRaft `ReplicationControlManager.handleBrokerFenced` /
`generateLeaderAndIsrUpdates`: the broker leaves the ISR of every partition, except where it is
the last member (the ISR is kept so that this replica, the only one known to hold every
committed record, can lead again when it returns); where it led, a new leader is elected
(core/election.py), which is NO_LEADER (-1) when nobody in sync is live and unclean election is
off. Unfencing elects a leader for the leaderless partitions the broker replicates (Kafka's
`onBrokerStartup` -> OnlinePartition for offline partitions).

Epochs follow KRaft's PartitionRegistration.merge: every change bumps partition_epoch by one;
a change of leader (to -1 included) also bumps leader_epoch, so an old leader is fenced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, replace

from minikafka.common import NO_LEADER, TopicPartition
from minikafka.core.controller.model import VALUE, Event, PartitionRecord
from minikafka.core.election import elect_leader


@dataclass(**VALUE)
class PartitionChange:
    tp: TopicPartition
    before: PartitionRecord
    after: PartitionRecord
    reason: str
    unclean: bool = False

    @property
    def leader_changed(self) -> bool:
        return self.before.leader != self.after.leader

    def event(self) -> Event:
        """`leader_elected`, `partition_offline` (leader now -1) or `isr_changed`; a change of
        the replica set (a reassignment) also names the replicas before and after."""
        if not self.leader_changed:
            name = "isr_changed"
        elif self.after.leader == NO_LEADER:
            name = "partition_offline"
        else:
            name = "leader_elected"
        fields = {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "leader": self.after.leader,
            "previous_leader": self.before.leader,
            "leader_epoch": self.after.leader_epoch,
            "isr": list(self.after.isr),
            "previous_isr": list(self.before.isr),
            "partition_epoch": self.after.partition_epoch,
            "unclean": self.unclean,
            "reason": self.reason,
        }
        if self.after.replicas != self.before.replicas:
            fields["replicas"] = list(self.after.replicas)
            fields["previous_replicas"] = list(self.before.replicas)
        return Event(name=name, fields=fields)


def changed_record(
    before: PartitionRecord, *, leader: int, isr: tuple[int, ...]
) -> PartitionRecord | None:
    """The next registration with epochs bumped, or None when nothing changes."""
    if leader == before.leader and isr == before.isr:
        return None
    return replace(
        before,
        leader=leader,
        isr=isr,
        leader_epoch=before.leader_epoch + (1 if leader != before.leader else 0),
        partition_epoch=before.partition_epoch + 1,
    )


def fence_changes(
    partitions: Mapping[TopicPartition, PartitionRecord],
    broker_id: int,
    *,
    live: Set[int],
    unclean_allowed: Callable[[str], bool],
    reason: str,
) -> list[PartitionChange]:
    """What fencing `broker_id` does to every partition (`live` must exclude it).
    `unclean_allowed(topic)`: the topic's unclean.leader.election.enable, else the node's."""
    changes: list[PartitionChange] = []
    for tp in sorted(partitions):
        before = partitions[tp]
        if broker_id not in before.isr and before.leader != broker_id:
            continue
        # KRaft keeps the last ISR member rather than leave the ISR empty.
        isr = tuple(r for r in before.isr if r != broker_id) or before.isr
        leader, unclean = before.leader, False
        if before.leader == broker_id:
            result = elect_leader(
                replicas=before.replicas,
                isr=isr,
                live=live,
                unclean_allowed=unclean_allowed(tp.topic),
            )
            leader, isr, unclean = result.leader, tuple(result.isr), result.unclean
        after = changed_record(before, leader=leader, isr=isr)
        if after is not None:
            changes.append(
                PartitionChange(tp=tp, before=before, after=after, reason=reason, unclean=unclean)
            )
    return changes


def offline_changes(
    partitions: Mapping[TopicPartition, PartitionRecord],
    broker_id: int,
    tps: Set[TopicPartition],
    *,
    live: Set[int],
    unclean_allowed: Callable[[str], bool],
) -> list[PartitionChange]:
    """What `broker_id`'s failed replicas of `tps` do to their partitions: the broker leaves
    their ISRs and, where it led, a new leader is elected among the others, exactly as if the
    broker were fenced for these partitions alone (Kafka's log-dir failure handling,
    KafkaController.onReplicasBecomeOffline; KRaft since KIP-858)."""
    mine = {tp: partitions[tp] for tp in sorted(tps) if tp in partitions}
    return fence_changes(
        mine,
        broker_id,
        live=live - {broker_id},
        unclean_allowed=unclean_allowed,
        reason="replica_offline",
    )


def unfence_changes(
    partitions: Mapping[TopicPartition, PartitionRecord],
    broker_id: int,
    *,
    live: Set[int],
    unclean_allowed: Callable[[str], bool],
) -> list[PartitionChange]:
    """Leaders for the leaderless partitions that `broker_id` (now in `live`) replicates."""
    return leaderless_changes(
        partitions,
        live=live,
        unclean_allowed=unclean_allowed,
        reason="broker_unfenced",
        only=lambda _tp, record: broker_id in record.replicas,
    )


def leaderless_changes(
    partitions: Mapping[TopicPartition, PartitionRecord],
    *,
    live: Set[int],
    unclean_allowed: Callable[[str], bool],
    reason: str,
    only: Callable[[TopicPartition, PartitionRecord], bool] = lambda _tp, _record: True,
) -> list[PartitionChange]:
    """Leaders, where one can now be elected, for the leaderless partitions `only` selects."""
    changes: list[PartitionChange] = []
    for tp in sorted(partitions):
        before = partitions[tp]
        if before.leader != NO_LEADER or not only(tp, before):
            continue
        result = elect_leader(
            replicas=before.replicas,
            isr=before.isr,
            live=live,
            unclean_allowed=unclean_allowed(tp.topic),
        )
        if result.leader == NO_LEADER:
            continue
        after = changed_record(before, leader=result.leader, isr=tuple(result.isr))
        if after is not None:
            changes.append(
                PartitionChange(
                    tp=tp, before=before, after=after, reason=reason, unclean=result.unclean
                )
            )
    return changes
