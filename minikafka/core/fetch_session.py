"""The leader's fetch sessions (KIP-227; Kafka's FetchSession.scala: FetchManager,
FetchSessionCache, FetchSession, CachedPartition), sans IO.

A follower that holds a session sends only what changed: partitions added or whose fetch state
moved (`FetchRequest.partitions`) and partitions dropped (`forgotten`); the leader keeps the rest
in the session and answers only partitions with news. So an idle, caught-up follower costs the
leader nothing per partition.

Rules (Kafka's FetchMetadata and FetchManager.newContext):
- `session_epoch` FINAL_EPOCH (-1) is a sessionless fetch (consumers, older peers, sessions off);
  with a session id it closes that session first.
- INITIAL_EPOCH (0) is a full fetch that opens a session (closing the one named, if any); the
  response carries the new id, or INVALID_SESSION_ID (0) when no slot is free, and the follower
  then fetches full again next time.
- Any other epoch is incremental: an unknown id (or another replica's) is
  FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH; otherwise the session
  takes the request's changes and expects `next_epoch` (which wraps from INT32_MAX to 1).
- Slots are bounded (`max.incremental.fetch.session.cache.slots`). A new session first drops
  the sessions idle longer than `eviction_ms` (Kafka's `min.incremental.fetch.session.eviction.ms`),
  then takes a free slot or none; an active session of another replica is never stolen. (Kafka
  also ranks non-follower sessions by size; only followers hold sessions here.)
- What a partition's response must carry (CachedPartition.maybeUpdateResponseData): records, a
  high watermark or log start offset the follower has not been told, an error or a diverging
  epoch; after an error the cached HW is -1, so the partition is sent again once the error has
  gone. A partition that is answered moves to the end of the session's rotation (Kafka's
  IncrementalFetchContext re-adds it to the partition map).
- Which partitions the leader looks at for an incremental fetch: the ones sent, the ones that
  changed on the leader since the last look (`dirty`, fed by `mark_changed`), and the ones being
  `watched`: behind the leader, out of the ISR or in error at the last look. A partition that is
  none of these is caught up and idle: nothing to read, nothing to tell.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from minikafka.common import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.wire.messages import FetchPartition, FetchPartitionResponse, FetchRequest

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
DEFAULT_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: FINAL stays FINAL; INT32_MAX wraps to 1 (0 means a new one)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True, kw_only=True)
class CachedPartition:
    """Kafka's CachedPartition: the follower's fetch state as last sent, and what the follower
    has been told. Mutable: the session updates it in place as Kafka's does."""

    fetch: FetchPartition
    high_watermark: int = -1  # as last sent to the follower (-1: never)
    log_start_offset: int = -1
    seq: int = 0  # rotation order: lower goes first
    caught_up: bool = False  # at the leader's LEO, in sync, no error at the last look
    seen_ms: int = 0  # when the leader last processed a fetch of it


@dataclass(slots=True, kw_only=True)
class FetchSession:
    id: int
    replica_id: int
    epoch: int  # the epoch the next request must carry
    created_ms: int
    last_used_ms: int
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    dirty: set[TopicPartition] = field(default_factory=set)
    watched: set[TopicPartition] = field(default_factory=set)
    next_seq: int = 0

    def put(self, fp: FetchPartition) -> None:
        """Add a partition (at the end of the rotation) or update its fetch state."""
        tp = TopicPartition(fp.topic, fp.partition)
        cached = self.partitions.get(tp)
        if cached is None:
            self.partitions[tp] = CachedPartition(fetch=fp, seq=self._take_seq())
        else:
            cached.fetch = fp

    def move_to_end(self, tp: TopicPartition) -> None:
        cached = self.partitions.get(tp)
        if cached is not None:
            cached.seq = self._take_seq()

    def _take_seq(self) -> int:
        self.next_seq += 1
        return self.next_seq


class ContextKind(Enum):
    SESSIONLESS = "sessionless"  # Kafka's SessionlessFetchContext
    FULL = "full"  # FullFetchContext: a new session (or none if no slot)
    INCREMENTAL = "incremental"  # IncrementalFetchContext
    ERROR = "error"  # SessionErrorContext


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchContext:
    kind: ContextKind
    session: FetchSession | None = None
    error_code: ErrorCode = ErrorCode.NONE


def must_respond(cached: CachedPartition, part: FetchPartitionResponse) -> bool:
    """CachedPartition.maybeUpdateResponseData: whether an incremental response carries `part`;
    when it does, the follower is now told its HW and log start offset."""
    respond = (
        bool(part.records)
        or part.error_code != ErrorCode.NONE
        or part.diverging_epoch is not None
        or part.high_watermark != cached.high_watermark
        or part.log_start_offset != cached.log_start_offset
    )
    if respond:
        cached.high_watermark = part.high_watermark
        cached.log_start_offset = part.log_start_offset
    if part.error_code != ErrorCode.NONE:
        # Kafka: an invalid HW, so the partition is sent again once the error goes away.
        cached.high_watermark = -1
    return respond


class FetchSessionCache:
    """Kafka's FetchSessionCache and FetchManager: the sessions by id, least recently used first,
    and which sessions hold each partition (so a change reaches them without a scan)."""

    def __init__(
        self,
        *,
        rng: random.Random,
        max_slots: int = DEFAULT_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
    ) -> None:
        self.rng = rng  # session ids (Kafka: ThreadLocalRandom)
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.holders: dict[TopicPartition, set[int]] = {}
        self.evictions = 0

    def new_context(self, req: FetchRequest, now_ms: int) -> FetchContext:
        """FetchManager.newContext: decide what kind of fetch `req` is and update the cache."""
        if req.session_epoch == FINAL_EPOCH:
            self.remove(req.session_id)
            return FetchContext(kind=ContextKind.SESSIONLESS)
        if req.session_epoch == INITIAL_EPOCH:
            self.remove(req.session_id)
            session = self.create(req.replica_id, req.partitions, now_ms)
            return FetchContext(kind=ContextKind.FULL, session=session)
        session = self.sessions.get(req.session_id)
        if session is None or session.replica_id != req.replica_id:
            return FetchContext(
                kind=ContextKind.ERROR, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            )
        if session.epoch != req.session_epoch:
            return FetchContext(
                kind=ContextKind.ERROR, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH
            )
        for fp in req.partitions:
            tp = TopicPartition(fp.topic, fp.partition)
            session.put(fp)
            self.holders.setdefault(tp, set()).add(session.id)
        self._forget(session, (TopicPartition(f.topic, f.partition) for f in req.forgotten))
        session.epoch = next_epoch(session.epoch)
        self._touch(session, now_ms)
        return FetchContext(kind=ContextKind.INCREMENTAL, session=session)

    def create(
        self, replica_id: int, partitions: Iterable[FetchPartition], now_ms: int
    ) -> FetchSession | None:
        """A new session holding `partitions`, or None when no slot can be had."""
        self._evict_stale(now_ms)
        if len(self.sessions) >= self.max_slots:
            return None
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self.rng.randint(1, INT32_MAX)
        session = FetchSession(
            id=session_id,
            replica_id=replica_id,
            epoch=next_epoch(INITIAL_EPOCH),
            created_ms=now_ms,
            last_used_ms=now_ms,
        )
        for fp in partitions:
            session.put(fp)
            self.holders.setdefault(TopicPartition(fp.topic, fp.partition), set()).add(session_id)
        self.sessions[session_id] = session
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._forget(session, list(session.partitions))
        return session

    def mark_changed(self, tp: TopicPartition) -> list[FetchSession]:
        """`tp` changed on the leader (LEO, HW, role): the sessions holding it look at it in
        their next response; returns them (the shell wakes their long polls)."""
        out = []
        for session_id in self.holders.get(tp, ()):
            session = self.sessions[session_id]
            session.dirty.add(tp)
            out.append(session)
        return out

    def caught_up_holders(
        self, tp: TopicPartition, log_end_offset: int
    ) -> list[tuple[int, int, int]]:
        """Before the leader's LEO moves past `log_end_offset`: (replica id, fetch offset, time)
        of each session follower caught up at it as of its latest fetch. A sessionless follower
        would have fetched `tp` at that LEO then, so the shell records that fetch first
        (Partition.updateFollowerFetchState) and the ISR's caught-up clocks stay Kafka's."""
        out = []
        for session_id in self.holders.get(tp, ()):
            session = self.sessions[session_id]
            cached = session.partitions[tp]
            if cached.caught_up and cached.fetch.fetch_offset == log_end_offset:
                out.append(
                    (
                        session.replica_id,
                        cached.fetch.fetch_offset,
                        max(session.last_used_ms, cached.seen_ms),
                    )
                )
        return out

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self.sessions.move_to_end(session.id)

    def _evict_stale(self, now_ms: int) -> None:
        """Drop the sessions idle past eviction_ms, least recently used first. Kafka evicts one
        only when the cache is full; here every new session sweeps them, so the sessions of a
        follower that restarted (and never closed them) do not hold memory until the cache fills."""
        while self.sessions:
            oldest = next(iter(self.sessions.values()))
            if now_ms - oldest.last_used_ms <= self.eviction_ms:
                return
            self.remove(oldest.id)
            self.evictions += 1

    def _forget(self, session: FetchSession, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            session.partitions.pop(tp, None)
            session.dirty.discard(tp)
            session.watched.discard(tp)
            holders = self.holders.get(tp)
            if holders is not None:
                holders.discard(session.id)
                if not holders:
                    del self.holders[tp]


def request_candidates(
    session: FetchSession, requested: Iterable[FetchPartition]
) -> set[TopicPartition]:
    """The partitions an incremental fetch looks at when it arrives: those sent, those that
    changed on the leader since the last look (the dirty set is taken), those watched."""
    tps = {TopicPartition(fp.topic, fp.partition) for fp in requested}
    return tps | take_dirty(session) | (session.watched & session.partitions.keys())


def take_dirty(session: FetchSession) -> set[TopicPartition]:
    """The partitions that changed since the last look (cleared)."""
    dirty, session.dirty = session.dirty, set()
    return {tp for tp in dirty if tp in session.partitions}


def order_partitions(
    session: FetchSession, tps: Iterable[TopicPartition], rng: random.Random | None
) -> list[TopicPartition]:
    """The read order under the response cap (KIP-74): with a session the leader picks which
    partitions carry data, so it also gives each the same chance, by a shuffle from `rng`
    (KIP-73's `random`) or, with rng None, by the session's rotation (Kafka's `rotate`:
    answered partitions go to the end)."""
    present = [tp for tp in tps if tp in session.partitions]
    if rng is not None:
        present.sort()  # a set's order is not the seed's: sort, then shuffle
        rng.shuffle(present)
        return present
    present.sort(key=lambda tp: session.partitions[tp].seq)
    return present
