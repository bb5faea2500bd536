"""minikafka/core/log_retention.py: segments, rolling, retention, DeleteRecords, out of range.

Table tests pin each of Kafka's rules on small logs written out by hand (the Kafka method each
follows is named in the module); property tests run the rules on logs built by the module's own
write path (`append_batch`, which rolls as `UnifiedLog.maybeRoll` does) and on random walks of a
partition's life (appends, a moving high watermark, DeleteRecords, retention runs), checking
what must always hold: the log start offset never moves back nor past the high watermark,
nothing at or above the high watermark is deleted, size retention stops exactly where Kafka's
arithmetic says, retention is idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.core.log import check_follower_fetch
from minikafka.core.log_retention import (
    DELETE_RECORDS_HIGH_WATERMARK,
    NO_TIMESTAMP,
    DeletionReason,
    LogStartOffsetIncrementReason,
    Segment,
    append_batch,
    check_fetch_offset,
    deletable_segments,
    delete_old_segments,
    delete_records_on_leader,
    delete_records_satisfied,
    follower_log_start_offset,
    follower_out_of_range_reset,
    log_start_offset_breached_segments,
    low_watermark,
    maybe_increment_log_start_offset,
    retention_ms_breached_segments,
    retention_size_breached_segments,
    roll,
    should_roll,
)
from minikafka.errors import ErrorCode

NONE = ErrorCode.NONE
OOR = ErrorCode.OFFSET_OUT_OF_RANGE
HOUR = 3_600_000


def seg(
    base: int,
    nxt: int,
    size: int,
    max_ts: int = NO_TIMESTAMP,
    *,
    first_ts: int | None = None,
    created: int = 0,
    modified: int = 0,
) -> Segment:
    """A segment written out by hand; its first batch's timestamp defaults to its largest."""
    return Segment(
        base_offset=base,
        next_offset=nxt,
        size_bytes=size,
        max_timestamp_ms=max_ts,
        first_batch_timestamp_ms=(max_ts if size else NO_TIMESTAMP)
        if first_ts is None
        else first_ts,
        created_ms=created,
        last_modified_ms=modified,
    )


def contiguous(*specs: tuple[int, int] | tuple[int, int, int]) -> tuple[Segment, ...]:
    """Segments back to back from offset 0: each spec is (records, bytes[, max timestamp])."""
    out: list[Segment] = []
    offset = 0
    for spec in specs:
        records, size = spec[0], spec[1]
        ts = spec[2] if len(spec) == 3 else NO_TIMESTAMP
        out.append(seg(offset, offset + records, size, ts))
        offset += records
    return tuple(out)


def upper_bound(segments: Sequence[Segment], i: int) -> int:
    """Kafka's upperBoundOffset: the next segment's base, or the log end offset for the last."""
    return segments[i + 1].base_offset if i + 1 < len(segments) else segments[i].next_offset


# ---------------------------------------------------------------------------- Segment


def test_a_new_segment_is_empty_at_its_base():
    s = Segment.new(base_offset=7, now_ms=1_000)
    assert (s.base_offset, s.next_offset, s.size_bytes) == (7, 7, 0)
    assert s.max_timestamp_ms == s.first_batch_timestamp_ms == NO_TIMESTAMP
    assert s.created_ms == s.last_modified_ms == 1_000
    assert s.is_empty


def test_append_keeps_the_first_batch_timestamp_and_the_largest_one():
    s = Segment.new(base_offset=0, now_ms=0)
    s = s.append(base_offset=0, next_offset=3, size_bytes=100, max_timestamp_ms=500, now_ms=10)
    s = s.append(base_offset=3, next_offset=4, size_bytes=50, max_timestamp_ms=900, now_ms=20)
    s = s.append(base_offset=4, next_offset=6, size_bytes=25, max_timestamp_ms=700, now_ms=30)
    assert (s.next_offset, s.size_bytes) == (6, 175)
    assert s.first_batch_timestamp_ms == 500  # LogSegment.rollingBasedTimestamp
    assert s.max_timestamp_ms == 900  # maxTimestampSoFar: not the last batch's 700
    assert s.last_modified_ms == 30


@pytest.mark.parametrize(
    ("base", "nxt", "size"),
    [(2, 5, 10), (5, 5, 10), (5, 4, 10), (5, 6, 0), (5, 6, -1)],
    ids=["before-the-end", "no-records", "backwards", "no-bytes", "negative-bytes"],
)
def test_append_refuses_what_cannot_be_a_batch(base, nxt, size):
    s = seg(0, 5, 100, 10)
    with pytest.raises(ValueError):
        s.append(base_offset=base, next_offset=nxt, size_bytes=size, max_timestamp_ms=1, now_ms=1)


@pytest.mark.parametrize(
    ("max_ts", "modified", "largest"),
    [(5_000, 9_000, 5_000), (0, 9_000, 0), (NO_TIMESTAMP, 9_000, 9_000)],
    ids=["its-records", "timestamp-zero-counts", "none-falls-back-to-last-modified"],
)
def test_largest_timestamp_falls_back_to_the_last_modified_time(max_ts, modified, largest):
    # LogSegment.largestTimestamp: maxTimestampSoFar if >= 0, else the file's lastModified.
    assert seg(0, 1, 10, max_ts, modified=modified).largest_timestamp_ms == largest


def test_segments_must_be_well_formed():
    with pytest.raises(ValueError):
        seg(5, 4, 10)
    with pytest.raises(ValueError):
        seg(5, 6, -1)
    with pytest.raises(ValueError):
        seg(-1, 6, 10)


# ---------------------------------------------------------------------------- rolling


SEGMENT_BYTES = 1_000
SEGMENT_MS = HOUR


@pytest.mark.parametrize(
    ("active", "batch_bytes", "batch_ts", "now", "expected"),
    [
        (None, 10, 0, 0, True),  # no segment at all: the first one is rolled
        (seg(0, 0, 0), 10, 0, 0, False),  # an empty segment takes a batch that fits
        (seg(0, 0, 0), 1_001, 0, 0, True),  # ... not one larger than segment.bytes (KAFKA-6388)
        (seg(0, 5, 900, 0), 100, 0, 0, False),  # exactly full: size > segment.bytes - batch? no
        (seg(0, 5, 901, 0), 100, 0, 0, True),  # one byte over
        (seg(0, 5, 10, 1_000), 10, 1_000 + HOUR, 0, False),  # waited exactly segment.ms: no
        (seg(0, 5, 10, 1_000), 10, 1_000 + HOUR + 1, 0, True),  # one ms more: roll
        # The wait is the batch's timestamp minus the segment's first batch's, not the clock.
        (seg(0, 5, 10, 1_000), 10, 1_000, 10**12, False),
        (seg(0, 5, 10, 1_000), 10, 0, 10**12, False),  # an older batch: a negative wait
        (seg(0, 5, 10, 1_000, first_ts=0), 10, HOUR + 1, 0, True),  # the first batch counts
        # The first batch had no timestamp: the wall clock against the segment's creation.
        (seg(0, 5, 10, NO_TIMESTAMP, created=500), 10, 0, 500 + HOUR, False),
        (seg(0, 5, 10, NO_TIMESTAMP, created=500), 10, 0, 501 + HOUR, True),
        # An empty segment never rolls by time, however old.
        (seg(0, 0, 0, created=0), 10, 10**12, 10**12, False),
    ],
)
def test_should_roll(active, batch_bytes, batch_ts, now, expected):
    got = should_roll(
        active,
        batch_bytes=batch_bytes,
        batch_max_timestamp_ms=batch_ts,
        now_ms=now,
        segment_bytes=SEGMENT_BYTES,
        segment_ms=SEGMENT_MS,
    )
    assert got is expected


def test_roll_opens_an_empty_segment_at_the_log_end():
    log = contiguous((5, 100, 10), (3, 50, 20))
    out = roll(log, now_ms=777)
    assert out[:2] == log
    assert out[2] == Segment.new(base_offset=8, now_ms=777)


def test_rolling_an_empty_active_segment_replaces_it():
    # LocalLog.roll: a segment at the new base that is the empty active one is recreated.
    log = (*contiguous((5, 100, 10)), seg(5, 5, 0, created=1))
    out = roll(log, now_ms=777)
    assert out == (log[0], Segment.new(base_offset=5, now_ms=777))


@pytest.mark.parametrize(("expected", "base"), [(None, 8), (3, 8), (8, 8), (12, 12)])
def test_roll_starts_at_the_larger_of_the_expected_offset_and_the_log_end(expected, base):
    out = roll(contiguous((8, 100, 10)), now_ms=0, expected_next_offset=expected)
    assert out[-1].base_offset == base


def test_rolling_an_empty_log_needs_an_offset():
    assert roll((), now_ms=5, expected_next_offset=40) == (Segment.new(base_offset=40, now_ms=5),)
    with pytest.raises(ValueError):
        roll((), now_ms=5)


def _append(log, base, nxt, size, ts, now=0, segment_bytes=SEGMENT_BYTES, segment_ms=SEGMENT_MS):
    return append_batch(
        log,
        base_offset=base,
        next_offset=nxt,
        size_bytes=size,
        max_timestamp_ms=ts,
        now_ms=now,
        segment_bytes=segment_bytes,
        segment_ms=segment_ms,
    )


def test_append_batch_rolls_when_the_active_segment_is_full():
    log = _append((), 0, 4, 600, 10, now=1)
    assert log == (seg(0, 4, 600, 10, created=1, modified=1),)
    log = _append(log, 4, 6, 400, 20, now=2)  # 1,000 bytes: exactly segment.bytes, same segment
    assert len(log) == 1 and log[0].size_bytes == 1_000
    log = _append(log, 6, 7, 1, 30, now=3)  # one more byte: a new segment at the batch's base
    assert [(s.base_offset, s.next_offset, s.size_bytes) for s in log] == [(0, 6, 1_000), (6, 7, 1)]
    assert log[1].created_ms == 3


def test_append_batch_rolls_on_segment_ms_by_record_time():
    log = _append((), 0, 1, 10, 1_000)
    log = _append(log, 1, 2, 10, 1_000 + HOUR)
    assert len(log) == 1
    log = _append(log, 2, 3, 10, 1_001 + HOUR)
    assert [s.base_offset for s in log] == [0, 2]


def test_append_batch_refuses_an_offset_before_the_log_end():
    log = _append((), 0, 4, 10, 1)
    with pytest.raises(ValueError):
        _append(log, 3, 5, 10, 1)


# ---------------------------------------------------------------------------- deletableSegments


def test_deletable_segments_stop_at_the_first_segment_kept():
    log = contiguous((1, 10), (1, 10), (1, 10), (1, 10))
    verdicts = {0: True, 1: False, 2: True, 3: True}
    got = deletable_segments(log, lambda s, _n: verdicts[s.base_offset], high_watermark=4)
    assert got == log[:1]  # never skips over a kept segment


@pytest.mark.parametrize(("hw", "count"), [(0, 0), (4, 0), (5, 1), (7, 1), (8, 2), (9, 3)])
def test_deletable_segments_keep_every_segment_not_wholly_below_the_high_watermark(hw, count):
    log = contiguous((5, 10), (3, 10), (1, 10))  # upper bounds 5, 8, 9 (the log end)
    assert deletable_segments(log, lambda _s, _n: True, high_watermark=hw) == log[:count]


def test_the_upper_bound_is_the_next_segments_base_not_the_segments_own_end():
    # Kafka bounds a segment by the next one's base offset: a gap counts as part of the segment.
    log = (seg(0, 5, 10), seg(8, 9, 10))
    always = lambda _s, _n: True  # noqa: E731
    assert deletable_segments(log, always, high_watermark=7) == ()
    assert deletable_segments(log, always, high_watermark=8) == log[:1]


def test_the_last_segment_goes_only_if_it_has_records():
    log = (*contiguous((5, 10)), seg(5, 5, 0))
    always = lambda _s, _n: True  # noqa: E731
    assert deletable_segments(log, always, high_watermark=5) == log[:1]
    active = contiguous((5, 10), (2, 10))
    assert deletable_segments(active, always, high_watermark=7) == active


def test_the_predicate_sees_the_next_segment_and_is_not_asked_past_the_high_watermark():
    log = contiguous((2, 10), (2, 10), (2, 10))
    asked: list[tuple[int, int | None]] = []

    def predicate(s: Segment, nxt: Segment | None) -> bool:
        asked.append((s.base_offset, None if nxt is None else nxt.base_offset))
        return True

    deletable_segments(log, predicate, high_watermark=4)
    assert asked == [(0, 2), (2, 4)]  # the segment [4, 6) is above the HW: not asked


def test_deletable_segments_of_no_segments():
    assert deletable_segments((), lambda _s, _n: True, high_watermark=10) == ()


# ---------------------------------------------------------------------------- the three rules


NOW = 10 * HOUR
RETENTION = HOUR


@pytest.mark.parametrize(
    ("timestamps", "retention_ms", "count"),
    [
        ([0, 0, 0], -1, 0),  # -1: no time limit
        ([0, 0, 0], -2, 0),  # Kafka tests retention < 0
        ([NOW - HOUR - 1, NOW - HOUR, 0], RETENTION, 1),  # older than retention.ms by 1 ms: go
        ([NOW - HOUR, 0, 0], RETENTION, 0),  # exactly retention.ms old: stays
        ([0, NOW, 0], RETENTION, 1),  # a recent segment shields the older ones after it
        ([0, 0, NOW + HOUR], RETENTION, 2),  # future timestamps are never breached
        ([0, 0, 0], 0, 3),  # retention 0: everything older than now
    ],
)
def test_retention_ms(timestamps, retention_ms, count):
    log = contiguous(*[(1, 10, ts) for ts in timestamps])
    got = retention_ms_breached_segments(
        log, high_watermark=3, retention_ms=retention_ms, now_ms=NOW
    )
    assert got == log[:count]


def test_retention_ms_judges_a_segment_by_its_largest_timestamp():
    # An old first batch does not make a segment old: LogSegment.largestTimestamp.
    log = (seg(0, 2, 10, NOW - 1, first_ts=0), seg(2, 3, 10, NOW))
    got = retention_ms_breached_segments(log, high_watermark=3, retention_ms=RETENTION, now_ms=NOW)
    assert got == ()


def test_retention_ms_uses_the_last_modified_time_without_timestamps():
    log = (seg(0, 2, 10, NO_TIMESTAMP, modified=0), seg(2, 3, 10, NO_TIMESTAMP, modified=NOW))
    got = retention_ms_breached_segments(log, high_watermark=3, retention_ms=RETENTION, now_ms=NOW)
    assert got == log[:1]


@pytest.mark.parametrize(
    ("sizes", "retention_bytes", "count"),
    [
        ([100, 100, 100, 50], -1, 0),  # -1: no size limit
        ([100, 100, 100, 50], 351, 0),  # below the limit
        ([100, 100, 100, 50], 350, 0),  # at the limit: diff 0, no segment fits in it
        ([100, 100, 100, 50], 250, 1),  # diff 100: the oldest exactly
        ([100, 100, 100, 50], 200, 1),  # diff 150: one, then 50 - 100 < 0
        ([100, 100, 100, 50], 50, 3),  # diff 300: three, leaving the 50 bytes of the last
        ([100, 100, 100, 50], 0, 4),  # everything, the active segment too
        ([100, 30, 100, 50], 130, 2),  # diff 150: 100 and 30 fit, the third does not
    ],
)
def test_retention_bytes(sizes, retention_bytes, count):
    log = contiguous(*[(1, size) for size in sizes])
    got = retention_size_breached_segments(log, high_watermark=4, retention_bytes=retention_bytes)
    assert got == log[:count]


def test_an_empty_segment_fits_in_no_excess_at_all():
    # Kafka deletes while `diff - segment.size >= 0`: at exactly retention.bytes, an empty
    # segment (left behind by a roll past a gap) still goes, and nothing after it.
    log = (seg(0, 0, 0), seg(2, 3, 100), seg(3, 4, 100), seg(4, 5, 50))
    got = retention_size_breached_segments(log, high_watermark=5, retention_bytes=250)
    assert got == log[:1]


def test_retention_bytes_counts_the_high_watermark_against_what_is_kept():
    log = contiguous((1, 100), (1, 100), (1, 100), (1, 50))
    # The size is breached by 300, but only the first segment is wholly below the HW.
    got = retention_size_breached_segments(log, high_watermark=1, retention_bytes=50)
    assert got == log[:1]


@pytest.mark.parametrize(("lso", "count"), [(0, 0), (4, 0), (5, 1), (7, 1), (8, 2), (9, 2)])
def test_log_start_offset_breach(lso, count):
    log = contiguous((5, 10), (3, 10), (1, 10))
    # A segment goes once the next one starts at or below the log start offset; the last never.
    got = log_start_offset_breached_segments(log, high_watermark=9, log_start_offset=lso)
    assert got == log[:count]


# ---------------------------------------------------------------------------- deleteOldSegments


def _plan(log, *, hw, lso=0, ms=-1, size=-1, now=NOW, delete=True):
    return delete_old_segments(
        log,
        high_watermark=hw,
        log_start_offset=lso,
        retention_ms=ms,
        retention_bytes=size,
        now_ms=now,
        delete_enabled=delete,
    )


def test_nothing_to_delete_changes_nothing():
    log = contiguous((5, 100, NOW), (5, 100, NOW))
    plan = _plan(log, hw=10, lso=2, ms=RETENTION, size=1_000)
    assert plan.deletions == () and plan.deleted == ()
    assert plan.segments == log and plan.log_start_offset == 2 and not plan.rolled


def test_rules_run_in_kafkas_order_each_on_what_the_last_left():
    # KAFKA-12177's test (testRetentionIdempotency): the log start offset rule first unblocks
    # the time rule in the same run, so a second run at the same time deletes nothing.
    log = contiguous((1, 10, NOW - 900 + 100), (1, 10, NOW - 900), (1, 10, NOW - 900 + 100))
    plan = _plan(log, hw=3, lso=1, ms=899)
    assert [(d.reason, d.segments) for d in plan.deletions] == [
        (DeletionReason.LOG_START_OFFSET_BREACH, log[:1]),
        (DeletionReason.RETENTION_MS_BREACH, log[1:2]),
    ]
    assert [d.log_start_offset for d in plan.deletions] == [1, 2]
    assert plan.segments == log[2:] and plan.log_start_offset == 2
    again = _plan(plan.segments, hw=3, lso=plan.log_start_offset, ms=899)
    assert again.deletions == ()


def test_size_runs_before_time():
    log = contiguous((1, 100, 0), (1, 100, 0), (1, 100, NOW))
    plan = _plan(log, hw=3, ms=RETENTION, size=200)
    assert [(d.reason, len(d.segments)) for d in plan.deletions] == [
        (DeletionReason.RETENTION_SIZE_BREACH, 1),
        (DeletionReason.RETENTION_MS_BREACH, 1),
    ]
    assert plan.log_start_offset == 2


def test_without_the_delete_policy_only_the_log_start_offset_deletes():
    log = contiguous((1, 100, 0), (1, 100, 0), (1, 100, 0))
    plan = _plan(log, hw=3, lso=2, ms=0, size=0, delete=False)
    assert [d.reason for d in plan.deletions] == [DeletionReason.LOG_START_OFFSET_BREACH]
    assert plan.deleted == log[:2] and plan.log_start_offset == 2


def test_deleting_every_segment_rolls_a_new_one_first():
    log = contiguous((4, 100, 0), (3, 100, 0))
    plan = _plan(log, hw=7, ms=RETENTION, now=NOW)
    (deletion,) = plan.deletions
    assert deletion.segments == log
    assert deletion.rolled == Segment.new(base_offset=7, now_ms=NOW)
    assert plan.segments == (deletion.rolled,) and plan.rolled
    assert plan.log_start_offset == 7  # the log is empty: start == end


def test_the_active_segment_stays_while_the_high_watermark_is_behind_the_log_end():
    log = contiguous((4, 100, 0), (3, 100, 0))
    plan = _plan(log, hw=6, ms=RETENTION)
    assert plan.deleted == log[:1] and not plan.rolled and plan.log_start_offset == 4


def test_an_empty_log_is_left_as_it_is():
    log = (seg(9, 9, 0, created=0),)
    plan = _plan(log, hw=9, lso=9, ms=0, size=0)
    assert plan.deletions == () and plan.segments == log


@pytest.mark.parametrize(
    ("log", "hw", "lso"),
    [
        (contiguous((5, 10)), 3, 4),  # log start above the HW
        (contiguous((5, 10)), 6, 0),  # HW above the log end
        ((seg(2, 5, 10),), 5, 1),  # log start before the first segment
        ((seg(0, 5, 10), seg(4, 6, 10)), 6, 0),  # overlapping segments
        ((), 0, 0),  # no segment: Kafka always has one
    ],
)
def test_plans_refuse_broken_logs(log, hw, lso):
    with pytest.raises(ValueError):
        _plan(log, hw=hw, lso=lso)


# ---------------------------------------------------------------------------- log start offset


@pytest.mark.parametrize(
    ("current", "new", "hw", "error", "after", "moved"),
    [
        (5, 8, 10, NONE, 8, True),
        (5, 10, 10, NONE, 10, True),  # up to the HW itself
        (5, 11, 10, OOR, 5, False),  # past the HW: OffsetOutOfRangeException
        (5, 5, 10, NONE, 5, False),
        (5, 3, 10, NONE, 5, False),  # never backwards
    ],
)
def test_maybe_increment_log_start_offset(current, new, hw, error, after, moved):
    reason = LogStartOffsetIncrementReason.SEGMENT_DELETION
    got = maybe_increment_log_start_offset(current, new, high_watermark=hw, reason=reason)
    assert (got.error, got.log_start_offset, got.moved, got.reason) == (error, after, moved, reason)


@pytest.mark.parametrize(
    ("offset", "error", "requested", "after"),
    [
        (DELETE_RECORDS_HIGH_WATERMARK, NONE, 10, 10),  # -1: up to the high watermark
        (7, NONE, 7, 7),
        (10, NONE, 10, 10),
        (11, OOR, -1, 4),  # past the HW
        (2, NONE, 2, 4),  # already deleted: nothing moves, the request is satisfied
        (-2, OOR, -1, 4),  # no other negative offset means anything
    ],
)
def test_delete_records_on_leader(offset, error, requested, after):
    got = delete_records_on_leader(offset, high_watermark=10, log_start_offset=4)
    assert (got.error, got.requested_offset, got.log_start_offset) == (error, requested, after)


def test_delete_records_needs_the_delete_policy_and_a_user_topic():
    compacted = delete_records_on_leader(
        5, high_watermark=10, log_start_offset=0, delete_enabled=False
    )
    assert (compacted.error, compacted.log_start_offset) == (ErrorCode.POLICY_VIOLATION, 0)
    internal = delete_records_on_leader(
        5, high_watermark=10, log_start_offset=0, delete_enabled=False, internal_topic=True
    )
    assert internal.error == ErrorCode.INVALID_TOPIC_EXCEPTION  # checked before the policy
    assert (internal.requested_offset, internal.log_start_offset) == (-1, 0)


@pytest.mark.parametrize(
    ("leader", "replicas", "expected"),
    [(10, [], 10), (10, [12, 11], 10), (10, [7, 12], 7), (10, [10], 10)],
)
def test_low_watermark_is_the_smallest_log_start_offset(leader, replicas, expected):
    assert low_watermark(leader, replicas) == expected


@pytest.mark.parametrize(
    ("lw", "requested", "done"), [(9, 10, False), (10, 10, True), (11, 10, True)]
)
def test_delete_records_completes_once_the_low_watermark_reaches_the_offset(lw, requested, done):
    assert delete_records_satisfied(lw, requested) is done


@pytest.mark.parametrize(
    ("own", "leader", "hw", "error", "after"),
    [
        (0, 5, 8, NONE, 5),  # the leader deleted: the follower follows
        (5, 5, 8, NONE, 5),
        (6, 5, 8, NONE, 6),  # the leader's is behind ours (a new leader): ours stays
        (0, 9, 8, OOR, 0),  # past our HW: Kafka's OffsetOutOfRangeException, nothing moves
    ],
)
def test_follower_takes_the_leaders_log_start_offset(own, leader, hw, error, after):
    got = follower_log_start_offset(
        log_start_offset=own, leader_log_start_offset=leader, high_watermark=hw
    )
    assert (got.error, got.log_start_offset) == (error, after)
    assert got.reason is LogStartOffsetIncrementReason.LEADER_OFFSET_INCREMENTED


# ---------------------------------------------------------------------------- out of range


@pytest.mark.parametrize(
    ("fetch", "expected"),
    [(4, OOR), (5, NONE), (7, NONE), (9, NONE), (10, OOR)],
)
def test_fetch_offset_must_lie_between_the_log_start_and_end(fetch, expected):
    assert check_fetch_offset(fetch, log_start_offset=5, log_end_offset=9) == expected


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_the_fetch_offset_rule_is_the_one_the_leader_applies_to_fetches(lso, extra, fetch):
    leo = lso + extra
    check = check_follower_fetch(
        epochs=[],
        log_start_offset=lso,
        log_end_offset=leo,
        leader_epoch=0,
        fetch_offset=fetch,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
    )
    assert check_fetch_offset(fetch, log_start_offset=lso, log_end_offset=leo) == check.error_code


@pytest.mark.parametrize(
    ("own_end", "leader_start", "leader_end", "fetch", "truncate_to", "start_at"),
    [
        (20, 0, 15, 15, 15, None),  # the leader's log is shorter (unclean election): truncate
        (5, 10, 30, 10, None, 10),  # retention passed us by: start over at the leader's start
        (12, 10, 30, 12, None, None),  # a transient error: fetch again from our end
        (10, 10, 30, 10, None, None),  # exactly at the leader's start: nothing to drop
        (15, 0, 15, 15, None, None),  # equal ends: no truncation
    ],
)
def test_follower_out_of_range_reset(
    own_end, leader_start, leader_end, fetch, truncate_to, start_at
):
    got = follower_out_of_range_reset(
        log_end_offset=own_end,
        leader_log_start_offset=leader_start,
        leader_log_end_offset=leader_end,
    )
    assert (got.fetch_offset, got.truncate_to, got.truncate_fully_and_start_at) == (
        fetch,
        truncate_to,
        start_at,
    )


# ---------------------------------------------------------------------------- properties


batches = st.lists(
    st.tuples(
        st.integers(1, 4),  # records
        st.integers(1, 400),  # bytes
        st.integers(-1, 20),  # max timestamp in 10-minute steps; -1: none
        st.integers(0, 3),  # clock ticks (10 minutes each) before the append
        st.integers(0, 2),  # offsets skipped before the batch (a compacted leader's gaps)
    ),
    min_size=1,
    max_size=30,
)
TICK = 600_000


def build(spec, segment_bytes: int, segment_ms: int, start: int = 0):
    """A log written batch by batch through `append_batch`; its batches as (base, next, size)."""
    log: tuple[Segment, ...] = (Segment.new(base_offset=start, now_ms=0),)
    written: list[tuple[int, int, int]] = []
    offset, now = start, 0
    for records, size, ts, ticks, gap in spec:
        now += ticks * TICK
        base = offset + gap
        log = append_batch(
            log,
            base_offset=base,
            next_offset=base + records,
            size_bytes=size,
            max_timestamp_ms=ts * TICK if ts >= 0 else NO_TIMESTAMP,
            now_ms=now,
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
        )
        written.append((base, base + records, size))
        offset = base + records
    return log, written, now


segment_bytes_st = st.integers(100, 1_000)
segment_ms_st = st.sampled_from([TICK, 3 * TICK, 10**15])


@settings(max_examples=150, derandomize=True, deadline=None)
@given(batches, segment_bytes_st, segment_ms_st)
def test_the_write_path_keeps_segments_back_to_back_and_within_segment_bytes(spec, sb, sm):
    log, written, _ = build(spec, sb, sm)
    assert sum(s.size_bytes for s in log) == sum(size for _b, _n, size in written)
    assert log[-1].next_offset == written[-1][1]
    for a, b in zip(log, log[1:], strict=False):
        assert a.next_offset <= b.base_offset  # ordered, never overlapping
    for s in log:
        inside = [w for w in written if s.base_offset <= w[0] < s.next_offset]
        # a segment outgrows segment.bytes only by holding one batch larger than it
        assert s.size_bytes <= sb or len(inside) == 1
        if inside:
            assert s.next_offset == inside[-1][1]
    for a, b in zip(log, log[1:], strict=False):
        # every segment but the last was rolled: the batch that opened the next did not fit, or
        # came a segment.ms later (by record time, or by the clock if there was none)
        first = next(w for w in written if w[0] == b.base_offset)
        assert a.size_bytes + first[2] > sb or sm != 10**15


def random_log(data, spec, sb, sm):
    log, _written, now = build(spec, sb, sm)
    leo = log[-1].next_offset
    first = log[0].base_offset
    # the HW at the log end half the time: only then may the active segment go
    hw = data.draw(st.just(leo) | st.integers(first, leo), label="hw")
    lso = data.draw(st.just(first) | st.integers(first, hw), label="lso")
    return log, hw, lso, now


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.data(), batches, segment_bytes_st, segment_ms_st)
def test_retention_plans_hold_kafkas_invariants(data, spec, sb, sm):
    log, hw, lso, now = random_log(data, spec, sb, sm)
    retention_ms = data.draw(st.sampled_from([-1, 0, TICK, 5 * TICK, 100 * TICK]), label="ms")
    retention_bytes = data.draw(st.sampled_from([-1, 0, 100, 500, 2_000]), label="bytes")
    later = now + data.draw(st.integers(0, 30), label="ticks") * TICK
    plan = _plan(log, hw=hw, lso=lso, ms=retention_ms, size=retention_bytes, now=later)

    # Whole segments from the front, in order, each deletion with its own reason once.
    n = len(plan.deleted)
    assert plan.deleted == log[:n]
    reasons = [d.reason for d in plan.deletions]
    assert reasons == sorted(set(reasons), key=list(DeletionReason).index)
    assert all(d.segments for d in plan.deletions)
    # Nothing at or above the high watermark goes.
    assert all(upper_bound(log, i) <= hw for i in range(n))
    # The log start offset moves forward only, never past the HW, to the first kept segment.
    assert lso <= plan.log_start_offset <= hw
    assert all(
        a.log_start_offset <= b.log_start_offset
        for a, b in zip(plan.deletions, plan.deletions[1:], strict=False)
    )
    if n:
        assert plan.log_start_offset == max(lso, plan.segments[0].base_offset)
    else:
        assert plan.log_start_offset == lso
    # A log keeps a segment; the active one goes only with a new one rolled at the end first.
    assert plan.segments
    assert plan.rolled == (n == len(log))
    if plan.rolled:
        assert plan.segments == (Segment.new(base_offset=log[-1].next_offset, now_ms=later),)
        assert hw == log[-1].next_offset
    else:
        assert plan.segments == log[n:]
    # Disabled rules delete nothing; a run right after deletes nothing more (KAFKA-12177).
    if retention_ms < 0:
        assert DeletionReason.RETENTION_MS_BREACH not in reasons
    if retention_bytes < 0:
        assert DeletionReason.RETENTION_SIZE_BREACH not in reasons
    again = _plan(
        plan.segments,
        hw=hw,
        lso=plan.log_start_offset,
        ms=retention_ms,
        size=retention_bytes,
        now=later,
    )
    assert again.deletions == ()


def _kept_is_deletable(segments: Sequence[Segment], hw: int) -> bool:
    """Whether the first segment could have gone as far as the HW and emptiness go."""
    first = segments[0]
    last_and_empty = len(segments) == 1 and first.size_bytes == 0
    return upper_bound(segments, 0) <= hw and not last_and_empty


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.data(), batches, segment_bytes_st, st.integers(-1, 3_000))
def test_size_retention_stops_exactly_where_kafkas_arithmetic_says(data, spec, sb, retention):
    log, hw, _lso, _now = random_log(data, spec, sb, 10**15)
    total = sum(s.size_bytes for s in log)
    gone = retention_size_breached_segments(log, high_watermark=hw, retention_bytes=retention)
    kept = log[len(gone) :]
    kept_bytes = sum(s.size_bytes for s in kept)
    if retention < 0 or total < retention:
        assert gone == ()
        return
    # Never below retention.bytes: a segment goes only if the rest still holds at least that.
    assert kept_bytes >= retention
    # And it stops only where the HW or an empty active segment stops it, or where deleting the
    # oldest kept segment would take the log below retention.bytes.
    if kept and _kept_is_deletable(kept, hw):
        assert kept_bytes - kept[0].size_bytes < retention
    # More HW never deletes less.
    more = retention_size_breached_segments(
        log, high_watermark=log[-1].next_offset, retention_bytes=retention
    )
    assert more[: len(gone)] == gone


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    st.data(), batches, segment_bytes_st, segment_ms_st, st.sampled_from([-1, 0, TICK, 7 * TICK])
)
def test_time_retention_uses_each_segments_largest_timestamp(data, spec, sb, sm, retention):
    log, hw, _lso, now = random_log(data, spec, sb, sm)
    later = now + data.draw(st.integers(0, 40), label="ticks") * TICK
    gone = retention_ms_breached_segments(
        log, high_watermark=hw, retention_ms=retention, now_ms=later
    )
    if retention < 0:
        assert gone == ()
        return
    assert all(later - s.largest_timestamp_ms > retention for s in gone)
    kept = log[len(gone) :]
    if kept and _kept_is_deletable(kept, hw):
        assert later - kept[0].largest_timestamp_ms <= retention
    # Later never deletes less.
    after = retention_ms_breached_segments(
        log, high_watermark=hw, retention_ms=retention, now_ms=later + TICK
    )
    assert after[: len(gone)] == gone


# A partition's life: appends, the HW catching up, DeleteRecords, retention runs, time passing.
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3), st.integers(1, 300), st.integers(0, 3)),
        st.tuples(st.just("hw"), st.integers(0, 10)),
        st.tuples(st.just("delete_records"), st.integers(-2, 40)),
        st.tuples(st.just("follow"), st.integers(0, 40)),
        st.tuples(
            st.just("retention"),
            st.sampled_from([-1, 0, TICK, 4 * TICK]),
            st.sampled_from([-1, 0, 300, 900]),
        ),
        st.tuples(st.just("tick"), st.integers(1, 5)),
    ),
    max_size=60,
)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(ops, st.integers(200, 1_200))
def test_a_partitions_life_never_moves_its_log_start_offset_back(steps, sb):
    log: tuple[Segment, ...] = (Segment.new(base_offset=0, now_ms=0),)
    lso = hw = now = 0
    for step in steps:
        before = lso
        leo = log[-1].next_offset
        if step[0] == "append":
            _, records, size, ts_ticks = step
            log = append_batch(
                log,
                base_offset=leo,
                next_offset=leo + records,
                size_bytes=size,
                max_timestamp_ms=max(NO_TIMESTAMP, now - ts_ticks * TICK),
                now_ms=now,
                segment_bytes=sb,
                segment_ms=3 * TICK,
            )
        elif step[0] == "hw":
            hw = min(leo, hw + step[1])
        elif step[0] == "delete_records":
            got = delete_records_on_leader(step[1], high_watermark=hw, log_start_offset=lso)
            assert (got.error == NONE) == (step[1] == -1 or 0 <= step[1] <= hw)
            lso = got.log_start_offset
        elif step[0] == "follow":
            got = follower_log_start_offset(
                log_start_offset=lso, leader_log_start_offset=step[1], high_watermark=hw
            )
            assert (got.error == NONE) == (step[1] <= hw)
            lso = got.log_start_offset
        elif step[0] == "retention":
            plan = _plan(log, hw=hw, lso=lso, ms=step[1], size=step[2], now=now)
            assert all(s.next_offset <= hw for s in plan.deleted)
            log, lso = plan.segments, plan.log_start_offset
            # what a consumer may still fetch: from the log start offset to the end
            assert check_fetch_offset(lso, log_start_offset=lso, log_end_offset=leo) == NONE
            assert check_fetch_offset(lso - 1, log_start_offset=lso, log_end_offset=leo) == OOR
        else:
            now += step[1] * TICK
        assert before <= lso <= hw <= log[-1].next_offset
        assert log[0].base_offset <= lso
        assert log and all(
            a.next_offset <= b.base_offset for a, b in zip(log, log[1:], strict=False)
        )
