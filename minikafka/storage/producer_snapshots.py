"""Idempotent producers' state on disk: snapshots and the log tail after them (KIP-98).

The named database `producer-snapshots` holds per partition (the key of its log's name) a
msgpack `[offset, entries]`: the state as of the log up to `offset`, like Kafka's
`<offset>.snapshot` files. `entries` is the bytes of core/producer_snapshot_codec.py (or, if
written before it, core/producer_state.py's `entries_to_doc` lists: both load). The state of a
log is that snapshot
plus the producer fields of the batches from its offset on (ProducerStateManager's log
recovery); without a usable snapshot, the whole log. Used by `LogStore` inside its
transactions (lmdb stays in this package).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import lmdb
import msgpack

from minikafka.core.producer_snapshot_codec import decode_entries
from minikafka.core.producer_state import (
    ProducerBatch,
    ProducerStateManager,
    SnapshotMark,
    entries_from_doc,
    rebuild,
)
from minikafka.core.records import peek_header, peek_producer

DB_NAME = b"producer-snapshots"
# What a snapshot that does not read raises (its msgpack, its shape, or the codec's CRC and
# version: SnapshotFormatError is a ValueError): the store then replays the whole log.
UNREADABLE = (ValueError, TypeError, msgpack.UnpackException)


def get(txn: lmdb.Transaction, db: Any, key: bytes) -> tuple[int, Any] | None:
    raw = txn.get(key, db=db)
    if raw is None:
        return None
    offset, doc = msgpack.unpackb(raw, raw=False)
    return offset, doc


def put(txn: lmdb.Transaction, db: Any, key: bytes, offset: int, doc: bytes | list[Any]) -> None:
    """`doc`: encode_entries' bytes (what the broker writes), or a list (an empty state)."""
    txn.put(key, msgpack.packb([offset, doc], use_bin_type=True), db=db)


def start_of_replay(snapshot: tuple[int, Any] | None, log_start: int, leo: int) -> tuple[int, Any]:
    """(offset to replay from, the snapshot's entries or None): the snapshot if it lies in the
    log, else None and the whole log."""
    if snapshot is None or not log_start <= snapshot[0] <= leo:
        return log_start, None
    return snapshot


def replay(doc: Any, offset: int, raw_batches: Iterable[Any], leo: int) -> ProducerStateManager:
    """The state: the snapshot's entries (None: no snapshot), then every batch at or after
    `offset`. The state remembers the snapshot it started from (`snapshot_mark`), so an
    unchanged state is not written again (core/producer_state.py `snapshot_due`)."""
    tail = []
    for raw in raw_batches:
        base, _epoch, count = peek_header(raw)
        pid, p_epoch, seq = peek_producer(raw)
        if pid >= 0 and base >= offset:
            tail.append(
                ProducerBatch(
                    producer_id=pid,
                    producer_epoch=p_epoch,
                    base_sequence=seq,
                    base_offset=base,
                    count=count,
                )
            )
    if doc is None:
        entries = {}
    elif isinstance(doc, bytes):
        entries = decode_entries(doc)
    else:
        entries = entries_from_doc(doc)
    state = rebuild(entries, tail, log_end_offset=leo)
    if doc is not None:
        state.snapshot_mark = SnapshotMark(offset=offset, removals=0)
    return state
