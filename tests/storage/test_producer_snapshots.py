"""storage/producer_snapshots.py: a snapshot's entries load from the codec's bytes and from the
msgpack lists written before them, and the loaded state knows which snapshot it came from (so
an unchanged state is not written again, core/producer_state.py `snapshot_due`)."""

from __future__ import annotations

import msgpack

from minikafka.common import TopicPartition
from minikafka.core.producer_snapshot_codec import encode_entries
from minikafka.core.producer_state import (
    ProducerBatch,
    SnapshotMark,
    entries_to_doc,
    rebuild,
    snapshot_due,
)
from minikafka.core.records import make_batch
from minikafka.storage import LogStore, StoreConfig, producer_snapshots
from minikafka.storage.log_store import AppendWrite, _db_name


def entries():
    state = rebuild(
        {},
        [
            ProducerBatch(producer_id=1, producer_epoch=0, base_sequence=0, base_offset=0, count=2),
            ProducerBatch(producer_id=2, producer_epoch=3, base_sequence=0, base_offset=2, count=1),
        ],
        log_end_offset=3,
    )
    return state.entries


def test_bytes_and_older_lists_load_alike() -> None:
    for doc in (encode_entries(entries().values()), entries_to_doc(entries())):
        # As stored: msgpack [offset, doc] (bin for bytes), read back by `get`'s unpackb.
        offset, read = msgpack.unpackb(msgpack.packb([3, doc], use_bin_type=True), raw=False)
        state = producer_snapshots.replay(read, offset, [], 3)
        assert state.entries == entries()
        assert state.snapshot_mark == SnapshotMark(offset=3, removals=0)
        assert not snapshot_due(state, 10)  # unchanged since the snapshot it came from


def test_a_batch_after_the_snapshot_changes_the_loaded_state() -> None:
    doc = encode_entries(entries().values())
    tail = make_batch(
        [(0, None, b"v")], base_offset=3, producer_id=1, producer_epoch=0, base_sequence=2
    )
    state = producer_snapshots.replay(doc, 3, [tail], 4)
    assert state.entries[1].last_seq == 2
    assert snapshot_due(state, 4 + len(state.entries))


def test_without_a_usable_snapshot_the_state_has_no_mark() -> None:
    assert producer_snapshots.start_of_replay(None, 0, 5) == (0, None)
    assert producer_snapshots.start_of_replay((9, b"\x01"), 0, 5) == (0, None)  # past the end
    state = producer_snapshots.replay(None, 0, [], 0)
    assert state.entries == {} and state.snapshot_mark is None
    assert snapshot_due(state, 0)


def test_a_snapshot_that_does_not_read_is_passed_over_for_the_whole_log(tmp_path) -> None:
    """A torn or foreign snapshot (bad CRC, not msgpack, wrong shape): the state is rebuilt
    from the log, as Kafka's ProducerStateManager drops a corrupt snapshot; before, the load
    raised and the partition (and so the broker) could not start."""
    good = encode_entries(entries().values())
    torn = good[:-1] + bytes([good[-1] ^ 1])  # the codec's CRC no longer holds
    junk = {
        "torn": msgpack.packb([1, torn], use_bin_type=True),
        "not msgpack": b"\xc1",
        "wrong shape": msgpack.packb([1, 2, 3]),
    }
    for name, raw in junk.items():
        with LogStore(tmp_path / name, StoreConfig(map_size_bytes=1 << 26)) as store:
            store.create_partition(TP)
            store.append([AppendWrite(tp=TP, batches=LOG)])
            with store._lease.txn(write=True) as txn:  # what a torn write would leave
                txn.put(_db_name(TP), raw, db=store._producers_db)
            state = store.load_producers(TP)
        assert state.entries[7].last_seq == 2, name  # from the log's two batches


TP = TopicPartition("t", 0)
LOG = [
    make_batch(
        [(0, None, b"a"), (1, None, b"b")], producer_id=7, producer_epoch=0, base_sequence=0
    ),
    make_batch([(2, None, b"c")], base_offset=2, producer_id=7, producer_epoch=0, base_sequence=2),
]
