"""The controller state machine: broker liveness, topics, partition leaders and ISRs.

Modelled on KRaft's QuorumController (ClusterControlManager for registrations and broker
epochs, BrokerHeartbeatManager for session timeouts, ReplicationControlManager for topics,
fencing and AlterPartition), but it pushes LeaderAndIsr / UpdateMetadata to brokers as the
ZooKeeper-era KafkaController did, instead of brokers tailing a metadata log.

Rules:
- Sans-IO and deterministic: every call takes its inputs (and `now_ms` where time matters) and
  returns a list of effects (core/controller_model.py); randomness is `self.rng` only.
- The shell persists `to_doc()` after every call that returned effects, then executes them.
- Broker epochs come from a persisted counter, so a restarted controller never reuses one.
  `from_doc` bumps `controller_epoch` (a restarted controller is a new controller) and restores
  every broker fenced with last contact unknown; the first `now_ms` seen starts their clocks,
  and a broker that is not back within a session timeout is then fenced for real.
- Partitions are frozen `PartitionRecord`s keyed by TopicPartition, replaced whole on change.
- Liveness: a broker is live while unfenced; it is fenced when `last contact + session timeout
  < now` (strictly: at exactly the timeout it is still live), when a new incarnation of it
  registers (a restart), and it is unfenced by registering or by heartbeating with its epoch.
- LeaderAndIsr goes to the live replicas of every partition the controller changed (leader or
  ISR, like the ZK controller's OfflineReplica transition), and to a broker that joins for all
  its partitions; UpdateMetadata goes to every live broker with the changed partitions (all
  partitions for a joining broker).
- Dynamic configs (core/dynamic_config.py, core/controller_configs.py) are one versioned
  `ConfigSnapshot`, persisted in the document; it is pushed whole in UpdateMetadata to every live
  broker when an alter changes it, and to every broker that joins.
- Reassignments (core/controller_reassign.py, KIP-455) are persisted with the partitions. Every
  call that changes ISRs ends in `_effects`, which first completes the reassignments whose
  targets are now in sync, removes the throttles no reassignment claims any more, and sends
  StopReplica(delete) to the live brokers that lost replicas (after LeaderAndIsr/UpdateMetadata).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from minikafka.core.controller_alter import alter_one
from minikafka.core.controller_changes import (
    PartitionChange,
    fence_changes,
    leaderless_changes,
    offline_changes,
    unfence_changes,
)
from minikafka.core.controller_configs import (
    alter_configs,
    created_topic_configs,
    describe_configs,
)
from minikafka.core.controller_model import (
    BrokerRecord,
    ControllerConfig,
    Effect,
    Event,
    PartitionRecord,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    request_effects,
)
from minikafka.core.controller_reassign import Reassignments
from minikafka.core.controller_throttles import remove_unclaimed
from minikafka.core.controller_topics import TopicPlan, plan_topic, replicas_per_broker
from minikafka.core.dynamic_config import TOPICS, ConfigSnapshot, topic_overrides
from minikafka.core.hosts import registration_refused
from minikafka.core.producer_ids import ProducerIdBlock, allocate_block
from minikafka.core.types import TopicPartition
from minikafka.errors import ConfigError, ErrorCode
from minikafka.wire.messages import (
    NO_LEADER,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterPartitionItem,
    AlterPartitionItemResponse,
    BrokerInfo,
    ConfigEntity,
    CreatableTopic,
    CreatableTopicResult,
    DescribeConfigsResource,
    DescribeConfigsResult,
    OngoingPartitionReassignment,
    PartitionState,
    ReassignablePartition,
    ReassignablePartitionResponse,
)

# The effect and config types live in controller_model; importable from here too.
__all__ = [
    "ControllerConfig",
    "ControllerState",
    "Effect",
    "Event",
    "SendLeaderAndIsr",
    "SendStopReplica",
    "SendUpdateMetadata",
]

DOC_VERSION = 1


class ControllerState:
    def __init__(self, *, controller_id: int, config: ControllerConfig, rng: random.Random) -> None:
        self.controller_id = controller_id
        self.config = config
        self.rng = rng
        self.controller_epoch = 1
        self._next_broker_epoch = 1
        self._brokers: dict[int, BrokerRecord] = {}
        self._topics: dict[str, dict[str, str]] = {}  # name -> configs
        self._partitions: dict[TopicPartition, PartitionRecord] = {}
        self._configs = ConfigSnapshot()
        self._reassign = Reassignments()
        self._next_producer_id = 0  # KIP-730: the first id of the next block handed out

    # ------------------------------------------------------------------------ persistence

    def to_doc(self) -> dict[str, Any]:
        """The persistent state, msgpack-able (str/int/bool/list/dict/None only)."""
        return {
            "version": DOC_VERSION,
            "controller_epoch": self.controller_epoch,
            "next_broker_epoch": self._next_broker_epoch,
            "brokers": [self._brokers[b].to_doc() for b in sorted(self._brokers)],
            "topics": [
                {
                    "name": name,
                    "configs": dict(configs),
                    "partitions": [rec.to_doc() for rec in self._topic_records(name)],
                }
                for name, configs in sorted(self._topics.items())
            ],
            "configs": self._configs.to_doc(),
            "reassignments": self._reassign.to_doc(),
            "next_producer_id": self._next_producer_id,
        }

    @classmethod
    def from_doc(
        cls,
        doc: dict[str, Any],
        *,
        controller_id: int,
        config: ControllerConfig,
        rng: random.Random,
    ) -> ControllerState:
        """Restore from `to_doc()`: controller_epoch + 1, every broker fenced, contact unknown."""
        state = cls(controller_id=controller_id, config=config, rng=rng)
        try:
            if doc["version"] != DOC_VERSION:
                raise ValueError(f"version {doc['version']!r}, expected {DOC_VERSION}")
            state.controller_epoch = int(doc["controller_epoch"]) + 1
            state._next_broker_epoch = int(doc["next_broker_epoch"])
            for broker_doc in doc["brokers"]:
                broker = BrokerRecord.restored(broker_doc)
                state._brokers[broker.broker_id] = broker
            for topic in doc["topics"]:
                name = str(topic["name"])
                state._topics[name] = {str(k): str(v) for k, v in topic["configs"].items()}
                for index, rec_doc in enumerate(topic["partitions"]):
                    state._partitions[TopicPartition(name, index)] = PartitionRecord.from_doc(
                        rec_doc
                    )
            if "configs" in doc:  # absent from documents written before dynamic configs
                state._configs = ConfigSnapshot.from_doc(doc["configs"])
            if "reassignments" in doc:  # absent from documents written before reassignments
                state._reassign = Reassignments.from_doc(doc["reassignments"])
            state._next_producer_id = int(doc.get("next_producer_id", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"controller metadata document is malformed: {exc!r}") from exc
        return state

    # ------------------------------------------------------------------------ queries

    def partition_states(self, topics: Sequence[str] | None = None) -> list[PartitionState]:
        """Partitions sorted by (topic, partition); unknown topics are skipped."""
        wanted = None if topics is None else set(topics)
        return [
            rec.to_state(tp)
            for tp, rec in sorted(self._partitions.items())
            if wanted is None or tp.topic in wanted
        ]

    def live_brokers(self) -> list[BrokerInfo]:
        return [self._brokers[b].info() for b in self._live_ids()]

    def broker_info(self, broker_id: int) -> BrokerInfo | None:
        """Address of a registered broker, fenced or not (None if never registered)."""
        broker = self._brokers.get(broker_id)
        return None if broker is None else broker.info()

    def broker_epoch(self, broker_id: int) -> int | None:
        broker = self._brokers.get(broker_id)
        return None if broker is None else broker.epoch

    def is_fenced(self, broker_id: int) -> bool:
        broker = self._brokers.get(broker_id)
        return broker is None or broker.fenced

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def topic_configs(self, topic: str) -> dict[str, str]:
        """A copy of the topic's configs as given at creation; KeyError if unknown."""
        return dict(self._topics[topic])

    def config_snapshot(self) -> ConfigSnapshot:
        """Every dynamic config, as last committed (immutable)."""
        return self._configs

    def pushed_configs(self) -> ConfigSnapshot | None:
        """The snapshot a joining broker is sent: None while no config was ever set (version 0,
        empty: what a broker starts with anyway)."""
        return self._configs if self._configs.version > 0 else None

    def describe(self) -> dict[str, Any]:
        """A plain summary for the CLI and the event log."""
        states = self.partition_states()
        return {
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "brokers": [
                {
                    "broker_id": b.broker_id,
                    "host": b.host,
                    "port": b.port,
                    "broker_epoch": b.epoch,
                    "fenced": b.fenced,
                    "last_contact_ms": b.last_contact_ms,
                }
                for _, b in sorted(self._brokers.items())
            ],
            "topics": {
                name: {
                    "configs": {**configs, **self._configs.configs(TOPICS, name)},
                    "partitions": len(self._topic_records(name)),
                }
                for name, configs in sorted(self._topics.items())
            },
            "partitions": len(states),
            "offline_partitions": sum(1 for s in states if s.leader == NO_LEADER),
            "under_replicated_partitions": sum(1 for s in states if len(s.isr) < len(s.replicas)),
            "reassigning_partitions": len(self._reassign.ongoing),
        }

    # ------------------------------------------------------------------------ brokers

    def register_broker(
        self, *, broker_id: int, incarnation_id: str, host: str, port: int, now_ms: int
    ) -> tuple[int, int, list[Effect]]:
        """-> (error_code, broker_epoch, effects). BrokerRegistration (ClusterControlManager)."""
        self._observe(now_ms)
        if broker_id < 0:
            return ErrorCode.INVALID_REQUEST, -1, []
        refused = registration_refused(broker_id, host, port)  # issue 11, see core/hosts.py
        if refused is not None:
            return ErrorCode.INVALID_REQUEST, -1, [refused]
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        known = self._brokers.get(broker_id)
        if known is not None and known.incarnation_id == incarnation_id:
            # A retry of a registration whose answer was lost: same epoch.
            known.last_contact_ms = now_ms
            if not known.fenced:
                return ErrorCode.NONE, known.epoch, []
            changed |= self._unfence(known, events)
            return ErrorCode.NONE, known.epoch, self._effects(events, changed, joined=broker_id)
        if known is not None and (not known.fenced or known.cleanup_pending):
            changed |= self._fence(known, "restart", events)  # a new incarnation: a restart
        broker = BrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            host=host,
            port=port,
            epoch=self._next_broker_epoch,
            fenced=True,
            last_contact_ms=now_ms,
        )
        self._next_broker_epoch += 1
        self._brokers[broker_id] = broker
        events.append(
            broker.event(
                "broker_registered",
                incarnation_id=incarnation_id,
                host=host,
                port=port,
                restart=known is not None,
            )
        )
        changed |= self._unfence(broker, events)
        return ErrorCode.NONE, broker.epoch, self._effects(events, changed, joined=broker_id)

    def allocate_producer_ids(
        self, *, broker_id: int, broker_epoch: int
    ) -> tuple[int, ProducerIdBlock | None, list[Effect]]:
        """-> (error_code, block, effects). AllocateProducerIds (KIP-730): the event effect makes
        the shell persist the advanced counter before the block is answered."""
        code, block = allocate_block(
            self._next_producer_id,
            broker_epoch=broker_epoch,
            registered_epoch=self.broker_epoch(broker_id),
        )
        if block is None:
            return code, None, []
        self._next_producer_id = block.next_block_first_id
        event = Event(
            name="producer_ids_allocated",
            fields={"broker_id": broker_id, "first_id": block.first_id, "size": block.size},
        )
        return code, block, [event]

    def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        now_ms: int,
        offline: Iterable[TopicPartition] = (),
    ) -> tuple[int, bool, list[Effect]]:
        """-> (error_code, is_fenced, effects). BrokerHeartbeat: keeps the broker live.
        `offline`: the replicas the broker cannot write (it repeats the whole list each time);
        newly reported ones leave their ISRs and their leaderships (`offline_changes`)."""
        self._observe(now_ms)
        broker = self._brokers.get(broker_id)
        if broker is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED, True, []
        if broker_epoch != broker.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, True, []
        broker.last_contact_ms = now_ms
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        new_offline = frozenset(offline) - broker.offline
        if new_offline:
            broker.offline |= new_offline
            events.append(
                broker.event("replicas_offline", partitions=[str(tp) for tp in sorted(new_offline)])
            )
            changes = offline_changes(
                self._partitions,
                broker_id,
                new_offline,
                live=set(self._live_ids()),
                unclean_allowed=self._unclean_allowed,
            )
            changed |= self._apply(changes, events)
        joined = None
        if broker.fenced:
            changed |= self._unfence(broker, events)
            joined = broker_id
        if not events:
            return ErrorCode.NONE, False, []
        return ErrorCode.NONE, False, self._effects(events, changed, joined=joined)

    def next_deadline_ms(self) -> int | None:
        """The first now_ms at which `on_deadline` fences someone (last + timeout + 1)."""
        deadlines = [
            b.last_contact_ms + self.config.session_timeout_ms + 1
            for b in self._brokers.values()
            if (not b.fenced or b.cleanup_pending) and b.last_contact_ms is not None
        ]
        return min(deadlines) if deadlines else None

    def on_deadline(self, now_ms: int) -> list[Effect]:
        """Fence every broker whose last contact + session timeout < now_ms."""
        self._observe(now_ms)
        expired = [
            b
            for _, b in sorted(self._brokers.items())
            if (not b.fenced or b.cleanup_pending)
            and b.last_contact_ms is not None
            and b.last_contact_ms + self.config.session_timeout_ms < now_ms
        ]
        if not expired:
            return []
        reasons = {
            b.broker_id: "controller_restart_timeout" if b.cleanup_pending else "session_timeout"
            for b in expired
        }
        for broker in expired:
            broker.fenced = True  # first, so that none of them is elected in the meantime
        events: list[Event] = []
        changed: set[TopicPartition] = set()
        for broker in expired:
            changed |= self._fence(broker, reasons[broker.broker_id], events)
        return self._effects(events, changed)

    # ------------------------------------------------------------------------ topics

    def create_topics(
        self, topics: Sequence[CreatableTopic], now_ms: int, *, validate_only: bool = False
    ) -> tuple[list[CreatableTopicResult], list[Effect]]:
        """CreateTopics: one result per topic, in order; one bad topic doesn't stop the others.

        `validate_only` checks and places (consuming rng draws) but creates nothing.
        """
        self._observe(now_ms)
        counts = Counter(t.name for t in topics)
        live = self._live_ids()
        results: list[CreatableTopicResult] = []
        events: list[Event] = []
        created: set[TopicPartition] = set()
        configs = self._configs
        hosted = replicas_per_broker(self._partitions.values())  # topics planned here add up
        for topic in topics:
            if counts[topic.name] > 1:
                message = (
                    f"Create topics request contains multiple entries for topic '{topic.name}'."
                )
                results.append(
                    CreatableTopicResult(
                        name=topic.name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message=message,
                    )
                )
                continue
            plan = plan_topic(
                topic,
                existing=self._topics,
                registered=self._brokers,
                live=live,
                config=self.config,
                rng=self.rng,
                hosted=hosted,
            )
            if isinstance(plan, CreatableTopicResult):
                results.append(plan)
                continue
            hosted.update(b for replicas in plan.replicas for b in replicas)
            results.append(CreatableTopicResult(name=topic.name, error_code=ErrorCode.NONE))
            if not validate_only:
                partitions, configs = self._create(plan, events, configs)
                created |= partitions
        if not created:
            return results, []
        push = self._push_configs(configs) if configs is not self._configs else []
        effects = self._effects(events, created, broker_list_changed=False)
        # The throttle lists go out before the LeaderAndIsr that starts the new replicas'
        # fetchers, so no fetch escapes them (KRaft writes a topic's ConfigRecords before its
        # TopicRecord, in the same batch).
        n_events = sum(isinstance(e, Event) for e in effects)
        return results, [*effects[:n_events], *push, *effects[n_events:]]

    def _create(
        self, plan: TopicPlan, events: list[Event], configs: ConfigSnapshot
    ) -> tuple[set[TopicPartition], ConfigSnapshot]:
        """Record the topic and its partitions; -> (them, `configs` with the topic's throttle
        lists given at creation, at the next snapshot version)."""
        # KRaft createTopic: leader = first ISR member, leader and partition epochs 0.
        self._topics[plan.name] = dict(plan.configs)
        if plan.dynamic_configs:  # one snapshot version for the whole request
            configs, event = created_topic_configs(
                configs, plan.name, plan.dynamic_configs, version=self._configs.version + 1
            )
            events.append(event)
        created: set[TopicPartition] = set()
        for index, (replicas, isr) in enumerate(zip(plan.replicas, plan.isrs, strict=True)):
            tp = TopicPartition(plan.name, index)
            self._partitions[tp] = PartitionRecord(
                replicas=tuple(replicas), isr=tuple(isr), leader=isr[0]
            )
            created.add(tp)
        fields = {
            "topic": plan.name,
            "partitions": len(plan.replicas),
            "replication_factor": len(plan.replicas[0]),
            "assignment": [list(r) for r in plan.replicas],
            "configs": {**plan.configs, **plan.dynamic_configs},
        }
        events.append(Event(name="topic_created", fields=fields))
        return created, configs

    # ------------------------------------------------------------------------ configs

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], *, validate_only: bool = False
    ) -> tuple[list[AlterConfigsResourceResponse], list[Effect]]:
        """IncrementalAlterConfigs: one response per resource, in order.

        A change emits `config_changed` events and pushes the whole new snapshot to every live
        broker; `validate_only` answers as if applied and changes nothing. A topic whose
        unclean.leader.election.enable turns true gets an unclean election at once for its
        leaderless partitions (Kafka's controller does on that change:
        KafkaController.processTopicUncleanLeaderElectionEnable), not at the next fence.
        """
        responses, after, events = alter_configs(
            self._configs, resources, topic_exists=self._topics.__contains__
        )
        if validate_only or after is self._configs:
            return responses, []
        pushed = self._push_configs(after)
        elections: list[Event] = []
        changed = self._apply(
            leaderless_changes(
                self._partitions,
                live=set(self._live_ids()),
                unclean_allowed=self._unclean_allowed,
                reason="unclean_enabled",
                only=lambda tp, _record: self._unclean_allowed(tp.topic),
            ),
            elections,
        )
        tail = self._effects(elections, changed) if changed else []
        return responses, [*events, *pushed, *tail]

    def describe_configs(
        self, resources: Sequence[DescribeConfigsResource]
    ) -> list[DescribeConfigsResult]:
        """DescribeConfigs: see core/controller_configs.py for the shape of the results."""
        return describe_configs(self._configs, resources, topic_exists=self._topics.__contains__)

    def _push_configs(self, after: ConfigSnapshot) -> list[Effect]:
        """Commit a new snapshot and push it whole to every live broker."""
        self._configs = after
        live = tuple(self._live_ids())
        return [SendUpdateMetadata(broker_ids=live, partitions=(), configs=after)] if live else []

    # ------------------------------------------------------------------------ reassignments

    def alter_partition_reassignments(
        self,
        items: Sequence[ReassignablePartition],
        throttle_configs: Sequence[ConfigEntity] = (),
    ) -> tuple[int, str | None, list[ReassignablePartitionResponse], list[Effect]]:
        """-> (error_code, error_message, per-partition responses, effects).

        AlterPartitionReassignments (KIP-455, core/controller_reassign.py): start, replace or
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

    # ------------------------------------------------------------------------ internals

    def _live_ids(self) -> list[int]:
        return sorted(b for b, rec in self._brokers.items() if not rec.fenced)

    def _topic_records(self, name: str) -> list[PartitionRecord]:
        records = []
        while (tp := TopicPartition(name, len(records))) in self._partitions:
            records.append(self._partitions[tp])
        return records

    def _observe(self, now_ms: int) -> None:
        # A restored broker's session clock starts at the first time this controller sees.
        for broker in self._brokers.values():
            if broker.cleanup_pending and broker.last_contact_ms is None:
                broker.last_contact_ms = now_ms

    def _apply(
        self, changes: Iterable[PartitionChange], events: list[Event]
    ) -> set[TopicPartition]:
        tps: set[TopicPartition] = set()
        for change in changes:
            self._partitions[change.tp] = change.after
            events.append(change.event())
            tps.add(change.tp)
        return tps

    def _fence(self, broker: BrokerRecord, reason: str, events: list[Event]) -> set[TopicPartition]:
        broker.fenced = True
        broker.cleanup_pending = False
        events.append(broker.event("broker_fenced", reason=reason))
        changes = fence_changes(
            self._partitions,
            broker.broker_id,
            live=set(self._live_ids()),
            unclean_allowed=self._unclean_allowed,
            reason=reason,
        )
        return self._apply(changes, events)

    def _unclean_allowed(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable, else the controller's (Kafka's LogConfig
        override of the broker default)."""
        own = topic_overrides(self._configs, topic).unclean_leader_election
        return self.config.unclean_leader_election if own is None else own

    def _unfence(self, broker: BrokerRecord, events: list[Event]) -> set[TopicPartition]:
        broker.fenced = False
        broker.cleanup_pending = False
        events.append(broker.event("broker_unfenced"))
        changes = unfence_changes(
            self._partitions,
            broker.broker_id,
            live=set(self._live_ids()),
            unclean_allowed=self._unclean_allowed,
        )
        return self._apply(changes, events)

    def _effects(
        self,
        events: list[Event],
        changed: set[TopicPartition],
        *,
        joined: int | None = None,
        leader_and_isr: bool = True,
        broker_list_changed: bool = True,
    ) -> list[Effect]:
        # Reassignments whose targets are now in sync complete (the AlterPartition that did it
        # needs no LeaderAndIsr, but a completion does), throttles no move claims go.
        progress = self._reassign.progress(self._partitions, changed, live=set(self._live_ids()))
        completed = self._apply(progress.changes, events)
        events += progress.events
        tail: list[Effect] = []
        unclaimed = self._reassign.take_unclaimed()
        if unclaimed:
            after, throttle_events = remove_unclaimed(
                self._configs, unclaimed, topic_exists=self._topics.__contains__
            )
            events += throttle_events
            if after is not self._configs:
                tail = self._push_configs(after)
        live_epochs = {b: rec.epoch for b, rec in self._brokers.items() if not rec.fenced}
        requests = request_effects(
            self._partitions,
            live_epochs,
            changed | completed,
            joined=joined,
            leader_and_isr=leader_and_isr,
            broker_list_changed=broker_list_changed,
            configs=self.pushed_configs(),
            forced_leader_and_isr=completed,
        )
        stops: list[Effect] = list(self._reassign.take_stops(live_epochs, self._partitions))
        return [*events, *requests, *stops, *tail]
