"""`minikafka reassign --execute` on fakes: what the cluster cannot take is refused, the
throttles a move gets, and the order of the tool's requests (check, set, start, restore).
"""

from __future__ import annotations

import pytest

from minikafka.common import TopicPartition
from minikafka.errors import BrokerError, ConfigError, ErrorCode
from minikafka.tools.reassign import runner
from minikafka.tools.reassign.moves import OngoingReassignment
from tests.cli.reassign_support import T0, T1, FakeAdmin, view

# ---------------------------------------------------------------------------- --execute


CURRENT = {T0: (1, 2), T1: (2, 3)}


def test_plan_execute_refuses_what_the_cluster_cannot_take():
    with pytest.raises(ConfigError, match="unknown topic 'x'"):
        runner.plan_execute(
            view(CURRENT),
            {TopicPartition("x", 0): [1]},
            throttle=1,
            mode="replication",
            additional=False,
        )
    with pytest.raises(ConfigError, match="names broker 4, which is not live"):
        runner.plan_execute(
            view(CURRENT), {T0: [1, 4]}, throttle=1, mode="replication", additional=False
        )
    with pytest.raises(ConfigError, match="replication factor 4 but only 3 brokers"):
        runner.plan_execute(
            view(CURRENT), {T0: [1, 2, 3, 4]}, throttle=1, mode="replication", additional=False
        )


def test_a_move_in_progress_needs_additional_and_stays_throttled_with_it():
    moving = {T1: OngoingReassignment(replicas=(3, 1, 2), adding=(3,), removing=(2,))}
    cluster = view({T0: (1, 2), T1: (3, 1, 2)}, moving)
    with pytest.raises(ConfigError, match="in progress .t-1.: expected --additional"):
        runner.plan_execute(
            cluster, {T0: [2, 3]}, throttle=10, mode="replication", additional=False
        )
    todo = runner.plan_execute(
        cluster, {T0: [2, 3]}, throttle=10, mode="replication", additional=True
    )
    # t-1's move (1,2 -> 3,1) keeps its lists; t-0 copies to 3 from 1 or 2.
    assert [str(c) for c in todo.changes[:2]] == [
        "topics t: leader.replication.throttled.replicas=0:1,0:2,1:1,1:2",
        "topics t: follower.replication.throttled.replicas=0:3,1:3",
    ]
    assert {c.entity_name for c in todo.changes[2:]} == {"1", "2", "3"}
    # The rollback file holds replicas from before any move (t-1 is not in the file).
    assert todo.rollback_json == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    )
    entities = {(e.entity_type, e.entity_name): e.configs for e in todo.throttle_entities}
    assert entities[("brokers", "3")] == {
        "leader.replication.throttled.rate": "10",
        "follower.replication.throttled.rate": "10",
    }


def test_reassignment_mode_sets_rates_only_and_no_throttle_sets_nothing():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=7, mode="reassignment", additional=False
    )
    assert {c.name for c in todo.changes} == {
        "leader.reassignment.throttled.rate",
        "follower.reassignment.throttled.rate",
    }
    assert {c.entity_name for c in todo.changes} == {"1", "2", "3"}
    none = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=None, mode="replication", additional=False
    )
    assert none.changes == () and none.throttle_entities == []


async def test_execute_checks_then_sets_then_starts_with_the_same_configs_recorded():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=5, mode="replication", additional=False
    )
    admin = FakeAdmin()
    result = await runner.execute(admin, todo)
    kinds = [c[0] for c in admin.calls if c[0] != "describe"]
    assert kinds == ["validate", "alter", "reassign"]
    assert admin.calls[-1][2] == todo.throttle_entities
    assert result.started == (T0,) and result.errors == {}


async def test_execute_refused_by_the_controller_sets_nothing():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=5, mode="replication", additional=False
    )
    admin = FakeAdmin(refuse_config=ErrorCode.INVALID_CONFIG)
    with pytest.raises(BrokerError, match="INVALID_CONFIG"):
        await runner.execute(admin, todo)
    assert [c[0] for c in admin.calls if c[0] != "describe"] == ["validate"]


async def test_a_start_refused_as_a_whole_puts_the_previous_configs_back():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=5, mode="replication", additional=False
    )
    admin = FakeAdmin(
        own={("brokers", "1"): {"leader.replication.throttled.rate": "99"}}, refuse_start=True
    )
    with pytest.raises(BrokerError, match="refused as a whole"):
        await runner.execute(admin, todo)
    restore = admin.calls[-1]
    assert restore[0] == "alter"
    assert restore[1][("brokers", "1")] == {
        "leader.replication.throttled.rate": "99",  # set back
        "follower.replication.throttled.rate": None,  # deleted: it was not set
    }
    assert restore[1][("topics", "t")]["leader.replication.throttled.replicas"] is None


async def test_per_partition_refusals_are_reported_not_raised():
    # Refused by the controller (FakeAdmin refuses [9]) after the tool's own checks passed.
    todo = runner.ExecutePlan(
        proposed={T0: [3, 2], T1: [9]},
        rollback_json="",
        moves={},
        changes=(),
        throttle=None,
        mode="replication",
    )
    result = await runner.execute(FakeAdmin(), todo)
    assert result.started == (T0,) and result.errors == {T1: "bad"}
