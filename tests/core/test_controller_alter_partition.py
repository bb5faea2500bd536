"""The controller state machine: AlterPartition, the leader's ISR changes (shrink, expand,
rejections, fenced members, stale epochs).

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random

import pytest

from minikafka.core.controller import ControllerConfig, ControllerState, SendUpdateMetadata
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    TIMEOUT,
    alter,
    create,
    events,
    item,
    keep_alive,
    lai,
    make,
    register,
    states,
    updates,
)

# ---------------------------------------------------------------------------- AlterPartition


@pytest.fixture
def ap():
    """Brokers 1, 2, 3; topic a: a-0 = [1, 2, 3] led by 1, a-1 = [2, 3, 1] led by 2."""
    c = make()
    epochs = register(c)
    create(c, name="a", assignments=[[1, 2, 3], [2, 3, 1]])
    return c, epochs


def test_alter_partition_shrink_then_expand(ap):
    c, epochs = ap
    s0 = states(c)[0]
    code, [resp], effects = alter(c, 1, epochs[1], item(s0, [1, 3]))
    assert code == ErrorCode.NONE
    assert (resp.error_code, resp.leader, resp.leader_epoch, resp.isr, resp.partition_epoch) == (
        ErrorCode.NONE,
        1,
        0,
        [1, 3],
        1,
    )
    new = states(c)[0]
    assert (new.isr, new.partition_epoch, new.leader_epoch) == ([1, 3], 1, 0)
    assert lai(effects) == {}
    assert updates(effects) == [SendUpdateMetadata(broker_ids=(1, 2, 3), partitions=(new,))]
    [changed] = events(effects, "isr_changed")
    assert changed.fields["previous_isr"] == [1, 2, 3] and changed.fields["isr"] == [1, 3]
    code, [resp], _ = alter(c, 1, epochs[1], item(new, [1, 3, 2]))
    assert resp.error_code == ErrorCode.NONE and states(c)[0].isr == [1, 3, 2]
    assert states(c)[0].partition_epoch == 2


def test_alter_partition_same_isr_is_accepted_without_change(ap):
    c, epochs = ap
    s0 = states(c)[0]
    code, [resp], effects = alter(c, 1, epochs[1], item(s0, [1, 2, 3]))
    assert (code, resp.error_code, resp.partition_epoch, effects) == (
        ErrorCode.NONE,
        ErrorCode.NONE,
        0,
        [],
    )


@pytest.mark.parametrize(
    ("sender", "overrides", "code"),
    [
        (1, {}, ErrorCode.NONE),  # the baseline item is valid
        (1, dict(topic="nope"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (1, dict(partition=9), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (2, {}, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (1, dict(leader_epoch=1), ErrorCode.FENCED_LEADER_EPOCH),
        (1, dict(leader_epoch=-1), ErrorCode.FENCED_LEADER_EPOCH),
        (1, dict(partition_epoch=3), ErrorCode.INVALID_UPDATE_VERSION),
        (1, dict(new_isr=[2, 3]), ErrorCode.INVALID_REQUEST),  # leader missing
        (1, dict(new_isr=[1, 4]), ErrorCode.INVALID_REQUEST),  # not a replica
        (1, dict(new_isr=[1, 1]), ErrorCode.INVALID_REQUEST),  # duplicate
        (1, dict(new_isr=[]), ErrorCode.INVALID_REQUEST),
    ],
)
def test_alter_partition_rejections(ap, sender, overrides, code):
    c, epochs = ap
    before = c.partition_states()
    s0 = states(c)[0]
    overrides = dict(overrides)
    new_isr = overrides.pop("new_isr", [1, 2])
    top, [resp], effects = alter(c, sender, epochs[sender], item(s0, new_isr, **overrides))
    assert top == ErrorCode.NONE
    assert resp.error_code == code
    if code == ErrorCode.NONE:
        assert (resp.leader, resp.isr, resp.partition_epoch) == (1, [1, 2], 1)
        return
    assert (resp.leader, resp.isr, resp.partition_epoch) == (-1, [], -1)
    assert effects == []
    assert c.partition_states() == before


def test_alter_partition_adding_fenced_replica_is_ineligible(ap):
    c, epochs = ap
    s0 = states(c)[0]
    alter(c, 1, epochs[1], item(s0, [1]))  # shrink to the leader alone
    keep_alive(c, epochs, [1, 2], 5000)
    c.on_deadline(TIMEOUT + 1)  # fences 3
    s0 = states(c)[0]
    _, [resp], _ = alter(c, 1, epochs[1], item(s0, [1, 3]))
    assert resp.error_code == ErrorCode.INELIGIBLE_REPLICA
    _, [resp], _ = alter(c, 1, epochs[1], item(s0, [1, 2]))
    assert resp.error_code == ErrorCode.NONE  # live replicas may join


def test_alter_partition_may_keep_a_fenced_member_but_not_add_one(ap):
    c, epochs = ap
    restored = ControllerState.from_doc(
        c.to_doc(), controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    keep_alive(restored, epochs, [1], 10)  # 2 and 3 not back yet: still fenced
    s0 = states(restored)[0]
    _, [resp], _ = alter(restored, 1, epochs[1], item(s0, [1, 2]))
    assert resp.error_code == ErrorCode.NONE  # shrinking away 3, keeping 2, is allowed
    _, [resp], _ = alter(restored, 1, epochs[1], item(states(restored)[0], [1, 2, 3]))
    assert resp.error_code == ErrorCode.INELIGIBLE_REPLICA  # re-adding fenced 3 is not


def test_alter_partition_stale_or_unknown_broker_epoch_rejects_whole_request(ap):
    c, epochs = ap
    s0 = states(c)[0]
    before = c.partition_states()
    assert alter(c, 1, epochs[1] + 1, item(s0, [1])) == (ErrorCode.STALE_BROKER_EPOCH, [], [])
    assert alter(c, 9, 1, item(s0, [1])) == (ErrorCode.STALE_BROKER_EPOCH, [], [])
    assert c.partition_states() == before


def test_alter_partition_items_are_independent(ap):
    c, epochs = ap
    s = states(c)
    top, resps, effects = alter(
        c, 2, epochs[2], item(s[0], [1]), item(s[1], [2]), item(s[1], [2, 3])
    )
    assert top == ErrorCode.NONE
    # Not leader of a-0; a-1 accepted; the repeat carries the old partition epoch.
    assert [r.error_code for r in resps] == [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NONE,
        ErrorCode.INVALID_UPDATE_VERSION,
    ]
    assert states(c)[1].isr == [2]
    [update] = updates(effects)
    assert [p.partition for p in update.partitions] == [1]


def test_alter_partition_after_leader_change_is_fenced(ap):
    c, epochs = ap
    old = states(c)[0]
    keep_alive(c, epochs, [2, 3], 5000)
    c.on_deadline(TIMEOUT + 1)  # 1 fenced: a-0 now led by 2 with leader epoch 1
    assert states(c)[0].leader == 2
    _, [resp], _ = alter(c, 2, epochs[2], item(old, [2, 3]))
    assert resp.error_code == ErrorCode.FENCED_LEADER_EPOCH
