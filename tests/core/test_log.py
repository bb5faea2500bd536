"""Leader-epoch cache and truncation rules (minikafka.core.log), against Kafka's behaviour.

Tables mirror Kafka's LeaderEpochFileCacheTest and AbstractFetcherThreadTest; the property test
is the "logs never diverge after failover" guarantee of KIP-101/KIP-279/KIP-320.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from minikafka.common import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from minikafka.core.log import (
    FetchCheck,
    assign_epoch,
    check_follower_fetch,
    end_offset_for_epoch,
    follower_high_watermark,
    follower_truncation_offset,
    latest_epoch,
    truncate_epochs_from_end,
    truncate_epochs_from_start,
)
from minikafka.errors import ErrorCode

U = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)

# ---------------------------------------------------------------------------- assign_epoch


@pytest.mark.parametrize(
    ("epochs", "epoch", "start", "expected"),
    [
        ([], 0, 0, [(0, 0)]),  # empty cache: always appended
        ([], 3, 7, [(3, 7)]),
        ([(1, 0)], 2, 5, [(1, 0), (2, 5)]),  # new epoch: appended
        ([(1, 0)], 1, 5, [(1, 0)]),  # same epoch, later batch: no-op
        ([(1, 0), (2, 5)], 2, 5, [(1, 0), (2, 5)]),  # same entry again: no-op
        ([(1, 0), (2, 5)], 2, 9, [(1, 0), (2, 5)]),  # same epoch, later offset: no-op
        # same latest epoch, earlier start: Kafka replaces the entry
        ([(1, 0), (2, 5)], 2, 3, [(1, 0), (2, 3)]),
        # ... and removes every entry starting at or after the new start
        ([(1, 0), (2, 5)], 2, 0, [(2, 0)]),
        # new epoch at an offset some older entries start at or after: those go
        ([(1, 0), (2, 5), (3, 8)], 4, 5, [(1, 0), (4, 5)]),
        # lower epoch than the latest (the documented choice, Kafka's): conflicting entries go
        ([(1, 0), (3, 8)], 2, 10, [(1, 0), (2, 10)]),
        ([(1, 0), (3, 8)], 2, 4, [(1, 0), (2, 4)]),
        ([(1, 0), (3, 8)], 0, 4, [(0, 4)]),
    ],
)
def test_assign_epoch_table(epochs, epoch, start, expected):
    before = list(epochs)
    assert assign_epoch(epochs, epoch, start) == expected
    assert epochs == before  # the input list is never mutated


def test_assign_epoch_returns_a_new_list_even_for_a_no_op():
    epochs = [(1, 0)]
    out = assign_epoch(epochs, 1, 3)
    assert out == epochs and out is not epochs


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1), (-1, -1)])
def test_assign_epoch_rejects_negative_values(epoch, start):
    with pytest.raises(ValueError):
        assign_epoch([], epoch, start)


@settings(derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 30)), max_size=20))
def test_assign_epoch_keeps_the_cache_strictly_ascending(assignments):
    epochs: list[tuple[int, int]] = []
    for epoch, start in assignments:
        epochs = assign_epoch(epochs, epoch, start)
        assert epochs[-1][0] == epoch  # the newest information always wins
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(epochs, epochs[1:], strict=False))


# ---------------------------------------------------------------------------- truncation


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        (20, [(1, 0), (2, 5), (4, 10)]),  # beyond every start: unchanged
        (11, [(1, 0), (2, 5), (4, 10)]),
        (10, [(1, 0), (2, 5)]),  # an entry starting exactly at the end goes
        (6, [(1, 0), (2, 5)]),
        (5, [(1, 0)]),
        (1, [(1, 0)]),
        (0, []),
        (-1, [(1, 0), (2, 5), (4, 10)]),  # Kafka ignores a negative end offset
    ],
)
def test_truncate_epochs_from_end(end_offset, expected):
    assert truncate_epochs_from_end([(1, 0), (2, 5), (4, 10)], end_offset) == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (0, [(1, 0), (2, 5), (4, 10)]),  # the first entry starts there already
        (3, [(1, 3), (2, 5), (4, 10)]),  # the covering entry is moved up
        (5, [(2, 5), (4, 10)]),  # exclusive: an entry at 5 is kept (as (2, 5))
        (7, [(2, 7), (4, 10)]),
        (10, [(4, 10)]),
        (15, [(4, 15)]),  # beyond the last start: the last entry covers it
    ],
)
def test_truncate_epochs_from_start(start_offset, expected):
    assert truncate_epochs_from_start([(1, 0), (2, 5), (4, 10)], start_offset) == expected


def test_truncate_epochs_from_start_before_the_first_entry_changes_nothing():
    assert truncate_epochs_from_start([(2, 5), (4, 10)], 3) == [(2, 5), (4, 10)]
    assert truncate_epochs_from_start([], 3) == []


def test_latest_epoch():
    assert latest_epoch([]) == UNDEFINED_EPOCH
    assert latest_epoch([(1, 0)]) == 1
    assert latest_epoch([(1, 0), (5, 9)]) == 5


# ---------------------------------------------------------------------------- end_offset_for_epoch

CACHE = [(2, 5), (4, 10), (7, 20)]  # LEO 25


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (7, (7, 25)),  # the latest epoch: the log end offset
        (4, (4, 20)),  # a known epoch ends where the next one starts
        (2, (2, 10)),
        (5, (4, 20)),  # unknown epoch between: largest epoch below it, next start
        (6, (4, 20)),
        (3, (2, 10)),
        # below the first epoch: Kafka (since 2.0) returns (requested, first start),
        # not UNDEFINED as its stale Javadoc says
        (1, (1, 5)),
        (0, (0, 5)),
        (8, U),  # above the latest: undefined
        (UNDEFINED_EPOCH, U),
    ],
)
def test_end_offset_for_epoch_table(requested, expected):
    assert end_offset_for_epoch(CACHE, requested, 25) == expected


def test_end_offset_for_epoch_on_an_empty_cache_is_undefined():
    assert end_offset_for_epoch([], 0, 0) == U
    assert end_offset_for_epoch([], 3, 17) == U


# ---------------------------------------------------------------------------- check_follower_fetch


def _check(**kw) -> FetchCheck:
    args = dict(
        epochs=CACHE,
        log_start_offset=5,
        log_end_offset=25,
        leader_epoch=7,
        fetch_offset=25,
        current_leader_epoch=7,
        last_fetched_epoch=7,
    )
    args.update(kw)
    return check_follower_fetch(**args)


@pytest.mark.parametrize(
    ("kw", "error", "diverging"),
    [
        ({}, ErrorCode.NONE, None),  # caught-up follower
        ({"fetch_offset": 22}, ErrorCode.NONE, None),  # inside the current epoch
        ({"current_leader_epoch": 6}, ErrorCode.FENCED_LEADER_EPOCH, None),
        ({"current_leader_epoch": 8}, ErrorCode.UNKNOWN_LEADER_EPOCH, None),
        # UNDEFINED_EPOCH skips fencing (old clients)
        ({"current_leader_epoch": -1, "fetch_offset": 22}, ErrorCode.NONE, None),
        # fencing is checked before anything else
        ({"current_leader_epoch": 6, "fetch_offset": 99}, ErrorCode.FENCED_LEADER_EPOCH, None),
        # last fetched epoch 4 ends at 20 here: fetching from 20 is consistent ...
        ({"last_fetched_epoch": 4, "fetch_offset": 20}, ErrorCode.NONE, None),
        ({"last_fetched_epoch": 4, "fetch_offset": 12}, ErrorCode.NONE, None),
        # ... from 21 the follower has epoch-4 records the leader does not: diverging (4, 20)
        ({"last_fetched_epoch": 4, "fetch_offset": 21}, ErrorCode.NONE, (4, 20)),
        # an epoch the leader never had: its largest epoch below, and where that ends
        ({"last_fetched_epoch": 5, "fetch_offset": 18}, ErrorCode.NONE, (4, 20)),
        ({"last_fetched_epoch": 3, "fetch_offset": 6}, ErrorCode.NONE, (2, 10)),
        # below the leader's first epoch: (requested, first start) and end 5 < 8 diverges
        ({"last_fetched_epoch": 1, "fetch_offset": 8}, ErrorCode.NONE, (1, 5)),
        ({"last_fetched_epoch": 1, "fetch_offset": 5}, ErrorCode.NONE, None),
        # an epoch above the leader's latest: undefined divergence (follower falls back to HW)
        ({"last_fetched_epoch": 8, "fetch_offset": 25}, ErrorCode.NONE, U),
        # offset range, without a last fetched epoch (consumers, first fetch)
        ({"last_fetched_epoch": -1, "fetch_offset": 26}, ErrorCode.OFFSET_OUT_OF_RANGE, None),
        ({"last_fetched_epoch": -1, "fetch_offset": 4}, ErrorCode.OFFSET_OUT_OF_RANGE, None),
        ({"last_fetched_epoch": -1, "fetch_offset": 5}, ErrorCode.NONE, None),
        ({"last_fetched_epoch": -1, "fetch_offset": 25}, ErrorCode.NONE, None),
        # in the latest epoch the end is the LEO: a follower past it diverges (Kafka checks the
        # epoch end before the read would say OFFSET_OUT_OF_RANGE)
        ({"fetch_offset": 26}, ErrorCode.NONE, (7, 25)),
        # below the log start: out of range even when the epochs also diverge (Kafka)
        ({"last_fetched_epoch": 1, "fetch_offset": 4}, ErrorCode.OFFSET_OUT_OF_RANGE, None),
    ],
)
def test_check_follower_fetch_table(kw, error, diverging):
    result = _check(**kw)
    assert result == FetchCheck(error_code=error, diverging_epoch=diverging)
    assert result.ok == (error == ErrorCode.NONE and diverging is None)


# ---------------------------------------------------------------------------- follower truncation


def _trunc(local, leo, leader_epoch, leader_end, hw=0):
    return follower_truncation_offset(
        local_epochs=local,
        local_log_end_offset=leo,
        diverging_epoch=leader_epoch,
        diverging_end_offset=leader_end,
        high_watermark=hw,
    )


@pytest.mark.parametrize(
    ("local", "leo", "leader", "hw", "expected"),
    [
        # same epoch on both sides: min(local end, leader end)
        ([(1, 0), (2, 5)], 12, (2, 8), 0, 8),  # local epoch 2 ends at LEO 12; leader's at 8
        ([(1, 0), (2, 5), (3, 9)], 12, (2, 11), 0, 9),  # local epoch 2 ends at 9 < 11
        ([(1, 0), (2, 5)], 12, (1, 5), 0, 5),
        # follower never had the leader's epoch: end of its largest epoch below (intermediate)
        ([(1, 0), (3, 6)], 12, (2, 9), 0, 6),  # local floor(2) = 1, ends where 3 starts: 6
        ([(1, 0), (4, 6)], 12, (3, 20), 0, 6),
        # leader epoch below every local epoch: Kafka endOffsetFor gives (requested, first start)
        ([(3, 4), (5, 8)], 12, (2, 10), 0, 4),
        # follower knows nothing about it (empty cache): the leader's end offset
        ([], 12, (2, 7), 0, 7),
        # leader end offset undefined: the follower's high watermark
        ([(1, 0), (2, 5)], 12, U, 4, 4),
        ([(1, 0), (2, 5)], 12, (2, UNDEFINED_OFFSET), 4, 4),
        # leader epoch undefined but an offset (pre-KIP-279 peers): the leader's offset
        ([(1, 0), (2, 5)], 12, (UNDEFINED_EPOCH, 7), 0, 7),
        # never beyond the local LEO
        ([(1, 0), (2, 5)], 12, (2, 30), 0, 12),
        ([(1, 0), (2, 5)], 12, U, 40, 12),
        ([], 3, (UNDEFINED_EPOCH, 7), 0, 3),
    ],
)
def test_follower_truncation_offset_table(local, leo, leader, hw, expected):
    assert _trunc(local, leo, leader[0], leader[1], hw) == expected


def test_follower_high_watermark():
    assert follower_high_watermark(10, 7) == 7  # the follower has only 7 records
    assert follower_high_watermark(5, 7) == 5
    assert follower_high_watermark(7, 7) == 7


# ---------------------------------------------------------------------------- failover model


@dataclass
class Node:
    """A replica's log: log[offset] is the epoch of the record at that offset."""

    log: list[int] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=list)

    def truncate(self, offset: int) -> None:
        del self.log[offset:]
        self.epochs = truncate_epochs_from_end(self.epochs, offset)

    def append(self, epoch: int) -> None:
        self.epochs = assign_epoch(self.epochs, epoch, len(self.log))
        self.log.append(epoch)


def _records(node: Node) -> list[tuple[int, int]]:
    return list(enumerate(node.log))  # (offset, epoch): unique per record


def replicate(leader: Node, follower: Node, leader_epoch: int, max_records: int) -> int:
    """One follower catch-up: fetch, truncate on divergence, re-fetch, copy; returns rounds."""
    for rounds in range(1, 50):
        fetch_offset = len(follower.log)
        check = check_follower_fetch(
            epochs=leader.epochs,
            log_start_offset=0,
            log_end_offset=len(leader.log),
            leader_epoch=leader_epoch,
            fetch_offset=fetch_offset,
            current_leader_epoch=leader_epoch,
            last_fetched_epoch=latest_epoch(follower.epochs),
        )
        if check.diverging_epoch is not None:
            epoch, end = check.diverging_epoch
            # a leader stamps its epoch when elected, so its latest epoch is above every epoch
            # a follower can hold and the end offset is always known (the HW fallback is unused)
            assert end != UNDEFINED_OFFSET
            offset = _trunc(follower.epochs, fetch_offset, epoch, end, hw=0)
            assert 0 <= offset <= fetch_offset
            follower.truncate(offset)
            continue
        assert check.error_code == ErrorCode.NONE
        # the guarantee: once the leader accepts the fetch, the follower is a prefix of it
        assert _records(follower) == _records(leader)[:fetch_offset]
        for epoch in leader.log[fetch_offset : fetch_offset + max_records]:
            follower.append(epoch)
        return rounds
    raise AssertionError("follower truncation did not converge")


N_NODES = 4
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("elect"), st.integers(0, N_NODES - 1)),
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("fetch"), st.integers(0, N_NODES - 1), st.integers(0, 4)),
    ),
    max_size=60,
)


@settings(max_examples=400, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_logs_never_diverge_after_failover(ops):
    nodes = [Node() for _ in range(N_NODES)]
    leader: int | None = None
    epoch = -1
    for op in ops:
        if op[0] == "elect":
            # any replica may win (clean or unclean); it stamps its new epoch at its LEO
            # (Kafka Partition.makeLeader -> maybeAssignEpochStartOffset)
            leader, epoch = op[1], epoch + 1
            nodes[leader].epochs = assign_epoch(nodes[leader].epochs, epoch, len(nodes[leader].log))
        elif leader is None:
            continue
        elif op[0] == "append":
            for _ in range(op[1]):
                nodes[leader].append(epoch)
        elif op[1] != leader:
            rounds = replicate(nodes[leader], nodes[op[1]], epoch, op[2])
            if rounds > 1:
                event(f"truncation rounds: {rounds - 1}")
    if leader is None:
        return
    lead = nodes[leader]
    assert _nonempty(lead.epochs, len(lead.log)) == _epochs_of(lead.log)
    for i, node in enumerate(nodes):
        if i != leader:
            rounds = replicate(lead, node, epoch, max_records=10**6)
            event(f"final catch-up truncation rounds: {rounds - 1}")
            assert node.log == lead.log
            # the follower's cache describes exactly the records it holds (plus, at most, a
            # stamp of its own old leadership at its LEO, dropped when records arrive there)
            assert _nonempty(node.epochs, len(node.log)) == _epochs_of(node.log)


def _epochs_of(log: list[int]) -> list[tuple[int, int]]:
    """The epoch cache a log's records imply: where each epoch's first record is."""
    return [(e, o) for o, e in enumerate(log) if o == 0 or log[o - 1] != e]


def _nonempty(epochs: list[tuple[int, int]], leo: int) -> list[tuple[int, int]]:
    """Cache entries that cover at least one record (a leader stamps its epoch before writing)."""
    ends = [s for _e, s in epochs[1:]] + [leo]
    return [(e, s) for (e, s), end in zip(epochs, ends, strict=False) if s < end]


# ---------------------------------------------------------------------------- named scenarios


def test_kip101_scenario_divergent_tail_is_truncated():
    # A leads epoch 0 and writes 0..2; B copies 0..1. A dies; B leads epoch 1 and writes 2..3.
    # A returns as a follower: its record 2 (epoch 0) conflicts with B's record 2 (epoch 1).
    a, b = Node(), Node()
    a.epochs = assign_epoch(a.epochs, 0, 0)
    for _ in range(3):
        a.append(0)
    replicate(a, b, 0, max_records=2)
    b.epochs = assign_epoch(b.epochs, 1, 2)  # B: [(0, 0), (1, 2)]
    b.append(1)
    b.append(1)
    # A fetches at 3 with last epoch 0; B's epoch 0 ends at 2 < 3 -> diverging (0, 2),
    # A truncates to min(own end of epoch 0 = 3, 2) = 2, then copies B's 2..3.
    assert replicate(b, a, 1, max_records=10) == 2
    assert a.log == b.log == [0, 0, 1, 1]


def test_kip279_scenario_needs_two_rounds():
    # B wrote epochs 0 then 2 (it led epoch 2 alone); A wrote epoch 0 then led epoch 1 and
    # now leads epoch 3. B's epoch 2 is unknown to A: round 1 truncates B to the end of its
    # epoch 0, round 2 settles on the leader's epoch-0 end.
    a, b = Node(), Node()
    a.epochs = assign_epoch(a.epochs, 0, 0)
    for _ in range(2):
        a.append(0)
    replicate(a, b, 0, max_records=10)  # both [0, 0]
    a.epochs = assign_epoch(a.epochs, 1, 2)
    a.append(1)  # A: [0, 0, 1]
    b.epochs = assign_epoch(b.epochs, 2, 2)
    b.append(2)
    b.append(2)  # B: [0, 0, 2, 2]
    a.epochs = assign_epoch(a.epochs, 3, 3)  # A leads epoch 3: [(0,0), (1,2), (3,3)]
    # B fetches at 4, last epoch 2: A answers (1, 3); B has no epoch 1 -> end of its epoch 0 = 2.
    # B refetches at 2, last epoch 0: A's epoch 0 ends at 2 -> consistent.
    assert replicate(a, b, 3, max_records=10) == 2
    assert b.log == a.log == [0, 0, 1]
