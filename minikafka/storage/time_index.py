"""The time index of every partition log, in one LMDB database beside the logs (KIP-79).

Kafka keeps a `TimeIndex` file per segment; here one named database, `time-index`, holds the
entries of every partition (a database per partition would double the environment's named
databases, which `max.broker.partitions` bounds). Key = 2-byte length + the log's database
name (`log/<topic>/<partition>`), then the entry's timestamp and base offset, 8 bytes
big-endian each (both >= 0: only timestamps above NO_TIMESTAMP are indexed); value empty.
Entries of one partition are therefore sorted by timestamp, which is also their offset order
(core/time_index.py says why), and "the first entry whose timestamp is >= T" is one
`set_range`: a descent of the B-tree, O(log n) pages.

storage/log_store.py calls these inside its own transactions, so the index always matches the
log of the same commit: entries added with the batches that raise the largest timestamp,
removed with the batches a truncation removes, dropped with the log. A partition whose
`partition-meta` lacks `TIME_INDEX_KEY` (a data dir from before the index) is indexed from its
log when the store opens.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

import lmdb

from minikafka.core import time_index as ti
from minikafka.core.records import peek_header
from minikafka.core.time_index import NO_TIMESTAMP, IndexEntry

DB_NAME = b"time-index"
TIME_INDEX_KEY = "time_index"  # in a partition's meta: the index format it has (1)
TIME_INDEX_VERSION = 1
_LEN = struct.Struct(">H")
_ENTRY = struct.Struct(">QQ")
_PAST_ANY_ENTRY = b"\xff" * _ENTRY.size  # timestamps are < 2**63: every entry sorts before it


def prefix(log_name: bytes) -> bytes:
    """The key prefix of one partition's entries (length first: no name prefixes another)."""
    return _LEN.pack(len(log_name)) + log_name


def _entry(key: Any, pre: bytes) -> IndexEntry | None:
    key = bytes(key)
    if len(key) != len(pre) + _ENTRY.size or not key.startswith(pre):
        return None
    ts, base = _ENTRY.unpack_from(key, len(pre))
    return IndexEntry(timestamp=ts, base_offset=base)


def put(txn: lmdb.Transaction, db: Any, pre: bytes, entries: Iterable[IndexEntry]) -> None:
    for e in entries:
        txn.put(pre + _ENTRY.pack(e.timestamp, e.base_offset), b"", db=db)


def add(txn: lmdb.Transaction, db: Any, pre: bytes, batches: Sequence[bytes], top: int) -> int:
    """Index the appended `batches` that raise the log's largest timestamp `top`; the new one."""
    maxes = ((peek_header(raw)[0], ti.safe_max_timestamp(raw)) for raw in batches)
    return add_maxes(txn, db, pre, maxes, top)


def add_maxes(
    txn: lmdb.Transaction, db: Any, pre: bytes, maxes: Iterable[tuple[int, int]], top: int
) -> int:
    """`add` given each batch's (base offset, max timestamp), already computed by the caller."""
    entries = ti.new_entries(maxes, top)
    put(txn, db, pre, entries)
    return entries[-1].timestamp if entries else top


def rebuild(txn: lmdb.Transaction, db: Any, pre: bytes, raws: Iterable[Any]) -> None:
    """Replace the partition's entries with those of its whole log (`raws`, in offset order)."""
    drop(txn, db, pre)
    put(txn, db, pre, ti.entries_of(map(bytes, raws)))


def first_at_or_after(cur: lmdb.Cursor, pre: bytes, target: int) -> IndexEntry | None:
    """The partition's first entry whose timestamp is >= target (one B-tree descent)."""
    if not cur.set_range(pre + _ENTRY.pack(max(target, 0), 0)):
        return None
    return _entry(cur.key(), pre)


def last(cur: lmdb.Cursor, pre: bytes) -> IndexEntry | None:
    """The partition's last entry: its timestamp is the log's largest."""
    found = cur.prev() if cur.set_range(pre + _PAST_ANY_ENTRY) else cur.last()
    return _entry(cur.key(), pre) if found else None


def largest(txn: lmdb.Transaction, db: Any, pre: bytes) -> int:
    """The log's largest indexed timestamp, NO_TIMESTAMP when it has none."""
    with txn.cursor(db=db) as cur:
        entry = last(cur, pre)
    return NO_TIMESTAMP if entry is None else entry.timestamp


def truncate(txn: lmdb.Transaction, db: Any, pre: bytes, log_end_offset: int) -> int:
    """Remove the entries of batches at or past `log_end_offset` (TimeIndex.truncateTo); they
    are the last ones. Returns the largest timestamp left."""
    with txn.cursor(db=db) as cur:
        while (entry := last(cur, pre)) is not None and entry.base_offset >= log_end_offset:
            cur.delete()
        return NO_TIMESTAMP if entry is None else entry.timestamp


def delete_below(txn: lmdb.Transaction, db: Any, pre: bytes, boundary: int, max_keys: int) -> int:
    """Forget the entries of the batches wholly below the log start offset (those whose base is
    below `boundary`, the base of the first batch kept), at most `max_keys` keys; returns how
    many are left to delete.

    Kafka's time indexes go with their segments, and the index of the first segment kept knows
    nothing of the ones before it. Here an entry is the log's largest timestamp *so far*, so the
    last entry below `boundary` is not deleted but moved to `boundary`: (its timestamp, boundary)
    says that the batches from `boundary` on may hold timestamps up to it, which keeps a lookup
    right (a search from `boundary` checks each batch's own max) and keeps `largest` what the
    appends that follow index against. Its timestamp may belong to a deleted batch:
    `LogStore.find_timestamp` checks that before answering MAX_TIMESTAMP from the last entry.
    """
    with txn.cursor(db=db) as cur:
        below: list[IndexEntry] = []
        found = cur.set_range(pre)
        while found and (e := _entry(cur.key(), pre)) is not None and e.base_offset < boundary:
            below.append(e)
            found = cur.next()
    if not below:
        return 0
    doomed = below[:-1][:max_keys]
    for e in doomed:
        txn.delete(pre + _ENTRY.pack(e.timestamp, e.base_offset), db=db)
    left = len(below) - len(doomed)  # the last one still to move
    if left == 1 and len(doomed) < max_keys:
        last = below[-1]
        txn.delete(pre + _ENTRY.pack(last.timestamp, last.base_offset), db=db)
        txn.put(pre + _ENTRY.pack(last.timestamp, boundary), b"", db=db)
        left = 0
    return left


def drop(txn: lmdb.Transaction, db: Any, pre: bytes) -> None:
    """Remove every entry of the partition."""
    with txn.cursor(db=db) as cur:
        if cur.set_range(pre):
            while _entry(cur.key(), pre) is not None:
                if not cur.delete() or not cur.key():
                    return
