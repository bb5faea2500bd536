"""The store's side of compaction (storage/log_store.py `apply_cleaning`, `batches_from`,
`cleaner_checkpoint`): a cleaner's window is written only over the batches it read, the
segments' sizes follow, and a truncation below the checkpoint pulls it back."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.common import TopicPartition
from minikafka.core import record_batch_v2 as v2
from minikafka.storage import AppendWrite, LogStore, StoreConfig

TP = TopicPartition("c", 0)
MiB = 1 << 20


def kb(base: int, key: bytes, value: bytes = b"v" * 100) -> bytes:
    return v2.build([(1000 + base, key, value)], base_offset=base)


@pytest.fixture
def store(tmp_path: Path):
    with LogStore(tmp_path / "node", StoreConfig(map_size_bytes=1 << 26)) as s:
        s.create_partition(TP)
        s.append([AppendWrite(tp=TP, batches=[kb(i, b"k%d" % (i % 2)) for i in range(6)])])
        yield s


def test_a_window_replaces_and_removes_batches_and_the_segment_shrinks(store: LogStore):
    old = store.batches_from(TP, 0, end=6, max_batches=10)
    size = store.segments(TP)[0].size_bytes
    assert store.apply_cleaning(TP, [(old[0], None), (old[1], kb(1, b"k1", b"x"))])
    assert store.batches_from(TP, 0, end=6, max_batches=10)[:2] == [kb(1, b"k1", b"x"), old[2]]
    shrunk = len(old[0]) + len(old[1]) - len(kb(1, b"k1", b"x"))
    assert store.segments(TP)[0].size_bytes == size - shrunk
    assert store.cleaner_checkpoint(TP) is None


def test_a_window_over_batches_that_changed_writes_nothing(store: LogStore):
    old = store.batches_from(TP, 0, end=6, max_batches=10)
    store.truncate(TP, 4, [])
    store.append([AppendWrite(tp=TP, batches=[kb(4, b"new")])])
    changed = store.batches_from(TP, 4, end=6, max_batches=1)
    assert changed != old[4:5]
    assert not store.apply_cleaning(TP, [(old[0], None), (old[4], None)])
    assert store.batches_from(TP, 0, end=6, max_batches=10) == [*old[:4], *changed]


def test_batches_deleted_by_retention_meanwhile_are_passed_over(store: LogStore):
    old = store.batches_from(TP, 0, end=6, max_batches=10)
    store.advance_log_start(TP, 2)
    assert store.apply_cleaning(TP, [(old[1], None), (old[2], None)])
    assert store.batches_from(TP, 0, end=6, max_batches=10) == old[3:]


def test_the_checkpoint_is_written_last_and_a_truncation_below_it_pulls_it_back(store: LogStore):
    assert store.apply_cleaning(TP, [], checkpoint=5, segment_bytes=MiB)
    assert store.cleaner_checkpoint(TP) == 5
    store.truncate(TP, 3, [])
    assert store.cleaner_checkpoint(TP) == 3  # LogCleaner.maybeTruncateCheckpoint


def test_batches_from_never_reads_below_the_log_start_nor_past_the_end(store: LogStore):
    store.advance_log_start(TP, 2)
    got = store.batches_from(TP, 0, end=4, max_batches=10)
    assert [v2.read_header(b).base_offset for b in got] == [2, 3]
    assert len(store.batches_from(TP, 0, end=6, max_batches=1)) == 1
