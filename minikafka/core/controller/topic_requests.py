"""Topic and config requests to the controller: CreateTopics, CreatePartitions, DeleteTopics,
IncrementalAlterConfigs, DescribeConfigs.

The checks and the placement are pure (core/controller/topics.py, core/controller/configs.py);
here they are applied to the controller's tables. A config change is one new `ConfigSnapshot`,
pushed whole to every live broker (`_push_configs`, core/controller/base.py), as KRaft's
ConfigurationControlManager commits one ConfigRecord batch per request.
"""

from collections import Counter
from collections.abc import Sequence

from minikafka.common import TopicPartition
from minikafka.core.controller.base import ControllerBase
from minikafka.core.controller.changes import leaderless_changes
from minikafka.core.controller.configs import alter_configs, created_topic_event, describe_configs
from minikafka.core.controller.model import Effect, Event, PartitionRecord, SendUpdateMetadata
from minikafka.core.controller.topics import (
    INTERNAL_TOPICS,
    TopicPlan,
    plan_partitions,
    plan_topic,
    replicas_per_broker,
)
from minikafka.core.dynamic_config import TOPICS
from minikafka.errors import ErrorCode, bounded_message
from minikafka.wire.messages import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsTopic,
    DescribeConfigsResource,
    DescribeConfigsResult,
)


class TopicRequests(ControllerBase):
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
        throttles: dict[tuple[str, str], dict[str, str]] = {}  # the topics' configs, applied once
        hosted = replicas_per_broker(self._partitions.values())  # topics planned here add up
        being_deleted = self._reassign.topics_being_deleted()
        for topic in topics:
            if topic.name in being_deleted:
                # Kafka (before topic ids) refused it the same way: a broker that has yet to
                # drop the old topic's log would keep it as the new topic's replica.
                message = f"Topic '{topic.name}' is marked for deletion."
                results.append(_result(topic.name, ErrorCode.TOPIC_ALREADY_EXISTS, message))
                continue
            if counts[topic.name] > 1:
                message = (
                    f"Create topics request contains multiple entries for topic '{topic.name}'."
                )
                results.append(
                    CreatableTopicResult(
                        name=topic.name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message=bounded_message(message),
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
                created |= self._create(plan, events)
                if plan.dynamic_configs:
                    throttles[(TOPICS, plan.name)] = plan.dynamic_configs
        if not created:
            return results, []
        # One snapshot version for the whole request, built once (a snapshot per
        # topic copied every entity per topic).
        push = (
            self._push_configs(
                self._configs.with_entities(throttles, version=self._configs.version + 1)
            )
            if throttles
            else []
        )
        effects = self._effects(events, created, broker_list_changed=False)
        # The throttle lists go out before the LeaderAndIsr that starts the new replicas'
        # fetchers, so no fetch escapes them (KRaft writes a topic's ConfigRecords before its
        # TopicRecord, in the same batch).
        n_events = sum(isinstance(e, Event) for e in effects)
        return results, [*effects[:n_events], *push, *effects[n_events:]]

    def _create(self, plan: TopicPlan, events: list[Event]) -> set[TopicPartition]:
        """Record the topic and its partitions (-> them); the caller commits the throttle lists
        given at creation, at the next snapshot version."""
        # KRaft createTopic: leader = first ISR member, leader and partition epochs 0.
        self._topics[plan.name] = dict(plan.configs)
        if plan.dynamic_configs:
            version = self._configs.version + 1
            events.append(created_topic_event(plan.name, plan.dynamic_configs, version=version))
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
        return created

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], now_ms: int, *, validate_only: bool = False
    ) -> tuple[list[CreatableTopicResult], list[Effect]]:
        """CreatePartitions: grow each topic to its count; one result per topic, in order.
        New partitions start as a created topic's do (leader = first live replica, epochs 0),
        and go out in one LeaderAndIsr and UpdateMetadata."""
        self._observe(now_ms)
        live = self._live_ids()
        counts = Counter(t.name for t in topics)
        results: list[CreatableTopicResult] = []
        events: list[Event] = []
        created: set[TopicPartition] = set()
        hosted = replicas_per_broker(self._partitions.values())
        for topic in topics:
            if counts[topic.name] > 1:
                message = f"Create partitions request contains multiple entries for {topic.name}."
                results.append(_result(topic.name, ErrorCode.INVALID_REQUEST, message))
                continue
            current = self._topic_records(topic.name) if topic.name in self._topics else None
            plan = plan_partitions(
                topic.name,
                topic.count,
                topic.assignments,
                current=None if current is None else [list(r.replicas) for r in current],
                registered=self._brokers,
                live=live,
                config=self.config,
                rng=self.rng,
                hosted=hosted,
            )
            if isinstance(plan, tuple):
                results.append(_result(topic.name, *plan))
                continue
            hosted.update(b for replicas in plan.replicas for b in replicas)
            results.append(_result(topic.name, ErrorCode.NONE))
            if validate_only:
                continue
            for offset, (replicas, isr) in enumerate(zip(plan.replicas, plan.isrs, strict=True)):
                tp = TopicPartition(plan.name, plan.first_index + offset)
                self._partitions[tp] = PartitionRecord(
                    replicas=tuple(replicas), isr=tuple(isr), leader=isr[0]
                )
                created.add(tp)
            fields = {
                "topic": plan.name,
                "from": plan.first_index,
                "partitions": plan.first_index + len(plan.replicas),
                "assignment": [list(r) for r in plan.replicas],
            }
            events.append(Event(name="partitions_created", fields=fields))
        if not created:
            return results, []
        return results, self._effects(events, created, broker_list_changed=False)

    def delete_topics(
        self, names: Sequence[str], now_ms: int
    ) -> tuple[list[CreatableTopicResult], list[Effect]]:
        """DeleteTopics: each topic's partitions go from the controller's tables at once, every
        broker forgets it (UpdateMetadata `deleted_topics`), and each replica gets
        StopReplica(delete), a fenced one when it returns; its dynamic configs go too. One
        result per name, in order. Refused: an unknown topic, an internal one, one being
        reassigned (cancel the move first)."""
        self._observe(now_ms)
        results: list[CreatableTopicResult] = []
        events: list[Event] = []
        deleted: list[str] = []
        config_changes: dict[tuple[str, str], dict[str, str]] = {}
        moving = {tp.topic for tp in self._reassign.ongoing}
        for name in names:
            if name not in self._topics or name in deleted:
                message = f"Topic '{name}' does not exist."
                results.append(_result(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message))
                continue
            if name in INTERNAL_TOPICS:
                message = f"Topic '{name}' is internal: it cannot be deleted."
                results.append(_result(name, ErrorCode.INVALID_REQUEST, message))
                continue
            if name in moving:
                message = f"Topic '{name}' has partitions being reassigned: cancel them first."
                results.append(_result(name, ErrorCode.REASSIGNMENT_IN_PROGRESS, message))
                continue
            records = self._topic_records(name)
            for index, rec in enumerate(records):
                tp = TopicPartition(name, index)
                for broker in rec.replicas:
                    self._reassign.queue_stop(broker, tp, rec.leader_epoch)
                del self._partitions[tp]
            del self._topics[name]
            if self._configs.configs(TOPICS, name):
                config_changes[(TOPICS, name)] = {}
            deleted.append(name)
            results.append(_result(name, ErrorCode.NONE))
            events.append(
                Event(name="topic_deleted", fields={"topic": name, "partitions": len(records)})
            )
        if not deleted:
            return results, []
        push = (
            self._push_configs(
                self._configs.with_entities(config_changes, version=self._configs.version + 1)
            )
            if config_changes
            else []
        )
        live_epochs = {b: rec.epoch for b, rec in self._brokers.items() if not rec.fenced}
        tell = SendUpdateMetadata(
            broker_ids=tuple(sorted(live_epochs)), partitions=(), deleted_topics=tuple(deleted)
        )
        stops = self._reassign.take_stops(live_epochs, self._partitions)
        return results, [*events, *([tell] if live_epochs else []), *stops, *push]

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
        """DescribeConfigs: see core/controller/configs.py for the shape of the results."""
        return describe_configs(self._configs, resources, topic_exists=self._topics.__contains__)


def _result(name: str, code: ErrorCode, message: str | None = None) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=code, error_message=bounded_message(message))
