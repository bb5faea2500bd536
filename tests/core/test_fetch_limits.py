"""KIP-74 byte caps (core/fetch_limits.py): worked examples, then properties against Kafka's shape.

The reference model below is written the way Kafka's code reads (`LogSegment.read` widening the
limit to the first batch when `minOneMessage`, `ReplicaManager.readFromLocalLog` clearing it
after the first non-empty partition), not the way `take_batches` is written, so the two check
each other.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.core.fetch_limits import ResponseBudget, plan_response, take_batches

# -- a second formulation, in Kafka's words ---------------------------------------------------------


def kafka_segment_read(sizes: list[int], max_size: int, min_one_message: bool) -> tuple[int, int]:
    """LogSegment.read: adjustedMaxSize = max(maxSize, firstBatchSize) if minOneMessage; whole
    batches that fit in adjustedMaxSize (a partial first batch becomes an empty set)."""
    if not sizes:
        return 0, 0
    adjusted = max(max_size, sizes[0]) if min_one_message else max_size
    prefix = list(itertools.accumulate(sizes))
    n = sum(1 for total in prefix if total <= adjusted)
    return n, (prefix[n - 1] if n else 0)


def kafka_read_from_local_log(
    partitions: list[list[int]], caps: list[int], response_max: int, hard: bool = False
) -> list[tuple[int, int]]:
    limit_bytes = response_max
    min_one_message = not hard
    out = []
    for sizes, cap in zip(partitions, caps, strict=True):
        result = kafka_segment_read(sizes, min(cap, limit_bytes), min_one_message)
        if result[1] > 0:
            min_one_message = False
        limit_bytes = max(0, limit_bytes - result[1])
        out.append(result)
    return out


sizes_st = st.lists(st.integers(min_value=1, max_value=60), max_size=8)
limit_st = st.integers(min_value=-5, max_value=150)


# -- take_batches ---------------------------------------------------------------------------------


def test_takes_whole_batches_while_total_fits() -> None:
    # 30 + 30 = 60 <= 70, + 30 = 90 > 70: two batches, 60 bytes.
    assert take_batches([30, 30, 30], 70, min_one=False) == (2, 60)
    assert take_batches([30, 30, 30], 70, min_one=True) == (2, 60)
    # The limit is inclusive: exactly 90 fits all three.
    assert take_batches([30, 30, 30], 90, min_one=False) == (3, 90)


def test_oversized_first_batch_only_with_min_one() -> None:
    # KIP-74: a 500-byte first batch under a 100-byte limit comes back alone, never with the next.
    assert take_batches([500, 10], 100, min_one=True) == (1, 500)
    assert take_batches([500, 10], 100, min_one=False) == (0, 0)
    # Not the first batch: a later oversized batch just stops the take.
    assert take_batches([10, 500], 100, min_one=True) == (1, 10)


def test_empty_and_zero_limit() -> None:
    assert take_batches([], 100, min_one=True) == (0, 0)
    assert take_batches([5], 0, min_one=False) == (0, 0)
    assert take_batches([5], 0, min_one=True) == (1, 5)


def test_sizes_are_consumed_lazily() -> None:
    pulled: list[int] = []

    def sizes():
        for size in [10, 10, 10, 10, 10]:
            pulled.append(size)
            yield size

    assert take_batches(sizes(), 25, min_one=False) == (2, 20)
    assert len(pulled) == 3  # the two taken and the one that did not fit


@given(sizes=sizes_st, limit=limit_st, min_one=st.booleans())
def test_take_batches_matches_kafka_segment_read(
    sizes: list[int], limit: int, min_one: bool
) -> None:
    assert take_batches(sizes, limit, min_one) == kafka_segment_read(sizes, limit, min_one)


@given(sizes=sizes_st, limit=limit_st, min_one=st.booleans())
def test_take_batches_properties(sizes: list[int], limit: int, min_one: bool) -> None:
    n, nbytes = take_batches(iter(sizes), limit, min_one)
    assert nbytes == sum(sizes[:n])  # a prefix, counted exactly
    if nbytes > max(0, limit):  # over the limit only as KIP-74's single first batch
        assert min_one and n == 1
    if n < len(sizes):  # maximal: the next batch would not fit
        assert nbytes + sizes[n] > limit
    if sizes and min_one:
        assert n >= 1  # progress is always possible


# -- ResponseBudget / plan_response ---------------------------------------------------------------


def test_partitions_share_the_response_cap_in_request_order() -> None:
    # response 100, partition cap 60: p0 takes 2x25 = 50 (a third would be 75 > 60);
    # p1 gets min(60, 100 - 50) = 50: 2x20 = 40; p2 gets min(60, 10) = 10: its 20-byte batch
    # does not fit and min_one is over, so nothing.
    plan = plan_response([[25, 25, 25], [20, 20, 20], [20]], 60, 100)
    assert plan == [(2, 50), (2, 40), (0, 0)]


def test_only_first_non_empty_partition_may_exceed() -> None:
    # p0 is empty (caught up), so p1 is the first non-empty partition: its 300-byte batch comes
    # back alone although cap 100 and response 150. The response is then spent (150 - 300 < 0),
    # and p2's 200-byte batch exceeds its cap: nothing.
    plan = plan_response([[], [300, 5], [200]], 100, 150)
    assert plan == [(0, 0), (1, 300), (0, 0)]


def test_oversized_batch_in_later_partition_returns_nothing() -> None:
    # p0 returns 10 bytes, so min_one ends; p1's 500-byte batch under a 100 cap: nothing,
    # and p2 still gets its batch (an empty partition does not end the response).
    plan = plan_response([[10], [500], [30]], 100, 1000)
    assert plan == [(1, 10), (0, 0), (1, 30)]


def test_hard_limit_mirrors_old_fetch_versions() -> None:
    assert plan_response([[500]], 100, 1000, hard_max_bytes_limit=True) == [(0, 0)]


def test_per_partition_caps_and_length_check() -> None:
    assert plan_response([[50], [50]], [40, 60], 1000) == [(1, 50), (1, 50)]
    with pytest.raises(ValueError, match="one partition_max_bytes per partition"):
        plan_response([[50], [50]], [40], 1000)


def test_exhausted_budget_does_not_touch_sizes() -> None:
    budget = ResponseBudget(100)
    assert budget.take([100], 1000) == (1, 100)
    assert budget.exhausted()

    def explode():
        raise AssertionError("sizes pulled after the response was full")
        yield 0  # pragma: no cover

    assert budget.take(explode(), 1000) == (0, 0)


def test_budget_record_and_limit() -> None:
    budget = ResponseBudget(100)
    assert budget.partition_limit(30) == 30 and budget.partition_limit(500) == 100
    budget.record(0)  # an empty partition keeps KIP-74's soft first batch
    assert budget.min_one
    budget.record(120)
    assert not budget.min_one and budget.remaining_bytes == 0


response_st = st.lists(sizes_st, max_size=6)


@given(
    partitions=response_st,
    cap=st.integers(min_value=0, max_value=120),
    response_max=st.integers(min_value=0, max_value=300),
    hard=st.booleans(),
)
def test_plan_response_matches_read_from_local_log(
    partitions: list[list[int]], cap: int, response_max: int, hard: bool
) -> None:
    caps = [cap] * len(partitions)
    got = plan_response(partitions, cap, response_max, hard_max_bytes_limit=hard)
    assert got == kafka_read_from_local_log(partitions, caps, response_max, hard)


@given(
    partitions=response_st,
    caps=st.lists(st.integers(min_value=0, max_value=120), min_size=6, max_size=6),
    response_max=st.integers(min_value=0, max_value=300),
)
def test_plan_response_properties(
    partitions: list[list[int]], caps: list[int], response_max: int
) -> None:
    caps = caps[: len(partitions)]
    plan = plan_response(partitions, caps, response_max)
    first_non_empty = next((i for i, (n, _) in enumerate(plan) if n), None)
    total = sum(nbytes for _, nbytes in plan)
    for i, ((n, nbytes), sizes, cap) in enumerate(zip(plan, partitions, caps, strict=True)):
        assert nbytes == sum(sizes[:n])
        if i != first_non_empty:
            assert nbytes <= cap  # hard per-partition cap outside KIP-74's one exception
        elif nbytes > cap:
            assert n == 1
    if first_non_empty is None:
        # Nothing returned although some partition had data: impossible with min_one.
        assert all(not sizes for sizes in partitions)
    else:
        oversized = plan[first_non_empty][1]
        assert total <= max(response_max, oversized)


def test_fetch_limits_is_sans_io() -> None:
    import minikafka.core.fetch_limits as module

    tree = ast.parse(Path(module.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {"__future__", "collections"}
