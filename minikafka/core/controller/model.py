"""The controller's values: its config, its effects, and the records it keeps.

Effects are what the controller state machine (core/controller/state.py) asks the shell to do. The
shell persists `ControllerState.take_changes()` after every call that returned effects, then executes
them in order: `SendLeaderAndIsr`, `SendUpdateMetadata` and `SendStopReplica` become LeaderAndIsr,
UpdateMetadata and StopReplica requests (the shell adds controller id/epoch and the live broker
list), and an `Event` becomes a line of the JSON-lines event log.

Records: a partition is a frozen `PartitionRecord` (tuples, never shared mutable lists),
replaced whole on every change, keyed by TopicPartition; it is turned into a fresh wire
`PartitionState` on the way out. A broker is a small mutable `BrokerRecord`, private to the
controller, because its liveness fields change on every heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from minikafka.common import NO_LEADER, TopicPartition
from minikafka.core.dynamic_config import ConfigSnapshot
from minikafka.wire.messages import BrokerInfo, PartitionState

VALUE = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**VALUE)
class ControllerConfig:
    session_timeout_ms: int = 9000  # broker.session.timeout.ms
    unclean_leader_election: bool = False  # unclean.leader.election.enable
    default_num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    # Bounded work per request and per broker: Kafka has no such caps (KIP-578
    # proposed max.broker.partitions). A topic above the per-topic cap is refused before any
    # placement work; a placement that would give a broker more replicas than its store can
    # open (storage's StoreConfig.max_partitions, 8192 LMDB databases) is refused at creation,
    # not found when that broker fails every LeaderAndIsr for them.
    max_partitions_per_topic: int = 50_000
    max_partitions_per_broker: int = 8192


# ---------------------------------------------------------------------------- effects


@dataclass(**VALUE)
class SendLeaderAndIsr:
    """One LeaderAndIsr request to one broker, stamped with that broker's current epoch."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[PartitionState, ...]


@dataclass(**VALUE)
class SendUpdateMetadata:
    """UpdateMetadata to each of `broker_ids`; `partitions` are the changed ones only
    (or all of them for a broker that just joined). The shell adds the live broker list.
    `configs` is the whole dynamic config snapshot when it changed or the broker just joined
    (None: the request carries no configs)."""

    broker_ids: tuple[int, ...]
    partitions: tuple[PartitionState, ...]
    configs: ConfigSnapshot | None = None
    full: bool = False  # everything: the broker forgets what it knew first (`replace`)
    deleted_topics: tuple[str, ...] = ()


@dataclass(**VALUE)
class SendStopReplica:
    """One StopReplica request to one broker, stamped with that broker's current epoch:
    `partitions` are (topic, partition, leader_epoch); `delete` also drops their logs (a replica
    a reassignment removed, Kafka's ReplicaDeletionStarted)."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[tuple[str, int, int], ...]
    delete: bool


@dataclass(**VALUE)
class Event:
    """A line of the controller's JSON-lines event log; `fields` are JSON/msgpack-able."""

    name: str
    fields: dict[str, Any] = field(default_factory=dict)


Effect = SendLeaderAndIsr | SendUpdateMetadata | SendStopReplica | Event


# ---------------------------------------------------------------------------- records


@dataclass(**VALUE)
class PartitionRecord:
    """A partition's registration (KRaft PartitionRegistration), replaced whole on change.

    While a reassignment moves it (core/controller/reassign.py), `replicas` is the union
    `target ++ (current -- target)` and `adding` / `removing` say which replicas come and go
    (KIP-455); a broker learns from `adding` that it is being added (the KIP-542 throttle).
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def to_state(self, tp: TopicPartition) -> PartitionState:
        return PartitionState(
            topic=tp.topic,
            partition=tp.partition,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            isr=list(self.isr),
            partition_epoch=self.partition_epoch,
            replicas=list(self.replicas),
            adding_replicas=list(self.adding),
            removing_replicas=list(self.removing),
        )

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
        }
        if self.adding or self.removing:
            doc["adding"] = list(self.adding)
            doc["removing"] = list(self.removing)
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> PartitionRecord:
        return cls(
            replicas=tuple(int(r) for r in doc["replicas"]),
            isr=tuple(int(r) for r in doc["isr"]),
            leader=int(doc["leader"]),
            leader_epoch=int(doc["leader_epoch"]),
            partition_epoch=int(doc["partition_epoch"]),
            adding=tuple(int(r) for r in doc.get("adding", ())),
            removing=tuple(int(r) for r in doc.get("removing", ())),
        )


@dataclass(slots=True, kw_only=True)
class BrokerRecord:
    """A registered broker (KRaft BrokerRegistration plus BrokerHeartbeatManager's view).

    `last_contact_ms` is None when unknown (restored from a doc). `cleanup_pending` marks a
    broker restored as fenced whose partition roles were kept as they were: if it does not
    come back within a session timeout, it is fenced for real (removed from ISRs and
    leaderships).
    """

    broker_id: int
    incarnation_id: str
    host: str
    port: int
    epoch: int
    kafka_host: str = ""  # the Kafka-protocol listener (BrokerInfo); port -1: none
    kafka_port: int = -1
    fenced: bool = False
    last_contact_ms: int | None = None
    cleanup_pending: bool = False
    # Replicas this incarnation reported it cannot write (its heartbeat's offline list; KIP-858's
    # OfflineLogDirs at partition grain). In memory only: every heartbeat repeats the whole list,
    # and a new incarnation (a restart re-opens its store) starts with none.
    offline: frozenset[TopicPartition] = frozenset()

    def info(self) -> BrokerInfo:
        return BrokerInfo(
            node_id=self.broker_id,
            host=self.host,
            port=self.port,
            kafka_host=self.kafka_host,
            kafka_port=self.kafka_port,
        )

    def event(self, name: str, **fields: Any) -> Event:
        """A `broker_*` event naming this broker and its epoch."""
        return Event(
            name=name, fields={"broker_id": self.broker_id, "broker_epoch": self.epoch, **fields}
        )

    def to_doc(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "incarnation_id": self.incarnation_id,
            "host": self.host,
            "port": self.port,
            "kafka_host": self.kafka_host,
            "kafka_port": self.kafka_port,
            "epoch": self.epoch,
        }

    @classmethod
    def restored(cls, doc: dict[str, Any]) -> BrokerRecord:
        """A broker read back from a doc: fenced, last contact unknown, cleanup pending."""
        return cls(
            broker_id=int(doc["broker_id"]),
            incarnation_id=str(doc["incarnation_id"]),
            host=str(doc["host"]),
            port=int(doc["port"]),
            # Absent from docs saved before the Kafka listener existed.
            kafka_host=str(doc.get("kafka_host", "")),
            kafka_port=int(doc.get("kafka_port", -1)),
            epoch=int(doc["epoch"]),
            fenced=True,
            last_contact_ms=None,
            cleanup_pending=True,
        )


# ---------------------------------------------------------------------------- requests


def request_effects(
    partitions: Mapping[TopicPartition, PartitionRecord],
    live_epochs: Mapping[int, int],
    changed: Set[TopicPartition],
    *,
    joined: int | None = None,
    leader_and_isr: bool = True,
    broker_list_changed: bool = True,
    configs: ConfigSnapshot | None = None,
    forced_leader_and_isr: Set[TopicPartition] = frozenset(),
) -> list[Effect]:
    """LeaderAndIsr per broker, then UpdateMetadata: the ZK controller's batch order.

    LeaderAndIsr goes to the live replicas of the `changed` partitions (if `leader_and_isr`;
    those in `forced_leader_and_isr` always, e.g. a reassignment an AlterPartition completed)
    and to a `joined` broker for all of its partitions; UpdateMetadata gives a joined broker
    every partition (and the `configs` snapshot) and the other live brokers the changed ones
    (sent even when none changed if the live broker list did). `live_epochs` maps each live
    broker to its broker epoch.
    """
    targets: dict[int, set[TopicPartition]] = {}
    for tp in changed if leader_and_isr else forced_leader_and_isr:
        for replica in partitions[tp].replicas:
            if replica in live_epochs:
                targets.setdefault(replica, set()).add(tp)
    if joined is not None:
        mine = {tp for tp, rec in partitions.items() if joined in rec.replicas}
        targets.setdefault(joined, set()).update(mine)
    # One wire state per partition, shared by every request naming it (frozen; a
    # creation of N partitions built N x (replication factor + 1) of them).
    states = _States(partitions)
    effects: list[Effect] = [
        SendLeaderAndIsr(
            broker_id=broker_id,
            broker_epoch=live_epochs[broker_id],
            partitions=states.of(targets[broker_id]),
        )
        for broker_id in sorted(targets)
        if targets[broker_id]
    ]
    if joined is not None:
        effects.append(
            SendUpdateMetadata(
                broker_ids=(joined,), partitions=states.of(partitions), configs=configs, full=True
            )
        )
    others = tuple(sorted(b for b in live_epochs if b != joined))
    if others and (changed or broker_list_changed):
        effects.append(SendUpdateMetadata(broker_ids=others, partitions=states.of(changed)))
    return effects


class _States:
    def __init__(self, partitions: Mapping[TopicPartition, PartitionRecord]) -> None:
        self._partitions = partitions
        self._made: dict[TopicPartition, PartitionState] = {}

    def of(self, tps: Iterable[TopicPartition]) -> tuple[PartitionState, ...]:
        """The states of `tps`, sorted by (topic, partition)."""
        return tuple(self._one(tp) for tp in sorted(tps))

    def _one(self, tp: TopicPartition) -> PartitionState:
        state = self._made.get(tp)
        if state is None:
            state = self._made[tp] = self._partitions[tp].to_state(tp)
        return state
