"""OffsetForLeaderEpoch on the leader (core/log.py `last_offset_for_leader_epoch`, Kafka's
Partition.lastOffsetForLeaderEpoch with fetchOnlyFromLeader, over LeaderEpochFileCache.endOffsetFor)
and the epoch ListOffsets answers with EARLIEST (`earliest_offset_epoch`,
UnifiedLog.fetchOffsetByTimestamp)."""

from __future__ import annotations

import pytest

from minikafka.core.log import earliest_offset_epoch, last_offset_for_leader_epoch
from minikafka.errors import ErrorCode

# Epoch 1 from 0, epoch 3 from 10, epoch 5 (the current one) from 20; log end offset 25.
EPOCHS = [(1, 0), (3, 10), (5, 20)]
NONE, FENCED, UNKNOWN = (
    ErrorCode.NONE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
)
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("is_leader", "current", "requested", "expected"),
    [
        # The current epoch ends at the log end offset (it is still being written).
        (True, 5, 5, (NONE, 5, 25)),
        (True, -1, 5, (NONE, 5, 25)),  # no current epoch given: not checked
        # An older epoch ends where the next one starts.
        (True, 5, 1, (NONE, 1, 10)),
        (True, 5, 3, (NONE, 3, 20)),
        # An epoch the leader never had: the largest below it, ending where the next starts
        # (a consumer of epoch 4 learns its log ended at 20: truncated after an unclean election).
        (True, 5, 4, (NONE, 3, 20)),
        (True, 5, 2, (NONE, 1, 10)),
        # Below every epoch: the asked one, ending where the first starts.
        (True, 5, 0, (NONE, 0, 0)),
        # Above every epoch, or undefined: no error, epoch and offset -1 (EpochEndOffset defaults).
        (True, 5, 6, (NONE, -1, -1)),
        (True, 5, -1, (NONE, -1, -1)),
        # Fencing, before the leadership check (Partition.getLocalLog: checkCurrentLeaderEpoch).
        (True, 4, 4, (FENCED, -1, -1)),
        (True, 6, 5, (UNKNOWN, -1, -1)),
        (False, 4, 4, (FENCED, -1, -1)),
        (False, 5, 5, (NOT_LEADER, -1, -1)),
        (False, -1, 5, (NOT_LEADER, -1, -1)),
    ],
)
def test_last_offset_for_leader_epoch_table(is_leader, current, requested, expected):
    got = last_offset_for_leader_epoch(
        epochs=EPOCHS,
        log_end_offset=25,
        is_leader=is_leader,
        leader_epoch=5,
        current_leader_epoch=current,
        requested_epoch=requested,
    )
    assert got == expected


def test_an_empty_cache_knows_no_epoch():
    got = last_offset_for_leader_epoch(
        epochs=[], log_end_offset=0, is_leader=True, leader_epoch=0, current_leader_epoch=0,
        requested_epoch=0,
    )  # fmt: skip
    assert got == (NONE, -1, -1)


@pytest.mark.parametrize(
    ("epochs", "log_start", "expected"),
    [
        ([(1, 0), (3, 10)], 0, 1),
        ([(3, 7), (4, 10)], 7, 3),  # truncated from the start: the first entry starts there
        ([(3, 7), (4, 10)], 5, -1),  # the first epoch starts after the log start: unknown
        ([], 0, -1),
    ],
)
def test_earliest_offset_epoch(epochs, log_start, expected):
    assert earliest_offset_epoch(epochs, log_start) == expected
