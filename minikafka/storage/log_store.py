"""The partition logs of one node, in one LMDB environment: batches, epochs, checkpoints.

This module (with `env` and `metadata_store`) is the only place lmdb is imported. It owns, in
the environment of the node's data dir (storage/env.py, shared with `MetadataStore`):

- one named database per partition log, `log/<topic>/<partition>`: key = 8-byte big-endian base
  offset, value = the whole batch bytes (header included, payload never decoded here);
- the named database `partition-meta`: per partition (same key as the log's name) a msgpack map
  `{"log_start_offset", "high_watermark", "epochs": [[epoch, start_offset], ...]}`;
- the named database `producer-snapshots` (storage/producer_snapshots.py): per partition the
  idempotent producers' state as of an offset, written with the HW checkpoint. A load rebuilds
  the state from it plus the producer fields of the batches after it (only those: the scan is
  bounded by one checkpoint interval), or from the whole log if there is none; a truncation
  below it deletes it;
- the named database `time-index` (storage/time_index.py): per partition the entries (largest
  timestamp so far, base offset) of the batches that raised it, written in the transaction
  that appends them, cut by the one that truncates them, built from the log when the store
  opens a partition that has none; `find_timestamp` answers ListOffsets by time (KIP-79) and
  MAX_TIMESTAMP (KIP-734) with one B-tree descent and, as a rule, one batch read.

Rules: every public method runs exactly ONE transaction and holds none across calls (the Trio
shell calls them through `trio.to_thread.run_sync`). The log end offset is not stored: it is the
last batch's base + count (or the log start offset when empty), cached in memory per partition,
rebuilt on load and truncation, and updated only after a commit succeeded. Writers serialise on
one lock so the cache always matches the last commit; readers run concurrently in their own
snapshots, and only `delete_partition` (which closes a database handle, unsafe while any
transaction may use it, see `mdb_dbi_close`) waits for them. Durability: `sync=True` survives
power loss; `sync=False` survives a process crash (SIGKILL) only.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import lmdb
import msgpack

from minikafka.common import EpochEntry, TopicPartition
from minikafka.core import time_index as ti
from minikafka.core.fetch_limits import ResponseBudget
from minikafka.core.producer_state import ProducerStateManager
from minikafka.core.records import peek_header, peek_shape
from minikafka.errors import CorruptRecordError
from minikafka.storage import producer_snapshots, time_index
from minikafka.storage.env import (  # noqa: F401 - importable from here too
    EnvLease,
    LogDirError,
    StorageError,
    StoreConfig,
)

_KEY = struct.Struct(">Q")
_INDEXED = {time_index.TIME_INDEX_KEY: time_index.TIME_INDEX_VERSION}  # in a meta: indexed
_META_DB = b"partition-meta"
_LOG_PREFIX = "log/"
_DEFAULT_CONFIG = StoreConfig()  # frozen: one shared default is safe
MAX_TIMESTAMP = -3  # ListOffsetsRequest.MAX_TIMESTAMP (KIP-734)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedPartition:
    tp: TopicPartition
    log_start_offset: int
    log_end_offset: int  # last batch's base + count, or log_start_offset if empty
    high_watermark: int  # checkpointed HW, clamped to [log_start_offset, log_end_offset]
    epochs: list[EpochEntry]  # persisted leader-epoch cache
    # Idempotent producers, rebuilt from the snapshot and the log after it (a fresh object per
    # load: the caller owns it).
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendWrite:
    tp: TopicPartition
    batches: Sequence[bytes]  # whole batches, offsets already set, contiguous
    epochs: list[EpochEntry] | None = None  # replace the persisted epoch cache when not None
    high_watermark: int | None = None  # checkpoint when not None (clamped to the new LEO)


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeLookup:
    """A `find_timestamp` answer, with what it read (the index's cost, observable in tests)."""

    found: ti.TimestampAndOffset | None
    index_entries_read: int
    batches_read: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadSpec:
    tp: TopicPartition
    fetch_offset: int
    max_offset: int  # exclusive: only batches whose next offset <= max_offset
    partition_max_bytes: int


class _DropGate:
    """Readers share; closing a database handle waits for running readers and blocks new ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._dropping = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._dropping:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def dropping(self) -> Iterator[None]:
        with self._cond:
            while self._dropping or self._readers:
                self._cond.wait()
            self._dropping = True
        try:
            yield
        finally:
            with self._cond:
                self._dropping = False
                self._cond.notify_all()


def _db_name(tp: TopicPartition) -> bytes:
    return f"{_LOG_PREFIX}{tp.topic}/{tp.partition}".encode()


def _parse_db_name(name: bytes) -> TopicPartition:
    topic, _, partition = name.decode()[len(_LOG_PREFIX) :].rpartition("/")
    return TopicPartition(topic, int(partition))


def _next_offset(raw: Any) -> int:
    base, _epoch, count = peek_header(raw)
    return base + count


def _seek_ending_at_or_after(cur: lmdb.Cursor, offset: int) -> bool:
    """Position `cur` on the first batch whose last offset >= `offset`; False if there is none."""
    key = _KEY.pack(max(0, offset))
    if not cur.set_range(key):
        return cur.last() and _next_offset(cur.value()) > offset
    if cur.key() == key:
        return True
    if cur.prev():  # the batch before may contain `offset`
        return _next_offset(cur.value()) > offset or cur.next()
    return cur.first()


def _batch_sizes(cur: lmdb.Cursor, max_offset: int, out: list[Any]) -> Iterator[int]:
    """Sizes of the batches from the cursor on that end at or before `max_offset`; keeps them."""
    for raw in cur.iternext(keys=False, values=True):
        if _next_offset(raw) > max_offset:
            return
        out.append(raw)
        yield len(raw)


def _read_partition(cur: lmdb.Cursor, spec: ReadSpec, budget: ResponseBudget) -> bytes:
    """Whole batches from the one containing `spec.fetch_offset`, under the budget (KIP-74)."""
    found = _seek_ending_at_or_after(cur, spec.fetch_offset)
    if not found or peek_header(cur.value())[0] > spec.fetch_offset:
        return b""  # no batch contains fetch_offset (below the log start)
    chunks: list[Any] = []
    sizes = _batch_sizes(cur, spec.max_offset, chunks)
    taken, _nbytes = budget.take(sizes, spec.partition_max_bytes)
    sizes.close()
    return b"".join(chunks[:taken])  # copies out of the map while the txn is still open


def _counted(raws: Iterator[Any], reads: list[int]) -> Iterator[bytes]:
    for raw in raws:
        reads[0] += 1
        yield bytes(raw)  # out of the map: decoded while the txn is open, never kept


def _checked_pairs(
    tp: TopicPartition, batches: Sequence[bytes], leo: int
) -> tuple[list[tuple[bytes, bytes]], int]:
    """(key, batch) pairs for batches that continue the log at `leo`, and the new LEO."""
    pairs = []
    for batch in batches:
        try:
            base, count = peek_shape(batch)
        except CorruptRecordError as exc:
            raise StorageError(f"{tp}: {exc}") from exc
        if base != leo:
            raise StorageError(f"{tp}: batch at offset {base} does not start at log end {leo}")
        pairs.append((_KEY.pack(base), batch))
        leo = base + count
    return pairs, leo


class LogStore:
    """All partition logs of one node; every method is synchronous and runs one transaction."""

    def __init__(self, path: str | os.PathLike[str], config: StoreConfig = _DEFAULT_CONFIG) -> None:
        self._config = config
        self._lease = EnvLease(path, config)
        self._env = self._lease.env
        self._write_lock = threading.Lock()
        self._gate = _DropGate()
        self._dbs: dict[TopicPartition, Any] = {}  # opened handles (lmdb._Database)
        self._leo: dict[TopicPartition, int] = {}  # log end offsets as of the last commit
        self._largest: dict[TopicPartition, int] = {}  # largest indexed timestamp, likewise
        try:
            with self._lease.txn(write=True) as txn:
                self._meta_db = self._env.open_db(_META_DB, txn=txn, create=True)
                self._producers_db = self._env.open_db(
                    producer_snapshots.DB_NAME, txn=txn, create=True
                )
                self._time_db = self._env.open_db(time_index.DB_NAME, txn=txn, create=True)
                names = list(txn.cursor(db=self._meta_db).iternext(keys=True, values=False))
                for name in map(bytes, names):
                    tp = _parse_db_name(name)
                    db = self._env.open_db(name, txn=txn, create=True)
                    self._dbs[tp] = db
                    self._leo[tp] = self._log_end_offset(txn, tp, db)
                    self._largest[tp] = self._open_time_index(txn, tp, db)
        except BaseException:
            self._lease.close()
            raise

    def close(self) -> None:
        """Release the environment (idempotent)."""
        self._lease.close()

    def __enter__(self) -> LogStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- partitions ------------------------------------------------------------------------------

    def list_partitions(self) -> list[TopicPartition]:
        with self._lease.txn(write=False) as txn:
            names = txn.cursor(db=self._meta_db).iternext(keys=True, values=False)
            return [_parse_db_name(bytes(name)) for name in names]

    def create_partition(self, tp: TopicPartition) -> LoadedPartition:
        """Create an empty log at offset 0, or load it unchanged if it exists already."""
        result = self.create_partitions([tp])[tp]
        if isinstance(result, StorageError):
            raise result
        return result

    def create_partitions(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LoadedPartition | StorageError]:
        """`create_partition` for many in ONE transaction (a LeaderAndIsr creating
        thousands of partitions paid one commit and one sync each). A partition over the
        store's cap gets its StorageError in the result and the others are created; a failure
        of the transaction itself (LogDirError) creates none and is raised."""
        with self._write_lock:
            out: dict[TopicPartition, LoadedPartition | StorageError] = {}
            opened: dict[TopicPartition, Any] = {}
            room = self._config.max_partitions - len(self._dbs)
            with self._lease.txn(write=True) as txn:
                for tp in dict.fromkeys(tps):
                    if tp not in self._dbs and room <= 0:
                        out[tp] = StorageError(
                            f"{tp}: this store holds at most {self._config.max_partitions} "
                            "partitions (max.broker.partitions)"
                        )
                        continue
                    room -= tp not in self._dbs
                    db = opened[tp] = self._env.open_db(_db_name(tp), txn=txn, create=True)
                    if txn.get(_db_name(tp), db=self._meta_db) is not None:
                        out[tp] = self._load(txn, tp, db)
                        continue
                    # New (a deletion drops a log, its meta and its snapshot together): empty,
                    # nothing to read back (half the cost of a creation was that reading).
                    self._put_meta(
                        txn,
                        tp,
                        {"log_start_offset": 0, "high_watermark": 0, "epochs": [], **_INDEXED},
                    )
                    out[tp] = LoadedPartition(
                        tp=tp, log_start_offset=0, log_end_offset=0, high_watermark=0, epochs=[]
                    )
            # Handles and LEOs only once the commit succeeded (an aborted txn's handles are void).
            for tp, db in opened.items():
                self._dbs[tp] = db
                self._leo[tp] = out[tp].log_end_offset  # type: ignore[union-attr]
                self._largest.setdefault(tp, ti.NO_TIMESTAMP)  # a new log; a loaded one kept
            return out

    def load_partition(self, tp: TopicPartition) -> LoadedPartition:
        """The persisted state of one partition: KeyError if it does not exist."""
        with self._write_lock:  # the snapshot is then the last commit, as is the LEO cache
            db = self._dbs.get(tp)
            if db is None:
                raise KeyError(tp)
            with self._lease.txn(write=False) as txn:
                loaded = self._load(txn, tp, db)
            self._leo[tp] = loaded.log_end_offset
            return loaded

    def load_all(self) -> dict[TopicPartition, LoadedPartition]:
        with self._write_lock:
            with self._lease.txn(write=False) as txn:
                loaded = {tp: self._load(txn, tp, db) for tp, db in self._dbs.items()}
            self._leo.update((tp, part.log_end_offset) for tp, part in loaded.items())
            return loaded

    def delete_partition(self, tp: TopicPartition) -> None:
        """Drop the partition's log and metadata; nothing happens if it does not exist."""
        with self._write_lock, self._gate.dropping():
            db = self._dbs.get(tp)
            with self._lease.txn(write=True) as txn:
                if db is not None:
                    txn.drop(db, delete=True)
                txn.delete(_db_name(tp), db=self._meta_db)
                txn.delete(_db_name(tp), db=self._producers_db)
                time_index.drop(txn, self._time_db, time_index.prefix(_db_name(tp)))
            self._dbs.pop(tp, None)
            self._leo.pop(tp, None)
            self._largest.pop(tp, None)

    # -- log operations --------------------------------------------------------------------------

    def append(self, writes: Sequence[AppendWrite]) -> None:
        """Append to several partitions in ONE transaction; on any violation nothing is written.

        Each write's first batch must start at the partition's log end offset and its batches must
        be contiguous (StorageError otherwise). Epochs and the HW are persisted when given.
        """
        with self._write_lock:
            new_leo: dict[TopicPartition, int] = {}
            largest: dict[TopicPartition, int] = {}
            with self._lease.txn(write=True) as txn:
                for write in writes:
                    db = self._db(write.tp)
                    leo = new_leo.get(write.tp, self._leo[write.tp])
                    pairs, leo = _checked_pairs(write.tp, write.batches, leo)
                    if pairs:
                        with txn.cursor(db=db) as cur:
                            _consumed, added = cur.putmulti(pairs, append=True)
                        if added != len(pairs):
                            raise StorageError(f"{write.tp}: append out of key order")
                        largest[write.tp] = time_index.add(
                            txn,
                            self._time_db,
                            time_index.prefix(_db_name(write.tp)),
                            [raw for _key, raw in pairs],
                            largest.get(write.tp, self._largest[write.tp]),
                        )
                    new_leo[write.tp] = leo
                    if write.epochs is not None or write.high_watermark is not None:
                        meta = self._get_meta(txn, write.tp)
                        if write.epochs is not None:
                            meta["epochs"] = [list(entry) for entry in write.epochs]
                        if write.high_watermark is not None:
                            meta["high_watermark"] = min(write.high_watermark, leo)
                        self._put_meta(txn, write.tp, meta)
            self._leo.update(new_leo)  # only once the commit succeeded
            self._largest.update(largest)

    def read(self, specs: Sequence[ReadSpec], response_max_bytes: int) -> list[bytes]:
        """Whole batches per spec, in ONE read transaction, under the KIP-74 caps.

        Per spec: the batches from the one containing `fetch_offset` on, each ending at or before
        `max_offset`, limited by `core.fetch_limits.ResponseBudget` across the specs in order.
        b"" when nothing: unknown partition, no batch contains `fetch_offset` (the caller checks
        the range against its in-memory log start / LEO), or the caps allow nothing.
        """
        budget = ResponseBudget(response_max_bytes)
        with self._gate.reading():
            # Handles are taken before the txn begins: a handle committed later must not be used
            # in an older snapshot (LMDB: "preexisting transactions must not use the new handle").
            handles = [self._dbs.get(spec.tp) for spec in specs]
            with self._lease.txn(write=False) as txn:
                out = []
                for spec, db in zip(specs, handles, strict=True):
                    if db is None or budget.exhausted() or spec.fetch_offset >= spec.max_offset:
                        out.append(b"")
                        continue
                    with txn.cursor(db=db) as cur:
                        out.append(_read_partition(cur, spec, budget))
                return out

    def find_timestamp(self, tp: TopicPartition, target: int, start_offset: int) -> TimeLookup:
        """ListOffsets by time in ONE read transaction (Kafka's UnifiedLog.fetchOffsetByTimestamp):
        for `target` >= 0 the first record whose timestamp is >= target and offset >=
        `start_offset`; for MAX_TIMESTAMP (-3) the first record holding the largest timestamp;
        for another negative target a scan from the log's first batch, as Kafka searches from
        the log start. None when there is no such record. The caller bounds the answer by what
        the asker may read (core/time_index.py `fetchable`). StorageError: no such partition."""
        with self._gate.reading():
            db = self._db(tp)  # taken before the txn begins, as `read` does
            pre = time_index.prefix(_db_name(tp))
            with self._lease.txn(write=False) as txn:
                with txn.cursor(db=self._time_db) as icur, txn.cursor(db=db) as cur:
                    reads = [0]
                    if target == MAX_TIMESTAMP:
                        entry = time_index.last(icur, pre)
                        raw = None if entry is None else cur.get(_KEY.pack(entry.base_offset))
                        found = None if raw is None else ti.max_timestamp_record(bytes(raw))
                        return TimeLookup(found=found, index_entries_read=1, batches_read=1)
                    if target < 0:  # below every indexed timestamp: from the first batch
                        entries_read, start = 0, cur.first()
                    else:
                        entry = time_index.first_at_or_after(icur, pre, target)
                        entries_read = 1
                        start = entry is not None and cur.set_key(_KEY.pack(entry.base_offset))
                    raws = cur.iternext(keys=False, values=True) if start else iter(())
                    found = ti.search_batches(_counted(raws, reads), target, start_offset)
                    return TimeLookup(
                        found=found, index_entries_read=entries_read, batches_read=reads[0]
                    )

    def truncate(self, tp: TopicPartition, offset: int, epochs: list[EpochEntry]) -> int:
        """Remove every batch whose last offset >= `offset`; persist `epochs`; return the new LEO.

        A batch containing `offset` goes whole, so the new LEO may be below `offset`. The
        checkpointed HW is clamped to the new LEO.
        """
        with self._write_lock:
            db = self._db(tp)
            leo = self._leo[tp]
            with self._lease.txn(write=True) as txn:
                with txn.cursor(db=db) as cur:
                    if _seek_ending_at_or_after(cur, offset):
                        leo = peek_header(cur.value())[0]
                        while cur.delete():
                            pass
                meta = self._get_meta(txn, tp)
                meta["epochs"] = [list(entry) for entry in epochs]
                meta["high_watermark"] = min(meta["high_watermark"], leo)
                self._put_meta(txn, tp, meta)
                snapshot = producer_snapshots.get(txn, self._producers_db, _db_name(tp))
                if snapshot is not None and snapshot[0] > leo:
                    txn.delete(_db_name(tp), db=self._producers_db)
                largest = time_index.truncate(
                    txn, self._time_db, time_index.prefix(_db_name(tp)), leo
                )
            self._leo[tp] = leo
            self._largest[tp] = largest
            return leo

    def truncate_fully(self, tp: TopicPartition, new_start_offset: int) -> None:
        """Empty the log: log start = LEO = HW = `new_start_offset`, epochs = []."""
        with self._write_lock:
            db = self._db(tp)
            with self._lease.txn(write=True) as txn:
                txn.drop(db, delete=False)
                meta = {
                    "log_start_offset": new_start_offset,
                    "high_watermark": new_start_offset,
                    "epochs": [],
                    **_INDEXED,
                }
                self._put_meta(txn, tp, meta)
                producer_snapshots.put(txn, self._producers_db, _db_name(tp), new_start_offset, [])
                time_index.drop(txn, self._time_db, time_index.prefix(_db_name(tp)))
            self._leo[tp] = new_start_offset
            self._largest[tp] = ti.NO_TIMESTAMP

    def checkpoint(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Persist high watermarks (each clamped to the LEO) in one transaction.

        Partitions that do not exist (deleted meanwhile) are skipped.
        """
        with self._write_lock:
            with self._lease.txn(write=True) as txn:
                for tp, hw in high_watermarks.items():
                    if tp not in self._dbs:
                        continue
                    meta = self._get_meta(txn, tp)
                    meta["high_watermark"] = min(hw, self._leo[tp])
                    self._put_meta(txn, tp, meta)

    def save_producer_snapshots(
        self, snapshots: Mapping[TopicPartition, tuple[int, list[Any]]]
    ) -> None:
        """Persist producer snapshots `(offset, entries_to_doc(...))` in one transaction; one
        whose offset is past the log end now (truncated meanwhile) or whose partition is gone
        is skipped."""
        with self._write_lock:
            with self._lease.txn(write=True) as txn:
                for tp, (offset, doc) in snapshots.items():
                    if tp in self._dbs and offset <= self._leo[tp]:
                        producer_snapshots.put(txn, self._producers_db, _db_name(tp), offset, doc)

    def load_producers(self, tp: TopicPartition) -> ProducerStateManager:
        """The producer state of the log as it is now (snapshot + the batches after it)."""
        with self._write_lock:
            db = self._db(tp)
            with self._lease.txn(write=False) as txn:
                return self._load_producers(txn, tp, db, self._get_meta(txn, tp), self._leo[tp])

    def disk_bytes(self) -> int:
        """Bytes of the data file in use (pages up to the highest one ever allocated)."""
        if self._lease.closed:
            raise StorageError("the store is closed")
        return (self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"]

    # -- helpers ---------------------------------------------------------------------------------

    def _db(self, tp: TopicPartition) -> Any:
        db = self._dbs.get(tp)
        if db is None:
            raise StorageError(f"{tp}: no such partition in this store")
        return db

    def _get_meta(self, txn: lmdb.Transaction, tp: TopicPartition) -> dict[str, Any]:
        raw = txn.get(_db_name(tp), db=self._meta_db)
        if raw is None:
            raise StorageError(f"{tp}: partition metadata is missing")
        return msgpack.unpackb(raw, raw=False)

    def _put_meta(self, txn: lmdb.Transaction, tp: TopicPartition, meta: dict[str, Any]) -> None:
        txn.put(_db_name(tp), msgpack.packb(meta, use_bin_type=True), db=self._meta_db)

    def _load_producers(
        self, txn: lmdb.Transaction, tp: TopicPartition, db: Any, meta: dict[str, Any], leo: int
    ) -> ProducerStateManager:
        """Snapshot + the producer fields of the batches from its offset to the log end. A
        snapshot that does not read (a torn or foreign write) is passed over and the state
        rebuilt from the whole log, as Kafka's ProducerStateManager drops a corrupt snapshot
        ("Snapshot is corrupt") and replays the log: the broker starts either way."""
        log_start = meta["log_start_offset"]
        try:
            snapshot = producer_snapshots.get(txn, self._producers_db, _db_name(tp))
            offset, doc = producer_snapshots.start_of_replay(snapshot, log_start, leo)
            return self._replay(txn, db, offset, doc, leo)
        except producer_snapshots.UNREADABLE:
            return self._replay(txn, db, log_start, None, leo)

    @staticmethod
    def _replay(
        txn: lmdb.Transaction, db: Any, offset: int, doc: Any, leo: int
    ) -> ProducerStateManager:
        with txn.cursor(db=db) as cur:
            found = _seek_ending_at_or_after(cur, offset)
            raws = cur.iternext(keys=False, values=True) if found else ()
            return producer_snapshots.replay(doc, offset, raws, leo)

    def _open_time_index(self, txn: lmdb.Transaction, tp: TopicPartition, db: Any) -> int:
        """The largest indexed timestamp; the index is first built from the log if this
        partition has none (a data dir from before the index)."""
        pre = time_index.prefix(_db_name(tp))
        meta = self._get_meta(txn, tp)
        if meta.get(time_index.TIME_INDEX_KEY) != time_index.TIME_INDEX_VERSION:
            with txn.cursor(db=db) as cur:
                time_index.rebuild(txn, self._time_db, pre, cur.iternext(keys=False, values=True))
            self._put_meta(txn, tp, {**meta, **_INDEXED})
        return time_index.largest(txn, self._time_db, pre)

    def _log_end_offset(self, txn: lmdb.Transaction, tp: TopicPartition, db: Any) -> int:
        """The LEO alone (opening the store: no producer state rebuilt for nothing)."""
        with txn.cursor(db=db) as cur:
            return (
                _next_offset(cur.value())
                if cur.last()
                else self._get_meta(txn, tp)["log_start_offset"]
            )

    def _load(self, txn: lmdb.Transaction, tp: TopicPartition, db: Any) -> LoadedPartition:
        meta = self._get_meta(txn, tp)
        start = meta["log_start_offset"]
        with txn.cursor(db=db) as cur:
            leo = _next_offset(cur.value()) if cur.last() else start
        return LoadedPartition(
            tp=tp,
            log_start_offset=start,
            log_end_offset=leo,
            high_watermark=max(start, min(meta["high_watermark"], leo)),
            epochs=[(epoch, offset) for epoch, offset in meta["epochs"]],
            producers=self._load_producers(txn, tp, db, meta, leo),
        )
