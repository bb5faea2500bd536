"""Partition reassignment in the controller state machine (KIP-455) and the throttles recorded
with it (core/controller_reassign.py, core/controller_throttles.py).

Seeded and deterministic. Brokers 1..4 register at t=0; topic "t" is placed by hand:
t-0 = [1, 2], t-1 = [2, 3], so the leaders are 1 and 2 with leader epoch 0. Fencing uses the
default 9000 ms session timeout: a broker silent since t=0 is fenced at 10 000 when the others
heartbeat at 10 000.
"""

from __future__ import annotations

import random

import msgpack
import pytest

from minikafka.core.controller import ControllerState
from minikafka.core.controller_model import (
    ControllerConfig,
    Event,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionItem,
    ConfigEntity,
    CreatableTopic,
    OngoingPartitionReassignment,
    PartitionState,
    ReassignablePartition,
)

LR = "leader.replication.throttled.rate"
FR = "follower.replication.throttled.rate"
LREP = "leader.replication.throttled.replicas"
FREP = "follower.replication.throttled.replicas"


class Cluster:
    """A controller with brokers 1..4 and topic t (t-0 = [1, 2], t-1 = [2, 3])."""

    def __init__(self, assignments=((1, 2), (2, 3)), seed: int = 11) -> None:
        self.c = ControllerState(
            controller_id=100, config=ControllerConfig(), rng=random.Random(seed)
        )
        self.now = 0
        self.epochs: dict[int, int] = {}
        for b in (1, 2, 3, 4):
            self.register(b)
        results, _ = self.c.create_topics(
            [CreatableTopic(name="t", assignments=[list(a) for a in assignments])], 0
        )
        assert results[0].error_code == ErrorCode.NONE, results[0].error_message

    def register(self, b: int, incarnation: str = "a") -> list:
        code, epoch, effects = self.c.register_broker(
            broker_id=b, incarnation_id=f"{b}-{incarnation}", host="h", port=b, now_ms=self.now
        )
        assert code == ErrorCode.NONE
        self.epochs[b] = epoch
        return effects

    def state(self, partition: int) -> PartitionState:
        return {s.partition: s for s in self.c.partition_states()}[partition]

    def move(self, moves: dict, throttles=()) -> tuple[list, list]:
        code, message, responses, effects = self.c.alter_partition_reassignments(
            [ReassignablePartition(topic="t", partition=p, replicas=r) for p, r in moves.items()],
            throttles,
        )
        assert (code, message) == (ErrorCode.NONE, None)
        return [(r.error_code, r.error_message) for r in responses], effects

    def moved(self, moves: dict, throttles=()) -> list:
        """`move`, every partition accepted."""
        responses, effects = self.move(moves, throttles)
        assert responses == [(ErrorCode.NONE, None)] * len(moves)
        return effects

    def isr(self, partition: int, isr: list[int]) -> list:
        """The leader asks for `isr` (AlterPartition), and it is accepted."""
        s = self.state(partition)
        item = AlterPartitionItem(
            topic="t",
            partition=partition,
            leader_epoch=s.leader_epoch,
            new_isr=isr,
            partition_epoch=s.partition_epoch,
        )
        code, [response], effects = self.c.alter_partition(
            broker_id=s.leader, broker_epoch=self.epochs[s.leader], items=[item]
        )
        assert (code, response.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
        assert response.isr == isr  # the answer is the accepted ISR, before any completion
        return effects

    def fence(self, victim: int) -> list:
        """Everybody live but `victim` heartbeats 10 s later; `victim` times out."""
        self.now += 10_000
        for b in (1, 2, 3, 4):
            if b != victim and not self.c.is_fenced(b):
                code, _, _ = self.c.heartbeat(
                    broker_id=b, broker_epoch=self.epochs[b], now_ms=self.now
                )
                assert code == ErrorCode.NONE
        effects = self.c.on_deadline(self.now)
        assert self.c.is_fenced(victim)
        return effects

    def set_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        ops = [AlterableConfig(name=k, op="set", value=v) for k, v in configs.items()]
        [response], _ = self.c.alter_configs(
            [AlterConfigsResource(resource_type=entity_type, resource_name=name, configs=ops)]
        )
        assert response.error_code == ErrorCode.NONE, response.error_message


def lai(effects) -> dict[int, SendLeaderAndIsr]:
    sends = [e for e in effects if isinstance(e, SendLeaderAndIsr)]
    assert len({s.broker_id for s in sends}) == len(sends)
    return {s.broker_id: s for s in sends}


def stops(effects) -> dict[int, SendStopReplica]:
    sends = [e for e in effects if isinstance(e, SendStopReplica)]
    assert len({s.broker_id for s in sends}) == len(sends)
    return {s.broker_id: s for s in sends}


def names(effects) -> list[str]:
    return [e.name for e in effects if isinstance(e, Event)]


def event(effects, name: str) -> Event:
    [found] = [e for e in effects if isinstance(e, Event) and e.name == name]
    return found


def shape(s: PartitionState) -> tuple:
    return s.replicas, s.adding_replicas, s.removing_replicas, s.isr, s.leader


def config_pushes(effects) -> list[SendUpdateMetadata]:
    return [e for e in effects if isinstance(e, SendUpdateMetadata) and e.configs is not None]


# ---------------------------------------------------------------------------- start


def test_start_makes_the_union_target_first_and_tells_every_replica():
    k = Cluster()
    before = k.state(0)
    effects = k.moved({0: [2, 3]})
    after = k.state(0)
    # Kafka's PartitionReassignmentReplicas: target ++ (current -- target).
    assert shape(after) == ([2, 3, 1], [3], [1], [1, 2], 1)
    assert after.leader_epoch == before.leader_epoch  # the leader stays
    assert after.partition_epoch == before.partition_epoch + 1
    sends = lai(effects)
    assert set(sends) == {1, 2, 3}  # the union: 3 learns it is being added
    assert all(s.partitions == (after,) for s in sends.values())
    [update] = [e for e in effects if isinstance(e, SendUpdateMetadata)]
    assert update.broker_ids == (1, 2, 3, 4) and update.partitions == (after,)
    assert stops(effects) == {}
    started = event(effects, "reassignment_started")
    assert started.fields["original"] == [1, 2] and started.fields["target"] == [2, 3]
    assert started.fields["adding"] == [3] and started.fields["removing"] == [1]
    assert k.c.list_partition_reassignments() == [
        OngoingPartitionReassignment(
            topic="t", partition=0, replicas=[2, 3, 1], adding_replicas=[3], removing_replicas=[1]
        )
    ]
    assert k.c.list_partition_reassignments(["other"]) == []
    assert k.c.describe()["reassigning_partitions"] == 1


def test_same_replicas_is_a_no_op():
    k = Cluster()
    before = k.c.partition_states()
    assert k.moved({0: [1, 2]}) == []
    assert k.c.partition_states() == before
    assert k.c.list_partition_reassignments() == []


def test_reorder_completes_at_once_and_keeps_the_leader():
    k = Cluster()
    effects = k.moved({0: [2, 1]})
    assert shape(k.state(0)) == ([2, 1], [], [], [1, 2], 1)
    assert names(effects)[-2:] == ["reassignment_started", "reassignment_completed"]
    assert k.state(0).partition_epoch == 1  # one change, one bump
    assert stops(effects) == {} and k.c.list_partition_reassignments() == []


def test_shrink_of_an_in_sync_partition_completes_at_once_and_stops_the_dropped_replica():
    k = Cluster()
    effects = k.moved({0: [2]})
    s = k.state(0)
    assert shape(s) == ([2], [], [], [2], 2)
    assert s.leader_epoch == 1  # the leader left: a clean election in the target
    assert set(lai(effects)) == {2}
    assert stops(effects) == {
        1: SendStopReplica(
            broker_id=1, broker_epoch=k.epochs[1], partitions=(("t", 0, 1),), delete=True
        )
    }


@pytest.mark.parametrize(
    ("partition", "replicas", "code", "message"),
    [
        (9, [1, 2], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition t-9"),
        (0, [], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
        (0, [3, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 3 more than once"),
        (0, [3, 7], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 7, but no such broker"),
        (0, [3, 4], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 4, but it is fenced"),
        (0, None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment of t-0 to cancel"),
    ],
)
def test_validation_per_partition(partition, replicas, code, message):
    k = Cluster()
    k.fence(4)
    before = k.c.partition_states()
    responses, effects = k.move({partition: replicas, 1: [1, 2]})
    assert responses[0][0] == code and message in responses[0][1]
    assert responses[1] == (ErrorCode.NONE, None)  # one bad partition does not stop the others
    assert k.c.partition_states()[0] == before[0]
    assert k.c.list_partition_reassignments()[0].partition == 1
    assert "reassignment_started" in names(effects)


def test_unknown_topic_and_a_partition_named_twice():
    k = Cluster()
    code, _, responses, effects = k.c.alter_partition_reassignments(
        [
            ReassignablePartition(topic="nope", partition=0, replicas=[1]),
            ReassignablePartition(topic="t", partition=0, replicas=[3, 4]),
            ReassignablePartition(topic="t", partition=0, replicas=[1, 4]),
        ]
    )
    assert code == ErrorCode.NONE
    assert [r.error_code for r in responses] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert effects == [] and k.c.list_partition_reassignments() == []


# ---------------------------------------------------------------------------- progress


def test_completion_without_a_leader_move():
    k = Cluster()
    k.moved({0: [1, 3]})  # union [1, 3, 2]: 3 comes, 2 goes, 1 leads throughout
    assert k.state(0).partition_epoch == 1
    effects = k.isr(0, [1, 2, 3])  # 3 caught up: the AlterPartition completes the move
    s = k.state(0)
    assert shape(s) == ([1, 3], [], [], [1, 3], 1)
    assert (s.leader_epoch, s.partition_epoch) == (0, 3)  # ISR change 2, completion 3
    sends = lai(effects)
    assert set(sends) == {1, 3}  # the remaining replicas; the leader adopts the new set
    assert sends[1].partitions == (s,)
    assert stops(effects) == {
        2: SendStopReplica(
            broker_id=2, broker_epoch=k.epochs[2], partitions=(("t", 0, 0),), delete=True
        )
    }
    kinds = [type(e).__name__ for e in effects]
    assert kinds.index("SendStopReplica") > max(
        i for i, kind in enumerate(kinds) if kind in ("SendLeaderAndIsr", "SendUpdateMetadata")
    )  # the ZK controller's order: new roles first, then the removed replica stops
    completed = event(effects, "reassignment_completed")
    assert completed.fields["removed"] == [2] and completed.fields["replicas"] == [1, 3]
    assert k.c.list_partition_reassignments() == []


def test_completion_with_a_leader_move_waits_for_every_target():
    k = Cluster()
    k.moved({0: [3, 4]})
    assert shape(k.state(0)) == ([3, 4, 1, 2], [3, 4], [1, 2], [1, 2], 1)
    effects = k.isr(0, [1, 2, 3])
    assert "reassignment_completed" not in names(effects)
    assert lai(effects) == {} and stops(effects) == {}  # an ISR change alone: UpdateMetadata
    effects = k.isr(0, [1, 2, 3, 4])
    s = k.state(0)
    assert shape(s) == ([3, 4], [], [], [3, 4], 3)  # the first of the target leads
    assert s.leader_epoch == 1
    assert event(effects, "leader_elected").fields["previous_leader"] == 1
    assert set(lai(effects)) == {3, 4}
    assert {b: s.partitions for b, s in stops(effects).items()} == {
        1: (("t", 0, 1),),
        2: (("t", 0, 1),),
    }


def test_isr_shrink_during_a_move_does_not_complete_it():
    k = Cluster()
    k.moved({0: [1, 3]})
    effects = k.isr(0, [1])
    assert "reassignment_completed" not in names(effects)
    assert k.c.list_partition_reassignments()[0].adding_replicas == [3]


# ---------------------------------------------------------------------------- cancel, replace


def test_cancel_restores_the_original_replicas_and_stops_the_adding_ones():
    k = Cluster()
    k.moved({0: [3, 4]})
    k.isr(0, [1, 2, 3])
    effects = k.moved({0: None})
    s = k.state(0)
    assert shape(s) == ([1, 2], [], [], [1, 2], 1)
    assert s.leader_epoch == 0
    assert set(lai(effects)) == {1, 2}
    assert set(stops(effects)) == {3, 4}
    assert all(st.delete for st in stops(effects).values())
    cancelled = event(effects, "reassignment_cancelled")
    assert cancelled.fields["target"] == [3, 4] and cancelled.fields["removed"] == [3, 4]
    assert k.c.list_partition_reassignments() == []


def test_cancel_re_elects_when_the_leader_was_being_added():
    k = Cluster()
    k.moved({0: [3, 4]})
    k.isr(0, [1, 2, 3])
    k.fence(1)  # the leader fails mid-move: the election runs in the union, target first
    assert shape(k.state(0)) == ([3, 4, 1, 2], [3, 4], [1, 2], [2, 3], 3)
    effects = k.moved({0: None})
    s = k.state(0)
    assert shape(s) == ([1, 2], [], [], [2], 2)
    assert event(effects, "leader_elected").fields["previous_leader"] == 3
    assert set(stops(effects)) == {3, 4}


def test_cancel_is_refused_when_no_original_replica_is_in_sync():
    k = Cluster()
    k.moved({0: [3, 4]})
    k.isr(0, [1, 2, 3])
    k.fence(2)
    k.fence(1)
    before = k.state(0)
    assert (before.leader, before.isr) == (3, [3])
    responses, effects = k.move({0: None})
    assert responses[0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "none of its original replicas [1, 2] is in sync" in responses[0][1]
    assert effects == [] and k.state(0) == before


def test_a_new_target_replaces_the_old_one_and_keeps_the_original_replicas():
    k = Cluster()
    k.moved({0: [3, 4]})
    k.isr(0, [1, 2, 3])
    effects = k.moved({0: [2, 4]})
    # Original [1, 2] stays: union = [2, 4] ++ [1]; 3 is no longer wanted and stops at once.
    assert shape(k.state(0)) == ([2, 4, 1], [4], [1], [1, 2], 1)
    assert set(stops(effects)) == {3}
    assert event(effects, "reassignment_started").fields["previous_target"] == [3, 4]
    effects = k.moved({0: None})
    assert shape(k.state(0)) == ([1, 2], [], [], [1, 2], 1)
    assert set(stops(effects)) == {4}


def test_resubmitting_the_same_target_changes_nothing():
    k = Cluster()
    k.moved({0: [3, 4]})
    before = k.c.partition_states()
    assert k.moved({0: [3, 4]}) == []
    assert k.c.partition_states() == before


# ---------------------------------------------------------------------------- failures


def test_leaving_leader_fails_mid_move_and_is_stopped_when_it_returns():
    k = Cluster()
    k.moved({0: [2, 3]})
    effects = k.fence(1)
    s = k.state(0)
    assert shape(s) == ([2, 3, 1], [3], [1], [2], 2)  # the normal election, in the union
    assert set(lai(effects)) == {2, 3}
    effects = k.isr(0, [2, 3])
    assert shape(k.state(0)) == ([2, 3], [], [], [2, 3], 2)
    assert stops(effects) == {}  # 1 is fenced: its StopReplica waits
    assert k.c.to_doc()["reassignments"]["stops"] == [{"broker_id": 1, "partitions": [["t", 0, 1]]}]
    effects = k.register(1, incarnation="b")  # back, as a new incarnation
    assert 1 not in lai(effects)  # it replicates nothing any more
    assert stops(effects) == {
        1: SendStopReplica(
            broker_id=1, broker_epoch=k.epochs[1], partitions=(("t", 0, 1),), delete=True
        )
    }
    assert k.c.to_doc()["reassignments"]["stops"] == []


def test_a_fenced_target_replica_holds_completion_until_it_is_back_in_sync():
    k = Cluster()
    k.moved({0: [3, 4]})
    k.isr(0, [1, 2, 3])
    k.fence(3)
    assert k.state(0).isr == [1, 2]
    assert "reassignment_completed" not in names(k.isr(0, [1, 2, 4]))
    k.register(3, incarnation="b")
    assert k.state(0).isr == [1, 2, 4]  # back, not yet caught up: not in the ISR
    effects = k.isr(0, [1, 2, 4, 3])
    assert shape(k.state(0)) == ([3, 4], [], [], [4, 3], 3)
    assert "reassignment_completed" in names(effects)


def test_a_pending_stop_is_sent_once():
    k = Cluster()
    k.moved({0: [2, 3]})
    k.fence(1)
    k.isr(0, [2, 3])
    k.now += 1
    code, _, effects = k.c.heartbeat(broker_id=1, broker_epoch=k.epochs[1], now_ms=k.now)
    assert code == ErrorCode.NONE and set(stops(effects)) == {1}  # same incarnation, back
    k.now += 1
    k.fence(4)  # any later change: nothing is sent to 1 again
    assert all(not isinstance(e, SendStopReplica) for e in k.register(4, incarnation="b"))


# ---------------------------------------------------------------------------- persistence


def test_round_trip_mid_move_then_completion_on_the_new_controller():
    k = Cluster()
    k.set_configs("brokers", "1", {LR: "1000"})
    recorded = [ConfigEntity(entity_type="brokers", entity_name="1", configs={LR: "1000"})]
    k.moved({0: [3, 4], 1: [2, 4]}, recorded)
    k.isr(0, [1, 2, 3])
    doc = msgpack.unpackb(msgpack.packb(k.c.to_doc()))
    assert doc == k.c.to_doc()
    restored = ControllerState.from_doc(
        doc, controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    assert restored.partition_states() == k.c.partition_states()
    assert restored.list_partition_reassignments() == k.c.list_partition_reassignments()
    assert restored.to_doc() == {**doc, "controller_epoch": doc["controller_epoch"] + 1}
    k.c = restored
    for b in (1, 2, 3, 4):  # the brokers come back and learn the moves from LeaderAndIsr
        _, _, effects = restored.heartbeat(broker_id=b, broker_epoch=k.epochs[b], now_ms=5)
        if b in (3, 4):
            assert any(s.adding_replicas for s in lai(effects)[b].partitions)
    effects = k.isr(0, [1, 2, 3, 4])
    assert shape(k.state(0)) == ([3, 4], [], [], [3, 4], 3)
    assert restored.config_snapshot().configs("brokers", "1") == {LR: "1000"}  # t-1 moves on
    effects = k.isr(1, [2, 3, 4])
    assert shape(k.state(1)) == ([2, 4], [], [], [2, 4], 2)
    assert restored.config_snapshot().configs("brokers", "1") == {}
    assert config_pushes(effects)


def test_a_document_written_before_reassignments_still_loads():
    k = Cluster()
    doc = k.c.to_doc()
    del doc["reassignments"]
    restored = ControllerState.from_doc(
        doc, controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    assert restored.list_partition_reassignments() == []
    assert restored.partition_states() == k.c.partition_states()


# ---------------------------------------------------------------------------- throttles


def tool_throttles(rate: str = "1000") -> list[ConfigEntity]:
    """What the reassign tool sets for moving t-0 [1, 2] -> [3, 4] and t-1 [2, 3] -> [2, 4]."""
    brokers = [
        ConfigEntity(entity_type="brokers", entity_name=str(b), configs={LR: rate, FR: rate})
        for b in (1, 2, 3, 4)
    ]
    topic = ConfigEntity(
        entity_type="topics",
        entity_name="t",
        configs={LREP: "0:1,0:2,1:2,1:3", FREP: "0:3,0:4,1:4"},
    )
    return [*brokers, topic]


def apply_tool(k: Cluster, throttles: list[ConfigEntity]) -> None:
    for entity in throttles:
        k.set_configs(entity.entity_type, entity.entity_name, entity.configs)


def test_throttles_are_removed_when_the_last_partition_completes():
    k = Cluster()
    throttles = tool_throttles()
    apply_tool(k, throttles)
    k.set_configs("brokers", "", {LR: "50000"})  # not recorded with the move: stays
    k.moved({0: [3, 4], 1: [2, 4]}, throttles)
    effects = k.isr(0, [1, 2, 3, 4])
    assert "reassignment_completed" in names(effects)
    assert config_pushes(effects) == []  # t-1 still moves under them
    assert k.c.config_snapshot().configs("topics", "t")[FREP] == "0:3,0:4,1:4"
    effects = k.isr(1, [2, 3, 4])
    snapshot = k.c.config_snapshot()
    assert dict(snapshot.entities) == {("brokers", ""): {LR: "50000"}}
    [push] = config_pushes(effects)
    assert push.configs == snapshot and push.broker_ids == (1, 2, 3, 4)
    changed = [e for e in effects if isinstance(e, Event) and e.name == "config_changed"]
    assert {(e.fields["entity_type"], e.fields["entity_name"]) for e in changed} == {
        ("brokers", "1"),
        ("brokers", "2"),
        ("brokers", "3"),
        ("brokers", "4"),
        ("topics", "t"),
    }
    assert "throttle_left_in_place" not in names(effects)


def test_a_throttle_changed_since_is_left_in_place_and_named():
    k = Cluster()
    throttles = tool_throttles()
    apply_tool(k, throttles)
    k.moved({0: [3, 4], 1: [2, 4]}, throttles)
    k.set_configs("brokers", "3", {LR: "2000"})  # an operator changes it mid-move
    k.isr(0, [1, 2, 3, 4])
    effects = k.isr(1, [2, 3, 4])
    left = event(effects, "throttle_left_in_place")
    assert left.fields == {
        "entity_type": "brokers",
        "entity_name": "3",
        "config": LR,
        "recorded": "1000",
        "current": "2000",
        "reason": "changed since the reassignment recorded it",
    }
    assert dict(k.c.config_snapshot().entities) == {("brokers", "3"): {LR: "2000"}}


def test_cancelling_the_last_partition_removes_the_throttles():
    k = Cluster()
    throttles = tool_throttles()
    apply_tool(k, throttles)
    k.moved({0: [3, 4], 1: [2, 4]}, throttles)
    assert config_pushes(k.moved({0: None})) == []
    effects = k.moved({1: None})
    assert dict(k.c.config_snapshot().entities) == {}
    assert config_pushes(effects)


def test_additional_moves_hand_a_throttle_on_instead_of_removing_it():
    # --additional: the tool re-sets the rate (now 3000) and moves t-1 too; t-0 finishing first
    # must not remove what t-1 still relies on, and t-1 finishing removes the latest value.
    k = Cluster()
    first = [ConfigEntity(entity_type="brokers", entity_name="4", configs={FR: "1000"})]
    apply_tool(k, first)
    k.moved({0: [3, 4]}, first)
    second = [ConfigEntity(entity_type="brokers", entity_name="4", configs={FR: "3000"})]
    apply_tool(k, second)
    k.moved({1: [2, 4]}, second)
    k.isr(0, [1, 2, 3, 4])
    assert k.c.config_snapshot().configs("brokers", "4") == {FR: "3000"}
    effects = k.isr(1, [2, 3, 4])
    assert k.c.config_snapshot().configs("brokers", "4") == {}
    assert "throttle_left_in_place" not in names(effects)


def test_resubmitting_a_moving_partition_with_new_throttles_moves_it_to_the_new_group():
    k = Cluster()
    first = [ConfigEntity(entity_type="brokers", entity_name="4", configs={FR: "1000"})]
    apply_tool(k, first)
    k.moved({0: [3, 4]}, first)
    second = [ConfigEntity(entity_type="brokers", entity_name="4", configs={FR: "5000"})]
    apply_tool(k, second)  # the documented way to change the throttle mid-move
    assert k.moved({0: [3, 4]}, second) == []
    assert k.c.config_snapshot().configs("brokers", "4") == {FR: "5000"}
    k.isr(0, [1, 2, 3, 4])
    assert k.c.config_snapshot().configs("brokers", "4") == {}


def test_throttles_with_nothing_to_move_are_removed_at_once():
    k = Cluster()
    throttles = [ConfigEntity(entity_type="brokers", entity_name="1", configs={LR: "1000"})]
    apply_tool(k, throttles)
    responses, effects = k.move({0: [1, 2], 1: [9]}, throttles)  # a no-op and an error
    assert [code for code, _ in responses] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ]
    assert k.c.config_snapshot().configs("brokers", "1") == {}
    assert config_pushes(effects)


@pytest.mark.parametrize(
    ("entity", "message"),
    [
        (ConfigEntity(entity_type="racks", entity_name="1", configs={}), "entity type 'racks'"),
        (ConfigEntity(entity_type="brokers", entity_name="1", configs={"x": "1"}), "'x'"),
        (ConfigEntity(entity_type="brokers", entity_name="1", configs={LR: "-5"}), LR),
        (ConfigEntity(entity_type="topics", entity_name="t", configs={LREP: "0-1"}), "0:1"),
    ],
)
def test_bad_throttle_configs_refuse_the_whole_request(entity, message):
    k = Cluster()
    before = k.c.to_doc()
    code, error, responses, effects = k.c.alter_partition_reassignments(
        [ReassignablePartition(topic="t", partition=0, replicas=[3, 4])], [entity]
    )
    assert code == ErrorCode.INVALID_CONFIG and message in error
    assert (responses, effects) == ([], [])
    assert k.c.to_doc() == before


def test_throttle_values_are_compared_normalised():
    k = Cluster()
    k.set_configs("topics", "t", {LREP: "0:1,0:2"})
    recorded = [ConfigEntity(entity_type="topics", entity_name="t", configs={LREP: " 0:1 , 0:2"})]
    k.moved({0: [3, 4]}, recorded)
    k.isr(0, [1, 2, 3, 4])
    assert k.c.config_snapshot().configs("topics", "t") == {}


# ---------------------------------------------------------------------------- a random walk


@pytest.mark.parametrize("seed", range(20))
def test_random_walk_invariants(seed):
    """Random moves, cancels, ISR changes, fences and returns; after every step the records
    and the listing agree with each other and with KIP-455's shapes."""
    rng = random.Random(seed)
    k = Cluster(assignments=((1, 2), (2, 3), (3, 4), (4, 1)), seed=seed)
    throttle = [ConfigEntity(entity_type="brokers", entity_name="1", configs={LR: "1000"})]
    for _ in range(120):
        action = rng.random()
        live = [b for b in (1, 2, 3, 4) if not k.c.is_fenced(b)]
        p = rng.randrange(4)
        s = k.state(p)
        if action < 0.3 and live:
            target = rng.sample(live, rng.randint(1, min(3, len(live))))
            recorded = rng.random() < 0.3
            if recorded:
                k.set_configs("brokers", "1", {LR: "1000"})
            k.move({p: target}, throttle if recorded else ())
        elif action < 0.4:
            k.move({p: None})
        elif action < 0.7 and s.leader != -1:
            grow = [r for r in s.replicas if r in live and r not in s.isr]
            isr = s.isr + grow[:1] if grow else [s.leader]
            k.isr(p, isr)
        elif action < 0.85 and len(live) > 1:
            k.fence(rng.choice(live))
        else:
            fenced = [b for b in (1, 2, 3, 4) if k.c.is_fenced(b)]
            if fenced:
                k.register(rng.choice(fenced), incarnation=str(rng.random()))
        listing = {r.partition: r for r in k.c.list_partition_reassignments()}
        for st in k.c.partition_states():
            assert set(st.isr) <= set(st.replicas) and st.isr
            assert st.leader == -1 or st.leader in st.isr
            assert len(set(st.replicas)) == len(st.replicas)
            assert set(st.adding_replicas) <= set(st.replicas)
            assert set(st.removing_replicas) <= set(st.replicas)
            assert not set(st.adding_replicas) & set(st.removing_replicas)
            moving = st.partition in listing
            if moving:
                assert listing[st.partition].replicas == st.replicas
                kept = len(st.replicas) - len(st.removing_replicas)
                assert st.removing_replicas == st.replicas[kept:]  # target first, then leaving
            else:
                assert st.adding_replicas == st.removing_replicas == []
        claims = k.c.to_doc()["reassignments"]["throttles"]["claims"]
        if not listing:  # no move left: nothing claims the throttle, and it is gone
            assert claims == []
            assert k.c.config_snapshot().configs("brokers", "1") == {}


def test_a_move_past_the_per_broker_cap_is_refused_partition_by_partition():
    """max.broker.partitions holds for moves as for creation (issue 11): broker 4 hosts nothing
    and may host 1; the first move onto it is accepted, the second refused, the state kept."""
    cl = Cluster()
    cl.c.config = ControllerConfig(max_partitions_per_broker=1)
    before = cl.state(1)
    responses, _ = cl.move({0: [1, 4], 1: [2, 4]})
    assert responses[0] == (ErrorCode.NONE, None)
    code, message = responses[1]
    assert code == ErrorCode.POLICY_VIOLATION
    assert "broker 4" in message and "max.broker.partitions" in message
    assert cl.state(1) == before
    assert [(r.topic, r.partition) for r in cl.c.list_partition_reassignments()] == [("t", 0)]
    # A move among brokers already hosting the partition adds nothing: allowed at the cap.
    responses, _ = cl.move({1: [3, 2]})
    assert responses == [(ErrorCode.NONE, None)]
