"""The time index beside the logs (storage/time_index.py, LogStore.find_timestamp), on real LMDB.

The index follows the log through every change (append, truncation, a full truncation,
deletion), is built when a store opens a data dir from before it, and a lookup reads one index
entry and one batch, however long the log (counted, not timed).
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.common import TopicPartition
from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import make_batch
from minikafka.core.time_index import batch_records, entries_of
from minikafka.storage import AppendWrite, LogStore, StoreConfig, time_index
from minikafka.storage.log_store import MAX_TIMESTAMP, _db_name

TP = TopicPartition("clicks", 0)
OTHER = TopicPartition("clicks", 1)
FAST = StoreConfig(map_size_bytes=1 << 32, sync=False)


def log_of(shapes: list[list[int]], start: int = 0) -> list[bytes]:
    out, base = [], start
    for i, stamps in enumerate(shapes):
        build = v2.build if i % 2 else make_batch
        out.append(build([(ts, None, b"v") for ts in stamps], base_offset=base))
        base += len(stamps)
    return out


def model(log: list[bytes], target: int) -> tuple[int, int] | None:
    for raw in log:
        for offset, ts in batch_records(raw):
            if ts >= target:
                return offset, ts
    return None


def find(store: LogStore, target: int, tp: TopicPartition = TP) -> tuple[int, int] | None:
    found = store.find_timestamp(tp, target, 0).found
    return None if found is None else (found.offset, found.timestamp)


def entries(store: LogStore, tp: TopicPartition = TP) -> list:
    pre = time_index.prefix(_db_name(tp))
    with store._lease.txn(write=False) as txn, txn.cursor(db=store._time_db) as cur:
        out = []
        found = cur.set_range(pre)
        while found and (e := time_index._entry(cur.key(), pre)) is not None:
            out.append(e)
            found = cur.next()
        return out


def test_appends_index_the_batches_that_raise_the_largest_timestamp(tmp_path):
    log = log_of([[50, 5], [10], [30, 70], [60], [71]])
    with LogStore(tmp_path, FAST) as store:
        store.create_partition(TP)
        store.create_partition(OTHER)
        store.append([AppendWrite(tp=TP, batches=log[:2])])
        store.append([AppendWrite(tp=TP, batches=log[2:]), AppendWrite(tp=OTHER, batches=log[:1])])
        assert entries(store) == entries_of(log)
        assert [e.timestamp for e in entries(store)] == [50, 70, 71]
        assert entries(store, OTHER) == entries_of(log[:1])  # partitions do not mix
        assert find(store, 55) == (4, 70)
        assert find(store, 72) is None
        assert find(store, MAX_TIMESTAMP) == (6, 71)
        assert find(store, MAX_TIMESTAMP, OTHER) == (0, 50)


def test_truncation_cuts_the_index_with_the_log(tmp_path):
    log = log_of([[10], [20], [30], [40]])
    with LogStore(tmp_path, FAST) as store:
        store.create_partition(TP)
        store.append([AppendWrite(tp=TP, batches=log)])
        assert store.truncate(TP, 2, []) == 2  # a follower's or an epoch's truncation
        assert entries(store) == entries_of(log[:2])
        assert find(store, 25) is None  # 30 and 40 are gone
        assert find(store, MAX_TIMESTAMP) == (1, 20)
        # The log grows again from 2 with smaller timestamps: indexed against what is left.
        again = log_of([[15], [25]], start=2)
        store.append([AppendWrite(tp=TP, batches=again)])
        assert entries(store) == entries_of(log[:2] + again)
        assert find(store, 21) == (3, 25)


def test_full_truncation_and_deletion_drop_the_index(tmp_path):
    with LogStore(tmp_path, FAST) as store:
        store.create_partition(TP)
        store.create_partition(OTHER)
        store.append([AppendWrite(tp=TP, batches=log_of([[10], [20]]))])
        store.append([AppendWrite(tp=OTHER, batches=log_of([[10]]))])
        store.truncate_fully(TP, 100)
        assert entries(store) == [] and find(store, 0) is None
        store.append([AppendWrite(tp=TP, batches=log_of([[5]], start=100))])
        assert find(store, 0) == (100, 5)  # indexed from scratch, not against 20
        store.delete_partition(OTHER)
        assert entries(store, OTHER) == []
        store.create_partition(OTHER)
        assert find(store, 0, OTHER) is None


def test_the_index_is_kept_across_reopen_and_built_for_an_old_data_dir(tmp_path):
    log = log_of([[30, 10], [20], [40]])
    with LogStore(tmp_path, FAST) as store:
        store.create_partition(TP)
        store.append([AppendWrite(tp=TP, batches=log)])
        # What a data dir from before the index looks like: no entries, no mark in the meta.
        with store._lease.txn(write=True) as txn:
            time_index.drop(txn, store._time_db, time_index.prefix(_db_name(TP)))
            meta = store._get_meta(txn, TP)
            del meta[time_index.TIME_INDEX_KEY]
            store._put_meta(txn, TP, meta)
        assert find(store, 35) is None  # the missing index hides the record
    with LogStore(tmp_path, FAST) as store:
        assert entries(store) == entries_of(log)
        assert find(store, 35) == (3, 40)
        # ... and the largest timestamp it found is the one the next append continues from.
        store.append([AppendWrite(tp=TP, batches=log_of([[39], [41]], start=4))])
        assert [e.timestamp for e in entries(store)] == [30, 40, 41]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    shapes=st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=4), max_size=10),
    cut=st.integers(0, 40),
    targets=st.lists(st.integers(0, 55), min_size=1, max_size=5),
)
def test_lookups_equal_a_scan_of_the_records_through_appends_and_truncations(
    tmp_path_factory, shapes, cut, targets
):
    log = log_of(shapes)
    with LogStore(tmp_path_factory.mktemp("s"), FAST) as store:
        store.create_partition(TP)
        for raw in log:  # one append per batch, as a follower might
            store.append([AppendWrite(tp=TP, batches=[raw])])
        leo = store.truncate(TP, cut, [])
        kept = [raw for raw in log if batch_records(raw)[-1][0] < leo]
        for target in targets:
            assert find(store, target) == model(kept, target)


def test_a_lookup_reads_one_entry_and_one_batch_of_a_long_log(tmp_path):
    """The O(log n) claim, counted: on 20,000 batches a lookup reads 1 index entry (one
    `set_range`: a B-tree descent of `depth` pages) and 1 batch, where a scan reads them all."""
    n = 20_000
    rng = random.Random(79)
    with LogStore(tmp_path, FAST) as store:
        store.create_partition(TP)
        batches, ts = [], 1_000
        for base in range(n):
            ts += rng.randint(0, 3)  # small steps: many batches share a max, none goes back
            batches.append(make_batch([(ts - rng.randint(0, 5), None, b"v")], base_offset=base))
        for i in range(0, n, 1000):
            store.append([AppendWrite(tp=TP, batches=batches[i : i + 1000])])
        for target in (1_000, ts // 2, ts):
            got = store.find_timestamp(TP, target, 0)
            assert got.found is not None
            assert (got.index_entries_read, got.batches_read) == (1, 1)
            assert (got.found.offset, got.found.timestamp) == model(batches, target)
        scan = store.find_timestamp(TP, -(10**12), 0)  # a negative target scans from the start
        assert scan.batches_read == 1  # ... and stops at the first batch
        miss = store.find_timestamp(TP, ts + 1, 0)
        assert miss.found is None and miss.batches_read == 0
        with store._lease.txn(write=False) as txn:
            depth = txn.stat(store._time_db)["depth"]
        assert depth <= 3  # ~n/100 entries per leaf page: log(n) pages per descent
