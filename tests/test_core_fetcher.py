"""Follower fetch planning (core/fetcher.py): KIP-73 shuffled order, back-off, fetcher hashing."""

from __future__ import annotations

import random

from minikafka.core.fetcher import (
    FetchPlanner,
    FetchSettings,
    FollowerFetchState,
    fetcher_index,
    java_string_hash,
)
from minikafka.core.types import TopicPartition

SETTINGS = FetchSettings(
    replica_id=2,
    max_wait_ms=500,
    min_bytes=1,
    response_max_bytes=10 << 20,
    partition_max_bytes=1 << 20,
    backoff_ms=1000,
)


def planner(n: int = 10, seed: int = 1) -> FetchPlanner:
    p = FetchPlanner(SETTINGS, random.Random(seed))
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
    assert p.next_ready_ms() == 1000
    assert FetchPlanner(SETTINGS, random.Random(0)).next_ready_ms() is None


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
