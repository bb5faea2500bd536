"""Leader-epoch cache rules and the log-offset rules of fetching and truncation.

This module owns the pure decisions that keep replicas' logs from diverging after a failover
(KIP-101, KIP-279, KIP-320):

* the leader-epoch cache, a plain ``list[EpochEntry]`` of ``(epoch, start_offset)`` ascending in
  both, edited by value (every function returns a new list), mirroring Kafka's
  ``LeaderEpochFileCache`` (``assign``, ``truncateFromEnd``, ``truncateFromStart``,
  ``endOffsetFor``);
* the leader's check of one partition of a fetch (``Partition.fetchRecords``/``readRecords``):
  leader-epoch fencing, KIP-320 divergence detection, offset range;
* the follower's answer to a divergence (``AbstractFetcherThread.truncateOnFetchResponse`` /
  ``getOffsetTruncationState``): the offset to truncate to;
* the follower's high watermark (``ReplicaFetcherThread.processPartitionData``).

Rules: an epoch cache never holds two entries with the same epoch, epochs and start offsets
strictly increase, and an entry's range ends where the next one starts (the last one at the log
end offset). A follower truncation offset never exceeds the follower's log end offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.common import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEntry
from minikafka.core.records import BatchView
from minikafka.errors import ErrorCode

__all__ = [
    "FetchCheck",
    "assign_epoch",
    "check_follower_fetch",
    "earliest_offset_epoch",
    "end_offset_for_epoch",
    "epochs_after_batches",
    "follower_high_watermark",
    "follower_truncation_offset",
    "last_offset_for_leader_epoch",
    "latest_epoch",
    "truncate_epochs_from_end",
    "truncate_epochs_from_start",
]


# ---------------------------------------------------------------------------- epoch cache


def assign_epoch(epochs: Sequence[EpochEntry], epoch: int, start_offset: int) -> list[EpochEntry]:
    """Record that `epoch` starts at `start_offset` (Kafka LeaderEpochFileCache.assign).

    No-op (a copy of `epochs`) when the latest entry already has `epoch` and starts at or before
    `start_offset`: the common case of every batch appended in the current epoch.

    Otherwise, exactly like Kafka's ``maybeTruncateNonMonotonicEntries``, entries are removed from
    the end while ``entry.epoch >= epoch or entry.start_offset >= start_offset`` and the new entry
    is appended. This covers the same latest epoch with an earlier start (the entry is replaced)
    and -- the documented choice -- an epoch *lower* than the latest: like Kafka we trust the
    newest information (it comes from the log being written) and drop the conflicting higher
    entries rather than ignore it. Epochs and offsets must be >= 0 (Kafka throws
    IllegalArgumentException).
    """
    if epoch < 0 or start_offset < 0:
        raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
    out = list(epochs)
    if out:
        last_epoch, last_start = out[-1]
        # Kafka isUpdateNeeded: entry.epoch != latest.epoch || entry.startOffset < latest.startOffset
        if last_epoch == epoch and start_offset >= last_start:
            return out
    while out and (out[-1][0] >= epoch or out[-1][1] >= start_offset):
        out.pop()
    out.append((epoch, start_offset))
    return out


def truncate_epochs_from_end(epochs: Sequence[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """Drop entries starting at or after `end_offset` (Kafka LeaderEpochFileCache.truncateFromEnd).

    Called when the log is truncated to `end_offset`; a negative offset changes nothing (Kafka
    checks ``endOffset >= 0``).
    """
    if end_offset < 0:
        return list(epochs)
    return [(e, s) for (e, s) in epochs if s < end_offset]


def truncate_epochs_from_start(epochs: Sequence[EpochEntry], start_offset: int) -> list[EpochEntry]:
    """Forget epochs wholly before `start_offset` (Kafka LeaderEpochFileCache.truncateFromStart).

    Entries starting at or before `start_offset` are removed and the last of them, the one that
    covers `start_offset`, is put back starting at `start_offset`. Exclusive, like Kafka's:
    truncating from 6 keeps an entry that starts at 6 (as (epoch, 6)).
    """
    removed = [(e, s) for (e, s) in epochs if s <= start_offset]
    kept = [(e, s) for (e, s) in epochs if s > start_offset]
    if not removed:
        return kept
    return [(removed[-1][0], start_offset), *kept]


def latest_epoch(epochs: Sequence[EpochEntry]) -> int:
    """The epoch of the last entry, UNDEFINED_EPOCH when empty (Kafka latestEpoch)."""
    return epochs[-1][0] if epochs else UNDEFINED_EPOCH


def end_offset_for_epoch(
    epochs: Sequence[EpochEntry], requested_epoch: int, log_end_offset: int
) -> tuple[int, int]:
    """(epoch, end offset) for `requested_epoch`, exactly Kafka's LeaderEpochFileCache.endOffsetFor.

    * requested is UNDEFINED_EPOCH -> (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
    * requested == the latest epoch -> (requested, log_end_offset): the epoch still being written;
    * no entry has a higher epoch (requested above the latest, or the cache is empty)
      -> (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
    * no entry has an epoch <= requested (requested below the first epoch) -> (requested, start of
      the first entry): the data before it is gone, so replicating from there is right. (Kafka's
      Javadoc still promises UNDEFINED_EPOCH_OFFSET here, but its code, since 2.0, returns this.)
    * otherwise -> (largest epoch <= requested, start offset of the first higher epoch).
    """
    if requested_epoch == UNDEFINED_EPOCH:
        return (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    if epochs and epochs[-1][0] == requested_epoch:
        return (requested_epoch, log_end_offset)
    higher = next(((e, s) for (e, s) in epochs if e > requested_epoch), None)
    if higher is None:
        return (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    floor = [e for (e, _s) in epochs if e <= requested_epoch]
    if not floor:
        return (requested_epoch, higher[1])
    return (floor[-1], higher[1])


def earliest_offset_epoch(epochs: Sequence[EpochEntry], log_start_offset: int) -> int:
    """The leader epoch ListOffsets answers with the log start offset (EARLIEST): the first
    cached epoch when it covers the log start, else UNDEFINED_EPOCH (Kafka
    UnifiedLog.fetchOffsetByTimestamp: "the first cached epoch usually corresponds to the log
    start offset, but we have to verify this")."""
    if epochs and epochs[0][1] <= log_start_offset:
        return epochs[0][0]
    return UNDEFINED_EPOCH


def last_offset_for_leader_epoch(
    *,
    epochs: Sequence[EpochEntry],
    log_end_offset: int,
    is_leader: bool,
    leader_epoch: int,
    current_leader_epoch: int,
    requested_epoch: int,
) -> tuple[int, int, int]:
    """(error_code, leader_epoch, end_offset): one partition of OffsetForLeaderEpoch (KIP-101,
    KIP-320), exactly Kafka's Partition.lastOffsetForLeaderEpoch with fetchOnlyFromLeader (what
    ReplicaManager.lastOffsetForLeaderEpoch asks, for consumers and followers alike):

    1. getLocalLog -> checkCurrentLeaderEpoch (skipped when current_leader_epoch < 0, i.e.
       NO_PARTITION_LEADER_EPOCH): our epoch above the asker's is FENCED_LEADER_EPOCH, below it
       UNKNOWN_LEADER_EPOCH. The epoch is checked before leadership, as Kafka does.
    2. Not the leader: NOT_LEADER_OR_FOLLOWER.
    3. UnifiedLog.endOffsetForEpoch: `end_offset_for_epoch`; an undefined end offset (the asked
       epoch is undefined, or above every epoch we know) is no error with epoch and offset -1
       (EpochEndOffset's defaults), else no error with the epoch found and its end offset.
    """
    if current_leader_epoch >= 0:
        if leader_epoch > current_leader_epoch:
            return (ErrorCode.FENCED_LEADER_EPOCH, UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        if leader_epoch < current_leader_epoch:
            return (ErrorCode.UNKNOWN_LEADER_EPOCH, UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    if not is_leader:
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER, UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    epoch, end = end_offset_for_epoch(epochs, requested_epoch, log_end_offset)
    if end == UNDEFINED_OFFSET:
        return (ErrorCode.NONE, UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    return (ErrorCode.NONE, epoch, end)


# ---------------------------------------------------------------------------- leader side


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchCheck:
    """The leader's verdict on one partition of a fetch.

    `diverging_epoch` is set (with error_code NONE) when the fetcher's log has diverged from
    the leader's: it is the (epoch, end_offset) to put in FetchPartitionResponse.diverging_epoch
    (KIP-320); the fetcher truncates with `follower_truncation_offset` and fetches again.
    """

    error_code: int
    diverging_epoch: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        """True when records may be read from the fetch offset."""
        return self.error_code == ErrorCode.NONE and self.diverging_epoch is None


_OK = FetchCheck(error_code=ErrorCode.NONE)


def check_follower_fetch(
    *,
    epochs: Sequence[EpochEntry],
    log_start_offset: int,
    log_end_offset: int,
    leader_epoch: int,
    fetch_offset: int,
    current_leader_epoch: int,
    last_fetched_epoch: int,
) -> FetchCheck:
    """Validate one partition of a follower's (or consumer's) fetch on the leader.

    Mirrors Kafka Partition.fetchRecords -> localLogWithEpochOrThrow, then readRecords:

    1. Fencing (skipped when current_leader_epoch < 0, i.e. UNDEFINED_EPOCH): a fetcher behind the
       leader's epoch gets FENCED_LEADER_EPOCH, one ahead of it UNKNOWN_LEADER_EPOCH.
    2. When last_fetched_epoch >= 0 (KIP-320): (e, end) = end_offset_for_epoch(epochs,
       last_fetched_epoch, LEO). A fetch offset below the log start is OFFSET_OUT_OF_RANGE
       "regardless of whether epochs are diverging" (Kafka checks it first). If e differs from
       last_fetched_epoch (the leader has no such epoch) or end < fetch_offset (the leader's
       epoch ends earlier), the answer is no error with diverging_epoch=(e, end).
       Where Kafka answers OFFSET_OUT_OF_RANGE because the end offset is undefined (the fetcher's
       epoch is above every epoch the leader knows), we answer the divergence
       (UNDEFINED_EPOCH, UNDEFINED_OFFSET) instead; the follower then truncates to its high
       watermark, which is what Kafka's OffsetsForLeaderEpoch path does with that answer.
    3. The read itself (Kafka UnifiedLog.read): fetch_offset outside [log start, LEO] is
       OFFSET_OUT_OF_RANGE.
    """
    if current_leader_epoch >= 0:
        if current_leader_epoch < leader_epoch:
            return FetchCheck(error_code=ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > leader_epoch:
            return FetchCheck(error_code=ErrorCode.UNKNOWN_LEADER_EPOCH)
    if fetch_offset < log_start_offset:
        return FetchCheck(error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    if last_fetched_epoch >= 0:
        epoch, end = end_offset_for_epoch(epochs, last_fetched_epoch, log_end_offset)
        if epoch != last_fetched_epoch or end < fetch_offset:
            return FetchCheck(error_code=ErrorCode.NONE, diverging_epoch=(epoch, end))
    if fetch_offset > log_end_offset:
        return FetchCheck(error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    return _OK


# ---------------------------------------------------------------------------- follower side


def follower_truncation_offset(
    *,
    local_epochs: Sequence[EpochEntry],
    local_log_end_offset: int,
    diverging_epoch: int,
    diverging_end_offset: int,
    high_watermark: int,
) -> int:
    """Where a follower truncates its log after the leader reported a divergence.

    Kafka AbstractFetcherThread.getOffsetTruncationState, branch by branch (every result is
    capped at the local log end offset):

    * leader end offset UNDEFINED -> the follower's high watermark (Kafka: "truncate to initial
      offset which is the high watermark for follower replica");
    * leader epoch UNDEFINED but an end offset -> the leader's end offset (pre-KIP-279 peers);
    * else (f_epoch, f_end) = end_offset_for_epoch(local_epochs, leader epoch, local LEO):
      - f_end UNDEFINED (the follower knows no epoch <= the leader's, Kafka's ``None`` case)
        -> the leader's end offset;
      - f_epoch != leader epoch (the follower never had the leader's epoch) -> f_end, the end of
        the follower's largest epoch below it; this is an intermediate truncation and the next
        fetch (with the new last fetched epoch) may diverge again (KIP-279 multi-round);
      - f_epoch == leader epoch -> min(f_end, leader end).
    """
    if diverging_end_offset == UNDEFINED_OFFSET:
        offset = high_watermark
    elif diverging_epoch == UNDEFINED_EPOCH:
        offset = diverging_end_offset
    else:
        f_epoch, f_end = end_offset_for_epoch(local_epochs, diverging_epoch, local_log_end_offset)
        if f_end == UNDEFINED_OFFSET:
            offset = diverging_end_offset
        elif f_epoch != diverging_epoch:
            offset = f_end
        else:
            offset = min(f_end, diverging_end_offset)
    return max(0, min(offset, local_log_end_offset))


def epochs_after_batches(
    epochs: Sequence[EpochEntry], batches: Sequence[BatchView]
) -> list[EpochEntry]:
    """The epoch cache once fetched `batches` are appended: a batch of a newer leader epoch starts
    that epoch at its base offset (UnifiedLog.appendAsFollower, maybeAssignEpochStartOffset)."""
    out = list(epochs)
    for b in batches:
        if b.leader_epoch > latest_epoch(out):
            out = assign_epoch(out, b.leader_epoch, b.base_offset)
    return out


def follower_high_watermark(leader_hw: int, local_leo: int) -> int:
    """A follower's HW: the leader's, capped by what it has (ReplicaFetcherThread)."""
    return min(leader_hw, local_leo)
