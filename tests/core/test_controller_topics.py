"""The controller state machine: creating topics (Kafka's replica assignment, validation,
manual assignments, validate_only), topic configs (a topic's own unclean election among them)
and the partition caps (bounded work per request and per broker).

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from minikafka.core.assignment import assign_replicas
from minikafka.core.controller import ControllerConfig
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    SEED,
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
from minikafka.wire.messages import CreatableTopic

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


# ---------------------------------------------------------------------------- topic configs


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"flush.ms": "1000"}, "unknown topic config 'flush.ms': expected one of "),
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


def test_a_creation_builds_one_wire_state_per_partition():
    """The LeaderAndIsr to each replica and the UpdateMetadata to every broker each
    built their own PartitionState, N x (replication factor + 1) for N partitions; they share
    one per partition now (frozen values)."""
    c = make()
    register(c)
    _, effects = c.create_topics(
        [CreatableTopic(name="t", num_partitions=6, replication_factor=2)], 0
    )
    by_tp = {}
    for effect in effects:
        for st in getattr(effect, "partitions", ()):
            by_tp.setdefault((st.topic, st.partition), set()).add(id(st))
    assert len(by_tp) == 6 and all(len(ids) == 1 for ids in by_tp.values())
    assert sum(len(e.partitions) for e in lai(effects).values()) == 12


def test_an_error_message_echoing_a_huge_config_name_is_cut():
    """A config name of 30,000 NULs was echoed (with the known names: over 120,000 characters) into
    the answer, which then could not be encoded (Kafka's strings hold 32,767 bytes), so the
    request went unanswered (found by fuzzing). The answer's message is cut, and says so."""
    c = make()
    register(c)
    topic = CreatableTopic(name="t", num_partitions=1, configs={"\x00" * 30_000: "1"})
    results, _ = c.create_topics([topic], 0)
    message = results[0].error_message
    assert results[0].error_code == ErrorCode.INVALID_CONFIG
    assert len(message) <= 1000 and message.endswith(" characters in all)")
    assert int(message.rsplit("(", 1)[1].split()[0].replace(",", "")) > 120_000
