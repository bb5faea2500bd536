"""The time-index decisions of ListOffsets by time (core/time_index.py), pure.

The model is Kafka's answer read off the records themselves: the first record in offset order
whose timestamp is >= the target (and whose offset is >= the log start). The index's answer
(the first entry whose timestamp is >= target, then that batch's records) must equal it for any
log, timestamps in any order, native batches and RecordBatch v2 alike.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import make_batch
from minikafka.core.time_index import (
    NO_TIMESTAMP,
    IndexEntry,
    TimestampAndOffset,
    batch_max_timestamp,
    batch_records,
    entries_of,
    fetchable,
    max_timestamp_record,
    new_entries,
    pick,
    search_batches,
    truncated,
)


def build_log(shapes: list[list[int]], *, v2_every: int = 0) -> list[bytes]:
    """Contiguous batches, one per list of record timestamps; every `v2_every`-th one a v2."""
    out, base = [], 0
    for i, stamps in enumerate(shapes):
        records = [(ts, None, b"v") for ts in stamps]
        use_v2 = v2_every and i % v2_every == 0
        build = v2.build if use_v2 else make_batch
        out.append(build(records, base_offset=base, leader_epoch=i % 3))
        base += len(stamps)
    return out


def model(log: list[bytes], target: int, start: int = 0) -> tuple[int, int] | None:
    """Kafka's answer, from every record of the log."""
    for raw in log:
        for offset, ts in batch_records(raw):
            if ts >= target and offset >= start:
                return offset, ts
    return None


def by_index(log: list[bytes], target: int, start: int = 0) -> tuple[int, int] | None:
    """The answer as the store finds it: one entry picked, then batches from its batch on."""
    entry = pick(entries_of(log), target)
    if entry is None:
        return None
    bases = [make_base(raw) for raw in log]
    found = search_batches(log[bases.index(entry.base_offset) :], target, start)
    return None if found is None else (found.offset, found.timestamp)


def make_base(raw: bytes) -> int:
    return batch_records(raw)[0][0]


stamps = st.lists(st.lists(st.integers(0, 60), min_size=1, max_size=5), max_size=12)


@settings(max_examples=300, deadline=None)
@given(shapes=stamps, target=st.integers(0, 70), v2_every=st.sampled_from([0, 1, 2]))
def test_the_index_answers_as_kafka_does_with_timestamps_in_any_order(shapes, target, v2_every):
    log = build_log(shapes, v2_every=v2_every)
    assert by_index(log, target) == model(log, target)


@settings(max_examples=200, deadline=None)
@given(shapes=stamps, cut=st.integers(0, 12), target=st.integers(0, 70))
def test_a_truncated_index_is_the_index_of_the_truncated_log(shapes, cut, target):
    log = build_log(shapes)
    kept = log[:cut]
    leo = sum(len(s) for s in shapes[:cut])
    assert truncated(entries_of(log), leo) == entries_of(kept)
    assert by_index(kept, target) == model(kept, target)


def test_non_monotonic_timestamps_pick_the_first_batch_that_reaches_the_target():
    # Batch maxima 50, 10, 70, 60: entries only where the running max grows (50 @0, 70 @4).
    log = build_log([[50, 5], [10, 1], [30, 70], [60]])
    assert entries_of(log) == [
        IndexEntry(timestamp=50, base_offset=0),
        IndexEntry(timestamp=70, base_offset=4),
    ]
    assert by_index(log, 20) == (0, 50)  # batch 0, its first record >= 20
    assert by_index(log, 55) == (5, 70)  # batch 2: 30 < 55, then 70; not batch 3's 60
    assert by_index(log, 60) == (5, 70)  # the earliest offset wins over the closest time
    assert by_index(log, 71) is None  # after the last record


def test_targets_before_the_first_record_and_an_empty_log():
    log = build_log([[100, 101], [102]])
    assert by_index(log, 0) == (0, 100)
    assert by_index([], 0) is None
    assert entries_of([]) == []
    assert pick([], 5) is None


def test_the_log_start_bounds_the_search_inside_a_batch():
    log = build_log([[5, 9, 7], [8]])
    assert model(log, 6, start=2) == (2, 7)
    assert search_batches(log, 6, 2) == TimestampAndOffset(timestamp=7, offset=2, leader_epoch=0)
    assert search_batches(log, 9, 2) is None  # 9 is at offset 1, below the start


def test_new_entries_append_only_a_larger_timestamp():
    assert new_entries([(0, 5), (1, 5), (2, 4), (3, 6)], NO_TIMESTAMP) == [
        IndexEntry(timestamp=5, base_offset=0),
        IndexEntry(timestamp=6, base_offset=3),
    ]
    assert new_entries([(10, 3)], 3) == []  # continues a log whose largest is already 3
    assert new_entries([(0, NO_TIMESTAMP)], NO_TIMESTAMP) == []  # no timestamp: not indexed


def test_max_timestamp_is_the_first_record_holding_the_largest():
    [native] = build_log([[3, 9, 1, 9]])
    assert max_timestamp_record(native) == TimestampAndOffset(timestamp=9, offset=1, leader_epoch=0)
    [batch] = build_log([[3, 9, 1, 9]], v2_every=1)
    assert max_timestamp_record(batch) == TimestampAndOffset(timestamp=9, offset=1, leader_epoch=0)
    assert batch_max_timestamp(batch) == 9


def test_log_append_time_gives_every_record_the_batch_timestamp():
    raw = bytearray(v2.build([(1, None, b"a"), (2, None, b"b")], base_offset=7))
    # Attributes (inside the CRC, which these functions do not check): LogAppendTime bit.
    attrs_at = v2.CRC_START
    raw[attrs_at + 1] |= 0x08
    raw = bytes(raw)
    assert batch_records(raw) == [(7, 2), (8, 2)]


@pytest.mark.parametrize(
    ("offset", "end", "kept"), [(4, 5, True), (5, 5, False), (9, 5, False)]
)
def test_an_answer_at_or_past_the_readable_end_is_no_answer(offset, end, kept):
    found = TimestampAndOffset(timestamp=1, offset=offset, leader_epoch=0)
    assert fetchable(found, end) == (found if kept else None)
    assert fetchable(None, end) is None
