"""The throttles recorded with a reassignment (core/controller/throttles.py): removed when the
last partition completes or is cancelled, handed on to additional moves, left in place when
changed since, and refused when bad.

Seeded and deterministic. Brokers 1..4 register at t=0; topic "t" is placed by hand:
t-0 = [1, 2], t-1 = [2, 3], so the leaders are 1 and 2 with leader epoch 0. Fencing uses the
default 9000 ms session timeout: a broker silent since t=0 is fenced at 10 000 when the others
heartbeat at 10 000. The `Cluster` is in minikafka/testing/controller_state.py.
"""

from __future__ import annotations

import pytest

from minikafka.core.controller import Event
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    FR,
    FREP,
    LR,
    LREP,
    Cluster,
    config_pushes,
    event,
    names,
)
from minikafka.wire.messages import ConfigEntity, ReassignablePartition

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
