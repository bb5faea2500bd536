"""Segments and deletion at the head of the log (storage/segments.py, LogStore), on real LMDB.

Segments roll on append by segment.bytes and survive a reopen, are built for a data dir that has
none, follow truncations; the log start offset moves forward only, cutting epochs and deleting
batch keys (and their time index entries) below it in bounded transactions; nothing below it is
served by a read or a time lookup; a crash between two deletions is purged later.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.common import TopicPartition
from minikafka.core.log_retention import Segment, append_batch, delete_old_segments
from minikafka.core.records import iter_batches, make_batch, peek_header
from minikafka.storage import AppendWrite, LogStore, ReadSpec, StorageError, StoreConfig, time_index
from minikafka.storage import segments as seg_db
from minikafka.storage.log_store import MAX_TIMESTAMP, _pre

TP = TopicPartition("events", 0)
FAST = StoreConfig(map_size_bytes=1 << 30, sync=False)
BIG = 1 << 30
NOW = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def batch(base: int, count: int = 1, ts: int | None = None, epoch: int = 0) -> bytes:
    """`count` records of 100 bytes; timestamps `ts` (all) or NOW + offset."""
    recs = [(NOW + base + i if ts is None else ts, None, b"x" * 100) for i in range(count)]
    return make_batch(recs, base_offset=base, leader_epoch=epoch)


SIZE = len(batch(0))  # every 1-record batch has this size


def open_store(path: Path, clock: Clock | None = None, **kwargs) -> LogStore:
    return LogStore(path, FAST, clock=clock or Clock(), **kwargs)


def append(store: LogStore, start: int, n: int, seg_bytes: int = 3 * SIZE, **kw) -> None:
    """n one-record batches from `start`, one append each, segment.bytes = 3 batches."""
    for off in range(start, start + n):
        store.append([AppendWrite(tp=TP, batches=[batch(off, **kw)], segment_bytes=seg_bytes)])


def keys(store: LogStore) -> list[int]:
    with store._lease.txn(write=False) as txn, txn.cursor(db=store._dbs[TP]) as cur:
        return [peek_header(bytes(v))[0] for v in cur.iternext(keys=False, values=True)]


def index_entries(store: LogStore) -> list[tuple[int, int]]:
    pre = _pre(TP)
    with store._lease.txn(write=False) as txn, txn.cursor(db=store._time_db) as cur:
        out, found = [], cur.set_range(pre)
        while found and (e := time_index._entry(cur.key(), pre)) is not None:
            out.append((e.timestamp, e.base_offset))
            found = cur.next()
        return out


def stored_segments(store: LogStore) -> tuple[Segment, ...]:
    with store._lease.txn(write=False) as txn:
        return seg_db.read(txn, store._seg_db, _pre(TP))


def offsets_read(store: LogStore, fetch: int) -> list[int]:
    raw = store.read([ReadSpec(tp=TP, fetch_offset=fetch, max_offset=10**9,
                               partition_max_bytes=BIG)], BIG)[0]  # fmt: skip
    return [b.base_offset for b in iter_batches(raw)]


def bounds(segs) -> list[tuple[int, int]]:
    return [(s.base_offset, s.next_offset) for s in segs]


@pytest.fixture
def store(tmp_path: Path):
    with open_store(tmp_path / "node") as s:
        s.create_partition(TP)
        yield s


# -- rolling, persistence, building ---------------------------------------------------------------


def test_segments_roll_by_segment_bytes_across_appends(store: LogStore) -> None:
    assert bounds(store.segments(TP)) == [(0, 0)]  # a new log has one empty segment
    append(store, 0, 7)
    segs = store.segments(TP)
    assert bounds(segs) == [(0, 3), (3, 6), (6, 7)]
    assert [s.size_bytes for s in segs] == [3 * SIZE, 3 * SIZE, SIZE]
    assert [s.max_timestamp_ms for s in segs] == [NOW + 2, NOW + 5, NOW + 6]
    assert [s.first_batch_timestamp_ms for s in segs] == [NOW, NOW + 3, NOW + 6]
    assert stored_segments(store) == segs  # written in the append's transaction
    # several batches in one append roll inside it too
    store.append([AppendWrite(tp=TP, batches=[batch(7), batch(8), batch(9)],
                              segment_bytes=3 * SIZE)])  # fmt: skip
    assert bounds(store.segments(TP))[-2:] == [(6, 9), (9, 10)]


def test_segments_roll_by_segment_ms(store: LogStore) -> None:
    for off, ts in enumerate([NOW, NOW + 50, NOW + 101, NOW + 120]):
        store.append([AppendWrite(tp=TP, batches=[batch(off, ts=ts)], segment_ms=100)])
    assert bounds(store.segments(TP)) == [(0, 2), (2, 4)]


def test_segments_survive_reopen(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        s.create_partition(TP)
        append(s, 0, 8)
        before = s.segments(TP)
    clock = Clock()
    clock.now += 10**6  # a rebuild would show in the times
    with open_store(tmp_path, clock) as s:
        assert s.segments(TP) == before


def test_missing_segments_are_built_from_the_log(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        s.create_partition(TP)
        append(s, 0, 8)
        s.advance_log_start(TP, 4)  # a log start inside a segment: the build starts there
        with s._lease.txn(write=True) as txn:  # a data dir from before segments
            seg_db.drop(txn, s._seg_db, _pre(TP))
        assert stored_segments(s) == ()
    with open_store(tmp_path, segment_bytes=3 * SIZE) as s:
        segs = s.segments(TP)
        assert bounds(segs) == [(4, 7), (7, 8)]
        assert [x.size_bytes for x in segs] == [3 * SIZE, SIZE]
        assert stored_segments(s) == segs
        assert seg_db.tiles(segs, 4, 8)


# -- the log start offset -------------------------------------------------------------------------


def test_advance_deletes_in_bounded_chunks(store: LogStore) -> None:
    append(store, 0, 10)
    store.append([AppendWrite(tp=TP, batches=[], epochs=[(0, 0), (1, 4), (2, 8)])])
    assert len(index_entries(store)) == 10
    # 7 batches wholly below 7, max_keys=2: the advance and three purges
    left = [store.advance_log_start(TP, 7, max_keys=2)]
    while left[-1]:
        left.append(store.purge(TP, max_keys=2))
    assert left == [10, 6, 2, 0]  # batch keys + time index entries
    assert keys(store) == [7, 8, 9]
    # the last entry below moved to the first batch kept: the largest timestamp so far
    assert index_entries(store) == [(NOW + 6, 7), (NOW + 7, 7), (NOW + 8, 8), (NOW + 9, 9)]
    assert store.load_partition(TP).epochs == [(1, 7), (2, 8)]  # truncateFromStart
    assert bounds(store.segments(TP)) == [(6, 9), (9, 10)]  # those wholly below went
    assert store.log_start_offset(TP) == 7


def test_advance_never_moves_backwards_nor_past_the_end(store: LogStore) -> None:
    append(store, 0, 5)
    assert store.advance_log_start(TP, 3) == 0
    assert store.advance_log_start(TP, 1) == 0
    assert store.log_start_offset(TP) == 3
    assert store.load_partition(TP).log_start_offset == 3
    store.advance_log_start(TP, 99)
    assert store.log_start_offset(TP) == 5 == store.log_end_offset(TP)


def test_a_batch_holding_the_log_start_is_kept(store: LogStore) -> None:
    store.append([AppendWrite(tp=TP, batches=[batch(0, 4), batch(4, 4)])])
    store.advance_log_start(TP, 6)
    assert keys(store) == [4]
    assert offsets_read(store, 6) == [4]  # the batch holding 6, whole


def test_reads_below_the_log_start_serve_nothing(store: LogStore) -> None:
    append(store, 0, 10)
    store.advance_log_start(TP, 6, max_keys=1)  # keys 1..5 left behind
    assert keys(store) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    for fetch in range(6):
        assert offsets_read(store, fetch) == []
    assert offsets_read(store, 6) == [6, 7, 8, 9]


def test_time_lookups_ignore_what_is_below_the_log_start(store: LogStore) -> None:
    stamps = [50, 900, 10, 20, 30, 40, 60]  # a big timestamp in a batch that will go
    for off, ts in enumerate(stamps):
        store.append([AppendWrite(tp=TP, batches=[batch(off, ts=ts)])])
    store.advance_log_start(TP, 2, max_keys=1)  # batch 1 not yet purged
    for purge in (False, True):
        if purge:
            while store.purge(TP):
                pass
        found = store.find_timestamp(TP, 15, 0).found
        assert (found.offset, found.timestamp) == (3, 20)
        found = store.find_timestamp(TP, 55, 0).found
        assert (found.offset, found.timestamp) == (6, 60)
        assert store.find_timestamp(TP, 61, 0).found is None
        found = store.find_timestamp(TP, -2, 0).found  # earliest: from the log start
        assert found.offset == 2
        found = store.find_timestamp(TP, MAX_TIMESTAMP, 0).found  # 900 is gone
        assert (found.offset, found.timestamp) == (6, 60)
    # appends after it are indexed against the largest timestamp so far, as before
    store.append([AppendWrite(tp=TP, batches=[batch(7, ts=1000)])])
    found = store.find_timestamp(TP, MAX_TIMESTAMP, 0).found
    assert (found.offset, found.timestamp) == (7, 1000)


def test_crash_between_deletions_leaves_keys_purged_later(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        s.create_partition(TP)
        append(s, 0, 6)
        assert s.advance_log_start(TP, 5, max_keys=1) > 0
        assert s.leftovers() == []  # known to the caller from the return value
    with open_store(tmp_path) as s:  # the process died before purging
        assert s.leftovers() == [TP]
        loaded = s.load_partition(TP)
        assert (loaded.log_start_offset, loaded.log_end_offset) == (5, 6)
        assert offsets_read(s, 2) == []
        while s.purge(TP, max_keys=2):
            pass
        assert keys(s) == [5]
        assert s.leftovers() == []


def test_a_log_emptied_by_deletion_keeps_its_end(tmp_path: Path) -> None:
    with open_store(tmp_path) as s:
        s.create_partition(TP)
        append(s, 0, 5)
        s.advance_log_start(TP, 5)
        assert keys(s) == []
        assert bounds(s.segments(TP)) == [(3, 5)]  # the active segment is never deleted so
    with open_store(tmp_path) as s:
        loaded = s.load_partition(TP)
        assert (loaded.log_start_offset, loaded.log_end_offset) == (5, 5)
        # retention then deletes it, rolling an empty one at the end (deleteSegments)
        plan, left = s.run_retention(TP, high_watermark=5, retention_ms=-1, retention_bytes=0)
        assert plan.rolled and left == 0
        assert bounds(s.segments(TP)) == [(5, 5)]
        append(s, 5, 1)
        assert s.log_end_offset(TP) == 6


# -- retention plans ------------------------------------------------------------------------------


def test_apply_retention_deletes_the_plans_segments(store: LogStore) -> None:
    append(store, 0, 10)
    plan = delete_old_segments(
        store.segments(TP), high_watermark=10, log_start_offset=0,
        retention_ms=-1, retention_bytes=4 * SIZE, now_ms=NOW,
    )  # fmt: skip
    assert bounds(plan.deleted) == [(0, 3), (3, 6)]
    assert store.apply_retention(TP, plan, max_keys=100) == 0
    assert store.log_start_offset(TP) == 6
    assert bounds(store.segments(TP)) == [(6, 9), (9, 10)]
    assert stored_segments(store) == store.segments(TP)
    assert keys(store) == [6, 7, 8, 9]


def test_apply_retention_keeps_appends_made_after_the_plan(store: LogStore) -> None:
    append(store, 0, 6)
    plan = delete_old_segments(
        store.segments(TP), high_watermark=6, log_start_offset=0,
        retention_ms=-1, retention_bytes=0, now_ms=NOW,
    )  # fmt: skip
    assert plan.rolled
    append(store, 6, 1)  # rolls a new segment at 6: the plan's roll is not needed
    store.apply_retention(TP, plan)
    assert bounds(store.segments(TP)) == [(6, 7)]
    assert keys(store) == [6]
    stale = delete_old_segments(
        store.segments(TP), high_watermark=7, log_start_offset=6,
        retention_ms=-1, retention_bytes=0, now_ms=NOW,
    )  # fmt: skip
    append(store, 7, 1)  # grows the active segment the plan deletes
    with pytest.raises(StorageError):
        store.apply_retention(TP, stale)
    assert keys(store) == [6, 7]


# -- truncation -----------------------------------------------------------------------------------


def test_truncation_keeps_segments(store: LogStore) -> None:
    append(store, 0, 8)
    assert store.truncate(TP, 4, []) == 4  # cuts the segment [3, 6)
    segs = store.segments(TP)
    assert bounds(segs) == [(0, 3), (3, 4)]
    assert segs[-1].size_bytes == SIZE and segs[-1].max_timestamp_ms == NOW + 3
    assert stored_segments(store) == segs
    assert store.truncate(TP, 3, []) == 3  # at a segment's base: it stays, empty
    assert bounds(store.segments(TP)) == [(0, 3), (3, 3)]
    append(store, 3, 4)
    assert bounds(store.segments(TP)) == [(0, 3), (3, 6), (6, 7)]
    store.truncate_fully(TP, 20)
    assert bounds(store.segments(TP)) == [(20, 20)]
    assert stored_segments(store) == store.segments(TP)


# -- the invariant, for any sequence of operations ------------------------------------------------


def check_invariant(store: LogStore) -> None:
    """Segments tile [log start .. LEO) exactly over the stored batches, in LMDB as in memory."""
    start, leo, segs = store.log_start_offset(TP), store.log_end_offset(TP), store.segments(TP)
    assert seg_db.tiles(segs, start, leo), (start, leo, segs)
    assert stored_segments(store) == segs
    with store._lease.txn(write=False) as txn, txn.cursor(db=store._dbs[TP]) as cur:
        live = []
        for raw in cur.iternext(keys=False, values=True):
            base, _e, count = peek_header(bytes(raw))
            if base + count > start:
                live.append((base, base + count, len(raw)))
    assert [b for b, _n, _s in live[1:]] == [n for _b, n, _s in live[:-1]]  # contiguous
    if live:
        assert live[-1][1] == leo
    for s in segs:
        inside = [x for x in live if s.base_offset <= x[0] < s.next_offset]
        assert all(n <= s.next_offset for _b, n, _s in inside)
        if s.base_offset >= start:  # below, a segment counts deleted batches, as Kafka's would
            assert sum(size for _b, _n, size in inside) == s.size_bytes
            assert (inside[0][0] if inside else s.next_offset) == s.base_offset


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(1, 3)),
        st.tuples(st.just("advance"), st.integers(0, 30), st.integers(1, 3)),
        st.tuples(st.just("truncate"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("retain"), st.integers(0, 12 * SIZE), st.integers(1, 3)),
        st.tuples(st.just("purge"), st.just(0), st.integers(1, 3)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    ),
    max_size=25,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_segments_tile_the_log_after_any_operations(tmp_path_factory, ops) -> None:
    path = tmp_path_factory.mktemp("prop")
    s = open_store(path)
    try:
        s.create_partition(TP)
        for op, a, b in ops:
            leo, start = s.log_end_offset(TP), s.log_start_offset(TP)
            if op == "append":
                bs, off = [], leo
                for _ in range(a):
                    bs.append(batch(off, b))
                    off += b
                s.append([AppendWrite(tp=TP, batches=bs, segment_bytes=int(2.5 * SIZE))])
            elif op == "advance":
                s.advance_log_start(TP, start + a % (leo - start + 1), max_keys=b)
            elif op == "truncate" and leo > start:
                s.truncate(TP, start + a % (leo - start), [])
            elif op == "retain":
                s.run_retention(TP, high_watermark=leo, retention_ms=-1, retention_bytes=a,
                                max_keys=b)  # fmt: skip
            elif op == "purge":
                s.purge(TP, max_keys=b)
            elif op == "reopen":
                s.close()
                s = open_store(path)
            check_invariant(s)
        while s.purge(TP, max_keys=2):
            pass
        first, left = s.log_start_offset(TP), keys(s)
        assert offsets_read(s, first)[:1] == left[:1]  # nothing below the batch holding it
        assert s.leftovers() == []
    finally:
        s.close()


BATCHES = st.lists(
    st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(-1, 300)), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(
    shapes=BATCHES,
    cuts=st.lists(st.integers(0, 40), max_size=6),
    segment_bytes=st.integers(1, 120),
    segment_ms=st.integers(0, 200),
    start=st.integers(0, 5),
)
def test_the_stores_append_is_log_retentions_append_batch(
    shapes, cuts, segment_bytes, segment_ms, start
) -> None:
    """segments.append (runs of batches per segment) == append_batch folded batch by batch."""
    batches, off = [], start
    for count, size, ts in shapes:
        batches.append((off, off + count, size, ts))
        off += count
    bounds_ = sorted({0, len(batches), *(min(c, len(batches)) for c in cuts)})
    got = [Segment.new(base_offset=start, now_ms=0)]
    want: tuple[Segment, ...] = tuple(got)
    for i, (lo, hi) in enumerate(zip(bounds_, bounds_[1:], strict=False)):
        now = 100 * (i + 1)  # each append at its own time
        seg_db.append(got, batches[lo:hi], now_ms=now, segment_bytes=segment_bytes,
                      segment_ms=segment_ms)  # fmt: skip
        for base, nxt, size, ts in batches[lo:hi]:
            want = append_batch(want, base_offset=base, next_offset=nxt, size_bytes=size,
                                max_timestamp_ms=ts, now_ms=now, segment_bytes=segment_bytes,
                                segment_ms=segment_ms)  # fmt: skip
    assert tuple(got) == want


def test_retention_ms_by_record_time_through_the_store(store: LogStore) -> None:
    for off in range(6):  # segments [0,3) and [3,6): largest timestamps NOW+2, NOW+5
        store.append([AppendWrite(tp=TP, batches=[batch(off)], segment_bytes=3 * SIZE)])
    plan, left = store.run_retention(
        TP, high_watermark=6, retention_ms=100, retention_bytes=-1, now_ms=NOW + 104
    )
    assert bounds(plan.deleted) == [(0, 3)] and left == 0
    assert (store.log_start_offset(TP), keys(store)) == (3, [3, 4, 5])
    plan, _left = store.run_retention(  # idempotent at the same time (Kafka since 3.0)
        TP, high_watermark=6, retention_ms=100, retention_bytes=-1, now_ms=NOW + 104
    )
    assert plan.deletions == ()


def test_a_deleted_partition_leaves_no_segments(store: LogStore) -> None:
    append(store, 0, 7)
    store.delete_partition(TP)
    store.create_partition(TP)
    assert bounds(store.segments(TP)) == [(0, 0)]
    assert stored_segments(store) == store.segments(TP)
