"""The controller's tables and the steps every request shares (ControllerState's base).

`ControllerBase` owns the state of the controller (core/controller/state.py has the rules it
keeps): the brokers, topics and partitions, the dynamic-config snapshot and the reassignments,
with the read-only queries the shell and the CLI ask. The request handlers
(core/controller/broker_requests.py, topic_requests.py, partition_requests.py) change that state
only through the helpers here:

- `_apply` replaces partition records with the `PartitionChange`s a request produced, logging an
  event for each (KRaft's ReplicationControlManager writes a PartitionChangeRecord per change);
- `_fence` / `_unfence` move a broker out of and into the live set with the partition
  transitions that follow (core/controller/changes.py);
- `_effects` ends every call that changed ISRs: it completes the reassignments now in sync,
  removes the throttles no move claims any more, and orders the requests to the brokers
  (events first, then LeaderAndIsr/UpdateMetadata, then StopReplica, then config pushes).
"""

import random
from collections.abc import Iterable, Sequence
from typing import Any

from minikafka.common import TopicPartition
from minikafka.core.controller.changes import PartitionChange, fence_changes, unfence_changes
from minikafka.core.controller.model import (
    BrokerRecord,
    ControllerConfig,
    Effect,
    Event,
    PartitionRecord,
    SendUpdateMetadata,
    request_effects,
)
from minikafka.core.controller.reassign import Reassignments
from minikafka.core.controller.records import TrackedDict
from minikafka.core.controller.throttles import remove_unclaimed
from minikafka.core.dynamic_config import ConfigSnapshot, topic_overrides
from minikafka.wire.messages import BrokerInfo, PartitionState


class ControllerBase:
    def __init__(self, *, controller_id: int, config: ControllerConfig, rng: random.Random) -> None:
        self.controller_id = controller_id
        self.config = config
        self.rng = rng
        self.controller_epoch = 1
        self._next_broker_epoch = 1
        self._brokers: dict[int, BrokerRecord] = {}
        # The big tables report the keys they changed (core/controller/records.py): a save
        # writes those records only.
        self._topics: TrackedDict[str, dict[str, str]] = TrackedDict()  # name -> configs
        self._partitions: TrackedDict[TopicPartition, PartitionRecord] = TrackedDict()
        self._configs = ConfigSnapshot()
        self._reassign = Reassignments()
        self._next_producer_id = 0  # KIP-730: the first id of the next block handed out
        # What the last save holds of the small parts, to write them only when they changed.
        self._saved_brokers: dict[int, dict[str, Any]] = {}
        self._saved_configs: ConfigSnapshot | None = None
        self._saved_reassign: dict[str, Any] | None = None
        self._stale_keys: tuple[str, ...] = ()  # records to delete at the next save

    # ------------------------------------------------------------------------ queries

    def partition_states(self, topics: Sequence[str] | None = None) -> list[PartitionState]:
        """Partitions sorted by (topic, partition); unknown topics are skipped. Naming topics
        costs their partitions, not the cluster's (a Metadata request with a topic
        filter was answered by sorting and scanning every partition)."""
        if topics is None:
            return [rec.to_state(tp) for tp, rec in sorted(self._partitions.items())]
        return [
            rec.to_state(TopicPartition(name, index))
            for name in sorted(set(topics))
            for index, rec in enumerate(self._topic_records(name))
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

    def _push_configs(self, after: ConfigSnapshot) -> list[Effect]:
        """Commit a new snapshot and push it whole to every live broker."""
        self._configs = after
        live = tuple(self._live_ids())
        return [SendUpdateMetadata(broker_ids=live, partitions=(), configs=after)] if live else []

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
