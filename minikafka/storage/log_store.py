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
  MAX_TIMESTAMP (KIP-734) with one B-tree descent and, as a rule, one batch read;
- the named database `log-segments` (storage/segments.py): per partition its virtual segments
  (core/log_retention.py `Segment`: runs of whole batches, Kafka's `LogSegment` without files),
  updated in the transaction that appends (rolling by the write's `segment.bytes` and
  `segment.ms`), truncates or deletes, built from the log when the store opens a partition
  that has none. Retention deletes whole segments (`apply_retention`, `run_retention`) and
  DeleteRecords or a follower moves the log start offset (`advance_log_start`): the log start
  offset moves in one transaction, which also deletes at most `max_keys` batch keys wholly
  below it (with their time index entries and segment records); `purge` deletes the rest in
  later transactions. A batch key below the log start offset is never served.

Rules: every public method runs exactly ONE transaction and holds none across calls (the Trio
shell calls them through `trio.to_thread.run_sync`). The log end offset is not stored: it is the
last batch's base + count (or the log start offset when there is no batch at or past it),
cached in memory per partition, rebuilt on load and truncation, and updated only after a commit
succeeded; so are the log start offset and the segments. Writers serialise on
one lock so the cache always matches the last commit; readers run concurrently in their own
snapshots, and only `delete_partition` (which closes a database handle, unsafe while any
transaction may use it, see `mdb_dbi_close`) waits for them. Durability: `sync=True` survives
power loss; `sync=False` survives a process crash (SIGKILL) only.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import lmdb
import msgpack

from minikafka.common import EpochEntry, TopicPartition
from minikafka.core import time_index as ti
from minikafka.core.compaction import group_segments
from minikafka.core.fetch_limits import ResponseBudget
from minikafka.core.log import truncate_epochs_from_start
from minikafka.core.log_retention import RetentionPlan, Segment, delete_old_segments
from minikafka.core.producer_state import ProducerStateManager
from minikafka.core.records import peek_header, peek_shape
from minikafka.errors import CorruptRecordError
from minikafka.storage import producer_snapshots, segments, time_index
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
DEFAULT_MAX_DELETE_KEYS = 1000  # batch keys (and as many index entries) one deletion txn removes


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


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
    # Rolling (LogSegment.shouldRoll): the topic's segment.bytes and segment.ms, Kafka's
    # defaults when the caller has none; `now_ms` None is the store's clock (its `clock`).
    segment_bytes: int = segments.KAFKA_SEGMENT_BYTES
    segment_ms: int = segments.KAFKA_SEGMENT_MS
    now_ms: int | None = None


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


@functools.lru_cache(maxsize=1 << 16)
def _pre(tp: TopicPartition) -> bytes:
    """The key prefix of the partition in the shared `time-index` and `log-segments`."""
    return time_index.prefix(_db_name(tp))


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
    if not _seek_ending_at_or_after(cur, spec.fetch_offset):
        return b""
    # The batch found may start past fetch_offset: the offsets between went to compaction
    # (core/compaction.py), and Kafka serves the next batch (LogSegment.read). The caller has
    # refused a fetch_offset below the log start.
    chunks: list[Any] = []
    sizes = _batch_sizes(cur, spec.max_offset, chunks)
    taken, _nbytes = budget.take(sizes, spec.partition_max_bytes)
    sizes.close()
    return b"".join(chunks[:taken])  # copies out of the map while the txn is still open


def _first_kept_key(cur: lmdb.Cursor, log_start_offset: int) -> bytes | None:
    """The key of the first batch not wholly below the log start offset (the one holding it, or
    the first after it); None when every batch is below it."""
    return bytes(cur.key()) if _seek_ending_at_or_after(cur, log_start_offset) else None


def _delete_keys_below(cur: lmdb.Cursor, boundary: bytes | None, max_keys: int) -> int:
    """Delete at most `max_keys` batch keys from the first on, below `boundary` (all when None),
    walking forward with one cursor; returns how many are left below it (counted on the keys
    alone: the batches' pages are not read)."""
    deleted = 0
    found = cur.first()
    while found and deleted < max_keys and (boundary is None or bytes(cur.key()) < boundary):
        found = cur.delete()  # moves to the next key
        deleted += 1
    left = 0
    while found and (boundary is None or bytes(cur.key()) < boundary):
        left += 1
        found = cur.next()
    return left


def _batch_maxes(pairs: Sequence[tuple[bytes, bytes]]) -> list[tuple[int, int, int, int]]:
    """(base, next offset, size, max timestamp) of each appended batch: the inputs of the time
    index and of the segments, each batch's timestamps decoded once."""
    return [segments.shape(raw) for _key, raw in pairs]


def _max_timestamp_scan(
    cur: lmdb.Cursor, segs: Sequence[Segment], log_start: int
) -> tuple[ti.TimestampAndOffset | None, int]:
    """MAX_TIMESTAMP from the segments, as Kafka answers it (the segment with the largest
    ``maxTimestampSoFar``, the first of equals): a segment's recorded largest timestamp is at
    least that of its batches still kept (only the first kept segment counts deleted ones), so
    the segments are scanned in decreasing order of it until none can beat the best record
    found. -> (the first record holding the largest timestamp at or past `log_start`, batches
    read)."""
    best: ti.TimestampAndOffset | None = None
    reads = 0
    live = [s for s in segs if s.next_offset > log_start and not s.is_empty]
    for seg in sorted(live, key=lambda s: (-s.max_timestamp_ms, s.base_offset)):
        if seg.max_timestamp_ms <= ti.NO_TIMESTAMP:
            break
        if best is not None and (
            seg.max_timestamp_ms < best.timestamp
            or (seg.max_timestamp_ms == best.timestamp and seg.base_offset > best.offset)
        ):
            continue
        found = _seek_ending_at_or_after(cur, max(seg.base_offset, log_start))
        while found and bytes(cur.key()) < _KEY.pack(seg.next_offset):
            raw = bytes(cur.value())
            reads += 1
            if best is None or ti.safe_max_timestamp(raw) >= best.timestamp:
                for offset, ts in ti.batch_records(raw):
                    if offset >= log_start and ts > ti.NO_TIMESTAMP:
                        if best is None or (ts, -offset) > (best.timestamp, -best.offset):
                            best = ti.TimestampAndOffset(
                                timestamp=ts, offset=offset, leader_epoch=peek_header(raw)[1]
                            )
            found = cur.next()
    return best, reads


def _counted(raws: Iterator[Any], reads: list[int]) -> Iterator[bytes]:
    for raw in raws:
        reads[0] += 1
        yield bytes(raw)  # out of the map: decoded while the txn is open, never kept


def _checked_pairs(
    tp: TopicPartition, batches: Sequence[bytes], leo: int
) -> tuple[list[tuple[bytes, bytes]], int]:
    """(key, batch) pairs for batches that continue the log at `leo`, and the new LEO. A batch
    may start past the log end (a follower copying a compacted leader's gap, which Kafka's
    ``UnifiedLog.append`` allows: only an offset below the log end is unexpected)."""
    pairs = []
    for batch in batches:
        try:
            base, count = peek_shape(batch)
        except CorruptRecordError as exc:
            raise StorageError(f"{tp}: {exc}") from exc
        if base < leo:
            raise StorageError(f"{tp}: batch at offset {base} starts below the log end {leo}")
        pairs.append((_KEY.pack(base), batch))
        leo = base + count
    return pairs, leo


class LogStore:
    """All partition logs of one node; every method is synchronous and runs one transaction."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: StoreConfig = _DEFAULT_CONFIG,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        segment_bytes: int = segments.KAFKA_SEGMENT_BYTES,
        segment_ms: int = segments.KAFKA_SEGMENT_MS,
        max_delete_keys: int = DEFAULT_MAX_DELETE_KEYS,
    ) -> None:
        """`clock` (ms) times the segments when a call gives no `now_ms`; `segment_bytes` and
        `segment_ms` roll the segments built for a data dir from before them (Kafka's
        defaults: the node's `log.segment.bytes`, `log.roll.ms`); `max_delete_keys` bounds the
        batch keys (and as many time index entries) one deletion transaction removes when the
        call gives no `max_keys`."""
        if max_delete_keys <= 0:
            raise ValueError("max_delete_keys must be positive")
        self._config = config
        self._clock = clock
        self._segment_bytes = segment_bytes
        self._segment_ms = segment_ms
        self._max_delete_keys = max_delete_keys
        self._lease = EnvLease(path, config)
        self._env = self._lease.env
        self._write_lock = threading.Lock()
        self._gate = _DropGate()
        self._dbs: dict[TopicPartition, Any] = {}  # opened handles (lmdb._Database)
        self._leo: dict[TopicPartition, int] = {}  # log end offsets as of the last commit
        self._largest: dict[TopicPartition, int] = {}  # largest indexed timestamp, likewise
        self._start: dict[TopicPartition, int] = {}  # log start offsets, likewise
        self._segs: dict[TopicPartition, tuple[Segment, ...]] = {}  # segments, likewise
        self._leftovers: set[TopicPartition] = set()  # keys below the log start at open
        try:
            with self._lease.txn(write=True) as txn:
                self._meta_db = self._env.open_db(_META_DB, txn=txn, create=True)
                self._producers_db = self._env.open_db(
                    producer_snapshots.DB_NAME, txn=txn, create=True
                )
                self._time_db = self._env.open_db(time_index.DB_NAME, txn=txn, create=True)
                self._seg_db = self._env.open_db(segments.DB_NAME, txn=txn, create=True)
                names = list(txn.cursor(db=self._meta_db).iternext(keys=True, values=False))
                for name in map(bytes, names):
                    tp = _parse_db_name(name)
                    db = self._env.open_db(name, txn=txn, create=True)
                    self._dbs[tp] = db
                    self._leo[tp] = self._log_end_offset(txn, tp, db)
                    self._largest[tp] = self._open_time_index(txn, tp, db)
                    self._open_segments(txn, tp, db)
        except BaseException:
            self._lease.close()
            raise

    def now_ms(self) -> int:
        """The store's clock (the node's wall clock: the simulation's in simulated time)."""
        return self._clock()

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
            new_segs: dict[TopicPartition, tuple[Segment, ...]] = {}
            now_ms = self._clock()
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
                        if tp not in self._segs:
                            new_segs[tp] = self._read_or_build_segments(
                                txn, tp, db, out[tp].log_start_offset, out[tp].log_end_offset
                            )
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
                    new_segs[tp] = (Segment.new(base_offset=0, now_ms=now_ms),)
                    segments.put(txn, self._seg_db, _pre(tp), new_segs[tp])
            # Handles and LEOs only once the commit succeeded (an aborted txn's handles are void).
            for tp, db in opened.items():
                self._dbs[tp] = db
                self._leo[tp] = out[tp].log_end_offset  # type: ignore[union-attr]
                self._largest.setdefault(tp, ti.NO_TIMESTAMP)  # a new log; a loaded one kept
                self._start[tp] = out[tp].log_start_offset  # type: ignore[union-attr]
            self._segs.update(new_segs)
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
            self._start[tp] = loaded.log_start_offset
            return loaded

    def load_all(self) -> dict[TopicPartition, LoadedPartition]:
        with self._write_lock:
            with self._lease.txn(write=False) as txn:
                loaded = {tp: self._load(txn, tp, db) for tp, db in self._dbs.items()}
            self._leo.update((tp, part.log_end_offset) for tp, part in loaded.items())
            self._start.update((tp, part.log_start_offset) for tp, part in loaded.items())
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
                time_index.drop(txn, self._time_db, _pre(tp))
                segments.drop(txn, self._seg_db, _pre(tp))
            self._dbs.pop(tp, None)
            self._leo.pop(tp, None)
            self._largest.pop(tp, None)
            self._start.pop(tp, None)
            self._segs.pop(tp, None)
            self._leftovers.discard(tp)

    # -- log operations --------------------------------------------------------------------------

    def append(self, writes: Sequence[AppendWrite]) -> None:
        """Append to several partitions in ONE transaction; on any violation nothing is written.

        Each write's batches must follow the partition's log end offset and each other, in order,
        with no overlap (StorageError otherwise; a gap is a compacted log's). Epochs and the HW
        are persisted when given. The segments follow in the same transaction, each batch
        rolling a new one by the write's `segment_bytes` / `segment_ms` at `now_ms`
        (``UnifiedLog.maybeRoll``).
        """
        with self._write_lock:
            new_leo: dict[TopicPartition, int] = {}
            largest: dict[TopicPartition, int] = {}
            new_segs: dict[TopicPartition, list[Segment]] = {}
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
                        shapes = _batch_maxes(pairs)
                        largest[write.tp] = time_index.add_maxes(
                            txn,
                            self._time_db,
                            _pre(write.tp),
                            ((base, max_ts) for base, _n, _s, max_ts in shapes),
                            largest.get(write.tp, self._largest[write.tp]),
                        )
                        segs = new_segs.get(write.tp)
                        if segs is None:  # the active one changes, and those rolled after it
                            segs = new_segs[write.tp] = list(self._segs[write.tp][-1:])
                        segments.append(
                            segs,
                            shapes,
                            now_ms=self._clock() if write.now_ms is None else write.now_ms,
                            segment_bytes=write.segment_bytes,
                            segment_ms=write.segment_ms,
                        )
                    new_leo[write.tp] = leo
                    if write.epochs is not None or write.high_watermark is not None:
                        meta = self._get_meta(txn, write.tp)
                        if write.epochs is not None:
                            meta["epochs"] = [list(entry) for entry in write.epochs]
                        if write.high_watermark is not None:
                            meta["high_watermark"] = min(write.high_watermark, leo)
                        self._put_meta(txn, write.tp, meta)
                for tp, segs in new_segs.items():
                    # The old active segment's base is among them (appended to, or replaced by
                    # an empty one rolled at its base): nothing to delete.
                    segments.put(txn, self._seg_db, _pre(tp), segs)
            self._leo.update(new_leo)  # only once the commit succeeded
            self._largest.update(largest)
            for tp, segs in new_segs.items():
                self._segs[tp] = (*self._segs[tp][:-1], *segs)

    def read(self, specs: Sequence[ReadSpec], response_max_bytes: int) -> list[bytes]:
        """Whole batches per spec, in ONE read transaction, under the KIP-74 caps.

        Per spec: the batches from the one containing `fetch_offset` on, each ending at or before
        `max_offset`, limited by `core.fetch_limits.ResponseBudget` across the specs in order.
        b"" when nothing: unknown partition, no batch contains `fetch_offset` (the caller checks
        the range against its in-memory log start / LEO), a `fetch_offset` below the log start
        offset (batch keys there, not yet purged, are never served), or the caps allow nothing.
        """
        budget = ResponseBudget(response_max_bytes)
        with self._gate.reading():
            # Handles are taken before the txn begins: a handle committed later must not be used
            # in an older snapshot (LMDB: "preexisting transactions must not use the new handle").
            # So are the log start offsets: one only moves forward (a full truncation drops every
            # batch below it), so the snapshot's is at least this one, and a batch served from
            # the cached one was in the log when the caller checked the range against it.
            handles = [self._dbs.get(spec.tp) for spec in specs]
            starts = [self._start.get(spec.tp, 0) for spec in specs]
            with self._lease.txn(write=False) as txn:
                out = []
                for spec, db, start in zip(specs, handles, starts, strict=True):
                    if (
                        db is None
                        or budget.exhausted()
                        or spec.fetch_offset >= spec.max_offset
                        or spec.fetch_offset < start
                    ):
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
        the asker may read (core/time_index.py `fetchable`). StorageError: no such partition.

        Nothing below the log start offset is searched or answered (its batches may be deleted
        or not yet purged). MAX_TIMESTAMP whose largest timestamp was in deleted batches is
        found as Kafka finds it, from the segments' largest timestamps (scanning the segments
        that may hold it: the first kept one, whose record counts deleted batches, and the one
        with the largest timestamp after it)."""
        with self._gate.reading():
            db = self._db(tp)  # taken before the txn begins, as `read` does
            log_start = self._start[tp]  # likewise (`read` says why that is safe)
            segs = self._segs[tp]
            pre = _pre(tp)
            with self._lease.txn(write=False) as txn:
                with txn.cursor(db=self._time_db) as icur, txn.cursor(db=db) as cur:
                    reads = [0]
                    if target == MAX_TIMESTAMP:
                        entry = time_index.last(icur, pre)
                        at = None if entry is None else max(entry.base_offset, log_start)
                        raw = None
                        if at is not None and _seek_ending_at_or_after(cur, at):
                            raw = bytes(cur.value())
                        found = None if raw is None else ti.max_timestamp_record(raw)
                        if entry is None or (
                            found is not None
                            and found.timestamp == entry.timestamp
                            and found.offset >= log_start
                        ):
                            return TimeLookup(found=found, index_entries_read=1, batches_read=1)
                        found, n = _max_timestamp_scan(cur, segs, log_start)
                        return TimeLookup(found=found, index_entries_read=1, batches_read=1 + n)
                    if target < 0:  # below every indexed timestamp: from the log start
                        entries_read, start = 0, _seek_ending_at_or_after(cur, log_start)
                    else:
                        entry = time_index.first_at_or_after(icur, pre, target)
                        entries_read = 1
                        start = entry is not None and _seek_ending_at_or_after(
                            cur, max(entry.base_offset, log_start)
                        )
                    raws = cur.iternext(keys=False, values=True) if start else iter(())
                    found = ti.search_batches(
                        _counted(raws, reads), target, max(start_offset, log_start)
                    )
                    return TimeLookup(
                        found=found, index_entries_read=entries_read, batches_read=reads[0]
                    )

    def truncate(self, tp: TopicPartition, offset: int, epochs: list[EpochEntry]) -> int:
        """Remove every batch whose last offset >= `offset`; persist `epochs`; return the new LEO.

        A batch containing `offset` goes whole, so the new LEO may be below `offset`. The
        checkpointed HW is clamped to the new LEO, and so is the log start offset (Kafka's
        ``UnifiedLog.truncateTo``: ``min(targetOffset, logStartOffset)``). The segments starting
        past the new LEO go and the one it cuts is recomputed from its remaining batches
        (``LocalLog.truncateTo``, ``LogSegment.truncateTo``); a segment emptied is as new.
        """
        with self._write_lock:
            db = self._db(tp)
            leo = self._leo[tp]
            start = self._start[tp]
            old = self._segs[tp]
            segs = old
            now_ms = self._clock()
            with self._lease.txn(write=True) as txn:
                with txn.cursor(db=db) as cur:
                    if _seek_ending_at_or_after(cur, offset):
                        leo = peek_header(cur.value())[0]
                    kept = [seg for seg in old if seg.base_offset <= leo]
                    cut_end = _KEY.pack(kept[-1].next_offset if kept else 0)
                    removed = 0  # bytes of the cut segment removed
                    if leo < old[-1].next_offset:
                        while cur.key() and bytes(cur.key()) < cut_end:
                            removed += len(cur.value())
                            cur.delete()
                        while cur.key() and cur.delete():
                            pass
                        if kept:
                            last = kept[-1]
                            found = _seek_ending_at_or_after(cur, last.base_offset)
                            raws = cur.iternext(keys=False, values=True) if found else ()
                            kept[-1] = segments.recompute(last, raws, leo, removed, now_ms)
                        segs = tuple(kept) or (Segment.new(base_offset=leo, now_ms=now_ms),)
                        tail = len(kept) - 1 if kept else 0
                        segments.replace(txn, self._seg_db, _pre(tp), old[tail:], segs[tail:])
                meta = self._get_meta(txn, tp)
                meta["epochs"] = [list(entry) for entry in epochs]
                meta["high_watermark"] = min(meta["high_watermark"], leo)
                start = meta["log_start_offset"] = min(meta["log_start_offset"], leo)
                if meta.get("cleaner_checkpoint", 0) > leo:  # LogCleaner.maybeTruncateCheckpoint
                    meta["cleaner_checkpoint"] = leo
                self._put_meta(txn, tp, meta)
                snapshot = producer_snapshots.get(txn, self._producers_db, _db_name(tp))
                if snapshot is not None and snapshot[0] > leo:
                    txn.delete(_db_name(tp), db=self._producers_db)
                largest = time_index.truncate(txn, self._time_db, _pre(tp), leo)
            self._leo[tp] = leo
            self._largest[tp] = largest
            self._start[tp] = start
            self._segs[tp] = segs
            return leo

    def truncate_fully(self, tp: TopicPartition, new_start_offset: int) -> None:
        """Empty the log: log start = LEO = HW = `new_start_offset`, epochs = [], one empty
        segment at `new_start_offset` (``UnifiedLog.truncateFullyAndStartAt``)."""
        with self._write_lock:
            db = self._db(tp)
            segs = (Segment.new(base_offset=new_start_offset, now_ms=self._clock()),)
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
                time_index.drop(txn, self._time_db, _pre(tp))
                segments.drop(txn, self._seg_db, _pre(tp))
                segments.put(txn, self._seg_db, _pre(tp), segs)
            self._leo[tp] = new_start_offset
            self._largest[tp] = ti.NO_TIMESTAMP
            self._start[tp] = new_start_offset
            self._segs[tp] = segs
            self._leftovers.discard(tp)

    # -- the log's start: segments, retention, deletion ------------------------------------------

    def segments(self, tp: TopicPartition) -> tuple[Segment, ...]:
        """The partition's segments as of the last commit, oldest first (never empty): the input
        of ``log_retention.delete_old_segments``. StorageError: no such partition."""
        self._db(tp)
        return self._segs[tp]

    def log_start_offset(self, tp: TopicPartition) -> int:
        """The persisted log start offset as of the last commit."""
        self._db(tp)
        return self._start[tp]

    def log_end_offset(self, tp: TopicPartition) -> int:
        self._db(tp)
        return self._leo[tp]

    def leftovers(self) -> list[TopicPartition]:
        """Partitions that held batch keys below their log start offset when the store opened (a
        deletion cut short by a crash): call `purge` on each until it returns 0."""
        return sorted(self._leftovers & self._dbs.keys())

    def advance_log_start(
        self, tp: TopicPartition, new_log_start_offset: int, *, max_keys: int | None = None
    ) -> int:
        """Move the log start offset forward to `new_log_start_offset` in ONE transaction
        (``UnifiedLog.maybeIncrementLogStartOffset``: DeleteRecords on a leader, a follower
        taking its leader's); returns how many keys below it are left to delete (`purge`).

        Never backwards (an offset at or below the current one moves nothing) and never past the
        log end offset (clamped to it: the caller checks the high watermark, Kafka's bound). In
        the same transaction: the leader epochs before it are cut (``LeaderEpochFileCache
        .truncateFromStart``: the entry covering it kept, starting at it); the segments wholly
        below it go (the next one starts at or below it: ``deleteLogStartOffsetBreachedSegments``,
        never the last one); and at most `max_keys` (the store's `max_delete_keys` when None)
        batch keys wholly below it are deleted, oldest first, with at most as many of their time
        index entries. From the commit on, nothing below it is served.
        """
        with self._write_lock:
            self._db(tp)
            segs = self._segs[tp]
            new = min(max(new_log_start_offset, self._start[tp]), self._leo[tp])
            cut = 0
            while cut + 1 < len(segs) and segs[cut + 1].base_offset <= new:
                cut += 1
            return self._delete_below(tp, segs[cut:], new, max_keys)

    def apply_retention(
        self, tp: TopicPartition, plan: RetentionPlan, *, max_keys: int | None = None
    ) -> int:
        """Apply a retention run planned on `segments(tp)` and `log_start_offset(tp)`
        (``log_retention.delete_old_segments``; Kafka's ``UnifiedLog.deleteSegments``) in ONE
        transaction: the log start offset moves to the plan's, the plan's deleted segments'
        records go, a rolled empty segment is written, the epochs before the new log start are
        cut, and at most `max_keys` batch keys below it are deleted (with their time index
        entries). Returns the keys left to delete (`purge`).

        Appends after the plan are kept (the active segment grown since is not deleted: a plan
        that deletes a segment whose end has changed since, e.g. by a truncation or by an append
        to the active segment, is refused with StorageError; plan again). A plan that deletes
        nothing changes nothing but still purges.
        """
        with self._write_lock:
            self._db(tp)
            return self._apply_plan(tp, plan, max_keys)

    def run_retention(
        self,
        tp: TopicPartition,
        *,
        high_watermark: int,
        retention_ms: int,
        retention_bytes: int,
        now_ms: int | None = None,
        delete_enabled: bool = True,
        max_keys: int | None = None,
    ) -> tuple[RetentionPlan, int]:
        """One retention run (``UnifiedLog.deleteOldSegments``) planned and applied in ONE
        transaction, under the store's write lock, so no append or truncation comes between
        the plan and its application: -> (the plan, keys left to delete). `high_watermark` is
        the partition's (clamped to [log start, log end]); `now_ms` None: the store's clock."""
        with self._write_lock:
            self._db(tp)
            start, leo = self._start[tp], self._leo[tp]
            plan = delete_old_segments(
                self._segs[tp],
                high_watermark=min(max(high_watermark, start), leo),
                log_start_offset=start,
                retention_ms=retention_ms,
                retention_bytes=retention_bytes,
                now_ms=self._clock() if now_ms is None else now_ms,
                delete_enabled=delete_enabled,
            )
            return plan, self._apply_plan(tp, plan, max_keys)

    def purge(self, tp: TopicPartition, *, max_keys: int | None = None) -> int:
        """Delete at most `max_keys` batch keys left below the log start offset (and as many of
        their time index entries) in ONE transaction; returns how many keys are still left.
        What a deletion cut short (by its bound, or by a crash: `leftovers`) left behind."""
        with self._write_lock:
            self._db(tp)
            return self._delete_below(tp, self._segs[tp], self._start[tp], max_keys)

    # -- compaction: the cleaner reads in snapshots and writes in bounded transactions ----------

    def batches_from(
        self, tp: TopicPartition, offset: int, *, end: int, max_batches: int
    ) -> list[bytes]:
        """At most `max_batches` whole batches, in ONE read transaction, from the first that
        ends at or after `offset` (never below the log start), each starting below `end`."""
        with self._gate.reading():
            db = self._db(tp)
            start = max(offset, self._start[tp])
            with self._lease.txn(write=False) as txn, txn.cursor(db=db) as cur:
                out: list[bytes] = []
                found = _seek_ending_at_or_after(cur, start)
                while found and len(out) < max_batches:
                    raw = cur.value()
                    if peek_header(raw)[0] >= end:
                        break
                    out.append(bytes(raw))
                    found = cur.next()
                return out

    def cleaner_checkpoint(self, tp: TopicPartition) -> int | None:
        """The cleaner's first dirty offset as last written (``cleaner-offset-checkpoint``)."""
        self._db(tp)
        with self._lease.txn(write=False) as txn:
            return self._get_meta(txn, tp).get("cleaner_checkpoint")

    def apply_cleaning(
        self,
        tp: TopicPartition,
        changes: Sequence[tuple[bytes, bytes | None]],
        *,
        checkpoint: int | None = None,
        segment_bytes: int | None = None,
    ) -> bool:
        """ONE transaction of a cleaner's pass (core/compaction.py): each change (the batch as
        read, its cleaned bytes or None when no record is left) replaces the batch at its base
        offset, the sizes of the segments holding them follow. With `checkpoint`, the last of a
        pass: the first dirty offset is written and the segments wholly below it are grouped
        within `segment_bytes` (``Cleaner.groupSegmentsBySize``). A batch deleted meanwhile by
        retention is skipped; a batch whose bytes changed meanwhile (a truncation and a new
        append) makes the whole call write nothing: False, and the pass is given up."""
        with self._write_lock:
            db = self._db(tp)
            old = self._segs[tp]
            sizes = [seg.size_bytes for seg in old]
            bases = [seg.base_offset for seg in old]
            with self._lease.txn(write=True) as txn:
                todo = []
                for before, after in changes:
                    key = before[:8]  # the base offset, as the log's key
                    stored = txn.get(key, db=db)
                    if stored is None:
                        continue  # below the log start now, deleted by retention
                    if bytes(stored) != before:
                        return False  # nothing written yet: the empty transaction commits
                    todo.append((key, before, after))
                for key, before, after in todo:
                    if after is None:
                        txn.delete(key, db=db)
                    else:
                        txn.put(key, after, db=db)
                    at = max(0, bisect.bisect_right(bases, _KEY.unpack(key)[0]) - 1)
                    sizes[at] -= len(before) - len(after or b"")
                segs = tuple(
                    dataclasses.replace(seg, size_bytes=max(0, size))
                    for seg, size in zip(old, sizes, strict=True)
                )
                if checkpoint is not None:
                    meta = self._get_meta(txn, tp)
                    meta["cleaner_checkpoint"] = checkpoint
                    self._put_meta(txn, tp, meta)
                    below = [seg for seg in segs[:-1] if seg.next_offset <= checkpoint]
                    if segment_bytes is not None:
                        grouped = group_segments(below, segment_bytes=segment_bytes)
                        segs = (*grouped, *segs[len(below) :])
                segments.replace(txn, self._seg_db, _pre(tp), old, segs)
            self._segs[tp] = segs
            return True

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
        """The LEO alone (opening the store: no producer state rebuilt for nothing): the last
        batch's end, or the log start offset when no batch reaches past it (a log emptied by
        deletion keeps its end there; keys below it not yet purged do not count)."""
        start = self._get_meta(txn, tp)["log_start_offset"]
        with txn.cursor(db=db) as cur:
            return max(start, _next_offset(cur.value())) if cur.last() else start

    def _open_segments(self, txn: lmdb.Transaction, tp: TopicPartition, db: Any) -> None:
        """Opening the store (a write txn): the log start offset and the segments into the
        caches, the segments first built if the partition has none; notes leftovers."""
        start = self._get_meta(txn, tp)["log_start_offset"]
        self._start[tp] = start
        self._segs[tp] = self._read_or_build_segments(txn, tp, db, start, self._leo[tp])
        with txn.cursor(db=db) as cur:
            first_kept = _first_kept_key(cur, start)
            if cur.first() and (first_kept is None or bytes(cur.key()) < first_kept):
                self._leftovers.add(tp)

    def _read_or_build_segments(
        self, txn: lmdb.Transaction, tp: TopicPartition, db: Any, start: int, leo: int
    ) -> tuple[Segment, ...]:
        """The partition's segments; built from its kept batches (and written) when it has none
        or they do not match its log (a data dir from before segments)."""
        segs = segments.read(txn, self._seg_db, _pre(tp))
        if segments.tiles(segs, start, leo):
            return segs
        with txn.cursor(db=db) as cur:
            found = _seek_ending_at_or_after(cur, start)
            base = peek_header(cur.value())[0] if found else leo
            raws = cur.iternext(keys=False, values=True) if found else ()
            built = segments.build(
                raws,
                start_offset=base,
                now_ms=self._clock(),
                segment_bytes=self._segment_bytes,
                segment_ms=self._segment_ms,
            )
        segments.drop(txn, self._seg_db, _pre(tp))
        segments.put(txn, self._seg_db, _pre(tp), built)
        return tuple(built)

    def _apply_plan(self, tp: TopicPartition, plan: RetentionPlan, max_keys: int | None) -> int:
        current = self._segs[tp]
        doomed = plan.deleted
        if len(doomed) > len(current) or any(
            (d.base_offset, d.next_offset) != (c.base_offset, c.next_offset)
            for d, c in zip(doomed, current, strict=False)
        ):
            raise StorageError(f"{tp}: a retention plan for segments that changed since")
        kept = current[len(doomed) :]
        if not kept:  # every segment goes: the plan rolled one at the log end
            kept = plan.segments[:1]
            if not kept or kept[0].base_offset != self._leo[tp] or not kept[0].is_empty:
                raise StorageError(f"{tp}: a retention plan deleting every segment rolls one")
        start = max(plan.log_start_offset, self._start[tp])
        return self._delete_below(tp, kept, min(start, self._leo[tp]), max_keys)

    def _delete_below(
        self,
        tp: TopicPartition,
        segs: tuple[Segment, ...],
        new_start: int,
        max_keys: int | None,
    ) -> int:
        """ONE transaction: the log start offset to `new_start` (forward only, with the epochs
        cut from it), the segments to `segs`, then at most `max_keys` batch keys wholly below
        `new_start` and as many time index entries deleted. -> keys left below it."""
        budget = self._max_delete_keys if max_keys is None else max_keys
        if budget <= 0:
            raise ValueError("max_keys must be positive")
        db = self._db(tp)
        old = self._segs[tp]
        moved = new_start > self._start[tp]
        with self._lease.txn(write=True) as txn:
            if moved:
                meta = self._get_meta(txn, tp)
                meta["log_start_offset"] = new_start
                epochs = [(e, o) for e, o in meta["epochs"]]
                meta["epochs"] = [list(x) for x in truncate_epochs_from_start(epochs, new_start)]
                self._put_meta(txn, tp, meta)
            if segs != old:
                segments.replace(txn, self._seg_db, _pre(tp), old, segs)
            with txn.cursor(db=db) as cur:
                boundary = _first_kept_key(cur, new_start)
                left = _delete_keys_below(cur, boundary, budget)
            first_kept = new_start if boundary is None else _KEY.unpack(boundary)[0]
            left += time_index.delete_below(txn, self._time_db, _pre(tp), first_kept, budget)
        self._start[tp] = max(new_start, self._start[tp])
        self._segs[tp] = segs
        if left == 0:
            self._leftovers.discard(tp)
        return left

    def _load(self, txn: lmdb.Transaction, tp: TopicPartition, db: Any) -> LoadedPartition:
        meta = self._get_meta(txn, tp)
        start = meta["log_start_offset"]
        with txn.cursor(db=db) as cur:
            leo = max(start, _next_offset(cur.value())) if cur.last() else start
        return LoadedPartition(
            tp=tp,
            log_start_offset=start,
            log_end_offset=leo,
            high_watermark=max(start, min(meta["high_watermark"], leo)),
            epochs=[(epoch, offset) for epoch, offset in meta["epochs"]],
            producers=self._load_producers(txn, tp, db, meta, leo),
        )
