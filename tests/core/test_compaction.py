"""Log compaction's decisions (core/compaction.py): what a pass keeps, where it ends, when a log
is cleaned, and that the result does not depend on how the passes fell (which is what lets
every replica clean its own log and still hold the leader's bytes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.core import record_batch_v2 as v2
from minikafka.core.compaction import (
    CleanerConfig,
    Outcome,
    build_offset_map,
    clean_batch,
    cleanable,
    group_segments,
    needs_cleaning,
)
from minikafka.core.log_retention import Segment
from minikafka.core.records import decode_records, iter_batches, make_batch, peek_header

DAY = 86_400_000
T0 = 1_700_000_000_000


def kbatch(base: int, records, *, compression: int = v2.NONE, control: bool = False) -> bytes:
    """A RecordBatch v2 of (key, value) records at offsets base.., timestamps T0 + offset."""
    raw = v2.build(
        [(T0 + base + i, k, v) for i, (k, v) in enumerate(records)],
        base_offset=base,
        compression=compression,
    )
    if control:  # set the control bit, CRC recomputed
        h = v2.read_header(raw)
        body = bytearray(raw)
        body[21:23] = (h.attributes | v2.CONTROL).to_bytes(2, "big")
        import crc32c

        body[17:21] = crc32c.crc32c(bytes(body[21:])).to_bytes(4, "big")
        raw = bytes(body)
    return raw


def records_of(raw: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, None if r.null_value else r.value)
        for b in iter_batches(raw)
        for r in decode_records(b)
    ]


def clean(log: list[bytes], first_dirty: int, end: int, now_ms: int, retention: int = DAY):
    """A whole pass over `log` (batches) up to `end`, as server/log_cleaner.py runs it."""
    offsets, end = build_offset_map(log, first_dirty=first_dirty, clean_end=end, max_keys=10**6)
    out = []
    for raw in log:
        if peek_header(raw)[0] >= end:
            out.append(raw)
            continue
        c = clean_batch(raw, offsets, now_ms=now_ms, delete_retention_ms=retention)
        if c.outcome is Outcome.KEPT:
            out.append(raw)
        elif c.outcome is Outcome.REWRITTEN:
            out.append(c.raw)
    return out


# ---------------------------------------------------------------------------- one pass


def test_the_last_record_of_each_key_survives_with_its_offset():
    log = [kbatch(0, [(b"a", b"1"), (b"b", b"1")]), kbatch(2, [(b"a", b"2"), (b"c", b"1")])]
    out = clean(log, 0, 4, T0)
    assert [records_of(b) for b in out] == [
        [(1, b"b", b"1")],
        [(2, b"a", b"2"), (3, b"c", b"1")],
    ]
    # The rewritten batch keeps its base offset and its last offset (the gap at 0 is left).
    assert peek_header(out[0])[0::2] == (0, 2)
    assert v2.read_header(out[0]).record_count == 1


def test_a_batch_left_empty_disappears_and_one_untouched_keeps_its_bytes():
    log = [kbatch(0, [(b"a", b"1")]), kbatch(1, [(b"a", b"2")]), kbatch(2, [(b"z", b"1")])]
    out = clean(log, 0, 3, T0)
    assert out == log[1:]


def test_records_at_or_past_the_clean_end_are_not_touched_and_not_in_the_map():
    log = [kbatch(0, [(b"a", b"1")]), kbatch(1, [(b"a", b"2")])]
    assert clean(log, 0, 1, T0) == log  # a@1 is past the end: a@0 is the last below it


def test_the_clean_section_loses_what_the_dirty_section_overwrites():
    # [0, 2) was cleaned before; the dirty [2, 4) holds a new `a`: the clean `a` goes.
    log = [kbatch(0, [(b"a", b"1"), (b"b", b"1")]), kbatch(2, [(b"a", b"2"), (b"c", b"1")])]
    out = clean(log, 2, 4, T0)
    assert records_of(b"".join(out)) == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]


def test_a_record_without_a_key_is_removed():
    log = [kbatch(0, [(None, b"x"), (b"a", b"1")])]
    assert records_of(clean(log, 0, 2, T0)[0]) == [(1, b"a", b"1")]


def test_a_tombstone_is_kept_for_delete_retention_ms_by_its_own_timestamp():
    log = [kbatch(0, [(b"a", b"1")]), kbatch(1, [(b"a", None)])]
    written = T0 + 1  # the tombstone's timestamp
    kept = clean(log, 0, 2, written + 999, retention=1000)
    assert records_of(b"".join(kept)) == [(1, b"a", None)]
    assert clean(log, 0, 2, written + 1000, retention=1000) == []


def test_a_tombstones_age_is_its_own_not_its_batchs():
    # The batch's max timestamp is b's (T0 + 1); a pass may lower it by removing b, so the
    # tombstone's fate must not hang on it (else replicas that cleaned in other steps differ).
    log = [kbatch(0, [(b"a", None), (b"b", b"1")])]
    assert records_of(b"".join(clean(log, 0, 2, T0 + 1000, retention=1000))) == [(1, b"b", b"1")]


def test_control_batches_are_kept_as_they_are():
    marker = kbatch(1, [(b"\x00\x00\x00\x00", b"")], control=True)
    log = [kbatch(0, [(b"a", b"1")]), marker, kbatch(2, [(b"a", b"2")])]
    assert clean(log, 0, 3, T0) == [marker, log[2]]


@pytest.mark.parametrize("codec", [v2.GZIP, v2.SNAPPY, v2.LZ4, v2.ZSTD])
def test_a_compressed_batch_is_rebuilt_with_its_codec_and_the_same_bytes_every_time(codec):
    log = [kbatch(0, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], compression=codec)]
    one, two = clean(log, 0, 3, T0), clean(log, 0, 3, T0 + 5)
    assert one == two  # no clock in the bytes (gzip's mtime is 0)
    assert v2.read_header(one[0]).compression == codec
    assert records_of(one[0]) == [(1, b"b", b"1"), (2, b"a", b"2")]


def test_a_native_batch_is_rewritten_as_a_v2_batch_with_the_same_offsets():
    native = make_batch([(T0, b"a", b"1"), (T0, b"b", b"1"), (T0, b"a", b"2")], base_offset=7)
    out = clean([native], 0, 10, T0)
    assert v2.is_v2(out[0]) and peek_header(out[0]) == (7, -1, 3)
    assert records_of(out[0]) == [(8, b"b", b"1"), (9, b"a", b"2")]
    untouched = make_batch([(T0, b"a", b"1")], base_offset=7)
    assert clean([untouched], 0, 10, T0) == [untouched]  # nothing removed: format kept


def test_a_pass_cleans_whole_batches_only():
    log = [kbatch(0, [(b"a", b"1"), (b"a", b"2")]), kbatch(2, [(b"a", b"3")])]
    offsets, end = build_offset_map(log, first_dirty=0, clean_end=1, max_keys=10)
    assert end == 0 and not offsets.offsets  # the batch holding offset 1 is past the end
    assert clean(log, 0, 1, T0) == log


def test_a_native_tombstone_deletes_its_key_like_a_kafka_clients():
    native = make_batch([(T0, b"a", b"1"), (T0, b"a", None), (T0, b"b", b"1")])
    kept = clean([native], 0, 3, T0)
    assert records_of(kept[0]) == [(1, b"a", None), (2, b"b", b"1")]
    assert records_of(clean([native], 0, 3, T0 + DAY)[0]) == [(2, b"b", b"1")]


def test_a_full_offset_map_ends_the_pass_early():
    log = [kbatch(0, [(b"a", b"1"), (b"b", b"1")]), kbatch(2, [(b"c", b"1"), (b"d", b"1")])]
    offsets, end = build_offset_map(log, first_dirty=0, clean_end=4, max_keys=3)
    assert end == 2 and set(offsets.offsets) == {b"a", b"b"}


# ---------------------------------------------------------------------------- when and where


def seg(base: int, nxt: int, size: int, ts: int = T0) -> Segment:
    return Segment(
        base_offset=base,
        next_offset=nxt,
        size_bytes=size,
        max_timestamp_ms=ts,
        first_batch_timestamp_ms=ts,
        created_ms=0,
        last_modified_ms=0,
    )


SEGS = (seg(0, 10, 100, T0), seg(10, 20, 100, T0 + 10), seg(20, 30, 100, T0 + 20))


def test_the_clean_end_is_the_active_segments_base_the_hw_and_the_lag():
    cfg = CleanerConfig()
    at = dict(log_start_offset=0, now_ms=T0 + 100, config=cfg)
    assert cleanable(SEGS, checkpoint=None, high_watermark=30, **at).clean_end == 20
    assert cleanable(SEGS, checkpoint=None, high_watermark=15, **at).clean_end == 15
    lagged = CleanerConfig(min_compaction_lag_ms=95)  # segment 2's records are 90 ms old
    c = cleanable(SEGS, checkpoint=None, high_watermark=30, log_start_offset=0,
                  now_ms=T0 + 100, config=lagged)  # fmt: skip
    assert c.clean_end == 10


def test_a_log_is_cleaned_past_its_dirty_ratio_or_its_max_lag():
    cfg = CleanerConfig(min_cleanable_ratio=0.5)
    at = dict(log_start_offset=0, high_watermark=30, now_ms=T0 + 100)
    half = cleanable(SEGS, checkpoint=10, config=cfg, **at)  # 100 clean, 100 dirty
    assert (half.first_dirty, half.clean_end, half.ratio) == (10, 20, 0.5)
    assert not needs_cleaning(half, cfg)  # Kafka: strictly more than the ratio
    assert needs_cleaning(cleanable(SEGS, checkpoint=0, config=cfg, **at), cfg)
    forced = CleanerConfig(min_cleanable_ratio=0.9, max_compaction_lag_ms=50)
    assert needs_cleaning(cleanable(SEGS, checkpoint=10, config=forced, **at), forced)
    done = cleanable(SEGS, checkpoint=20, config=cfg, **at)
    assert done.clean_end == 20 and not needs_cleaning(done, cfg)


def test_a_checkpoint_outside_the_log_starts_again_from_the_log_start():
    cfg = CleanerConfig()
    for checkpoint in (None, 35, 3):
        c = cleanable(SEGS, checkpoint=checkpoint, log_start_offset=5, high_watermark=30,
                      now_ms=T0, config=cfg)  # fmt: skip
        assert c.first_dirty == 5


def test_cleaned_segments_are_grouped_within_segment_bytes():
    small = (seg(0, 10, 40), seg(10, 20, 0), seg(20, 30, 70), seg(30, 40, 10))
    out = group_segments(small, segment_bytes=100)
    assert [(s.base_offset, s.next_offset, s.size_bytes) for s in out] == [
        (0, 20, 40),
        (20, 40, 80),
    ]


# ---------------------------------------------------------------------------- properties

logs = st.lists(
    st.lists(
        st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]), st.booleans()),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=12,
)


def write(spec) -> list[bytes]:
    out, offset = [], 0
    for batch in spec:
        recs = [
            (k, None if tomb else f"v{offset + i}".encode()) for i, (k, tomb) in enumerate(batch)
        ]
        out.append(kbatch(offset, recs))
        offset += len(batch)
    return out


def boundaries(spec) -> list[int]:
    """Where a pass may end: between batches (the HW and segment bases are there)."""
    out = [0]
    for batch in spec:
        out.append(out[-1] + len(batch))
    return out


@settings(max_examples=200, derandomize=True, deadline=None)
@given(logs, st.data())
def test_passes_in_any_steps_give_the_bytes_of_one_pass(spec, data):
    """Cleaning up to A and then up to B leaves the bytes one pass up to B leaves (and at any
    time: tombstones go by their own timestamps), so replicas that cleaned at different moments
    hold the same log once they have cleaned to the same point."""
    log = write(spec)
    b = data.draw(st.sampled_from(boundaries(spec)))
    a = data.draw(st.sampled_from([x for x in boundaries(spec) if x <= b]))
    t1 = data.draw(st.integers(0, 40))
    t2 = data.draw(st.integers(t1, 40))
    stepwise = clean(clean(log, 0, a, T0 + t1, retention=10), a, b, T0 + t2, retention=10)
    assert stepwise == clean(log, 0, b, T0 + t2, retention=10)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(logs, st.data())
def test_a_pass_keeps_exactly_the_last_record_of_each_key_below_its_end(spec, data):
    log = write(spec)
    end = data.draw(st.sampled_from(boundaries(spec)))
    before = records_of(b"".join(log))
    last = {k: o for o, k, _v in before if o < end and k is not None}
    expected = [
        (o, k, v)
        for o, k, v in before
        if o >= end or (k is not None and last[k] == o and v is not None)
    ]
    # A tombstone written at T0 + o is gone once now >= T0 + o + retention: all are, here.
    assert records_of(b"".join(clean(log, 0, end, T0 + 10**6, retention=1))) == expected


def test_a_compacted_offsets_partition_loads_the_same_groups_from_far_fewer_records():
    """__consumer_offsets is created compacted (server/groups.py): 500 auto-commits of 4
    partitions by 2 groups, and a tombstone for one group's partition, replay (Kafka's
    doLoadGroupsAndOffsets, core/group/load.py) to the same offsets after a pass, from one
    record per key."""
    from minikafka.core.group.load import replay
    from minikafka.core.group.messages import OffsetAndMetadata
    from minikafka.core.group.offsets_log import commit_records, offset_commit_key

    log, offset = [], 0
    for n in range(500):
        for group in ("g1", "g2"):
            commits = {("t", p): OffsetAndMetadata(offset=n * 10 + p) for p in range(4)}
            records = commit_records(group, commits)
            log.append(kbatch(offset, records))
            offset += len(records)
    log.append(kbatch(offset, [(offset_commit_key("g2", "t", 3), None)]))
    end = offset + 1

    def loaded(batches):
        return replay([(o, k, v) for b in batches for o, k, v in records_of(b)]).offsets

    cleaned = clean(log, 0, end, T0)
    assert loaded(cleaned) == loaded(log)
    assert loaded(log)["g1"][("t", 3)].offset == 4993 and ("t", 3) not in loaded(log)["g2"]
    assert sum(len(records_of(b)) for b in cleaned) == 8  # 7 live commits and the tombstone


records_st = st.lists(
    st.tuples(
        st.integers(-(10**6), 10**6),  # timestamp delta, either way
        st.one_of(st.none(), st.binary(max_size=200)),  # keys past 63 bytes take 2-byte lengths
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                 max_size=2),
    ),
    min_size=1,
    max_size=20,
)  # fmt: skip


@settings(max_examples=200, derandomize=True, deadline=None)
@given(records_st, st.sampled_from([v2.NONE, v2.GZIP]))
def test_the_cleaners_record_reader_agrees_with_the_consumers(records, codec):
    """raw_records (the cleaner's fast reader) against decode_records, on batches Kafka's own
    client library writes (kafka-python's builder: headers, null keys and values, any lengths)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24,
    )  # fmt: skip
    for i, (delta, key, value, headers) in enumerate(records):
        builder.append(i, T0 + delta, key, value, headers)
    raw = bytes(builder.build())
    _header, got = v2.raw_records(raw)
    want = v2.decode_records(raw)
    assert [(r.offset_delta, r.timestamp_ms, r.key, r.null_value) for r in got] == [
        (w.offset_delta, w.timestamp_ms, w.key, w.value is None) for w in want
    ]
