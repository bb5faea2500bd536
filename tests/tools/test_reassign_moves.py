"""The reassignment tool's arithmetic (Kafka's ReassignPartitionsCommand): JSON formats and
their validation, --generate, MoveRatio and bytes, the move map (with --additional) and the
throttle configs of both modes."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from minikafka.common import TopicPartition as TP
from minikafka.core.assignment import assign_replicas
from minikafka.core.dynamic_config import (
    FOLLOWER_RATE,
    FOLLOWER_REASSIGNMENT_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REASSIGNMENT_RATE,
    LEADER_REPLICAS,
    ConfigSnapshot,
    parse_throttled_replicas,
    validate_alter,
)
from minikafka.errors import ConfigError
from minikafka.tools.reassign import (
    BROKER_LIST_FORM,
    REASSIGNMENT_FORM,
    TOPICS_FORM,
    ConfigChange,
    OngoingReassignment,
    PartitionMove,
    bytes_to_move,
    bytes_to_move_per_broker,
    changes_by_entity,
    format_reassignment_json,
    generate,
    move_map,
    move_ratio,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_json,
    propose_assignment,
    reassignment_throttle_configs,
    throttle_lists,
    throttled_brokers,
    validate_reassignment,
)

ENTRY_FORM = '{"topic":"name","partition":0,"replicas":[1,2]}'


def reassignment(*entries: dict) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def entry(topic: str = "t", partition: Any = 0, replicas: Any = (1, 2)) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "replicas": list(replicas)}


# ---------------------------------------------------------------------------- topics JSON


def test_parse_topics_json_in_file_order():
    text = '{"version":1,"topics":[{"topic":"b"},{"topic":"a"}]}'
    assert parse_topics_json(text) == ["b", "a"]


def test_parse_topics_json_missing_version_is_kafkas_version_1():
    assert parse_topics_json('{"topics":[{"topic":"a"}]}') == ["a"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "not an object"),
        ('{"version":2,"topics":[{"topic":"a"}]}', "version 2"),
        ('{"version":"1","topics":[{"topic":"a"}]}', "version '1'"),
        ('{"version":true,"topics":[{"topic":"a"}]}', "version True"),
        ('{"version":1}', 'no "topics" list'),
        ('{"version":1,"topics":{"topic":"a"}}', 'a dict as "topics" list'),
        ('{"version":1,"topics":[]}', 'empty "topics" list'),
        ('{"version":1,"topics":[{"name":"a"}]}', 'topics[0] has no "topic"'),
        ('{"version":1,"topics":["a"]}', 'topics[0] has no "topic"'),
        ('{"version":1,"topics":[{"topic":""}]}', 'topics[0] has no "topic"'),
    ],
)
def test_parse_topics_json_errors_name_the_form(text, fragment):
    with pytest.raises(ConfigError) as e:
        parse_topics_json(text)
    message = str(e.value)
    assert fragment in message
    assert TOPICS_FORM in message
    assert "\n" not in message


def test_parse_topics_json_duplicate_topic():
    with pytest.raises(ConfigError, match="topic 'a' appears twice.*expected each topic once"):
        parse_topics_json('{"version":1,"topics":[{"topic":"a"},{"topic":"a"}]}')


# ---------------------------------------------------------------------------- reassignment JSON


def test_parse_reassignment_json_keeps_order_and_ignores_log_dirs():
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
                {"topic": "t", "partition": 0, "replicas": [2]},
            ],
        }
    )
    got = parse_reassignment_json(text)
    assert got == {TP("t", 1): [3, 1], TP("t", 0): [2]}
    assert list(got) == [TP("t", 1), TP("t", 0)]


@pytest.mark.parametrize(
    ("text", "fragment", "form"),
    [
        ("", "not valid JSON", REASSIGNMENT_FORM),
        ('{"version":1,"partitions":[', "not valid JSON", REASSIGNMENT_FORM),
        ('"x"', "JSON str, not an object", REASSIGNMENT_FORM),
        ('{"version":3,"partitions":[]}', "version 3", REASSIGNMENT_FORM),
        ('{"version":1}', 'no "partitions" list', REASSIGNMENT_FORM),
        ('{"version":1,"partitions":"t-0"}', 'a str as "partitions" list', REASSIGNMENT_FORM),
        ('{"version":1,"partitions":[]}', 'empty "partitions" list', REASSIGNMENT_FORM),
        ('{"version":1,"partitions":[7]}', "partitions[0] is not an object", ENTRY_FORM),
        (reassignment({"partition": 0, "replicas": [1]}), 'no "topic"', ENTRY_FORM),
        (reassignment({"topic": 5, "partition": 0, "replicas": [1]}), 'no "topic"', ENTRY_FORM),
        (reassignment({"topic": "t", "replicas": [1]}), '"partition" is None', ENTRY_FORM),
        (reassignment(entry(partition=-1)), '"partition" is -1', ENTRY_FORM),
        (reassignment(entry(partition="0")), "\"partition\" is '0'", ENTRY_FORM),
        (reassignment(entry(partition=True)), '"partition" is True', ENTRY_FORM),
        (reassignment({"topic": "t", "partition": 0}), '"replicas" is None', ENTRY_FORM),
        (
            reassignment({"topic": "t", "partition": 0, "replicas": 1}),
            '"replicas" is 1',
            ENTRY_FORM,
        ),
        (reassignment(entry(replicas=[1, "2"])), "\"replicas\" is [1, '2']", ENTRY_FORM),
        (reassignment(entry(replicas=[1, -2])), '"replicas" is [1, -2]', ENTRY_FORM),
        (reassignment(entry(replicas=[1.0])), '"replicas" is [1.0]', ENTRY_FORM),
    ],
)
def test_parse_reassignment_json_shape_errors_name_the_form(text, fragment, form):
    with pytest.raises(ConfigError) as e:
        parse_reassignment_json(text)
    message = str(e.value)
    assert fragment in message
    assert form in message
    assert "\n" not in message


def test_parse_reassignment_json_empty_replica_list():
    with pytest.raises(ConfigError, match="t-0 has an empty replica list: expected at least one"):
        parse_reassignment_json(reassignment(entry(replicas=[])))


def test_parse_reassignment_json_duplicate_replicas():
    with pytest.raises(
        ConfigError, match=r"t-0 lists broker 2 twice in \[2, 1, 2\]: expected distinct"
    ):
        parse_reassignment_json(reassignment(entry(replicas=[2, 1, 2])))


def test_parse_reassignment_json_duplicate_partitions():
    text = reassignment(entry(replicas=[1]), entry("u"), entry(replicas=[2]))
    with pytest.raises(ConfigError, match="t-0 appears twice.*expected each partition once"):
        parse_reassignment_json(text)


CURRENT = {
    TP("t", 0): [1, 2],
    TP("t", 1): [2, 3],
    TP("t", 2): [3, 1],
    TP("u", 0): [1],
}
LIVE = [1, 2, 3]


def test_validate_reassignment_accepts_known_partitions_and_live_brokers():
    validate_reassignment(
        {TP("t", 0): [3, 2, 1], TP("u", 0): [2]}, current=CURRENT, live_brokers=LIVE
    )


@pytest.mark.parametrize(
    ("proposed", "pattern"),
    [
        (
            {TP("x", 0): [1]},
            r"unknown topic 'x' in the reassignment file: expected an existing topic \(t, u\)",
        ),
        ({TP("t", 3): [1]}, r"unknown partition t-3: expected a partition of topic 't' \(0\.\.2\)"),
        (
            {TP("t", 0): [1, 9]},
            r"t-0 names broker 9, which is not live: expected ids among 1, 2, 3",
        ),
        (
            {TP("t", 0): [1, 2, 3, 4]},
            "replication factor 4 but only 3 brokers are live: expected at most 3",
        ),
    ],
)
def test_validate_reassignment_errors(proposed, pattern):
    with pytest.raises(ConfigError, match=pattern):
        validate_reassignment(proposed, current=CURRENT, live_brokers=LIVE)


def test_parse_broker_list():
    assert parse_broker_list("3, 1,2") == [3, 1, 2]
    for bad in ("", "1,,2", "a", "1;2", "-1", "1,2,1"):
        with pytest.raises(ConfigError) as e:
            parse_broker_list(bad)
        assert BROKER_LIST_FORM in str(e.value)


# ---------------------------------------------------------------------------- --generate

CLUSTER = {
    **{TP("a", p): [0, 1, 2] for p in range(6)},
    **{TP("b", p): [1, 2] for p in range(4)},
    TP("c", 0): [0],
}


def test_generate_same_seed_same_proposal_and_different_seeds_differ():
    first = generate(CLUSTER, ["a", "b"], [0, 1, 2, 3], random.Random(7))
    again = generate(CLUSTER, ["b", "a"], [0, 1, 2, 3], random.Random(7))  # order of file ignored
    assert first == again
    proposals = {
        generate(CLUSTER, ["a", "b"], [0, 1, 2, 3], random.Random(s))[1] for s in range(20)
    }
    assert len(proposals) > 1


def test_generate_keeps_partitions_and_rf_and_uses_only_listed_brokers():
    for seed in range(30):
        current_json, proposed_json = generate(CLUSTER, ["a", "b"], [1, 3, 4], random.Random(seed))
        current = parse_reassignment_json(current_json)
        proposed = parse_reassignment_json(proposed_json)
        assert set(current) == set(proposed) == {tp for tp in CLUSTER if tp.topic in ("a", "b")}
        for tp, replicas in proposed.items():
            assert len(replicas) == len(CLUSTER[tp])
            assert len(set(replicas)) == len(replicas)
            assert set(replicas) <= {1, 3, 4}


def test_generate_is_kafkas_placer_per_topic_in_sorted_order():
    # Topics in sorted order, each one assign_replicas call on the shared rng (two draws each).
    rng = random.Random(3)
    expect_a = assign_replicas([0, 1, 2, 3], 6, 3, rng)
    expect_b = assign_replicas([0, 1, 2, 3], 4, 2, rng)
    proposed = propose_assignment(CLUSTER, ["b", "a"], [0, 1, 2, 3], random.Random(3))
    assert [proposed[TP("a", p)] for p in range(6)] == expect_a
    assert [proposed[TP("b", p)] for p in range(4)] == expect_b


def test_generate_json_is_kafkas_compact_sorted_format():
    current_json, _ = generate(CLUSTER, ["b"], [1, 2], random.Random(0))
    assert current_json == (
        '{"version":1,"partitions":['
        '{"topic":"b","partition":0,"replicas":[1,2]},'
        '{"topic":"b","partition":1,"replicas":[1,2]},'
        '{"topic":"b","partition":2,"replicas":[1,2]},'
        '{"topic":"b","partition":3,"replicas":[1,2]}]}'
    )
    assert format_reassignment_json({TP("z", 1): [2], TP("y", 10): [1], TP("y", 2): [3]}) == (
        '{"version":1,"partitions":[{"topic":"y","partition":2,"replicas":[3]},'
        '{"topic":"y","partition":10,"replicas":[1]},{"topic":"z","partition":1,"replicas":[2]}]}'
    )


def test_generate_keeps_each_partitions_own_rf_when_a_topic_has_mixed_factors():
    current = {TP("m", 0): [0, 1, 2], TP("m", 1): [1], TP("m", 2): [2, 0]}
    for seed in range(10):
        proposed = propose_assignment(current, ["m"], [0, 1, 2, 3], random.Random(seed))
        assert [len(proposed[TP("m", p)]) for p in range(3)] == [3, 1, 2]


@pytest.mark.parametrize(
    ("topics", "brokers", "live", "pattern"),
    [
        (
            ["a", "nope"],
            [0, 1, 2],
            None,
            r"unknown topic 'nope' in the topics-to-move file: expected an existing topic \(a, b, c\)",
        ),
        (
            ["a"],
            [0, 1],
            None,
            "topic 'a' has replication factor 3 but the broker list has 2 brokers: expected at least 3",
        ),
        (["a"], [], None, f"empty broker list: expected {BROKER_LIST_FORM}"),
        (["a"], [0, 1, 1, 2], None, f"names broker 1 twice: expected {BROKER_LIST_FORM}"),
        (["a"], [0, 1, 5], [0, 1, 2], "broker 5, which is not live: expected ids among 0, 1, 2"),
    ],
)
def test_generate_errors(topics, brokers, live, pattern):
    with pytest.raises(ConfigError, match=pattern):
        generate(CLUSTER, topics, brokers, random.Random(0), live_brokers=live)


# ---------------------------------------------------------------------------- MoveRatio, bytes


def test_move_ratio_and_bytes_hand_worked():
    current = {TP("t", 0): [1, 2], TP("t", 1): [2, 3], TP("t", 2): [3, 1], TP("t", 3): [1, 3]}
    proposed = {
        TP("t", 0): [2, 1],  # order only: a new preferred leader, nothing copied
        TP("t", 1): [2, 4],  # 3 -> 4: one new replica
        TP("t", 2): [4, 5],  # both replaced: two new replicas
        TP("t", 3): [1, 3],  # unchanged
    }
    sizes = {TP("t", 0): 100, TP("t", 1): 1_000, TP("t", 2): 10_000, TP("t", 3): 7}
    assert move_ratio(current, proposed) == 2 / 4
    # t-1: 1_000 x 1 + t-2: 10_000 x 2 = 21_000
    assert bytes_to_move(current, proposed, sizes) == 21_000
    assert move_ratio(current, {}) == 0.0
    assert move_ratio({}, {}) == 0.0


def test_move_ratio_counts_over_all_current_partitions():
    # KIP-73: moved / total partition count; partitions not in the proposal count as staying.
    current = {TP("t", p): [1] for p in range(8)}
    assert move_ratio(current, {TP("t", 0): [2], TP("t", 5): [1, 2]}) == 2 / 8


def test_move_ratio_and_bytes_refuse_unknown_or_unsized_partitions():
    with pytest.raises(ConfigError, match="unknown partition t-9"):
        move_ratio({TP("t", 0): [1]}, {TP("t", 9): [1]})
    with pytest.raises(ConfigError, match="no size for partition t-0: expected a size in bytes"):
        bytes_to_move({TP("t", 0): [1]}, {TP("t", 0): [2]}, {})


# ---------------------------------------------------------------------------- move map

# Three partitions, source and destination sets overlapping across partitions:
# t-0: [1,2] -> [2,3]   sources {1,2}, destinations {3}
# t-1: [2,3] -> [3,1]   sources {2,3}, destinations {1}
# t-2: [3,1] -> [1,2,4] sources {1,3}, destinations {2,4} (RF grows)
OVERLAP_CURRENT = {TP("t", 0): [1, 2], TP("t", 1): [2, 3], TP("t", 2): [3, 1], TP("u", 0): [5]}
OVERLAP_PROPOSED = {TP("t", 0): [2, 3], TP("t", 1): [3, 1], TP("t", 2): [1, 2, 4]}


def test_move_map_sources_are_current_destinations_are_new():
    moves = move_map(OVERLAP_CURRENT, OVERLAP_PROPOSED)
    assert moves == {
        TP("t", 0): PartitionMove(sources=(1, 2), destinations=(3,)),
        TP("t", 1): PartitionMove(sources=(2, 3), destinations=(1,)),
        TP("t", 2): PartitionMove(sources=(1, 3), destinations=(2, 4)),
    }
    assert throttle_lists(moves) == {"t": ("0:1,0:2,1:2,1:3,2:1,2:3", "0:3,1:1,2:2,2:4")}
    assert throttled_brokers(moves) == [1, 2, 3, 4]


def test_move_map_additional_uses_the_original_replicas_of_the_ongoing_move():
    # t-0 is moving [1,2] -> [3,4]: during the move replicas = [3,4,1,2], adding [3,4],
    # removing [1,2]. --additional now retargets t-0 to [3,5] and adds a move of t-1.
    ongoing = {
        TP("t", 0): OngoingReassignment(replicas=(3, 4, 1, 2), adding=(3, 4), removing=(1, 2)),
        TP("u", 0): OngoingReassignment(replicas=(6, 5), adding=(6,), removing=(5,)),
    }
    current = {TP("t", 0): [3, 4, 1, 2], TP("t", 1): [2, 3], TP("u", 0): [6, 5]}
    proposed = {TP("t", 0): [3, 5], TP("t", 1): [2, 4]}
    moves = move_map(current, proposed, ongoing)
    assert moves == {
        # sources are the ORIGINAL replicas {1,2}, not the current [3,4,1,2]; 3 and 5 are new
        TP("t", 0): PartitionMove(sources=(1, 2), destinations=(3, 5)),
        TP("t", 1): PartitionMove(sources=(2, 3), destinations=(4,)),
        # the ongoing move not in the file stays in the map, so it stays throttled
        TP("u", 0): PartitionMove(sources=(5,), destinations=(6,)),
    }
    assert throttle_lists(moves) == {"t": ("0:1,0:2,1:2,1:3", "0:3,0:5,1:4"), "u": ("0:5", "0:6")}
    assert throttled_brokers(moves) == [1, 2, 3, 4, 5, 6]


def test_move_map_resubmitting_the_ongoing_move_keeps_it_whole():
    # --additional with the same file: how the throttle is changed mid-move.
    ongoing = {TP("t", 0): OngoingReassignment(replicas=(3, 1, 2), adding=(3,), removing=(1,))}
    moves = move_map({TP("t", 0): [3, 1, 2]}, {TP("t", 0): [3, 2]}, ongoing)
    assert moves == {TP("t", 0): PartitionMove(sources=(1, 2), destinations=(3,))}


def test_move_map_unknown_partition():
    with pytest.raises(ConfigError, match="unknown partition t-7"):
        move_map(OVERLAP_CURRENT, {TP("t", 7): [1]})


def test_move_map_is_sorted_and_non_moving_partitions_throttle_nothing():
    current = {TP("b", 0): [1, 2], TP("a", 10): [1], TP("a", 2): [2, 3]}
    proposed = {TP("b", 0): [2, 1], TP("a", 10): [4], TP("a", 2): [3, 2]}
    moves = move_map(current, proposed)
    assert list(moves) == [TP("a", 2), TP("a", 10), TP("b", 0)]
    assert not moves[TP("b", 0)].moving and not moves[TP("a", 2)].moving
    # Numeric order as the configs store it: 2:... before 10:...; b keeps an empty list so that
    # its previous lists are overwritten.
    assert throttle_lists(moves) == {"a": ("10:1", "10:4"), "b": ("", "")}
    assert throttled_brokers(moves) == [1, 4]


def test_bytes_to_move_per_broker_counts_destinations():
    moves = move_map(OVERLAP_CURRENT, OVERLAP_PROPOSED)
    sizes = {TP("t", 0): 10, TP("t", 1): 200, TP("t", 2): 3_000}
    # broker 1 <- t-1 (200); 2 <- t-2 (3_000); 3 <- t-0 (10); 4 <- t-2 (3_000)
    assert bytes_to_move_per_broker(moves, sizes) == {1: 200, 2: 3_000, 3: 10, 4: 3_000}
    assert sum(bytes_to_move_per_broker(moves, sizes).values()) == bytes_to_move(
        OVERLAP_CURRENT, OVERLAP_PROPOSED, sizes
    )


def _replica_lists(brokers, max_rf):
    for rf in range(1, max_rf + 1):
        yield from itertools.permutations(brokers, rf)


def test_exhaustive_single_partition_moves_over_four_brokers():
    # Every (current, proposed) pair of ordered replica lists over brokers 0..3, RF 1..3.
    lists = list(_replica_lists(range(4), 3))
    assert len(lists) == 4 + 12 + 24
    for cur, new in itertools.product(lists, lists):
        tp = TP("t", 5)
        moves = move_map({tp: list(cur)}, {tp: list(new)})
        move = moves[tp]
        assert set(move.sources) == set(cur)
        assert set(move.destinations) == set(new) - set(cur)
        assert set(move.sources) | set(move.destinations) >= set(new)
        leader, follower = throttle_lists(moves)["t"]
        changed = set(cur) != set(new)
        assert move_ratio({tp: cur}, {tp: new}) == (1.0 if changed else 0.0)
        assert bytes_to_move({tp: cur}, {tp: new}, {tp: 7}) == 7 * len(move.destinations)
        if move.moving:
            assert parse_throttled_replicas(leader).pairs == {(5, b) for b in cur}
            assert parse_throttled_replicas(follower).pairs == {(5, b) for b in set(new) - set(cur)}
            assert throttled_brokers(moves) == sorted(set(cur) | set(new))
        else:
            assert (leader, follower) == ("", "")
            assert throttled_brokers(moves) == []


# ---------------------------------------------------------------------------- throttle configs


def test_replication_mode_sets_lists_then_rates_on_every_involved_broker():
    moves = move_map(OVERLAP_CURRENT, OVERLAP_PROPOSED)
    changes = reassignment_throttle_configs(moves, 50_000_000, "replication")
    topic = [
        ConfigChange(
            entity_type="topics",
            entity_name="t",
            name=LEADER_REPLICAS,
            value="0:1,0:2,1:2,1:3,2:1,2:3",
        ),
        ConfigChange(
            entity_type="topics", entity_name="t", name=FOLLOWER_REPLICAS, value="0:3,1:1,2:2,2:4"
        ),
    ]
    brokers = [
        ConfigChange(entity_type="brokers", entity_name=str(b), name=name, value="50000000")
        for b in (1, 2, 3, 4)
        for name in (LEADER_RATE, FOLLOWER_RATE)
    ]
    assert changes == topic + brokers
    assert (
        str(changes[0]) == "topics t: leader.replication.throttled.replicas=0:1,0:2,1:2,1:3,2:1,2:3"
    )


def test_reassignment_mode_sets_only_kip542_rates():
    moves = move_map(OVERLAP_CURRENT, OVERLAP_PROPOSED)
    changes = reassignment_throttle_configs(moves, 1_000_000, "reassignment")
    assert changes == [
        ConfigChange(entity_type="brokers", entity_name=str(b), name=name, value="1000000")
        for b in (1, 2, 3, 4)
        for name in (LEADER_REASSIGNMENT_RATE, FOLLOWER_REASSIGNMENT_RATE)
    ]


def test_throttle_configs_pass_the_dynamic_config_validation():
    moves = move_map(OVERLAP_CURRENT, OVERLAP_PROPOSED)
    for mode in ("replication", "reassignment"):
        grouped = changes_by_entity(reassignment_throttle_configs(moves, 5_000, mode))
        for (entity_type, name), configs in grouped.items():
            # What the controller would store equals what we send: already normalised.
            stored = validate_alter(entity_type, name, configs, [], ConfigSnapshot())
            assert stored == configs
    grouped = changes_by_entity(reassignment_throttle_configs(moves, 5_000, "replication"))
    assert grouped[("brokers", "4")] == {LEADER_RATE: "5000", FOLLOWER_RATE: "5000"}
    assert list(grouped) == [("topics", "t")] + [("brokers", str(b)) for b in (1, 2, 3, 4)]


@pytest.mark.parametrize("throttle", [0, -5, 1.5, "100", True])
def test_throttle_configs_refuse_bad_throttle(throttle):
    with pytest.raises(ConfigError, match="expected a rate in bytes per second, an integer >= 1"):
        reassignment_throttle_configs({}, throttle, "replication")


def test_throttle_configs_refuse_unknown_mode():
    with pytest.raises(
        ConfigError, match="mode 'kip73': expected one of replication, reassignment"
    ):
        reassignment_throttle_configs({}, 10, "kip73")
