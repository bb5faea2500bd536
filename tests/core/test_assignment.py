"""Kafka's rack-unaware replica assignment (AdminUtils.assignReplicasToBrokers), exactly."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.core.assignment import AssignmentError, assign_replicas
from minikafka.errors import ConfigError, ErrorCode


def test_kafka_admin_utils_test_replica_assignment():
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, fixed start 0.
    # p0..p4: shift 0 -> followers at +1, +2; p5 wraps, shift 1 -> followers at +2, +3.
    expected = [
        [0, 1, 2],
        [1, 2, 3],
        [2, 3, 4],
        [3, 4, 0],
        [4, 0, 1],
        [0, 2, 3],
        [1, 3, 4],
        [2, 4, 0],
        [3, 0, 1],
        [4, 1, 2],
    ]
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, random.Random(0), fixed_start_index=0)
    assert got == expected


def test_hand_worked_three_brokers_rf2():
    # n=3: follower offset = 1 + shift % 2. Shift 0 for p0..p2 (+1), 1 for p3..p5 (+2),
    # 2 again for p6 (+1).
    got = assign_replicas([10, 20, 30], 7, 2, random.Random(0), fixed_start_index=0)
    assert got == [[10, 20], [20, 30], [30, 10], [10, 30], [20, 10], [30, 20], [10, 20]]


def test_brokers_are_sorted_before_placement():
    unsorted = assign_replicas([30, 10, 20], 7, 2, random.Random(0), fixed_start_index=0)
    assert unsorted == assign_replicas([10, 20, 30], 7, 2, random.Random(0), fixed_start_index=0)


def test_fixed_start_index_sets_both_start_and_shift():
    # start index 1 and shift 1: p0 first = brokers[1], follower offset 1 + (1 + 0) % 4 = 2.
    got = assign_replicas([0, 1, 2, 3, 4], 2, 2, random.Random(0), fixed_start_index=1)
    assert got == [[1, 3], [2, 4]]


def test_start_partition_id_continues_numbering_as_kafka_does():
    # Adding partitions 7..9 to the 5-broker topic: Kafka starts the shift at the fixed index
    # again (it does not count the wraps before 7), so p7 is [2, 3, 4], not [2, 4, 0].
    got = assign_replicas(
        [0, 1, 2, 3, 4], 3, 3, random.Random(0), fixed_start_index=0, start_partition_id=7
    )
    assert got == [[2, 3, 4], [3, 4, 0], [4, 0, 1]]
    # At a multiple of the broker count the wrap is counted, so it matches the full layout.
    full = assign_replicas([0, 1, 2, 3, 4], 10, 3, random.Random(0), fixed_start_index=0)
    tail = assign_replicas(
        [0, 1, 2, 3, 4], 5, 3, random.Random(0), fixed_start_index=0, start_partition_id=5
    )
    assert tail == full[5:]


def test_random_start_draws_start_index_then_shift_from_rng():
    rng = random.Random(1234)
    start, shift = rng.randrange(4), rng.randrange(4)
    got = assign_replicas([1, 2, 3, 4], 4, 2, random.Random(1234))
    brokers = [1, 2, 3, 4]
    for p, replicas in enumerate(got):
        first = (p + start) % 4
        assert replicas == [brokers[first], brokers[(first + 1 + shift % 3) % 4]]


def test_same_seed_same_result_and_rng_is_consumed():
    a = assign_replicas(range(6), 30, 3, random.Random(99))
    b = assign_replicas(range(6), 30, 3, random.Random(99))
    assert a == b
    rng = random.Random(5)
    assign_replicas(range(6), 3, 2, rng)
    fresh = random.Random(5)
    fresh.randrange(6)
    fresh.randrange(6)
    assert rng.random() == fresh.random()  # exactly two draws, as Kafka makes


def test_single_broker_rf1():
    assert assign_replicas([7], 3, 1, random.Random(0)) == [[7], [7], [7]]


@pytest.mark.parametrize(
    ("brokers", "partitions", "factor", "code", "message"),
    [
        ([0, 1], 0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
        ([0, 1], -3, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger"),
        ([0, 1], 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "must be larger than 0."),
        (
            [0, 1],
            1,
            3,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor: 3 larger than available brokers: 2.",
        ),
        ([], 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR, "available brokers: 0."),
        ([1, 1], 1, 1, ErrorCode.INVALID_REPLICA_ASSIGNMENT, "must be unique"),
    ],
)
def test_errors(brokers, partitions, factor, code, message):
    with pytest.raises(AssignmentError) as info:
        assign_replicas(brokers, partitions, factor, random.Random(0))
    assert info.value.code == code
    assert message in str(info.value)
    assert isinstance(info.value, ConfigError)
    assert isinstance(info.value, ValueError)


@given(
    n=st.integers(min_value=1, max_value=8),
    data=st.data(),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_properties(n, data, seed):
    brokers = data.draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    factor = data.draw(st.integers(1, n))
    partitions = data.draw(st.integers(1, 60))
    got = assign_replicas(brokers, partitions, factor, random.Random(seed))
    assert len(got) == partitions
    for replicas in got:
        assert len(replicas) == factor
        assert len(set(replicas)) == factor  # no broker twice in a partition
        assert set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in got)
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1  # leaders round-robin
    if partitions % n == 0:
        # Each run of n partitions is a rotation: every broker holds `factor` replicas in it.
        replicas = Counter(b for r in got for b in r)
        assert {replicas[b] for b in brokers} == {factor * partitions // n}
