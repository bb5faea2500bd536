"""The controller state machine: CreatePartitions (KRaft's ReplicationControlManager
.createPartitions checks and messages; new partitions placed as Kafka's AdminZkClient continues
a topic's layout, or as the request assigns them) and DeleteTopics (every broker told, each
replica stopped and deleted, a fenced one when it returns, the name reusable only then), and
the persistence of both.

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py.
"""

from __future__ import annotations

import random

import pytest

from minikafka.core.assignment import assign_replicas
from minikafka.core.controller import ControllerState
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    SEED,
    TIMEOUT,
    create,
    keep_alive,
    lai,
    make,
    register,
    states,
    updates,
)
from minikafka.wire.messages import CreatableTopic, CreatePartitionsTopic, ReassignablePartition


def grow(c, name="t", count=6, assignments=None, *, validate_only=False):
    return c.create_partitions(
        [CreatePartitionsTopic(name=name, count=count, assignments=assignments)],
        0,
        validate_only=validate_only,
    )


def test_new_partitions_continue_the_topics_layout_and_go_out_to_the_brokers():
    c = make()
    register(c)
    create(c, num_partitions=3, replication_factor=2)
    before = states(c)
    results, effects = grow(c, count=7)
    assert [(r.name, r.error_code) for r in results] == [("t", ErrorCode.NONE)]
    after = states(c)
    assert {p: after[p] for p in range(3)} == before  # the old ones are untouched
    # As if the topic had been made with 7 partitions from partition 0's leader on.
    brokers = [1, 2, 3]
    start = brokers.index(before[0].replicas[0])
    expected = assign_replicas(
        brokers, 4, 2, random.Random(0), fixed_start_index=start, start_partition_id=3
    )
    assert [after[p].replicas for p in range(3, 7)] == expected
    for p in range(3, 7):
        s = after[p]
        assert (s.leader, s.isr, s.leader_epoch) == (s.replicas[0], s.replicas, 0)
    sent = {p.partition for send in lai(effects).values() for p in send.partitions}
    assert sent == {3, 4, 5, 6}
    assert updates(effects), "every live broker learns the new partitions"


@pytest.mark.parametrize(
    ("name", "count", "assignments", "code", "message"),
    [
        ("nope", 4, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Topic 'nope' does not exist."),
        ("t", 2, None, ErrorCode.INVALID_PARTITIONS, "currently has 3 partition(s); 2 would not"),
        ("t", 3, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
        ("t", 5, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "add 2 additional partition(s)"),
        ("t", 4, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "with 1 replica(s)"),
        ("t", 4, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 9"),
        ("t", 4, [[2, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "more than once"),
    ],
)
def test_refusals_name_the_problem_and_change_nothing(name, count, assignments, code, message):
    c = make()
    register(c)
    create(c, num_partitions=3, replication_factor=2)
    before = states(c)
    results, effects = grow(c, name=name, count=count, assignments=assignments)
    assert results[0].error_code == code
    assert message in results[0].error_message
    assert effects == [] and states(c) == before


def test_manual_assignments_and_validate_only():
    c = make()
    register(c)
    create(c, num_partitions=1, replication_factor=2)
    results, effects = grow(c, count=3, assignments=[[3, 1], [2, 3]], validate_only=True)
    assert results[0].error_code == ErrorCode.NONE and effects == [] and len(states(c)) == 1
    grow(c, count=3, assignments=[[3, 1], [2, 3]])
    got = states(c)
    assert [(got[p].replicas, got[p].leader) for p in (1, 2)] == [([3, 1], 3), ([2, 3], 2)]


def test_the_partition_cap_counts_the_new_partitions():
    c = make(max_partitions_per_topic=4)
    register(c)
    create(c, num_partitions=3, replication_factor=1)
    results, _ = grow(c, count=5)
    assert results[0].error_code == ErrorCode.INVALID_PARTITIONS


def test_added_partitions_are_saved_and_restored():
    c = make()
    register(c)
    create(c, num_partitions=2, replication_factor=2)
    c.take_changes()
    grow(c, count=4)
    changes = c.take_changes()
    assert {k for k in changes.puts if k.startswith("partition/")} == {
        "partition/t/2",
        "partition/t/3",
    }
    restored = ControllerState.from_doc(
        c.to_doc(), controller_id=100, config=c.config, rng=random.Random(SEED)
    )
    assert states(restored) == states(c)


# ---------------------------------------------------------------------------- DeleteTopics


def _stops(effects):
    from minikafka.core.controller import SendStopReplica

    return {
        (e.broker_id, topic, partition)
        for e in effects
        if isinstance(e, SendStopReplica)
        for topic, partition, _epoch in e.partitions
    }


def test_delete_topics_forgets_the_topic_tells_every_broker_and_stops_each_replica():
    from minikafka.core.controller import SendUpdateMetadata

    c = make()
    register(c)
    create(c, num_partitions=2, replication_factor=2)
    create(c, name="keep", num_partitions=1, replication_factor=1)
    replicas = {p: s.replicas for p, s in states(c, "t").items()}
    c.take_changes()
    results, effects = c.delete_topics(["t", "nope"], 0)
    assert [(r.name, r.error_code) for r in results] == [
        ("t", ErrorCode.NONE),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert states(c, "t") == {} and len(states(c, "keep")) == 1
    told = [e for e in effects if isinstance(e, SendUpdateMetadata) and e.deleted_topics]
    assert [(e.broker_ids, e.deleted_topics) for e in told] == [((1, 2, 3), ("t",))]
    assert _stops(effects) == {(b, "t", p) for p, rs in replicas.items() for b in rs}
    changes = c.take_changes()
    assert {"partition/t/0", "partition/t/1", "topic/t"} <= set(changes.deletes)
    # The name is free again once every copy is dropped (all brokers were live here).
    again, _ = c.create_topics([CreatableTopic(name="t", num_partitions=1)], 0)
    assert again[0].error_code == ErrorCode.NONE


def test_a_deleted_topic_waits_for_a_fenced_replica_and_its_name_with_it():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=1, replication_factor=2)
    keep_alive(c, epochs, [1], now=TIMEOUT)
    c.on_deadline(TIMEOUT + 1)  # broker 2 missed its heartbeats: fenced
    _, effects = c.delete_topics(["t"], TIMEOUT + 1)
    assert _stops(effects) == {(1, "t", 0)}  # broker 2's copy waits for its return
    refused, _ = c.create_topics([CreatableTopic(name="t", num_partitions=1)], TIMEOUT + 1)
    assert refused[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert "marked for deletion" in refused[0].error_message


def test_internal_and_moving_topics_are_not_deleted():
    c = make()
    register(c)
    create(c, name="__consumer_offsets", num_partitions=1, replication_factor=1)
    results, effects = c.delete_topics(["__consumer_offsets"], 0)
    assert results[0].error_code == ErrorCode.INVALID_REQUEST and effects == []
    create(c, num_partitions=1, replication_factor=1)
    (only,) = states(c, "t")[0].replicas
    other = next(b for b in (1, 2, 3) if b != only)
    code, _msg, _responses, _effects = c.alter_partition_reassignments(
        [ReassignablePartition(topic="t", partition=0, replicas=[only, other])]
    )
    assert code == ErrorCode.NONE  # ongoing until `other` joins the ISR
    results, effects = c.delete_topics(["t"], 0)
    assert results[0].error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS and effects == []
    assert "cancel" in results[0].error_message
