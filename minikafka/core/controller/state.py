"""The controller state machine: broker liveness, topics, partition leaders and ISRs.

Modelled on KRaft's QuorumController (ClusterControlManager for registrations and broker
epochs, BrokerHeartbeatManager for session timeouts, ReplicationControlManager for topics,
fencing and AlterPartition), but it pushes LeaderAndIsr / UpdateMetadata to brokers as the
ZooKeeper-era KafkaController did, instead of brokers tailing a metadata log.

Rules:
- Sans-IO and deterministic: every call takes its inputs (and `now_ms` where time matters) and
  returns a list of effects (core/controller/model.py); randomness is `self.rng` only.
- The shell persists `take_changes()` after every call that returned effects, then executes
  them: the records (core/controller/records.py) of what changed since the last save, so a
  save costs the change, not the cluster. `to_doc` / `from_doc` are the whole
  state as one document, which `from_records` restores through.
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
- Dynamic configs (core/dynamic_config.py, core/controller/configs.py) are one versioned
  `ConfigSnapshot`, persisted in the document; it is pushed whole in UpdateMetadata to every live
  broker when an alter changes it, and to every broker that joins.
- Reassignments (core/controller/reassign.py, KIP-455) are persisted with the partitions. Every
  call that changes ISRs ends in `_effects`, which first completes the reassignments whose
  targets are now in sync, removes the throttles no reassignment claims any more, and sends
  StopReplica(delete) to the live brokers that lost replicas (after LeaderAndIsr/UpdateMetadata).

Where things are: the tables and the steps shared by every request are ControllerBase's
(core/controller/base.py); the handlers are split by the requests they answer
(broker_requests.py, topic_requests.py, partition_requests.py); this module adds persistence
(`to_doc` / `from_doc`, `take_changes` / `from_records`) and `describe`.
"""

from __future__ import annotations

import random
from typing import Any

from minikafka.common import NO_LEADER, TopicPartition
from minikafka.core.controller.broker_requests import BrokerRequests
from minikafka.core.controller.model import BrokerRecord, ControllerConfig, PartitionRecord
from minikafka.core.controller.partition_requests import PartitionRequests
from minikafka.core.controller.reassign import Reassignments
from minikafka.core.controller.records import (
    CONFIGS,
    HEADER,
    LEGACY_DOC,
    REASSIGNMENTS,
    RecordChanges,
    broker_key,
    doc_from_records,
    keyed,
    partition_key,
    topic_key,
)
from minikafka.core.controller.topic_requests import TopicRequests
from minikafka.core.dynamic_config import TOPICS, ConfigSnapshot
from minikafka.errors import ConfigError

DOC_VERSION = 1


class ControllerState(BrokerRequests, TopicRequests, PartitionRequests):
    """The whole controller: the tables (ControllerBase), the request handlers (one base class
    per family of requests), and here its persistence and its summary."""

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

    # ------------------------------------------------------------------------ records

    def _header(self) -> dict[str, Any]:
        return {
            "version": DOC_VERSION,
            "controller_epoch": self.controller_epoch,
            "next_broker_epoch": self._next_broker_epoch,
            "next_producer_id": self._next_producer_id,
        }

    def to_records(self) -> dict[str, Any]:
        """Every record of the state (core/controller/records.py): what `take_changes` gives
        after construction or `from_doc`."""
        return {
            HEADER: self._header(),
            **{broker_key(b): rec.to_doc() for b, rec in self._brokers.items()},
            **{topic_key(name): {"configs": dict(c)} for name, c in self._topics.items()},
            **{partition_key(tp): rec.to_doc() for tp, rec in self._partitions.items()},
            CONFIGS: self._configs.to_doc(),
            REASSIGNMENTS: self._reassign.to_doc(),
        }

    def take_changes(self) -> RecordChanges:
        """The records changed since the last take (all of them the first time): the header,
        the touched topics and partitions, and the brokers, configs and reassignments whose
        saved form differs. Costs the change plus O(brokers + ongoing reassignments)."""
        puts, deletes = keyed(
            self._partitions.take_touched(), self._partitions, partition_key, _to_doc
        )
        topic_puts, topic_deletes = keyed(
            self._topics.take_touched(), self._topics, topic_key, lambda c: {"configs": dict(c)}
        )
        puts.update(topic_puts)
        deletes += topic_deletes
        puts[HEADER] = self._header()
        for b, rec in self._brokers.items():
            doc = rec.to_doc()
            if self._saved_brokers.get(b) != doc:
                puts[broker_key(b)] = self._saved_brokers[b] = doc
        if self._configs is not self._saved_configs:
            puts[CONFIGS] = self._configs.to_doc()
            self._saved_configs = self._configs
        reassign = self._reassign.to_doc()
        if reassign != self._saved_reassign:
            puts[REASSIGNMENTS] = self._saved_reassign = reassign
        deletes += self._stale_keys
        self._stale_keys = ()
        return RecordChanges(puts=puts, deletes=tuple(deletes))

    @classmethod
    def from_records(
        cls,
        records: dict[str, Any],
        *,
        controller_id: int,
        config: ControllerConfig,
        rng: random.Random,
    ) -> ControllerState:
        """Restore from saved records, as `from_doc` restores (controller_epoch + 1, brokers
        fenced); what they hold is then clean, so the first save writes the header only. A store
        written before records holds the whole document: all of it is rewritten as records."""
        try:
            doc = doc_from_records(records)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"controller metadata records are malformed: {exc!r}") from exc
        state = cls.from_doc(doc, controller_id=controller_id, config=config, rng=rng)
        if HEADER not in records:
            state._stale_keys = (LEGACY_DOC,)
            return state
        # What the records hold is saved already (the bumped epoch is in every save's header).
        state._partitions.take_touched()
        state._topics.take_touched()
        state._saved_brokers = {b: rec.to_doc() for b, rec in state._brokers.items()}
        state._saved_configs = state._configs
        state._saved_reassign = state._reassign.to_doc()
        return state

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
                    "kafka_port": b.kafka_port,
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


def _to_doc(record: PartitionRecord) -> dict[str, Any]:
    return record.to_doc()
