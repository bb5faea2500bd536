"""storage/producer_snapshots.py: a snapshot's entries load from the codec's bytes and from the
msgpack lists written before them, and the loaded state knows which snapshot it came from (so
an unchanged state is not written again, core/producer_state.py `snapshot_due`)."""

from __future__ import annotations

import msgpack

from minikafka.core.producer_snapshot_codec import encode_entries
from minikafka.core.producer_state import (
    ProducerBatch,
    SnapshotMark,
    entries_to_doc,
    rebuild,
    snapshot_due,
)
from minikafka.core.records import make_batch
from minikafka.storage import producer_snapshots


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
