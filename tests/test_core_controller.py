"""The controller state machine: registration, fencing, elections, topics, AlterPartition.

Seeded and deterministic. Times are ms; the session timeout is the default 9000 ms, so a broker
last heard from at t is still live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random
from collections import Counter

import msgpack
import pytest

from minikafka.core.assignment import assign_replicas
from minikafka.core.controller import ControllerState
from minikafka.core.controller_model import (
    ControllerConfig,
    Event,
    SendLeaderAndIsr,
    SendUpdateMetadata,
)
from minikafka.errors import ConfigError, ErrorCode
from minikafka.wire.messages import (
    AlterPartitionItem,
    BrokerInfo,
    CreatableTopic,
    PartitionState,
)

SEED = 20240611
TIMEOUT = 9000


def make(seed: int = SEED, **config) -> ControllerState:
    return ControllerState(
        controller_id=100, config=ControllerConfig(**config), rng=random.Random(seed)
    )


def register(c: ControllerState, ids=(1, 2, 3), now: int = 0) -> dict[int, int]:
    epochs = {}
    for b in ids:
        code, epoch, _ = c.register_broker(
            broker_id=b, incarnation_id=f"inc-{b}", host="127.0.0.1", port=9000 + b, now_ms=now
        )
        assert code == ErrorCode.NONE
        epochs[b] = epoch
    return epochs


def create(c: ControllerState, name="t", now=0, **kw):
    results, effects = c.create_topics([CreatableTopic(name=name, **kw)], now)
    assert results[0].error_code == ErrorCode.NONE, results[0].error_message
    return effects


def states(c: ControllerState, topic=None) -> dict[int, PartitionState]:
    return {s.partition: s for s in c.partition_states(None if topic is None else [topic])}


def lai(effects) -> dict[int, SendLeaderAndIsr]:
    sends = [e for e in effects if isinstance(e, SendLeaderAndIsr)]
    assert len({s.broker_id for s in sends}) == len(sends)  # one request per broker
    return {s.broker_id: s for s in sends}


def updates(effects) -> list[SendUpdateMetadata]:
    return [e for e in effects if isinstance(e, SendUpdateMetadata)]


def events(effects, name=None) -> list[Event]:
    return [e for e in effects if isinstance(e, Event) and (name is None or e.name == name)]


def keep_alive(c: ControllerState, epochs: dict[int, int], ids, now: int) -> None:
    for b in ids:
        code, fenced, _ = c.heartbeat(broker_id=b, broker_epoch=epochs[b], now_ms=now)
        assert (code, fenced) == (ErrorCode.NONE, False)


def alter(c, broker, epoch, *items):
    return c.alter_partition(broker_id=broker, broker_epoch=epoch, items=list(items))


def item(s: PartitionState, new_isr, **over) -> AlterPartitionItem:
    fields = dict(
        topic=s.topic,
        partition=s.partition,
        leader_epoch=s.leader_epoch,
        new_isr=new_isr,
        partition_epoch=s.partition_epoch,
    )
    fields.update(over)
    return AlterPartitionItem(**fields)


# ---------------------------------------------------------------------------- registration


def test_fresh_state():
    c = make()
    assert c.controller_epoch == 1
    assert c.live_brokers() == []
    assert c.partition_states() == []
    assert c.next_deadline_ms() is None
    assert c.on_deadline(10**9) == []


def test_register_gives_increasing_epochs_and_announces_broker():
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=1, incarnation_id="a", host="h1", port=1, now_ms=0
    )
    assert (code, epoch) == (ErrorCode.NONE, 1)
    assert [e.name for e in events(effects)] == ["broker_registered", "broker_unfenced"]
    assert lai(effects) == {}
    assert updates(effects) == [SendUpdateMetadata(broker_ids=(1,), partitions=())]
    _, epoch2, effects2 = c.register_broker(
        broker_id=2, incarnation_id="b", host="h2", port=2, now_ms=5
    )
    assert epoch2 == 2
    # The newcomer gets the full (empty) partition set; the others learn of the new broker.
    assert updates(effects2) == [
        SendUpdateMetadata(broker_ids=(2,), partitions=()),
        SendUpdateMetadata(broker_ids=(1,), partitions=()),
    ]
    assert c.live_brokers() == [
        BrokerInfo(node_id=1, host="h1", port=1),
        BrokerInfo(node_id=2, host="h2", port=2),
    ]
    assert c.broker_info(2) == BrokerInfo(node_id=2, host="h2", port=2)
    assert c.broker_info(9) is None
    assert c.broker_epoch(1) == 1


def test_register_retry_same_incarnation_returns_same_epoch_without_effects():
    c = make()
    register(c)
    code, epoch, effects = c.register_broker(
        broker_id=2, incarnation_id="inc-2", host="127.0.0.1", port=9002, now_ms=10
    )
    assert (code, epoch, effects) == (ErrorCode.NONE, 2, [])
    code, epoch, _ = c.register_broker(
        broker_id=4, incarnation_id="inc-4", host="127.0.0.1", port=9004, now_ms=10
    )
    assert epoch == 4  # the counter moved on; nothing was reused


def test_register_negative_id_rejected():
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=-1, incarnation_id="x", host="h", port=1, now_ms=0
    )
    assert (code, epoch, effects) == (ErrorCode.INVALID_REQUEST, -1, [])
    assert c.live_brokers() == []


def test_heartbeat_errors_and_plain_heartbeat():
    c = make()
    epochs = register(c)
    assert c.heartbeat(broker_id=9, broker_epoch=1, now_ms=1) == (
        ErrorCode.BROKER_ID_NOT_REGISTERED,
        True,
        [],
    )
    assert c.heartbeat(broker_id=1, broker_epoch=epochs[1] + 7, now_ms=1) == (
        ErrorCode.STALE_BROKER_EPOCH,
        True,
        [],
    )
    assert c.heartbeat(broker_id=1, broker_epoch=epochs[1], now_ms=1) == (ErrorCode.NONE, False, [])


# ---------------------------------------------------------------------------- topics


def test_create_100_partitions_rf2_uses_kafka_assignment():
    c = make()
    register(c)
    effects = create(c, num_partitions=100, replication_factor=2)
    expected = assign_replicas([1, 2, 3], 100, 2, random.Random(SEED))
    got = states(c)
    assert [got[p].replicas for p in range(100)] == expected
    # Kafka's layout, independently: the first replica of p is brokers[(p + start) % 3].
    draws = random.Random(SEED)
    start = draws.randrange(3)
    assert [got[p].leader for p in range(100)] == [[1, 2, 3][(p + start) % 3] for p in range(100)]
    assert sorted(Counter(s.leader for s in got.values()).values()) == [33, 33, 34]
    for s in got.values():
        assert s.isr == s.replicas and s.leader == s.replicas[0]
        assert (s.leader_epoch, s.partition_epoch) == (0, 0)
    sends = lai(effects)
    assert set(sends) == {1, 2, 3}
    for b, send in sends.items():
        assert send.broker_epoch == c.broker_epoch(b)
        assert {s.partition for s in send.partitions} == {
            p for p, s in got.items() if b in s.replicas
        }
    [update] = updates(effects)
    assert update.broker_ids == (1, 2, 3) and len(update.partitions) == 100
    [created] = events(effects, "topic_created")
    assert created.fields["partitions"] == 100 and created.fields["replication_factor"] == 2
    # LeaderAndIsr before UpdateMetadata, events first.
    kinds = [type(e).__name__ for e in effects]
    assert kinds == ["Event", "SendLeaderAndIsr", "SendLeaderAndIsr", "SendLeaderAndIsr"] + [
        "SendUpdateMetadata"
    ]


def test_create_defaults_and_configs():
    c = make(default_num_partitions=3, default_replication_factor=2)
    register(c)
    create(c, name="d", configs={"min.insync.replicas": "2"})
    got = states(c, "d")
    assert len(got) == 3 and all(len(s.replicas) == 2 for s in got.values())
    assert c.config_snapshot().configs("topics", "d") == {"min.insync.replicas": "2"}
    assert c.topic_configs("d") == {}  # every known topic config is a dynamic one
    assert c.topic_names() == ["d"]
    with pytest.raises(KeyError):
        c.topic_configs("nope")


@pytest.mark.parametrize(
    ("topic", "code", "message"),
    [
        (CreatableTopic(name=""), ErrorCode.INVALID_TOPIC_EXCEPTION, "can't be empty"),
        (CreatableTopic(name="."), ErrorCode.INVALID_TOPIC_EXCEPTION, 'cannot be "." or ".."'),
        (CreatableTopic(name=".."), ErrorCode.INVALID_TOPIC_EXCEPTION, 'cannot be "." or ".."'),
        (CreatableTopic(name="x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION, "longer than 249"),
        (CreatableTopic(name="bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION, "ASCII alphanumerics"),
        (
            CreatableTopic(name="caf\u00e9"),
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            "ASCII alphanumerics",
        ),
        (CreatableTopic(name="t", num_partitions=0), ErrorCode.INVALID_PARTITIONS, "non-positive"),
        (CreatableTopic(name="t", num_partitions=-5), ErrorCode.INVALID_PARTITIONS, "non-positive"),
        (
            CreatableTopic(name="t", replication_factor=0),
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "larger than 0, or -1",
        ),
        (
            CreatableTopic(name="t", replication_factor=4),
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "factor of 4 cannot be reached because only 3 broker(s)",
        ),
        (
            CreatableTopic(name="t", assignments=[[1, 7]]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "broker 7, but no such broker is registered",
        ),
        (
            CreatableTopic(name="t", assignments=[[1, 1]]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "broker 1 more than once",
        ),
        (
            CreatableTopic(name="t", assignments=[[1, 2], []]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "empty replica list",
        ),
        (
            CreatableTopic(name="t", assignments=[[1, 2], [3]]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "not consistent with previous partitions",
        ),
        (
            CreatableTopic(name="t", num_partitions=2, assignments=[[1]]),
            ErrorCode.INVALID_REQUEST,
            "numPartitions was not set to -1",
        ),
        (
            CreatableTopic(name="t", replication_factor=1, assignments=[[1]]),
            ErrorCode.INVALID_REQUEST,
            "replication factor was not set to -1",
        ),
        (
            CreatableTopic(name="t", configs={"a": 1}),
            ErrorCode.INVALID_CONFIG,
            "names and values are strings",
        ),
    ],
)
def test_create_topics_validation(topic, code, message):
    c = make()
    register(c)
    results, effects = c.create_topics([topic], 0)
    assert results[0].error_code == code
    assert message in results[0].error_message
    assert effects == []
    assert c.partition_states() == []
    assert c.topic_names() == []


def test_legal_edge_names_accepted():
    c = make()
    register(c)
    names = ["a" * 249, "A.b_c-9", "..."]
    results, _ = c.create_topics([CreatableTopic(name=n) for n in names], 0)
    assert [r.error_code for r in results] == [ErrorCode.NONE] * 3
    assert c.topic_names() == sorted(names)


def test_existing_topic_and_one_bad_topic_does_not_stop_others():
    c = make()
    register(c)
    create(c, name="a")
    topics = [
        CreatableTopic(name="a"),
        CreatableTopic(name="b", num_partitions=2),
        CreatableTopic(name="c", replication_factor=9),
        CreatableTopic(name="d", num_partitions=1),
    ]
    results, effects = c.create_topics(topics, 0)
    assert [(r.name, r.error_code) for r in results] == [
        ("a", ErrorCode.TOPIC_ALREADY_EXISTS),
        ("b", ErrorCode.NONE),
        ("c", ErrorCode.INVALID_REPLICATION_FACTOR),
        ("d", ErrorCode.NONE),
    ]
    assert results[0].error_message == "Topic 'a' already exists."
    assert c.topic_names() == ["a", "b", "d"]
    assert [e.fields["topic"] for e in events(effects, "topic_created")] == ["b", "d"]
    [update] = updates(effects)
    assert [(s.topic, s.partition) for s in update.partitions] == [("b", 0), ("b", 1), ("d", 0)]


def test_duplicate_names_in_one_request_are_all_rejected():
    c = make()
    register(c)
    results, effects = c.create_topics([CreatableTopic(name="x"), CreatableTopic(name="x")], 0)
    assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST] * 2
    assert "multiple entries" in results[0].error_message
    assert effects == [] and c.topic_names() == []


def test_no_live_brokers():
    c = make()
    results, _ = c.create_topics([CreatableTopic(name="t")], 0)
    assert results[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "All brokers are currently fenced" in results[0].error_message


def test_validate_only_creates_nothing():
    c = make()
    register(c)
    results, effects = c.create_topics([CreatableTopic(name="v")], 0, validate_only=True)
    assert results[0].error_code == ErrorCode.NONE
    assert effects == [] and c.topic_names() == []


def test_manual_assignment_with_a_fenced_replica():
    c = make()
    epochs = register(c)
    keep_alive(c, epochs, [2, 3], 5000)
    c.on_deadline(TIMEOUT + 1)  # fences 1
    effects = create(c, name="m", assignments=[[1, 2], [3, 1]])
    got = states(c, "m")
    # KRaft: the ISR is the unfenced part of the assignment and its first member leads.
    assert (got[0].leader, got[0].isr, got[0].replicas) == (2, [2], [1, 2])
    assert (got[1].leader, got[1].isr, got[1].replicas) == (3, [3], [3, 1])
    assert set(lai(effects)) == {2, 3}  # nothing is sent to the fenced broker
    results, _ = c.create_topics([CreatableTopic(name="n", assignments=[[1]])], TIMEOUT + 1)
    assert results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "are fenced" in results[0].error_message


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
        SendUpdateMetadata(broker_ids=(3,), partitions=tuple(c.partition_states())),
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


# ---------------------------------------------------------------------------- persistence


def busy_controller() -> tuple[ControllerState, dict[int, int]]:
    c = make()
    epochs = register(c)
    create(c, num_partitions=10, replication_factor=3, configs={"max.message.bytes": "2048"})
    keep_alive(c, epochs, [1, 2], 5000)
    c.on_deadline(TIMEOUT + 1)  # 3 fenced: epochs and ISRs move
    return c, epochs


def test_doc_round_trip_bumps_controller_epoch_and_keeps_partitions():
    c, epochs = busy_controller()
    doc = c.to_doc()
    packed = msgpack.unpackb(msgpack.packb(doc))
    assert packed == doc  # msgpack-able as is
    restored = ControllerState.from_doc(
        packed, controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    assert restored.controller_epoch == c.controller_epoch + 1 == 2
    assert restored.partition_states() == c.partition_states()
    assert any(s.leader_epoch > 0 for s in restored.partition_states())
    assert restored.config_snapshot().configs("topics", "t") == {"max.message.bytes": "2048"}
    assert restored.live_brokers() == []
    assert all(restored.is_fenced(b) for b in (1, 2, 3))
    assert restored.next_deadline_ms() is None  # last contact unknown
    again = restored.to_doc()
    assert again == {**doc, "controller_epoch": doc["controller_epoch"] + 1}
    # Brokers come back with their persisted epochs; the epoch counter is not reused.
    code, fenced, effects = restored.heartbeat(broker_id=1, broker_epoch=epochs[1], now_ms=50)
    assert (code, fenced) == (ErrorCode.NONE, False)
    assert len(lai(effects)[1].partitions) == 10
    _, new_epoch, _ = restored.register_broker(
        broker_id=4, incarnation_id="inc-4", host="h", port=4, now_ms=60
    )
    assert new_epoch == 4


def test_restored_broker_that_never_returns_is_fenced_for_real():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=4, replication_factor=2)
    restored = ControllerState.from_doc(
        c.to_doc(), controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    before = states(restored)
    assert restored.on_deadline(1000) == []  # starts the clocks of the restored brokers
    assert restored.next_deadline_ms() == 1000 + TIMEOUT + 1
    keep_alive(restored, epochs, [1], 5000)
    assert restored.on_deadline(1000 + TIMEOUT) == []
    effects = restored.on_deadline(1000 + TIMEOUT + 1)
    [fenced] = events(effects, "broker_fenced")
    assert fenced.fields == {
        "broker_id": 2,
        "broker_epoch": 2,
        "reason": "controller_restart_timeout",
    }
    for p, s in states(restored).items():
        assert s.leader == 1 and s.isr == [1]
        assert s.leader_epoch == before[p].leader_epoch + (1 if before[p].leader == 2 else 0)
    assert set(lai(effects)) == {1}


def test_from_doc_rejects_malformed_doc():
    with pytest.raises(ConfigError, match="malformed"):
        ControllerState.from_doc(
            {"version": 1}, controller_id=1, config=ControllerConfig(), rng=random.Random(0)
        )
    with pytest.raises(ConfigError, match="version"):
        ControllerState.from_doc(
            {**make().to_doc(), "version": 99},
            controller_id=1,
            config=ControllerConfig(),
            rng=random.Random(0),
        )


def test_describe_summarises():
    c, _ = busy_controller()
    d = c.describe()
    assert d["controller_epoch"] == 1
    assert [(b["broker_id"], b["fenced"]) for b in d["brokers"]] == [
        (1, False),
        (2, False),
        (3, True),
    ]
    assert d["topics"] == {"t": {"configs": {"max.message.bytes": "2048"}, "partitions": 10}}
    assert d["partitions"] == 10
    assert d["under_replicated_partitions"] == 10 and d["offline_partitions"] == 0
    assert msgpack.unpackb(msgpack.packb(d)) == d


# ---------------------------------------------------------------------------- determinism


def run_script(seed: int) -> list:
    c = make(seed=seed)
    out = []
    epochs = register(c)
    out += create(c, num_partitions=20, replication_factor=2)
    keep_alive(c, epochs, [1, 3], 4000)
    out += c.on_deadline(TIMEOUT + 1)
    out += c.heartbeat(broker_id=2, broker_epoch=epochs[2], now_ms=TIMEOUT + 2)[2]
    return out


def test_same_seed_same_effects():
    assert run_script(3) == run_script(3)
    assert len(run_script(3)) > 5


@pytest.mark.parametrize("seed", range(25))
def test_random_walk_invariants(seed):
    rng = random.Random(seed)
    c = make(seed=seed, unclean_leader_election=rng.random() < 0.5)
    ids = [1, 2, 3, 4]
    epochs = register(c, ids)
    create(c, num_partitions=8, replication_factor=3)
    now = 0
    last: dict = {}
    for _ in range(150):
        now += rng.randrange(0, 4000)
        action = rng.random()
        b = rng.choice(ids)
        if action < 0.4:
            code, _, _ = c.heartbeat(broker_id=b, broker_epoch=epochs[b], now_ms=now)
            assert code == ErrorCode.NONE
        elif action < 0.5:
            _, epochs[b], _ = c.register_broker(
                broker_id=b, incarnation_id=f"{b}-{now}", host="h", port=b, now_ms=now
            )
        elif action < 0.8:
            s = rng.choice(c.partition_states())
            isr = [s.leader] + [r for r in s.replicas if r != s.leader and rng.random() < 0.6]
            _, resps, _ = alter(c, s.leader, epochs.get(s.leader, -1), item(s, isr))
            if resps and resps[0].error_code == ErrorCode.NONE:
                assert states(c, s.topic)[s.partition].isr == isr
        else:
            c.on_deadline(now)
        live = {x.node_id for x in c.live_brokers()}
        for s in c.partition_states():
            assert s.isr and set(s.isr) <= set(s.replicas)
            assert s.leader == -1 or (s.leader in live and s.leader in s.isr)
            if not set(s.isr) <= live:  # a fenced member only as the last, leaderless one
                assert len(s.isr) == 1 and s.leader == -1
            key = (s.topic, s.partition)
            if key in last:
                assert s.leader_epoch >= last[key][0] and s.partition_epoch >= last[key][1]
            last[key] = (s.leader_epoch, s.partition_epoch)
        deadline = c.next_deadline_ms()
        assert deadline is None or deadline > now or c.on_deadline(now) != []


# ---------------------------------------------------------------------------- topic configs, issue 11


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"retention.ms": "1000"}, "unknown topic config 'retention.ms': expected one of "),
        ({"min.insync.replicas": "0"}, "min.insync.replicas='0': expected an integer >= 1"),
        ({"max.message.bytes": "1MB"}, "max.message.bytes='1MB': expected a size in bytes"),
        ({"unclean.leader.election.enable": "yes"}, "expected true or false"),
    ],
)
def test_an_unknown_or_bad_topic_config_refuses_the_topic_in_one_line(configs, expected):
    c = make()
    register(c)
    results, effects = c.create_topics([CreatableTopic(name="t", configs=configs)], 0)
    assert results[0].error_code == ErrorCode.INVALID_CONFIG
    assert expected in (results[0].error_message or "") and "\n" not in results[0].error_message
    assert effects == [] and c.topic_names() == []


def test_a_topics_unclean_election_setting_overrides_the_controllers():
    """The controller's unclean.leader.election.enable is false; topic "u" turns it on."""
    c = make(unclean_leader_election=False)
    epochs = register(c)
    create(c, name="m", assignments=[[1, 2]])
    create(c, name="u", assignments=[[1, 2]], configs={"unclean.leader.election.enable": "true"})
    keep_alive(c, epochs, [1, 3], 3000)
    c.on_deadline(TIMEOUT + 1)  # fences 2: both ISRs are [1]
    keep_alive(c, epochs, [3], 10_000)
    c.on_deadline(3000 + TIMEOUT + 1)  # fences 1, the last ISR member: both offline
    assert [s.leader for s in c.partition_states()] == [-1, -1]
    _, _, effects = c.heartbeat(broker_id=2, broker_epoch=epochs[2], now_ms=20_000)
    leaders = {s.topic: (s.leader, s.isr) for s in c.partition_states()}
    assert leaders == {"m": (-1, [1]), "u": (2, [2])}  # only "u" elects the out-of-sync 2
    [elected] = events(effects, "leader_elected")
    assert elected.fields["unclean"]


@pytest.mark.parametrize(
    ("host", "port", "why"),
    [
        ("a" * 64 + ".example", 9092, "label 'aaaa"),  # UnicodeError from the idna codec before
        ("bad host", 9092, "label 'bad host'"),
        ("h\u00e9", 9092, "label"),
        ("", 9092, "host name of 0 characters"),
        ("a." * 127 + "a", 9092, "host name of 255 characters"),
        ("h1..x", 9092, "label ''"),
        ("-h", 9092, "label '-h'"),
        ("h1", 0, "port 0 is outside 1..65535"),
        ("h1", 65536, "port 65536"),
    ],
)
def test_register_with_an_unusable_address_is_refused_and_logged(host, port, why):
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=1, incarnation_id="x", host=host, port=port, now_ms=0
    )
    assert (code, epoch) == (ErrorCode.INVALID_REQUEST, -1)
    [refused] = events(effects)
    assert refused.name == "broker_registration_refused"
    assert why in refused.fields["error"]
    assert c.live_brokers() == [] and c.broker_info(1) is None
    # the controller goes on: a good registration after it is accepted
    code, _, _ = c.register_broker(
        broker_id=1, incarnation_id="x", host="a" * 63 + ".example", port=9092, now_ms=1
    )
    assert code == ErrorCode.NONE


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "broker_1.local.", "x-1.y"])
def test_register_accepts_ip_literals_and_host_names(host):
    code, _, _ = make().register_broker(
        broker_id=1, incarnation_id="x", host=host, port=1, now_ms=0
    )
    assert code == ErrorCode.NONE


def test_a_topic_above_the_per_topic_cap_is_refused_before_placement():
    c = make(max_partitions_per_topic=10)
    register(c)
    results, effects = c.create_topics(
        [
            CreatableTopic(name="big", num_partitions=11, replication_factor=1),
            CreatableTopic(name="manual", assignments=[[1]] * 11),
            CreatableTopic(name="ok", num_partitions=10, replication_factor=1),
        ],
        0,
    )
    assert [r.error_code for r in results] == [ErrorCode.INVALID_PARTITIONS] * 2 + [0]
    assert "Number of partitions 11 is above the controller's limit of 10 per topic" in (
        results[0].error_message
    )
    assert "11" in results[1].error_message
    assert c.topic_names() == ["ok"]
    # placement was never tried for "big": the draws are those of creating "ok" alone
    alone = make()
    register(alone)
    create(alone, name="ok", num_partitions=10, replication_factor=1)
    assert c.rng.getstate() == alone.rng.getstate()


def test_the_per_broker_cap_counts_hosted_replicas_and_this_requests_topics():
    # 3 brokers, at most 4 replicas each: 12 in all.
    c = make(max_partitions_per_broker=4)
    register(c)
    create(c, name="a", num_partitions=3, replication_factor=2)  # 2 per broker
    results, effects = c.create_topics(
        [
            CreatableTopic(name="b", num_partitions=3, replication_factor=2),  # 4 per broker
            CreatableTopic(name="c", num_partitions=1, replication_factor=1),  # one too many
        ],
        0,
    )
    assert [r.error_code for r in results] == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION]
    assert "would give broker" in results[1].error_message
    assert "at most 4 per broker" in results[1].error_message
    assert c.topic_names() == ["a", "b"]
    # manual assignments are capped too; the broker that is full is named
    results, _ = c.create_topics([CreatableTopic(name="m", assignments=[[2]])], 0)
    assert results[0].error_code == ErrorCode.POLICY_VIOLATION
    assert "broker 2 5 partition replicas" in results[0].error_message


def test_partition_caps_have_generous_defaults():
    config = ControllerConfig()
    assert config.max_partitions_per_topic == 50_000
    assert config.max_partitions_per_broker == 8192  # what a broker's LMDB store can open


# ---------------------------------------------------------------------------- offline replicas


def heartbeat_offline(c, epochs, broker, tps, now=1):
    from minikafka.core.types import TopicPartition

    return c.heartbeat(
        broker_id=broker,
        broker_epoch=epochs[broker],
        now_ms=now,
        offline=[TopicPartition("t", p) for p in tps],
    )


def test_an_offline_replica_leaves_its_isr_and_its_leadership_moves():
    """Kafka's log-dir failure (KafkaController.onReplicasBecomeOffline, KIP-858 in KRaft): the
    broker stays live for its other partitions; only the replicas it reported move."""
    c = make()
    epochs = register(c)
    create(c, num_partitions=6, replication_factor=2)
    before = states(c)
    led = next(p for p, s in before.items() if s.leader == 1)
    followed = next(p for p, s in before.items() if 1 in s.replicas and s.leader != 1)
    code, fenced, effects = heartbeat_offline(c, epochs, 1, [led, followed])
    assert (code, fenced) == (ErrorCode.NONE, False)
    after = states(c)
    other = next(r for r in before[led].replicas if r != 1)
    assert (after[led].leader, after[led].isr) == (other, [other])
    assert after[led].leader_epoch == before[led].leader_epoch + 1
    assert after[followed].leader == before[followed].leader
    assert after[followed].isr == [before[followed].leader]
    for p, s in before.items():
        if p not in (led, followed):
            assert after[p] == s  # the broker's other replicas are untouched
    [ev] = events(effects, "replicas_offline")
    assert ev.fields["partitions"] == sorted([f"t-{led}", f"t-{followed}"])
    assert {s.partition for s in lai(effects)[other].partitions} >= {led}
    assert not c.is_fenced(1)
    # The list is repeated by every heartbeat: nothing new, nothing happens.
    assert heartbeat_offline(c, epochs, 1, [led, followed]) == (ErrorCode.NONE, False, [])


def test_an_offline_sole_isr_member_leaves_the_partition_leaderless_unless_unclean():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=1, replication_factor=2)
    s = states(c)[0]
    leader, follower = s.leader, next(r for r in s.replicas if r != s.leader)
    # The follower falls out of the ISR first (the leader's AlterPartition).
    code, _, _ = alter(c, leader, epochs[leader], item(s, [leader]))
    assert code == ErrorCode.NONE
    heartbeat_offline(c, epochs, leader, [0])
    after = states(c)[0]
    assert (after.leader, after.isr) == (-1, [leader])  # no clean candidate: offline partition
    assert follower in after.replicas


def test_a_new_incarnation_starts_with_no_offline_replicas():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=1, replication_factor=2)
    heartbeat_offline(c, epochs, 1, [0])
    code, epoch, _ = c.register_broker(
        broker_id=1, incarnation_id="restarted", host="127.0.0.1", port=9001, now_ms=2
    )
    assert code == ErrorCode.NONE
    epochs[1] = epoch
    # Reported again after the restart: it is news again, and acted on again.
    _, _, effects = heartbeat_offline(c, epochs, 1, [0], now=3)
    assert events(effects, "replicas_offline")


def test_turning_unclean_election_on_for_a_topic_elects_its_leaderless_partitions_at_once():
    """Kafka's controller runs the election when the topic config changes
    (KafkaController.processTopicUncleanLeaderElectionEnable), not at the next fence/unfence."""
    from minikafka.wire.admin_messages import AlterableConfig, AlterConfigsResource

    c = make(unclean_leader_election=False)
    epochs = register(c)
    create(c, name="m", assignments=[[1, 2]])
    create(c, name="u", assignments=[[1, 2]])
    keep_alive(c, epochs, [1, 3], 3000)
    c.on_deadline(TIMEOUT + 1)  # fences 2: both ISRs are [1]
    keep_alive(c, epochs, [2, 3], 3000 + TIMEOUT)  # 2 is back (unfenced), out of sync
    keep_alive(c, epochs, [2, 3], 3000 + 2 * TIMEOUT)
    c.on_deadline(3000 + TIMEOUT + 1)  # fences 1, the last ISR member: both offline
    assert {s.topic: s.leader for s in c.partition_states()} == {"m": -1, "u": -1}
    enable = AlterConfigsResource(
        resource_type="topics",
        resource_name="u",
        configs=[AlterableConfig(name="unclean.leader.election.enable", op="set", value="true")],
    )
    _, effects = c.alter_configs([enable], validate_only=True)
    assert effects == [] and {s.topic: s.leader for s in c.partition_states()}["u"] == -1
    responses, effects = c.alter_configs([enable])
    assert [r.error_code for r in responses] == [ErrorCode.NONE]
    leaders = {s.topic: (s.leader, s.isr) for s in c.partition_states()}
    assert leaders == {"m": (-1, [1]), "u": (2, [2])}
    [elected] = events(effects, "leader_elected")
    assert elected.fields["unclean"] and elected.fields["reason"] == "unclean_enabled"
    assert {s.topic for s in lai(effects)[2].partitions} == {"u"}
