"""The log's whole life: segments, rolling, retention, DeleteRecords, the log start offset.

The pure decisions by which a partition's log stops only growing, as Kafka makes them. The
store (storage/log_store.py) keeps one value per record batch; over those keys it keeps
*segments*, ranges of whole batches, so that retention deletes whole segments as Kafka does
(docs/log-life.md says how, and what a deletion costs in LMDB). This module decides:

* when the active segment is full and a new one is rolled (``LogSegment.shouldRoll``,
  ``UnifiedLog.maybeRoll``, ``LocalLog.roll``): ``should_roll``, ``roll``, ``append_batch``;
* which segments retention deletes (``UnifiedLog.deleteOldSegments``): the log start offset
  rule, then ``retention.bytes``, then ``retention.ms``, each on what the one before left
  (Kafka's order since 3.0, KAFKA-12177, which made a run idempotent; before it, time ran first
  and the log start offset last), each through ``deletableSegments``: whole segments from the
  oldest, stopping at the first one kept, never one holding an offset at or above the high
  watermark, never an empty active segment; deleting every segment rolls a new one first
  (``deleteSegments``): ``delete_old_segments`` and the rules one by one;
* where the log start offset moves (``UnifiedLog.maybeIncrementLogStartOffset``): forward
  only, never past the high watermark; by segment deletion, by DeleteRecords on the leader
  (KIP-107, ``Partition.deleteRecordsOnLeader``, ``ReplicaManager.deleteRecords``, the low
  watermark of ``DelayedDeleteRecords``), by a follower taking the leader's
  (``ReplicaFetcherThread.processPartitionData``);
* what is out of range (``UnifiedLog.read``/``LocalLog.read``): a fetch below the log start
  offset or past the log end offset; and how a follower recovers from it
  (``AbstractFetcherThread.fetchOffsetAndTruncate``).

Left out: ``segment.jitter.ms`` (``rollJitterMs``, a random per-segment reduction of
``segment.ms``, default 0); the other roll causes of ``shouldRoll`` (a full offset or time index,
a relative offset past 2^31): they guard Kafka's per-segment index files, and the store's keys
are absolute 8-byte offsets with no index file to fill; tiered storage (local retention,
``remoteLogEnabled``) and compaction (``cleanup.policy=compact`` appears only as
``delete_enabled=False``).

Every function returns new values; nothing here reads a clock or touches storage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from minikafka.errors import ErrorCode

__all__ = [
    "DELETE_RECORDS_HIGH_WATERMARK",
    "INVALID_LOW_WATERMARK",
    "NO_TIMESTAMP",
    "DeleteRecordsResult",
    "DeletionReason",
    "LogStartOffsetIncrementReason",
    "LogStartOffsetMove",
    "OutOfRangeReset",
    "RetentionPlan",
    "Segment",
    "SegmentDeletion",
    "append_batch",
    "check_fetch_offset",
    "deletable_segments",
    "delete_old_segments",
    "delete_records_on_leader",
    "delete_records_satisfied",
    "follower_log_start_offset",
    "follower_out_of_range_reset",
    "log_start_offset_breached_segments",
    "low_watermark",
    "maybe_increment_log_start_offset",
    "retention_ms_breached_segments",
    "retention_size_breached_segments",
    "roll",
    "should_roll",
]

NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
DELETE_RECORDS_HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK: "up to the HW"
INVALID_LOW_WATERMARK = -1  # DeleteRecordsResponse.INVALID_LOW_WATERMARK, with an error


# ---------------------------------------------------------------------------- segments


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A run of whole batches of one partition's log: Kafka's ``LogSegment``, without its files.

    ``next_offset`` is one past the last offset it holds (its base when empty; the last
    segment's is the log end offset). ``max_timestamp_ms`` is the largest record timestamp in it
    (``maxTimestampSoFar``, NO_TIMESTAMP when none has one); ``first_batch_timestamp_ms`` the
    largest timestamp of its first batch (``rollingBasedTimestamp``, what ``segment.ms`` is
    measured from); ``created_ms`` when it was rolled (``LogSegment.created``, the fallback when
    the first batch had no timestamp); ``last_modified_ms`` when a batch was last appended (the
    file's mtime in Kafka, the fallback of ``largestTimestamp``).
    """

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp_ms: int
    first_batch_timestamp_ms: int
    created_ms: int
    last_modified_ms: int

    def __post_init__(self) -> None:
        if self.base_offset < 0 or self.next_offset < self.base_offset or self.size_bytes < 0:
            raise ValueError(f"not a segment: {self}")

    @classmethod
    def new(cls, *, base_offset: int, now_ms: int) -> Segment:
        """An empty segment rolled at `now_ms` (``LogSegment.open``)."""
        return cls(
            base_offset=base_offset,
            next_offset=base_offset,
            size_bytes=0,
            max_timestamp_ms=NO_TIMESTAMP,
            first_batch_timestamp_ms=NO_TIMESTAMP,
            created_ms=now_ms,
            last_modified_ms=now_ms,
        )

    @property
    def is_empty(self) -> bool:
        return self.size_bytes == 0

    @property
    def largest_timestamp_ms(self) -> int:
        """``LogSegment.largestTimestamp``: the largest record timestamp if there is one (>= 0),
        else the last modification time. What ``retention.ms`` judges a segment by."""
        return self.max_timestamp_ms if self.max_timestamp_ms >= 0 else self.last_modified_ms

    def time_waited_for_roll(self, now_ms: int, batch_max_timestamp_ms: int) -> int:
        """``LogSegment.timeWaitedForRoll``: the new batch's timestamp minus the first batch's,
        or, when the first batch had none, the wall clock since the segment was created."""
        if self.first_batch_timestamp_ms >= 0:
            return batch_max_timestamp_ms - self.first_batch_timestamp_ms
        return now_ms - self.created_ms

    def append(
        self,
        *,
        base_offset: int,
        next_offset: int,
        size_bytes: int,
        max_timestamp_ms: int,
        now_ms: int,
    ) -> Segment:
        """This segment with one more batch ``[base_offset, next_offset)`` (``LogSegment.append``:
        the first batch sets the rolling timestamp, a larger timestamp the segment's largest).
        A batch may start past the segment's end (a compacted leader's gaps), never before it."""
        if base_offset < self.next_offset or next_offset <= base_offset or size_bytes <= 0:
            raise ValueError(
                f"batch [{base_offset}, {next_offset}) of {size_bytes} bytes cannot follow "
                f"a segment ending at {self.next_offset}"
            )
        return replace(
            self,
            next_offset=next_offset,
            size_bytes=self.size_bytes + size_bytes,
            max_timestamp_ms=max(self.max_timestamp_ms, max_timestamp_ms),
            first_batch_timestamp_ms=(
                max_timestamp_ms if self.is_empty else self.first_batch_timestamp_ms
            ),
            last_modified_ms=now_ms,
        )


def _check(segments: Sequence[Segment]) -> None:
    """Segments in offset order, distinct bases, none overlapping the next (``LogSegments`` is a
    map keyed by base offset)."""
    for a, b in zip(segments, segments[1:], strict=False):
        if not (a.base_offset < b.base_offset and a.next_offset <= b.base_offset):
            raise ValueError(f"segments out of order or overlapping: {a} then {b}")


# ---------------------------------------------------------------------------- rolling


def should_roll(
    active: Segment | None,
    *,
    batch_bytes: int,
    batch_max_timestamp_ms: int,
    now_ms: int,
    segment_bytes: int,
    segment_ms: int,
) -> bool:
    """Whether a batch goes to a new segment rather than to `active` (``LogSegment.shouldRoll``
    as ``UnifiedLog.maybeRoll`` calls it): the active segment cannot take the batch within
    ``segment.bytes`` (``size > segment.bytes - batch``: an empty segment given a batch larger
    than ``segment.bytes`` says yes too, and ``roll`` then recreates it, as Kafka does), or it
    holds something and ``segment.ms`` has passed since its first batch by record time
    (``time_waited_for_roll``). No active segment at all: yes, the first one.

    Left out: ``segment.jitter.ms`` and the index-file causes (module docstring).
    """
    if active is None:
        return True
    reached_roll_ms = active.time_waited_for_roll(now_ms, batch_max_timestamp_ms) > segment_ms
    return active.size_bytes > segment_bytes - batch_bytes or (
        active.size_bytes > 0 and reached_roll_ms
    )


def roll(
    segments: Sequence[Segment], *, now_ms: int, expected_next_offset: int | None = None
) -> tuple[Segment, ...]:
    """`segments` with a new empty active segment (``UnifiedLog.roll`` / ``LocalLog.roll``).

    It starts at ``max(expected_next_offset, log end offset)`` (Kafka rolls at the appended
    batch's first offset). An empty active segment at that offset is replaced by a new one
    (Kafka deletes and recreates it, KAFKA-6388). An empty log needs `expected_next_offset`.
    """
    _check(segments)
    if not segments:
        if expected_next_offset is None:
            raise ValueError("rolling a log without segments needs the offset to start at")
        return (Segment.new(base_offset=expected_next_offset, now_ms=now_ms),)
    active = segments[-1]
    base = max(expected_next_offset or 0, active.next_offset)
    if active.base_offset == base:  # only an empty segment ends where it starts
        return (*segments[:-1], Segment.new(base_offset=base, now_ms=now_ms))
    return (*segments, Segment.new(base_offset=base, now_ms=now_ms))


def append_batch(
    segments: Sequence[Segment],
    *,
    base_offset: int,
    next_offset: int,
    size_bytes: int,
    max_timestamp_ms: int,
    now_ms: int,
    segment_bytes: int,
    segment_ms: int,
) -> tuple[Segment, ...]:
    """`segments` after one batch ``[base_offset, next_offset)`` is appended (``UnifiedLog.append``:
    ``maybeRoll``, rolling at the batch's base offset, then ``LogSegment.append``). A new tuple
    of every segment: the store, which keeps its segments in LMDB, asks ``should_roll`` and
    updates the active segment alone."""
    active = segments[-1] if segments else None
    if should_roll(
        active,
        batch_bytes=size_bytes,
        batch_max_timestamp_ms=max_timestamp_ms,
        now_ms=now_ms,
        segment_bytes=segment_bytes,
        segment_ms=segment_ms,
    ):
        if active is not None and base_offset < active.next_offset:
            raise ValueError(f"batch at {base_offset} before the log end {active.next_offset}")
        segments = roll(segments, now_ms=now_ms, expected_next_offset=base_offset)
    out = list(segments)
    out[-1] = out[-1].append(
        base_offset=base_offset,
        next_offset=next_offset,
        size_bytes=size_bytes,
        max_timestamp_ms=max_timestamp_ms,
        now_ms=now_ms,
    )
    return tuple(out)


# ---------------------------------------------------------------------------- deletion rules


class DeletionReason(Enum):
    """Why segments go (Kafka's ``SegmentDeletionReason``), in the order the rules run."""

    LOG_START_OFFSET_BREACH = "log start offset"  # StartOffsetBreach
    RETENTION_SIZE_BREACH = "retention.bytes"  # RetentionSizeBreach
    RETENTION_MS_BREACH = "retention.ms"  # RetentionMsBreach


# (segment, the next segment or None for the last) -> deletable: Kafka's DeletionCondition
Predicate = Callable[[Segment, Segment | None], bool]


def deletable_segments(
    segments: Sequence[Segment], should_delete: Predicate, *, high_watermark: int
) -> tuple[Segment, ...]:
    """The oldest segments `should_delete` accepts, up to the first it does not
    (``UnifiedLog.deletableSegments``, local log).

    A segment is offered only if every offset up to its upper bound (the next segment's base,
    or the log end offset for the last) is below the high watermark ("we don't delete segments
    with offsets at or beyond the high watermark to ensure that the log start offset can never
    exceed it"), and the predicate is not even asked otherwise (size retention counts what it
    accepts). A last segment that is empty is never returned. So the active segment goes only
    when it holds records and the high watermark is the log end offset.
    """
    out: list[Segment] = []
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        is_last_and_empty = nxt is None and segment.is_empty
        upper_bound = nxt.base_offset if nxt is not None else segment.next_offset
        accepted = high_watermark >= upper_bound and should_delete(segment, nxt)
        if not accepted or is_last_and_empty:
            break
        out.append(segment)
    return tuple(out)


def log_start_offset_breached_segments(
    segments: Sequence[Segment], *, high_watermark: int, log_start_offset: int
) -> tuple[Segment, ...]:
    """Segments wholly below the log start offset: the next one starts at or below it
    (``UnifiedLog.deleteLogStartOffsetBreachedSegments``). Runs whatever the cleanup policy:
    this is how DeleteRecords frees space. The last segment never goes by this rule."""
    return deletable_segments(
        segments,
        lambda _s, nxt: nxt is not None and nxt.base_offset <= log_start_offset,
        high_watermark=high_watermark,
    )


def retention_size_breached_segments(
    segments: Sequence[Segment], *, high_watermark: int, retention_bytes: int
) -> tuple[Segment, ...]:
    """The oldest segments whose bytes the log holds above ``retention.bytes``
    (``UnifiedLog.deleteRetentionSizeBreachedSegments``). Negative: no limit. Kafka's exact
    arithmetic: nothing unless ``size >= retention.bytes``; then ``diff = size - retention.bytes``
    and a segment goes while ``diff - segment.size >= 0`` (diff shrinking by each one taken). So
    the log never drops below ``retention.bytes``, and where only the size stops it, the bytes
    kept minus the oldest kept segment are below ``retention.bytes``."""
    size = sum(s.size_bytes for s in segments)
    if retention_bytes < 0 or size < retention_bytes:
        return ()
    diff = size - retention_bytes

    def should_delete(segment: Segment, _nxt: Segment | None) -> bool:
        nonlocal diff
        if diff - segment.size_bytes >= 0:
            diff -= segment.size_bytes
            return True
        return False

    return deletable_segments(segments, should_delete, high_watermark=high_watermark)


def retention_ms_breached_segments(
    segments: Sequence[Segment], *, high_watermark: int, retention_ms: int, now_ms: int
) -> tuple[Segment, ...]:
    """The oldest segments whose largest timestamp is more than ``retention.ms`` before `now_ms`
    (``UnifiedLog.deleteRetentionMsBreachedSegments``: ``now - largestTimestamp > retentionMs``).
    Negative: no limit. A segment with a newer (or future) timestamp keeps every one after it."""
    if retention_ms < 0:
        return ()
    return deletable_segments(
        segments,
        lambda s, _n: now_ms - s.largest_timestamp_ms > retention_ms,
        high_watermark=high_watermark,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentDeletion:
    """One rule's deletion (``UnifiedLog.deleteSegments``): the segments, oldest first; the
    active segment rolled first when every segment goes ("we must always have at least one
    segment"); the log start offset after it (moved before the segments are removed)."""

    reason: DeletionReason
    segments: tuple[Segment, ...]
    rolled: Segment | None
    log_start_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPlan:
    """What one retention run does to a log: its deletions in the order they happen, the
    segments left (with any rolled one) and the log start offset after all of them."""

    deletions: tuple[SegmentDeletion, ...]
    segments: tuple[Segment, ...]
    log_start_offset: int

    @property
    def deleted(self) -> tuple[Segment, ...]:
        return tuple(s for d in self.deletions for s in d.segments)

    @property
    def rolled(self) -> bool:
        return any(d.rolled is not None for d in self.deletions)


def delete_old_segments(
    segments: Sequence[Segment],
    *,
    high_watermark: int,
    log_start_offset: int,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
    delete_enabled: bool = True,
) -> RetentionPlan:
    """One retention run over a log (``UnifiedLog.deleteOldSegments``, as ``LogManager.cleanupLogs``
    calls it every ``log.retention.check.interval.ms``).

    With ``cleanup.policy`` including ``delete`` (`delete_enabled`), three rules run in this
    order, each on the log the one before left: the log start offset breach, ``retention.bytes``,
    ``retention.ms``. Without it only the first. Each rule's segments are deleted as
    ``deleteSegments`` does: if they are all of the log, a new active segment is rolled at the
    log end offset first; the log start offset moves to the base of the first segment kept
    (``maybeIncrementLogStartOffset``, reason SegmentDeletion), which the high watermark check
    of ``deletable_segments`` keeps at or below the high watermark.

    The log must be well formed: at least one segment (Kafka always has one), the first at or
    below the log start offset, ``log start <= high watermark <= log end``.
    """
    _check(segments)
    if not segments:
        raise ValueError("a log has at least one segment")
    log_end_offset = segments[-1].next_offset
    if not segments[0].base_offset <= log_start_offset <= high_watermark <= log_end_offset:
        raise ValueError(
            f"log start {log_start_offset}, high watermark {high_watermark} and log end "
            f"{log_end_offset} out of order, or a first segment at {segments[0].base_offset}"
        )
    rules: list[tuple[DeletionReason, Callable[[tuple[Segment, ...], int], tuple[Segment, ...]]]]
    rules = [
        (
            DeletionReason.LOG_START_OFFSET_BREACH,
            lambda log, lso: log_start_offset_breached_segments(
                log, high_watermark=high_watermark, log_start_offset=lso
            ),
        )
    ]
    if delete_enabled:
        rules.append(
            (
                DeletionReason.RETENTION_SIZE_BREACH,
                lambda log, _lso: retention_size_breached_segments(
                    log, high_watermark=high_watermark, retention_bytes=retention_bytes
                ),
            )
        )
        rules.append(
            (
                DeletionReason.RETENTION_MS_BREACH,
                lambda log, _lso: retention_ms_breached_segments(
                    log, high_watermark=high_watermark, retention_ms=retention_ms, now_ms=now_ms
                ),
            )
        )
    log = tuple(segments)
    lso = log_start_offset
    deletions: list[SegmentDeletion] = []
    for reason, rule in rules:
        doomed = rule(log, lso)
        if not doomed:
            continue
        kept = log[len(doomed) :]
        rolled = None
        if not kept:
            # deletable_segments never returns an empty last segment, so the new one starts
            # past the last deleted one and Kafka's "deleted and recreated" case cannot arise.
            rolled = Segment.new(base_offset=log[-1].next_offset, now_ms=now_ms)
            kept = (rolled,)
        move = maybe_increment_log_start_offset(
            lso,
            kept[0].base_offset,
            high_watermark=high_watermark,
            reason=LogStartOffsetIncrementReason.SEGMENT_DELETION,
        )
        assert move.error == ErrorCode.NONE, move  # the high watermark check guarantees it
        log, lso = kept, move.log_start_offset
        deletions.append(
            SegmentDeletion(reason=reason, segments=doomed, rolled=rolled, log_start_offset=lso)
        )
    return RetentionPlan(deletions=tuple(deletions), segments=log, log_start_offset=lso)


# ---------------------------------------------------------------------------- log start offset


class LogStartOffsetIncrementReason(Enum):
    """Why the log start offset moved (Kafka's ``LogStartOffsetIncrementReason``)."""

    CLIENT_RECORD_DELETION = "client delete records request"
    LEADER_OFFSET_INCREMENTED = "leader offset increment"
    SEGMENT_DELETION = "segment deletion"


@dataclass(frozen=True, slots=True, kw_only=True)
class LogStartOffsetMove:
    """The answer of ``maybe_increment_log_start_offset``. On OFFSET_OUT_OF_RANGE nothing
    moved. When `moved`, the caller also forgets what lies before the new log start offset:
    the epochs (``truncate_epochs_from_start`` in core/log.py, Kafka's
    ``truncateFromStartAsyncFlush``) and the producers whose last offset is below it
    (``ProducerStateManager.onLogStartOffsetIncremented``)."""

    error: ErrorCode
    log_start_offset: int  # after the call
    moved: bool  # Kafka's return value
    reason: LogStartOffsetIncrementReason


def maybe_increment_log_start_offset(
    log_start_offset: int,
    new_log_start_offset: int,
    *,
    high_watermark: int,
    reason: LogStartOffsetIncrementReason,
) -> LogStartOffsetMove:
    """``UnifiedLog.maybeIncrementLogStartOffset``: an offset past the high watermark is
    OFFSET_OUT_OF_RANGE (Kafka throws OffsetOutOfRangeException); otherwise the log start offset
    becomes the larger of the two: it never moves back."""
    if new_log_start_offset > high_watermark:
        return LogStartOffsetMove(
            error=ErrorCode.OFFSET_OUT_OF_RANGE,
            log_start_offset=log_start_offset,
            moved=False,
            reason=reason,
        )
    moved = new_log_start_offset > log_start_offset
    return LogStartOffsetMove(
        error=ErrorCode.NONE,
        log_start_offset=new_log_start_offset if moved else log_start_offset,
        moved=moved,
        reason=reason,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsResult:
    """One partition of DeleteRecords on its leader (Kafka's ``LogDeleteRecordsResult``).
    `requested_offset` is the offset asked for, the high watermark for -1, and -1 on error; the
    answer waits (``DelayedDeleteRecords``) until ``delete_records_satisfied``."""

    error: ErrorCode
    requested_offset: int
    log_start_offset: int  # the leader's, after the call


def delete_records_on_leader(
    offset: int,
    *,
    high_watermark: int,
    log_start_offset: int,
    delete_enabled: bool = True,
    internal_topic: bool = False,
) -> DeleteRecordsResult:
    """DeleteRecords (KIP-107) for one partition this broker leads: move the log start offset to
    `offset` (``ReplicaManager.deleteRecordsOnLocalLog``, ``Partition.deleteRecordsOnLeader``).

    In Kafka's order: an internal topic is INVALID_TOPIC_EXCEPTION; a ``cleanup.policy`` without
    ``delete`` is POLICY_VIOLATION; -1 (DELETE_RECORDS_HIGH_WATERMARK) means the high watermark;
    a negative offset, or one past the high watermark, is OFFSET_OUT_OF_RANGE; an offset at or
    below the log start offset changes nothing and succeeds. (A broker that does not lead the
    partition answers NOT_LEADER_OR_FOLLOWER before any of this: the caller's check.) The
    segments below it go at the next retention run, by the log start offset rule.
    """

    def refused(error: ErrorCode) -> DeleteRecordsResult:
        return DeleteRecordsResult(
            error=error, requested_offset=-1, log_start_offset=log_start_offset
        )

    if internal_topic:
        return refused(ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not delete_enabled:
        return refused(ErrorCode.POLICY_VIOLATION)
    converted = high_watermark if offset == DELETE_RECORDS_HIGH_WATERMARK else offset
    if converted < 0:
        return refused(ErrorCode.OFFSET_OUT_OF_RANGE)
    move = maybe_increment_log_start_offset(
        log_start_offset,
        converted,
        high_watermark=high_watermark,
        reason=LogStartOffsetIncrementReason.CLIENT_RECORD_DELETION,
    )
    if move.error != ErrorCode.NONE:
        return refused(move.error)
    return DeleteRecordsResult(
        error=ErrorCode.NONE, requested_offset=converted, log_start_offset=move.log_start_offset
    )


def low_watermark(leader_log_start_offset: int, replica_log_start_offsets: Iterable[int]) -> int:
    """``Partition.lowWatermarkIfLeader``: the smallest log start offset of the leader and of the
    other replicas on live brokers (as their fetches last reported it: FetchRequest's
    ``log_start_offset``), in the ISR or not. What a DeleteRecords response reports."""
    return min([leader_log_start_offset, *replica_log_start_offsets])


def delete_records_satisfied(low_watermark: int, requested_offset: int) -> bool:
    """``DelayedDeleteRecords.tryComplete``: a partition's DeleteRecords is answered once every
    replica has moved its log start offset to the offset asked for (or with REQUEST_TIMED_OUT
    at the request's timeout)."""
    return low_watermark >= requested_offset


def follower_log_start_offset(
    *, log_start_offset: int, leader_log_start_offset: int, high_watermark: int
) -> LogStartOffsetMove:
    """A follower takes the leader's log start offset from each fetch answer
    (``ReplicaFetcherThread.processPartitionData``: ``maybeIncrementLogStartOffset`` with reason
    LeaderOffsetIncremented), after appending the records and taking the high watermark, so
    `high_watermark` is the follower's own, already updated. Forward only. A leader's log start
    offset past it is OFFSET_OUT_OF_RANGE, and Kafka then marks the partition failed; a correct
    leader never sends one: ``Partition.readRecords`` reads its log start offset before the
    records (which start at or above it, so it is at most our log end after the append), and it
    is never above the leader's high watermark; ours is the smaller of those two."""
    return maybe_increment_log_start_offset(
        log_start_offset,
        leader_log_start_offset,
        high_watermark=high_watermark,
        reason=LogStartOffsetIncrementReason.LEADER_OFFSET_INCREMENTED,
    )


# ---------------------------------------------------------------------------- out of range


def check_fetch_offset(
    fetch_offset: int, *, log_start_offset: int, log_end_offset: int
) -> ErrorCode:
    """OFFSET_OUT_OF_RANGE for a fetch below the log start offset (``UnifiedLog.read``:
    ``checkLogStartOffset``) or past the log end offset (``LocalLog.read``); NONE otherwise. An
    offset between the high watermark and the log end is in range: a consumer reads nothing
    there. The same rule as core/log.py ``check_follower_fetch`` applies after its epoch checks."""
    if fetch_offset < log_start_offset or fetch_offset > log_end_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    return ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OutOfRangeReset:
    """A follower's recovery from OFFSET_OUT_OF_RANGE: at most one of the truncations, then
    fetch from `fetch_offset`."""

    fetch_offset: int
    truncate_to: int | None = None  # truncate the log's end to this offset
    truncate_fully_and_start_at: int | None = None  # drop the whole log, start empty here


def follower_out_of_range_reset(
    *, log_end_offset: int, leader_log_start_offset: int, leader_log_end_offset: int
) -> OutOfRangeReset:
    """``AbstractFetcherThread.fetchOffsetAndTruncate``, given the leader's latest and earliest
    offsets (ListOffsets): a leader whose log ends before ours (an unclean election) makes us
    truncate to its end; a leader whose log starts after ours ends (retention deleted what we
    lacked) makes us drop our log and start empty at its start; otherwise we fetch again from
    the larger of our end and its start."""
    if leader_log_end_offset < log_end_offset:
        return OutOfRangeReset(
            fetch_offset=leader_log_end_offset, truncate_to=leader_log_end_offset
        )
    if leader_log_start_offset > log_end_offset:
        return OutOfRangeReset(
            fetch_offset=leader_log_start_offset,
            truncate_fully_and_start_at=leader_log_start_offset,
        )
    return OutOfRangeReset(fetch_offset=max(leader_log_start_offset, log_end_offset))
