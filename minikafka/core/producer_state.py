"""Idempotent-producer state of one partition: who wrote which sequence numbers (KIP-98).

Mirrors Kafka's ProducerStateManager / ProducerAppendInfo / ProducerStateEntry:

- per producer id: its current epoch and the metadata (first and last sequence, first and last
  offset) of its last `BATCHES_RETAINED` = 5 batches (ProducerStateEntry.NUM_BATCHES_TO_RETAIN,
  which is why a producer may keep at most 5 requests in flight per partition);
- a leader checks every produced batch carrying a producer id (`check_append`, Kafka's
  ProducerAppendInfo.checkProducerEpoch + checkSequence, origin Client):
    * an epoch older than the producer's current one -> INVALID_PRODUCER_EPOCH (47);
    * the same epoch and exactly the sequence range of one of the last 5 batches -> a duplicate,
      answered with that batch's ORIGINAL offsets and not appended (Log.analyzeAndValidate-
      ProducerState / ProducerStateEntry.findDuplicateBatch);
    * a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
    * the same epoch must continue at last sequence + 1 (wrapping after 2^31 - 1 to 0, as
      DefaultRecordBatch.incrementSequence does), else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
    * a producer id this partition has never seen (or has expired, below) must start at
      sequence 0, else UNKNOWN_PRODUCER_ID (59). Kafka 2.5+ (KIP-360) accepts any sequence
      there, because its retention may delete every batch of a live producer; minikafka keeps
      the answer of Kafka before KIP-360: an unknown producer at sequence > 0 means either the
      batches before were lost (an unclean failover, a truncated tail) or its state expired,
      and 59 lets the client restart the partition's sequence under a bumped epoch (as Kafka's
      client does on 59 for an idempotent producer, KIP-360) instead of accepting a hole
      silently; it also keeps a producer's batches in order when two of its requests overtake
      each other.
- followers and restarts apply batches from the log without checks (origin Replication / log
  recovery): the state is a function of the log, rebuilt from a snapshot plus the batches after
  it (`rebuild`), as Kafka's `.snapshot` files plus log recovery do.

Appends are applied when they are QUEUED (a leader's stamp, a follower's fetched batch), so that
a producer's next request is checked against the previous one while both wait for the disk.
Each change is remembered (`_undo`) until the high watermark passes it (`trim`), so a failed
write (the writer gives its offsets back) and a follower truncating its unreplicated tail are
undone exactly in memory (`rollback`), and the state at the HW is what a snapshot holds
(`state_at`). Below that, a truncation rebuilds from the snapshot and the log (Kafka's
ProducerStateManager.truncateAndReload).

Producer ids expire (KIP-854, ProducerStateManager.removeExpiredProducers): `remove_expired`,
called every producer.id.expiration.check.interval.ms, drops the producers not seen for
producer.id.expiration.ms. Kafka compares the wall clock with the producer's last batch
timestamp; here the clock is the broker's monotonic `now_ms` (the core's one clock), because a
batch timestamp is the client's (CreateTime): a producer stamping the future would never expire
and one stamping the past would expire at once. A producer counts as seen at the first check
after its batch was applied (never early, at most one interval late; Kafka's own granularity is
the check interval too); a state loaded from a snapshot and the log is seen at its first check,
so a restart postpones expiry by at most one period, never shortens it. There is no bound on
producers per partition beyond expiry, as in Kafka (KIP-936 proposes a per-principal rate of
new producer ids instead; a cap would refuse live producers with no Kafka error to say why).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from minikafka.core.records import BatchView
from minikafka.errors import ErrorCode

MAX_SEQUENCE = 2**31 - 1  # Integer.MAX_VALUE: sequences wrap to 0 after it
MAX_EPOCH = 2**15 - 1  # Short.MAX_VALUE: a producer needs a new id after it
BATCHES_RETAINED = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN (= max.in.flight per partition)
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past 2^31 - 1 to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Does `next_sequence` follow `last_sequence` (ProducerAppendInfo.inSequence)?"""
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == MAX_SEQUENCE
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]  # oldest first, at most BATCHES_RETAINED

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """ProducerStateEntry.findDuplicateBatch: the same epoch and exact sequence range."""
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerEntry:
        """This entry after `batch` (a newer epoch starts the batch list afresh)."""
        if epoch != self.epoch:
            return ProducerEntry(producer_id=self.producer_id, epoch=epoch, batches=(batch,))
        return ProducerEntry(
            producer_id=self.producer_id,
            epoch=epoch,
            batches=(*self.batches[-(BATCHES_RETAINED - 1) :], batch),
        )


# ---------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True, kw_only=True)
class Accept:
    """A new batch: append it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Duplicate:
    """A retry of a batch already in the log: answer with its original offsets, append nothing."""

    batch: BatchMetadata


@dataclass(frozen=True, slots=True, kw_only=True)
class Refuse:
    error_code: ErrorCode
    message: str


Decision = Accept | Duplicate | Refuse
ACCEPT = Accept()  # one value: the hot path allocates nothing for a new batch


def check_append(
    entry: ProducerEntry | None, *, producer_epoch: int, first_seq: int, count: int
) -> Decision:
    """The leader's verdict on a produced batch of `count` records from a producer whose state
    is `entry` (None: never seen here). Pure: nothing changes."""
    if not (0 <= first_seq <= MAX_SEQUENCE and 0 <= producer_epoch <= MAX_EPOCH and count >= 1):
        return Refuse(
            error_code=ErrorCode.INVALID_RECORD,
            message=f"producer epoch {producer_epoch} / base sequence {first_seq}: expected "
            f"0 to {MAX_EPOCH} / 0 to {MAX_SEQUENCE}",
        )
    last_seq = increment_sequence(first_seq, count - 1)
    if entry is None or not entry.batches:
        if first_seq == 0:
            return ACCEPT
        return Refuse(
            error_code=ErrorCode.UNKNOWN_PRODUCER_ID,
            message=f"no record of this producer here; its first sequence must be 0, not {first_seq}",
        )
    if producer_epoch < entry.epoch:
        return Refuse(
            error_code=ErrorCode.INVALID_PRODUCER_EPOCH,
            message=f"producer epoch {producer_epoch} is older than the current {entry.epoch}",
        )
    duplicate = entry.find_duplicate(producer_epoch, first_seq, last_seq)
    if duplicate is not None:
        return Duplicate(batch=duplicate)
    if producer_epoch > entry.epoch:
        if first_seq == 0:
            return ACCEPT
        return Refuse(
            error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            message=f"new epoch {producer_epoch} must start at sequence 0, not {first_seq}",
        )
    if in_sequence(entry.last_seq, first_seq):
        return ACCEPT
    return Refuse(
        error_code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        message=f"expected sequence {increment_sequence(entry.last_seq, 1)}, got {first_seq}",
    )


# ---------------------------------------------------------------------------- the state


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerBatch:
    """The producer fields of one batch in the log, with its offsets."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    count: int

    @classmethod
    def of(cls, batch: BatchView) -> ProducerBatch:
        """The producer fields of a stored batch (core/records.py)."""
        return cls(
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            base_offset=batch.base_offset,
            count=batch.count,
        )

    def metadata(self) -> BatchMetadata:
        return BatchMetadata(
            first_seq=self.base_sequence,
            last_seq=increment_sequence(self.base_sequence, self.count - 1),
            first_offset=self.base_offset,
            last_offset=self.base_offset + self.count - 1,
        )


class ProducerStateManager:
    """The producer state of one partition replica; O(1) per batch.

    Every applied batch at or above `exact_from` keeps an undo record, until `trim(offset)`
    (called with the high watermark) drops the records below it. So `rollback(offset)` and
    `state_at(offset)` are exact, in memory, for any offset >= `exact_from`: a failed write, a
    follower truncating its tail above its HW, a snapshot at the HW."""

    def __init__(
        self, entries: dict[int, ProducerEntry] | None = None, *, exact_from: int = 0
    ) -> None:
        self.entries: dict[int, ProducerEntry] = dict(entries or {})
        self.exact_from = exact_from
        # (first offset, producer id, entry before) per applied batch at or above exact_from.
        self._undo: deque[tuple[int, int, ProducerEntry | None]] = deque()
        self._pending: dict[int, int] = {}  # undo records per producer id: never expired
        # Expiry (KIP-854): the ids applied since the last check, stamped at the next one, and
        # each id's stamp, oldest first (an OrderedDict pops its oldest in O(1)).
        self._seen: set[int] = set(self.entries)
        self._last_seen_ms: OrderedDict[int, int] = OrderedDict()
        self.removals = 0  # producers expired so far (a snapshot taken before is stale)
        self.last_batch_offset = -1  # the highest first offset of an applied producer batch
        self.snapshot_mark: SnapshotMark | None = None  # set by whoever saves our snapshots

    def check(self, producer_id: int, producer_epoch: int, first_seq: int, count: int) -> Decision:
        return check_append(
            self.entries.get(producer_id),
            producer_epoch=producer_epoch,
            first_seq=first_seq,
            count=count,
        )

    def apply(self, batch: ProducerBatch) -> None:
        """Record `batch` (no checks: the leader checked it, or it comes from the log)."""
        if batch.producer_id < 0:
            return
        prev = self.entries.get(batch.producer_id)
        base = prev or ProducerEntry(
            producer_id=batch.producer_id, epoch=batch.producer_epoch, batches=()
        )
        self.entries[batch.producer_id] = base.with_batch(batch.producer_epoch, batch.metadata())
        self._seen.add(batch.producer_id)
        self.last_batch_offset = max(self.last_batch_offset, batch.base_offset)
        if batch.base_offset >= self.exact_from:
            self._undo.append((batch.base_offset, batch.producer_id, prev))
            self._pending[batch.producer_id] = self._pending.get(batch.producer_id, 0) + 1

    def trim(self, offset: int) -> None:
        """No rollback below `offset` will be asked (it is the high watermark): forget undo."""
        undo = self._undo
        while undo and undo[0][0] < offset:
            self._settle(undo.popleft()[1])
        self.exact_from = max(self.exact_from, offset)

    def can_roll_back_to(self, offset: int) -> bool:
        return offset >= self.exact_from

    def rollback(self, offset: int) -> None:
        """The batches from `offset` on are gone (a failed write, a truncation): forget them.
        Exact when `can_roll_back_to(offset)`; else the caller rebuilds from the log."""
        undo = self._undo
        while undo and undo[-1][0] >= offset:
            _offset, producer_id, prev = undo.pop()
            self._settle(producer_id)
            if prev is None:
                del self.entries[producer_id]
            else:
                self.entries[producer_id] = prev

    def _settle(self, producer_id: int) -> None:
        """One undo record of `producer_id` is gone."""
        left = self._pending[producer_id] - 1
        if left:
            self._pending[producer_id] = left
        else:
            del self._pending[producer_id]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers not seen for `expiration_ms` (Kafka's removeExpiredProducers,
        producer.id.expiration.ms); -> their ids. The ids applied since the last call count as
        seen at `now_ms`. A producer with a batch above the trimmed offset (not yet under the
        HW, so `rollback` or `state_at` may still need its entry) is kept and seen again now,
        as Kafka keeps a producer with an ongoing transaction. O(ids seen + ids expired)."""
        expired, _more = self.expire_some(now_ms, expiration_ms, budget=None)
        return expired

    def expire_some(
        self, now_ms: int, expiration_ms: int, *, budget: int | None
    ) -> tuple[list[int], bool]:
        """`remove_expired` in steps of at most `budget` ids stamped or looked at (None: all),
        so a shell can yield between them; -> (the ids expired, whether work is left)."""
        if expiration_ms < 1:
            raise ValueError(f"producer.id.expiration.ms must be at least 1, not {expiration_ms}")
        if budget is not None and budget < 1:
            raise ValueError(f"an expiry step must look at 1 id at least, not {budget}")
        left = budget if budget is not None else -1
        last, seen = self._last_seen_ms, self._seen
        while seen and left != 0:
            producer_id = seen.pop()
            last[producer_id] = now_ms
            last.move_to_end(producer_id)
            left -= 1
        expired = []
        while last and left != 0 and not seen:
            left -= 1
            producer_id, seen_ms = last.popitem(last=False)  # the oldest, in O(1)
            if now_ms - seen_ms < expiration_ms:
                last[producer_id] = seen_ms
                last.move_to_end(producer_id, last=False)  # back in front: nothing older
                left = -1
                break
            if producer_id in self._pending:
                last[producer_id] = now_ms  # seen again, at the end
            elif self.entries.pop(producer_id, None) is not None:  # else rolled back already
                expired.append(producer_id)
        self.removals += len(expired)
        return expired, left == 0 and bool(seen or last)

    def state_at(self, offset: int) -> dict[int, ProducerEntry]:
        """The entries as of the log up to `offset` (>= exact_from), on a copy."""
        entries = dict(self.entries)
        for first_offset, producer_id, prev in reversed(self._undo):
            if first_offset < offset:
                break
            if prev is None:
                entries.pop(producer_id, None)
            else:
                entries[producer_id] = prev
        return entries

    @property
    def undo_records(self) -> int:
        return len(self._undo)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotMark:
    """What the saved snapshot of a state is: the state as of the log up to `offset`, taken
    when the state had expired `removals` producers."""

    offset: int
    removals: int


def snapshot_due(state: ProducerStateManager, high_watermark: int) -> bool:
    """Should the snapshot of `state` be written again at `high_watermark`? Its cost is one
    entry per producer, so it is bounded against the log it spares a restart from replaying:
    - no snapshot of ours is saved, or the log went back below it (a truncation): yes;
    - the state at the HW is the saved one (no producer batch at or above the saved offset, no
      producer expired since) and not empty: no. The saved snapshot plus the batches after it
      (none with a producer) is the same state; rewriting it would cost seconds for a million
      producers and save only the reading of those batches' headers at a restart;
    - else (changed, or empty: a few bytes that keep a restart's replay short) only once the
      log has grown by as many records as the state has producers since the saved offset, so
      snapshots cost at most one encoded entry per record appended, and a restart replays at
      most that many records with producer ids before its state is current again."""
    mark = state.snapshot_mark
    if mark is None or high_watermark < mark.offset:
        return True
    if high_watermark == mark.offset:
        return False
    size = len(state.entries)
    changed = state.last_batch_offset >= mark.offset or state.removals != mark.removals
    if size and not changed:
        return False
    return high_watermark - mark.offset >= size


def rebuild(
    entries: dict[int, ProducerEntry], batches: Iterable[ProducerBatch], *, log_end_offset: int
) -> ProducerStateManager:
    """The state after a snapshot's `entries` and then the log's `batches` (in offset order),
    exact (rollback-able) from `log_end_offset` on."""
    state = ProducerStateManager(entries, exact_from=log_end_offset)
    for b in batches:
        state.apply(b)
    return state


# ---------------------------------------------------------------------------- snapshots


def entries_to_doc(entries: dict[int, ProducerEntry]) -> list[list[Any]]:
    """msgpack-able: [[producer_id, epoch, [[first_seq, last_seq, first_off, last_off], ...]]]"""
    return [
        [
            e.producer_id,
            e.epoch,
            [[b.first_seq, b.last_seq, b.first_offset, b.last_offset] for b in e.batches],
        ]
        for e in entries.values()
    ]


def entries_from_doc(doc: list[list[Any]]) -> dict[int, ProducerEntry]:
    out = {}
    for producer_id, epoch, batches in doc:
        out[int(producer_id)] = ProducerEntry(
            producer_id=int(producer_id),
            epoch=int(epoch),
            batches=tuple(
                BatchMetadata(first_seq=a, last_seq=b, first_offset=c, last_offset=d)
                for a, b, c, d in batches
            ),
        )
    return out
