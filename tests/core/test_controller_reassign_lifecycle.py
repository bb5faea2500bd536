"""Partition reassignment in the controller state machine (KIP-455, core/controller/reassign.py):
starting, progress to completion, cancelling and replacing, failures mid-move, and a move
surviving a new controller.

Seeded and deterministic. Brokers 1..4 register at t=0; topic "t" is placed by hand:
t-0 = [1, 2], t-1 = [2, 3], so the leaders are 1 and 2 with leader epoch 0. Fencing uses the
default 9000 ms session timeout: a broker silent since t=0 is fenced at 10 000 when the others
heartbeat at 10 000. The `Cluster` is in minikafka/testing/controller_state.py.
"""

from __future__ import annotations

import random

import msgpack
import pytest

from minikafka.core.controller import (
    ControllerConfig,
    ControllerState,
    SendStopReplica,
    SendUpdateMetadata,
)
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    LR,
    Cluster,
    config_pushes,
    event,
    lai,
    names,
    shape,
    stops,
)
from minikafka.wire.messages import (
    ConfigEntity,
    OngoingPartitionReassignment,
    ReassignablePartition,
)

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
