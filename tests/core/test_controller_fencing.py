"""The controller state machine: fencing at the session timeout, unfencing, restarts with a new
incarnation, and the clean and unclean leader elections they cause.

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import pytest

from minikafka.core.controller import SendUpdateMetadata
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    TIMEOUT,
    create,
    events,
    keep_alive,
    lai,
    make,
    register,
    states,
    updates,
)

# ---------------------------------------------------------------------------- fencing


def test_session_timeout_boundary_and_failover():
    c = make()
    epochs = register(c)
    create(c, num_partitions=100, replication_factor=2)
    before = states(c)
    keep_alive(c, epochs, [1, 2], 5000)
    assert c.next_deadline_ms() == TIMEOUT + 1
    assert c.on_deadline(TIMEOUT) == []  # exactly the timeout: not yet
    assert c.live_brokers()[-1].node_id == 3
    effects = c.on_deadline(TIMEOUT + 1)
    assert [b.node_id for b in c.live_brokers()] == [1, 2]
    assert c.is_fenced(3)
    after = states(c)
    changed = set()
    for p, old in before.items():
        new = after[p]
        if old.leader == 3:
            other = [r for r in old.replicas if r != 3][0]
            assert (new.leader, new.isr) == (other, [other])
            assert (new.leader_epoch, new.partition_epoch) == (1, 1)
            changed.add(p)
        elif 3 in old.replicas:
            assert (new.leader, new.isr) == (old.leader, [old.leader])
            assert (new.leader_epoch, new.partition_epoch) == (0, 1)
            changed.add(p)
        else:
            assert new == old
    led_by_3 = sum(1 for s in before.values() if s.leader == 3)
    assert len(events(effects, "leader_elected")) == led_by_3
    assert len(events(effects, "isr_changed")) == len(changed) - led_by_3
    assert events(effects, "broker_fenced")[0].fields["reason"] == "session_timeout"
    sends = lai(effects)
    assert set(sends) == {1, 2}
    for b, send in sends.items():
        assert send.broker_epoch == epochs[b]
        assert {s.partition for s in send.partitions} == {
            p for p in changed if b in after[p].replicas
        }
        assert all(s == after[s.partition] for s in send.partitions)
    [update] = updates(effects)
    assert update.broker_ids == (1, 2)
    assert {s.partition for s in update.partitions} == changed
    # Broker 2 and 1 heartbeated at 5000: next deadline is theirs.
    assert c.next_deadline_ms() == 5000 + TIMEOUT + 1


def test_returning_broker_is_unfenced_and_told_everything():
    c = make()
    epochs = register(c)
    create(c, num_partitions=30, replication_factor=2)
    keep_alive(c, epochs, [1, 2], 5000)
    c.on_deadline(TIMEOUT + 1)
    fenced_view = states(c)
    code, fenced, effects = c.heartbeat(broker_id=3, broker_epoch=epochs[3], now_ms=TIMEOUT + 5)
    assert (code, fenced) == (ErrorCode.NONE, False)
    assert not c.is_fenced(3)
    assert states(c) == fenced_view  # no leaderless partitions: nothing changes, ISR not regrown
    sends = lai(effects)
    assert set(sends) == {3}
    assert {s.partition for s in sends[3].partitions} == {
        p for p, s in fenced_view.items() if 3 in s.replicas
    }
    assert updates(effects) == [
        SendUpdateMetadata(broker_ids=(3,), partitions=tuple(c.partition_states()), full=True),
        SendUpdateMetadata(broker_ids=(1, 2), partitions=()),
    ]
    assert [e.name for e in events(effects)] == ["broker_unfenced"]


def fence_both_replicas(unclean: bool):
    """Brokers 1, 2, 3; m-0 = [1, 2], m-1 = [2, 1]; 2 then 1 time out while 3 lives."""
    c = make(unclean_leader_election=unclean)
    epochs = register(c)
    create(c, name="m", assignments=[[1, 2], [2, 1]])
    keep_alive(c, epochs, [1, 3], 3000)
    c.on_deadline(TIMEOUT + 1)  # fences 2
    s = states(c)
    assert (s[0].leader, s[0].isr, s[0].leader_epoch, s[0].partition_epoch) == (1, [1], 0, 1)
    assert (s[1].leader, s[1].isr, s[1].leader_epoch, s[1].partition_epoch) == (1, [1], 1, 1)
    keep_alive(c, epochs, [3], 10_000)
    effects = c.on_deadline(3000 + TIMEOUT + 1)  # fences 1, the last ISR member
    return c, epochs, effects


@pytest.mark.parametrize("unclean", [False, True])
def test_last_isr_member_fenced_leaves_no_leader_and_keeps_isr(unclean):
    c, _, effects = fence_both_replicas(unclean)
    s = states(c)
    assert (s[0].leader, s[0].isr, s[0].leader_epoch, s[0].partition_epoch) == (-1, [1], 1, 2)
    assert (s[1].leader, s[1].isr, s[1].leader_epoch, s[1].partition_epoch) == (-1, [1], 2, 2)
    assert len(events(effects, "partition_offline")) == 2
    assert lai(effects) == {}  # the only live broker replicates neither
    [update] = updates(effects)
    assert update.broker_ids == (3,) and len(update.partitions) == 2
    assert c.describe()["offline_partitions"] == 2


def test_clean_only_last_isr_member_return_restores_leader():
    c, epochs, _ = fence_both_replicas(unclean=False)
    # 2 returns first: not in the ISR, unclean is off -> still no leader.
    _, _, effects = c.heartbeat(broker_id=2, broker_epoch=epochs[2], now_ms=20_000)
    assert all(s.leader == -1 for s in c.partition_states())
    assert {s.leader for s in lai(effects)[2].partitions} == {-1}
    # 1 returns: it is the ISR, so it leads again with a bumped leader epoch.
    _, _, effects = c.heartbeat(broker_id=1, broker_epoch=epochs[1], now_ms=20_001)
    s = states(c)
    assert (s[0].leader, s[0].isr, s[0].leader_epoch, s[0].partition_epoch) == (1, [1], 2, 3)
    assert (s[1].leader, s[1].isr, s[1].leader_epoch, s[1].partition_epoch) == (1, [1], 3, 3)
    sends = lai(effects)
    assert set(sends) == {1, 2}  # 1 for all its partitions, 2 because its leader changed
    assert [p.leader for p in sends[1].partitions] == [1, 1]
    assert [p.leader for p in sends[2].partitions] == [1, 1]
    elected = events(effects, "leader_elected")
    assert len(elected) == 2 and not any(e.fields["unclean"] for e in elected)


def test_unclean_election_when_a_non_isr_replica_returns():
    c, epochs, _ = fence_both_replicas(unclean=True)
    _, _, effects = c.heartbeat(broker_id=2, broker_epoch=epochs[2], now_ms=20_000)
    s = states(c)
    assert (s[0].leader, s[0].isr, s[0].leader_epoch) == (2, [2], 2)
    assert (s[1].leader, s[1].isr, s[1].leader_epoch) == (2, [2], 3)
    assert all(e.fields["unclean"] for e in events(effects, "leader_elected"))


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_at_fence_time(unclean):
    c = make(unclean_leader_election=unclean)
    epochs = register(c, ids=(1, 2))
    create(c, name="u", assignments=[[1, 2]])
    keep_alive(c, epochs, [1], 3000)
    c.on_deadline(TIMEOUT + 1)  # 2 out of the ISR
    keep_alive(c, epochs, [2], 9500)  # 2 back, but not in sync
    effects = c.on_deadline(3000 + TIMEOUT + 1)  # 1, the leader and last ISR member, fenced
    [s] = c.partition_states()
    if unclean:
        assert (s.leader, s.isr, s.leader_epoch) == (2, [2], 1)
        assert events(effects, "leader_elected")[0].fields["unclean"] is True
        assert [p.leader for p in lai(effects)[2].partitions] == [2]
    else:
        assert (s.leader, s.isr, s.leader_epoch) == (-1, [1], 1)
        assert [p.leader for p in lai(effects)[2].partitions] == [-1]


def test_two_brokers_fenced_at_once_never_elect_each_other():
    c = make()
    epochs = register(c)
    create(c, num_partitions=12, replication_factor=3)
    keep_alive(c, epochs, [1], 5000)
    effects = c.on_deadline(TIMEOUT + 1)
    for s in c.partition_states():
        assert s.leader == 1 and s.isr == [1]
        assert s.leader_epoch == (0 if s.replicas[0] == 1 else 1)  # one bump, not two
    assert set(lai(effects)) == {1}
    assert [u.broker_ids for u in updates(effects)] == [(1,)]
    assert len(events(effects, "broker_fenced")) == 2


def test_restart_with_new_incarnation_is_fence_then_unfence():
    c = make()
    epochs = register(c)
    create(c, num_partitions=30, replication_factor=2)
    before = states(c)
    code, new_epoch, effects = c.register_broker(
        broker_id=3, incarnation_id="inc-3-b", host="127.0.0.1", port=9003, now_ms=2000
    )
    assert code == ErrorCode.NONE and new_epoch == 4
    names = [e.name for e in events(effects)]
    assert names[0] == "broker_fenced" and names[-2:] == ["broker_registered", "broker_unfenced"]
    assert events(effects, "broker_fenced")[0].fields["reason"] == "restart"
    assert events(effects, "broker_registered")[0].fields["restart"] is True
    after = states(c)
    for p, old in before.items():
        if old.leader == 3:
            assert after[p].leader != 3 and after[p].leader_epoch == 1
        if 3 in old.replicas:
            assert 3 not in after[p].isr and after[p].partition_epoch == 1
    sends = lai(effects)
    assert sends[3].broker_epoch == 4
    assert {s.partition for s in sends[3].partitions} == {
        p for p, s in before.items() if 3 in s.replicas
    }
    assert not c.is_fenced(3)
    assert c.heartbeat(broker_id=3, broker_epoch=epochs[3], now_ms=2001)[0] == (
        ErrorCode.STALE_BROKER_EPOCH
    )
    assert c.heartbeat(broker_id=3, broker_epoch=4, now_ms=2001)[:2] == (ErrorCode.NONE, False)


def test_restart_of_sole_replica_keeps_it_leader_with_new_epochs():
    c = make()
    register(c, ids=(1,))
    create(c, name="solo")
    _, _, effects = c.register_broker(
        broker_id=1, incarnation_id="again", host="h", port=1, now_ms=10
    )
    [s] = c.partition_states()
    assert (s.leader, s.isr, s.leader_epoch, s.partition_epoch) == (1, [1], 2, 2)
    assert [e.name for e in events(effects)] == [
        "broker_fenced",
        "partition_offline",
        "broker_registered",
        "broker_unfenced",
        "leader_elected",
    ]
    assert lai(effects)[1].partitions == (s,)


def test_fenced_broker_re_registering_same_incarnation_is_unfenced():
    c = make()
    epochs = register(c, ids=(1, 2))
    keep_alive(c, epochs, [1], 5000)
    c.on_deadline(TIMEOUT + 1)
    code, epoch, effects = c.register_broker(
        broker_id=2, incarnation_id="inc-2", host="127.0.0.1", port=9002, now_ms=TIMEOUT + 2
    )
    assert (code, epoch) == (ErrorCode.NONE, epochs[2])
    assert not c.is_fenced(2)
    assert [e.name for e in events(effects)] == ["broker_unfenced"]
