"""The leader's fetch sessions in the shell (KIP-227; Kafka's FetchManager inside KafkaApis and
ReplicaManager.fetchMessages), around the pure cache of core/fetch_session.py.

- Full fetches (INITIAL_EPOCH) are served as sessionless ones (server/fetch_serve.py), then the
  session remembers what each partition was told.
- An incremental fetch records the follower's fetch offset (HW, ISR: core/partition.py) for the
  partitions it sent and for those the session watches (behind, out of the ISR, in error) or
  that changed since the last look; a caught-up idle partition needs none: a follower at the
  leader's LEO is caught up by definition. Just before the leader's LEO moves past such a
  partition, `before_leader_append` records the fetch a sessionless follower would have made at
  its latest request, so the ISR's caught-up clocks are what they would be without sessions.
- The long poll waits on one event per session, set by `partition_changed` (every
  LocalPartition.notify) for the sessions holding that partition: an idle wait touches no
  partition. A partition that changed is looked at (checked, read) when the wait ends.
- Read order under the response cap: the request's `partition_order` (`random`: a shuffle from
  this node's seeded RNG, KIP-73; otherwise the session's rotation, Kafka's), since with a
  session the leader, not the request, picks the partitions that carry data.
- Throttling is unchanged: `LeaderFetchPlan` (core/quota/planner.py) decides per partition at
  each read and charges the response actually sent; a throttled partition returns nothing and
  stays watched, so it is read again at the next fetch (Kafka keeps it in the session the same
  way). Client quotas never apply here: only followers fetch in sessions (consumers are
  sessionless on both listeners), and replicas are never client-throttled.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Protocol

import trio

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.core.fetch_session import (
    ContextKind,
    FetchSession,
    FetchSessionCache,
    must_respond,
    order_partitions,
    request_candidates,
    take_dirty,
)
from minikafka.core.fetcher import RANDOM
from minikafka.core.quota.planner import LeaderFetchPlan
from minikafka.core.replica_effects import Effect
from minikafka.errors import ErrorCode
from minikafka.server.fetch_read import (
    FetchHost,
    answer,
    charge_response,
    check_partition,
    leader_plan,
    read_limits,
    read_once,
    recheck_at,
)
from minikafka.server.listener import Reply
from minikafka.server.local_partition import LocalPartition
from minikafka.wire.messages import FetchPartitionResponse, FetchRequest, FetchResponse


class FetchSessions:
    """The session cache, the sessions' wake-up events and the RNG of the `random` order."""

    def __init__(
        self,
        *,
        max_slots: int,
        rng: random.Random,
        lookup: Callable[[TopicPartition], LocalPartition | None],
        execute: Callable[[LocalPartition, Iterable[Effect]], None],
    ) -> None:
        self.cache = FetchSessionCache(rng=rng, max_slots=max_slots)
        self.rng = rng
        self.lookup = lookup  # the hosted partitions
        self.execute = execute  # ReplicaManager.execute: the replica machine's effects
        self._events: dict[int, trio.Event] = {}

    def partition_changed(self, tp: TopicPartition) -> None:
        """LocalPartition.notify: the sessions holding `tp` look at it, and wake."""
        for session in self.cache.mark_changed(tp):
            event = self._events.get(session.id)
            if event is not None:
                event.set()

    def before_leader_append(self, p: LocalPartition) -> None:
        """The leader's LEO is about to move: record, for each session follower caught up at the
        current LEO, the fetch it made at its latest request (module docstring)."""
        if not p.is_leader:
            return
        for replica_id, offset, at_ms in self.cache.caught_up_holders(p.tp, p.log_end_offset):
            if p.replica.follower_fetch_error(replica_id) == ErrorCode.NONE:
                self.execute(p, p.replica.on_follower_fetch(replica_id, offset, at_ms))

    async def wait(self, session: FetchSession, deadline: float) -> None:
        """Until a partition of `session` changes, or the (Trio-clock) deadline."""
        if session.dirty:
            return
        event = self._events[session.id] = trio.Event()
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            self._events.pop(session.id, None)

    def classify(
        self, session: FetchSession, tp: TopicPartition, part: FetchPartitionResponse
    ) -> None:
        """After a look at `tp`: watch it unless it is caught up, in sync and error-free."""
        cached = session.partitions.get(tp)
        if cached is None:
            return
        p = self.lookup(tp)
        caught_up = (
            part.error_code == ErrorCode.NONE
            and part.diverging_epoch is None
            and p is not None
            and p.leader is not None
            and cached.fetch.fetch_offset == p.log_end_offset
            and p.leader.is_in_sync(session.replica_id)
        )
        cached.caught_up = caught_up
        if caught_up:
            session.watched.discard(tp)
        else:
            session.watched.add(tp)


class SessionHost(FetchHost, Protocol):
    """What a session fetch reads of the replica manager: a fetch's, and the sessions."""

    fetch_sessions: FetchSessions


FullFetch = Callable[[SessionHost, FetchRequest, "frozenset[str] | set[str]"], Awaitable[Reply]]


async def handle_session_fetch(
    rm: SessionHost,
    req: FetchRequest,
    known_topic: frozenset[str] | set[str],
    *,
    full: FullFetch,
) -> Reply:
    """A follower's fetch naming a session epoch (FetchManager.newContext decides its kind);
    `full` serves the request's partitions as a sessionless fetch does."""
    sessions = rm.fetch_sessions
    t = now_ms()
    ctx = sessions.cache.new_context(req, t)
    if ctx.kind is ContextKind.ERROR:
        rm.metrics.inc("fetch_session_errors")
        return Reply(response=FetchResponse(partitions=[], error_code=ctx.error_code))
    if ctx.kind is not ContextKind.INCREMENTAL:
        reply = await full(rm, req, known_topic)
        session = ctx.session
        if session is None:
            return reply
        assert isinstance(reply.response, FetchResponse)
        for part in reply.response.partitions:
            tp = TopicPartition(part.topic, part.partition)
            cached = session.partitions.get(tp)
            if cached is not None:
                must_respond(cached, part)  # the follower has been told all of it
                cached.seen_ms = t
                if part.records:  # the rotation starts as the follower's planner does
                    session.move_to_end(tp)
                sessions.classify(session, tp, part)
        return Reply(response=replace(reply.response, session_id=session.id))
    assert ctx.session is not None
    return await _incremental(rm, ctx.session, req, known_topic, t)


async def _incremental(
    rm: SessionHost,
    session: FetchSession,
    req: FetchRequest,
    known_topic: frozenset[str] | set[str],
    t: int,
) -> Reply:
    """Look at the candidates, long-poll on the session, answer the partitions with news."""
    sessions = rm.fetch_sessions
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    rng = sessions.rng if req.partition_order == RANDOM else None
    looked: dict[TopicPartition, FetchPartitionResponse | LocalPartition] = {}

    def look(tps: set[TopicPartition], *, record_fetch: bool) -> None:
        # Sorted: recording a follower's fetch can propose an ISR change, and the order of the
        # proposals is the controller's order of decisions; a set's follows the string hash.
        for tp in sorted(tps):
            cached = session.partitions[tp]
            looked[tp] = check_partition(
                rm, cached.fetch, req.replica_id, known_topic, t, record_fetch=record_fetch
            )
            if record_fetch:
                cached.seen_ms = t

    look(request_candidates(session, req.partitions), record_fetch=True)
    while True:
        order = order_partitions(session, looked, rng)
        fps = [session.partitions[tp].fetch for tp in order]
        readable = [
            (k, fps[k], p)
            for k, tp in enumerate(order)
            if isinstance(p := looked[tp], LocalPartition)
        ]
        early = len(readable) < len(order)  # an error or a divergence goes out at once
        plan = leader_plan(rm, req.replica_id, fps)
        limits = read_limits(rm, plan, readable)
        data = await read_once(rm, readable, limits, is_follower=True, max_bytes=req.max_bytes)
        enough = sum(len(d) for d in data) >= req.min_bytes
        if early or enough or trio.current_time() >= deadline:
            break
        if any(not p.is_leader for _k, _fp, p in readable):
            break
        await sessions.wait(session, recheck_at(plan, limits, deadline))
        # Changed partitions not looked at yet: checked and read; their fetch was recorded at
        # the request's arrival (or by before_leader_append), as a sessionless fetch's was.
        look(take_dirty(session) - looked.keys(), record_fetch=False)
    return _respond(rm, session, order, looked, readable, data, plan)


def _respond(
    rm: SessionHost,
    session: FetchSession,
    order: list[TopicPartition],
    looked: dict[TopicPartition, FetchPartitionResponse | LocalPartition],
    readable: list,
    data: list[bytes],
    plan: LeaderFetchPlan,
) -> Reply:
    """The partitions with news, in read order (maybeUpdateResponseData); the leader throttle
    is charged for exactly those."""
    parts: list[FetchPartitionResponse | None] = [None] * len(order)
    for (k, fp, p), records in zip(readable, data, strict=True):
        parts[k] = answer(fp, p, records)
    out = []
    for k, tp in enumerate(order):
        part = parts[k]
        if part is None:
            value = looked[tp]
            assert isinstance(value, FetchPartitionResponse)
            part = value
        cached = session.partitions.get(tp)
        if cached is not None and must_respond(cached, part):
            out.append(part)
            parts[k] = part
            session.move_to_end(tp)  # Kafka moves answered partitions to the end
        else:
            parts[k] = None  # not in the response, not charged
        rm.fetch_sessions.classify(session, tp, part)
    charge_response(rm, plan, parts)
    rm.metrics.inc("replication_bytes_out", sum(len(a.records) for a in out))
    return Reply(response=FetchResponse(partitions=out, session_id=session.id))
