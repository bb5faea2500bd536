"""Follower fetch planning (core/fetcher.py): KIP-73 shuffled order, Kafka's rotation, back-off,
fetcher hashing."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from minikafka.common import TopicPartition
from minikafka.core.fetcher import (
    ROTATE,
    FetchPlanner,
    FetchSettings,
    FollowerFetchState,
    fetcher_index,
    java_string_hash,
)

SETTINGS = FetchSettings(
    replica_id=2,
    max_wait_ms=500,
    min_bytes=1,
    response_max_bytes=10 << 20,
    partition_max_bytes=1 << 20,
    backoff_ms=1000,
)


def planner(n: int = 10, seed: int = 1, *, partition_order: str = "random") -> FetchPlanner:
    p = FetchPlanner(replace(SETTINGS, partition_order=partition_order), random.Random(seed))
    for i in range(n):
        p.add(
            TopicPartition("t", i),
            FollowerFetchState(fetch_offset=i * 10, current_leader_epoch=3, last_fetched_epoch=2),
        )
    return p


def order(req) -> list[int]:  # noqa: ANN001
    return [fp.partition for fp in req.partitions]


def test_request_carries_every_ready_partition_with_its_state():
    req = planner().build_request(now_ms=0)
    assert sorted(order(req)) == list(range(10))
    fp = next(fp for fp in req.partitions if fp.partition == 4)
    assert (fp.fetch_offset, fp.current_leader_epoch, fp.last_fetched_epoch) == (40, 3, 2)
    assert fp.partition_max_bytes == 1 << 20
    assert (req.replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes) == (2, 500, 1, 10 << 20)


def test_order_is_shuffled_per_request_and_replayable_from_the_seed():
    p = planner(seed=7)
    orders = [order(p.build_request(now_ms=0)) for _ in range(20)]
    assert len({tuple(o) for o in orders}) > 10  # a fresh order each time (KIP-73)
    q = planner(seed=7)
    assert orders == [order(q.build_request(now_ms=0)) for _ in range(20)]  # same seed, same orders


def test_every_partition_gets_to_go_first():
    # With a fixed order the leader would fill the response cap from the same partition every
    # time (KIP-74 fills in request order); the shuffle spreads the head of the line.
    p = planner(seed=3)
    firsts = {order(p.build_request(now_ms=0))[0] for _ in range(200)}
    assert firsts == set(range(10))


def test_delayed_partition_sits_out_until_backoff_passes():
    p = planner(n=3)
    p.delay(TopicPartition("t", 1), now_ms=100)  # ready again at 100 + 1000
    assert sorted(order(p.build_request(now_ms=1099))) == [0, 2]
    assert sorted(order(p.build_request(now_ms=1100))) == [0, 1, 2]


def test_nothing_ready_gives_no_request_and_the_time_to_wait():
    p = planner(n=2)
    p.delay(TopicPartition("t", 0), now_ms=0)
    p.delay(TopicPartition("t", 1), now_ms=50)
    assert p.build_request(now_ms=10) is None
    assert p.next_deadline_ms() == 1000
    assert FetchPlanner(SETTINGS, random.Random(0)).next_deadline_ms() is None


def test_excluded_partitions_are_left_out_of_the_request():
    p = planner(n=3)
    ex = frozenset({TopicPartition("t", 0), TopicPartition("t", 2)})
    assert order(p.build_request(now_ms=0, exclude=ex)) == [1]
    assert p.build_request(now_ms=0, exclude=frozenset(p.partitions)) is None


def test_advance_moves_the_fetch_position_and_epoch():
    p = planner(n=1)
    tp = TopicPartition("t", 0)
    p.advance(tp, fetch_offset=77, last_fetched_epoch=5)
    (fp,) = p.build_request(now_ms=0).partitions
    assert (fp.fetch_offset, fp.last_fetched_epoch) == (77, 5)
    p.remove([tp])
    assert p.build_request(now_ms=0) is None


def test_the_request_reports_our_log_start_and_a_move_sends_it_again():
    """The leader's low watermark (DeleteRecords) is made of what followers report."""
    p = planner(n=1)
    tp0 = TopicPartition("t", 0)
    (fp,) = p.build_request(now_ms=0).partitions
    assert fp.log_start_offset == -1  # not known: planner() gives none
    p.take_changed(now_ms=0)
    p.set_log_start(tp0, 40)
    assert p.take_changed(now_ms=0) == {tp0}  # a session sends the partition again
    (fp,) = p.build_request(now_ms=0).partitions
    assert fp.log_start_offset == 40
    p.set_log_start(tp0, 40)
    assert p.take_changed(now_ms=0) == set()  # unchanged: nothing to send


# -- replica.fetch.partition.order=rotate: Kafka's PartitionStates ----------------------------


def tp(i: int) -> TopicPartition:
    return TopicPartition("t", i)


# Each step is what the shell tells the planner after a response (or an add/remove), and then
# the order of the next request. Kafka's AbstractFetcherThread: updateAndMoveToEnd when a
# partition returned data (validBytes > 0) or got its first response (lag unknown), and in
# delayPartitions for a partition not already delayed; nothing else reorders.
ROTATION_STORIES = [
    ("data moves to the end", [("data", 0), ("data", 1)], [2, 3, 4, 0, 1]),
    ("in the order the data came", [("data", 3), ("data", 1)], [0, 2, 4, 3, 1]),
    ("first response moves even without data", [("first", 2)], [0, 1, 3, 4, 2]),
    ("later empty responses stay put", [("first", 0), ("first", 2), ("empty", 0)], [1, 3, 4, 0, 2]),
    ("an error delay moves to the end", [("delay", 1)], [0, 2, 3, 4, 1]),
    ("a second delay while delayed does not", [("delay", 1), ("data", 4), ("delay", 1)], [0, 2, 3, 1, 4]),
    ("truncation keeps the place", [("truncate", 0)], [0, 1, 2, 3, 4]),
    ("new partitions join at the end", [("remove", 1), ("add", 7), ("data", 0)], [2, 3, 4, 7, 0]),
]  # fmt: skip


def apply_step(p: FetchPlanner, step: str, i: int) -> None:
    st = p.partitions.get(tp(i))
    match step:
        case "data":
            p.advance(tp(i), fetch_offset=st.fetch_offset + 5, last_fetched_epoch=3,
                      returned_data=True)  # fmt: skip
            p.observe_leader(tp(i), leader_high_watermark=st.fetch_offset + 10)
        case "first" | "empty":  # an empty response: the first one, or one after a first
            p.observe_leader(tp(i), leader_high_watermark=st.fetch_offset)
        case "delay":
            p.delay(tp(i), now_ms=0)
        case "truncate":
            p.advance(tp(i), fetch_offset=0, last_fetched_epoch=1)
        case "remove":
            p.remove([tp(i)])
        case "add":
            p.add(tp(i), FollowerFetchState(fetch_offset=0, current_leader_epoch=3))


@pytest.mark.parametrize(
    ("steps", "expected"), [(s, e) for _, s, e in ROTATION_STORIES],
    ids=[name for name, _, _ in ROTATION_STORIES],
)  # fmt: skip
def test_rotation_order_after_responses(steps, expected):
    p = planner(n=5, partition_order=ROTATE)
    for step, i in steps:
        apply_step(p, step, i)
    # Delayed partitions sit out of the request but keep their place in the rotation.
    assert list(p.partitions) == [tp(i) for i in expected]
    assert order(p.build_request(now_ms=10_000)) == expected


def served_per_round(partition_order: str, *, rounds: int, n: int = 12, cap: int = 2) -> list:
    """A leader whose response cap lets only the first `cap` partitions of each request carry
    data (KIP-74 fills in request order): how many responses carried data for each partition,
    after each round of n / cap requests."""
    p = planner(n=n, seed=5, partition_order=partition_order)
    for i in range(n):
        p.observe_leader(tp(i), leader_high_watermark=10**9)  # lag known: a long way behind
    served = [0] * n
    counts = []
    for _ in range(rounds):
        for _ in range(n // cap):
            for fp in p.build_request(now_ms=0).partitions[:cap]:
                served[fp.partition] += 1
                p.advance(tp(fp.partition), fetch_offset=fp.fetch_offset + 100,
                          last_fetched_epoch=3, returned_data=True)  # fmt: skip
        counts.append(list(served))
    return counts


def test_rotation_serves_every_partition_once_per_round_under_a_response_cap():
    # 12 partitions, 2 fit in a response: rotation is round robin, 6 requests serve each once.
    assert served_per_round(ROTATE, rounds=3) == [[1] * 12, [2] * 12, [3] * 12]
    # The shuffle is fair only on average: after a round some partitions got several responses
    # and some none (seed 5), which is what spreads their completion times apart.
    random_counts = served_per_round("random", rounds=3)
    assert min(random_counts[0]) == 0 and max(random_counts[0]) >= 2


def test_random_order_ignores_the_rotation_notices():
    # The shuffle draws from the same list whatever the responses said, so a seed replays.
    quiet, told = planner(seed=9), planner(seed=9)
    for _ in range(5):
        a, b = order(quiet.build_request(now_ms=0)), order(told.build_request(now_ms=0))
        assert a == b
        told.advance(tp(b[0]), fetch_offset=1, last_fetched_epoch=3, returned_data=True)
        told.delay(tp(b[1]), now_ms=-10_000)  # delayed in the past: ready again at once


def test_unknown_partition_order_is_refused():
    with pytest.raises(ValueError, match="expected one of random, rotate"):
        replace(SETTINGS, partition_order="fifo")


def test_java_string_hash_matches_java():
    # Values of "...".hashCode() in Java.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE


def test_fetcher_index_is_kafkas_get_fetcher_id():
    # abs(31 * "hello".hashCode() + 3) % 4 = abs(3074032015 as int32 ...) computed by hand:
    h = (31 * 99162322 + 3) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert fetcher_index(TopicPartition("hello", 3), 4) == abs(h) % 4
    assert fetcher_index(TopicPartition("anything", 9), 1) == 0
    spread = {fetcher_index(TopicPartition("t", i), 3) for i in range(30)}
    assert spread == {0, 1, 2}
