"""KIP-227 fetch sessions, sans IO: the leader's cache (core/fetch_session.py) and the follower's
handler (core/fetch_session_handler.py), as tables and as one story of the two talking."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from minikafka.common import TopicPartition
from minikafka.core.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INT32_MAX,
    INVALID_SESSION_ID,
    CachedPartition,
    ContextKind,
    FetchSessionCache,
    must_respond,
    next_epoch,
    order_partitions,
    request_candidates,
)
from minikafka.core.fetch_session_handler import FetchSessionHandler
from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    ForgottenPartition,
)

REPLICA = 2


def fp(
    partition: int, offset: int = 0, *, topic: str = "t", max_bytes: int = 100
) -> FetchPartition:
    return FetchPartition(
        topic=topic, partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
    )


def tp(partition: int) -> TopicPartition:
    return TopicPartition("t", partition)


def request(
    partitions: list[FetchPartition],
    *,
    session_id: int = 0,
    epoch: int = FINAL_EPOCH,
    forgotten: list[int] = (),  # type: ignore[assignment]
    replica_id: int = REPLICA,
) -> FetchRequest:
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=partitions,
        session_id=session_id,
        session_epoch=epoch,
        forgotten=[ForgottenPartition(topic="t", partition=p) for p in forgotten],
    )


def cache(**kwargs: object) -> FetchSessionCache:
    return FetchSessionCache(rng=random.Random(1), **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- epochs


@pytest.mark.parametrize(
    ("epoch", "after"),
    [(FINAL_EPOCH, FINAL_EPOCH), (-7, FINAL_EPOCH), (0, 1), (1, 2), (41, 42), (INT32_MAX, 1)],
)
def test_next_epoch_wraps_to_one_never_to_the_initial_epoch(epoch, after):
    assert next_epoch(epoch) == after


def test_every_request_epoch_against_a_session_at_epoch_three():
    """Kafka's newContext, exhaustively over the epochs around the one expected."""
    for epoch in range(-2, 7):
        c = cache()
        created = c.new_context(request([fp(0)], epoch=INITIAL_EPOCH), now_ms=0).session
        assert created is not None
        created.epoch = 3
        ctx = c.new_context(request([], session_id=created.id, epoch=epoch), now_ms=1)
        if epoch == FINAL_EPOCH:  # sessionless, and the session is closed
            assert ctx.kind is ContextKind.SESSIONLESS and created.id not in c.sessions
        elif epoch == INITIAL_EPOCH:  # a new session replaces the one named
            assert ctx.kind is ContextKind.FULL and ctx.session is not None
            assert created.id not in c.sessions and ctx.session.id in c.sessions
        elif epoch == 3:
            assert ctx.kind is ContextKind.INCREMENTAL and created.epoch == 4
        else:  # -2 too: only -1 is FINAL (FetchMetadata.isFull)
            assert ctx.kind is ContextKind.ERROR
            assert ctx.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
            assert created.epoch == 3  # unchanged: the follower starts over


def test_epoch_wraps_in_the_cache():
    c = cache()
    s = c.new_context(request([fp(0)], epoch=INITIAL_EPOCH), now_ms=0).session
    assert s is not None and s.epoch == 1
    s.epoch = INT32_MAX
    assert (
        c.new_context(request([], session_id=s.id, epoch=INT32_MAX), 1).kind
        is ContextKind.INCREMENTAL
    )
    assert s.epoch == 1


def test_unknown_session_or_another_replicas_session_is_not_found():
    c = cache()
    s = c.new_context(request([fp(0)], epoch=INITIAL_EPOCH), now_ms=0).session
    assert s is not None and s.id != INVALID_SESSION_ID
    for req in (
        request([], session_id=s.id + 1, epoch=1),
        request([], session_id=s.id, epoch=1, replica_id=REPLICA + 1),
    ):
        ctx = c.new_context(req, now_ms=1)
        assert (ctx.kind, ctx.error_code) == (
            ContextKind.ERROR,
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        )
    assert s.epoch == 1


# ---------------------------------------------------------------------------- partitions


def test_incremental_adds_updates_and_forgets():
    c = cache()
    s = c.new_context(request([fp(0), fp(1), fp(2)], epoch=INITIAL_EPOCH), now_ms=0).session
    assert s is not None
    c.new_context(request([fp(1, 50), fp(3)], session_id=s.id, epoch=1, forgotten=[2]), now_ms=1)
    assert list(s.partitions) == [tp(0), tp(1), tp(3)]
    assert s.partitions[tp(1)].fetch.fetch_offset == 50
    assert c.holders == {tp(0): {s.id}, tp(1): {s.id}, tp(3): {s.id}}


def test_a_forgotten_partition_re_added_starts_fresh_at_the_end_of_the_rotation():
    c = cache()
    s = c.new_context(request([fp(0), fp(1)], epoch=INITIAL_EPOCH), now_ms=0).session
    assert s is not None
    s.partitions[tp(0)].high_watermark = 10
    s.watched.add(tp(0))
    s.dirty.add(tp(0))
    c.new_context(request([], session_id=s.id, epoch=1, forgotten=[0]), now_ms=1)
    assert tp(0) not in s.watched and tp(0) not in s.dirty and tp(0) not in c.holders
    c.new_context(request([fp(0, 5)], session_id=s.id, epoch=2), now_ms=2)
    assert s.partitions[tp(0)].high_watermark == -1  # told nothing yet: answered next time
    assert order_partitions(s, [tp(0), tp(1)], None) == [tp(1), tp(0)]


def test_changes_reach_only_the_sessions_holding_the_partition():
    c = cache()
    s1 = c.new_context(request([fp(0), fp(1)], epoch=INITIAL_EPOCH), now_ms=0).session
    s2 = c.new_context(request([fp(1)], epoch=INITIAL_EPOCH, replica_id=3), now_ms=0).session
    assert s1 is not None and s2 is not None
    assert {s.id for s in c.mark_changed(tp(0))} == {s1.id}
    assert {s.id for s in c.mark_changed(tp(1))} == {s1.id, s2.id}
    assert c.mark_changed(tp(9)) == []
    s1.watched.add(tp(1))
    assert request_candidates(s1, [fp(5)]) == {tp(0), tp(1), tp(5)}
    assert s1.dirty == set()  # taken
    assert request_candidates(s1, []) == {tp(1)}  # watched stays


@pytest.mark.parametrize(
    ("change", "respond"),
    [
        ({}, False),
        ({"records": b"x"}, True),
        ({"high_watermark": 11}, True),
        ({"log_start_offset": 1}, True),
        ({"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER}, True),
        ({"diverging_epoch": EpochEndOffset(epoch=1, end_offset=3)}, True),
    ],
)
def test_must_respond_table(change, respond):
    """maybeUpdateResponseData: what the follower has been told is updated only when sent."""
    cached = CachedPartition(fetch=fp(0), high_watermark=10, log_start_offset=0)
    part = FetchPartitionResponse(
        topic="t", partition=0, error_code=ErrorCode.NONE, high_watermark=10, log_start_offset=0
    )
    part = replace(part, **change)
    assert must_respond(cached, part) is respond
    told_hw = -1 if part.error_code else part.high_watermark  # resent once the error is gone
    assert (cached.high_watermark, cached.log_start_offset) == (told_hw, part.log_start_offset)
    cleared = replace(part, records=b"", error_code=0, diverging_epoch=None)
    assert must_respond(cached, cleared) is bool(part.error_code)  # then told, then quiet
    assert must_respond(cached, cleared) is False


def test_rotation_and_seeded_shuffle():
    c = cache()
    s = c.new_context(request([fp(p) for p in range(6)], epoch=INITIAL_EPOCH), now_ms=0).session
    assert s is not None
    s.move_to_end(tp(1))
    s.move_to_end(tp(0))
    tps = {tp(p) for p in range(6)}
    assert order_partitions(s, tps, None) == [tp(2), tp(3), tp(4), tp(5), tp(1), tp(0)]
    orders = [order_partitions(s, tps, random.Random(seed)) for seed in range(50)]
    assert all(sorted(o) == sorted(tps) for o in orders)
    assert len({tuple(o) for o in orders}) > 40  # fresh orders
    assert orders[7] == order_partitions(s, set(tps), random.Random(7))  # replayable
    assert order_partitions(s, {tp(0), tp(99)}, None) == [tp(0)]  # not in the session: skipped


def test_caught_up_holders_are_the_idle_followers_at_the_leo():
    c = cache()
    s = c.new_context(request([fp(0, 10), fp(1, 7)], epoch=INITIAL_EPOCH), now_ms=100).session
    assert s is not None
    s.partitions[tp(0)].caught_up = True
    s.partitions[tp(1)].caught_up = True
    c.new_context(request([], session_id=s.id, epoch=1), now_ms=400)
    assert c.caught_up_holders(tp(0), 10) == [(REPLICA, 10, 400)]
    assert c.caught_up_holders(tp(1), 10) == []  # behind the LEO: not idle
    s.partitions[tp(0)].caught_up = False
    assert c.caught_up_holders(tp(0), 10) == []


# ---------------------------------------------------------------------------- slots


def test_slots_are_bounded_and_only_idle_sessions_are_evicted():
    c = cache(max_slots=2, eviction_ms=1000)
    a = c.create(2, [fp(0)], now_ms=0)
    b = c.create(3, [fp(0)], now_ms=0)
    assert a is not None and b is not None
    assert c.create(4, [fp(0)], now_ms=1000) is None  # both used within eviction_ms
    c.new_context(request([], session_id=a.id, epoch=1), now_ms=900)  # a used: b is the LRU
    d = c.create(4, [fp(0)], now_ms=1001)
    assert d is not None and set(c.sessions) == {a.id, d.id} and c.evictions == 1
    assert c.holders[tp(0)] == {a.id, d.id}
    ctx = c.new_context(request([], session_id=b.id, epoch=1, replica_id=3), now_ms=1002)
    assert ctx.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_new_session_sweeps_every_stale_one():
    c = cache(max_slots=10, eviction_ms=1000)
    old = [c.create(r, [fp(0)], now_ms=r) for r in range(3)]
    fresh = c.create(9, [fp(1)], now_ms=900)
    assert None not in old and fresh is not None and c.evictions == 0
    newest = c.create(8, [fp(1)], now_ms=1500)  # the three from t <= 2 are idle past 1000 ms
    assert newest is not None and set(c.sessions) == {fresh.id, newest.id}
    assert c.evictions == 3 and tp(0) not in c.holders


def test_no_slots_means_sessionless_full_fetches():
    c = cache(max_slots=0)
    ctx = c.new_context(request([fp(0)], epoch=INITIAL_EPOCH), now_ms=0)
    assert ctx.kind is ContextKind.FULL and ctx.session is None


# ---------------------------------------------------------------------------- follower handler


def test_handler_full_then_incremental_sends_only_changes():
    h = FetchSessionHandler()
    first = h.build([fp(0), fp(1), fp(2)])
    assert (first.session_id, first.session_epoch, first.full) == (0, INITIAL_EPOCH, True)
    assert [f.partition for f in first.to_send] == [0, 1, 2]
    assert h.handle_response(first, ErrorCode.NONE, 77)
    second = h.build([fp(0), fp(1, 5), fp(3)])
    assert (second.session_id, second.session_epoch, second.full) == (77, 1, False)
    assert [f.partition for f in second.to_send] == [1, 3]
    assert [f.partition for f in second.forgotten] == [2]
    assert set(second.wanted()) == {tp(0), tp(1), tp(3)}
    assert h.handle_response(second, ErrorCode.NONE, 77)
    third = h.build([fp(0), fp(1, 5), fp(3, max_bytes=7)])  # max bytes changed: sent
    assert ([f.partition for f in third.to_send], third.forgotten, third.session_epoch) == (
        [3],
        [],
        2,
    )


def test_handler_build_changes_looks_only_at_the_partitions_named():
    h = FetchSessionHandler()
    entries = {p: fp(p) for p in range(5)}
    h.handle_response(h.build(entries.values()), ErrorCode.NONE, 77)
    entries[1] = fp(1, 9)  # moved on
    del entries[2]  # delayed or throttled: not wanted now
    entries[7] = fp(7)  # new
    entries[4] = fp(4, 3)  # moved too, but not named: the session keeps the old state
    sent = h.build_changes([tp(1), tp(2), tp(7), tp(3)], lambda t: entries.get(t.partition))
    assert [f.partition for f in sent.to_send] == [1, 7]
    assert [f.partition for f in sent.forgotten] == [2]
    assert sent.size() == 5 and sent.get(tp(2)) is None and sent.get(tp(4)) == fp(4)
    assert h.handle_response(sent, ErrorCode.NONE, 77)
    assert sorted(t.partition for t in h.session) == [0, 1, 3, 4, 7]
    assert h.session[tp(1)] == fp(1, 9) and sent.get(tp(1)) == fp(1, 9)


@pytest.mark.parametrize(
    ("error", "session_id_after"),
    [(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0), (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 77)],
)
def test_handler_session_errors_make_the_next_fetch_full(error, session_id_after):
    h = FetchSessionHandler()
    h.handle_response(h.build([fp(0)]), ErrorCode.NONE, 77)
    sent = h.build([fp(0, 3)])
    assert not h.handle_response(sent, error, 0)
    nxt = h.build([fp(0, 3)])
    assert (nxt.session_id, nxt.session_epoch, len(nxt.to_send)) == (session_id_after, 0, 1)


def test_handler_lost_response_closes_the_session_with_a_full_fetch():
    h = FetchSessionHandler()
    h.handle_response(h.build([fp(0)]), ErrorCode.NONE, 77)
    h.build([fp(0, 3)])
    h.on_error()
    nxt = h.build([fp(0, 3)])
    assert (nxt.session_id, nxt.session_epoch, nxt.full) == (77, INITIAL_EPOCH, True)


def test_handler_without_a_slot_keeps_fetching_full_and_wraps_epochs():
    h = FetchSessionHandler()
    assert h.handle_response(h.build([fp(0)]), ErrorCode.NONE, INVALID_SESSION_ID)
    assert h.build([fp(0)]).session_epoch == INITIAL_EPOCH
    h.handle_response(h.build([fp(0)]), ErrorCode.NONE, 5)
    h.epoch = INT32_MAX
    h.handle_response(h.build([fp(0)]), ErrorCode.NONE, 5)
    assert h.epoch == 1


def test_disabled_handler_is_sessionless():
    h = FetchSessionHandler(enabled=False)
    for _ in range(3):
        sent = h.build([fp(0), fp(1)])
        assert (sent.session_id, sent.session_epoch, len(sent.to_send)) == (0, FINAL_EPOCH, 2)
        assert h.handle_response(sent, ErrorCode.NONE, 0)


# ---------------------------------------------------------------------------- the two together


@pytest.mark.parametrize("seed", range(8))
def test_story_the_leaders_session_always_matches_what_the_follower_wants(seed):
    """A random walk: partitions come and go and move on, responses get lost and epochs get
    garbled. After every answered fetch the leader's session holds exactly the partitions the
    follower wanted, with the fetch state it wanted."""
    rng = random.Random(seed)
    c = cache(max_slots=1, eviction_ms=20)
    h = FetchSessionHandler()
    offsets = {p: 0 for p in range(6)}
    answered = 0
    for step in range(400):
        for p in list(offsets):
            if rng.random() < 0.1:
                offsets.pop(p)
        if rng.random() < 0.3:
            offsets[rng.randrange(10)] = rng.randrange(100)
        for p in offsets:
            if rng.random() < 0.3:
                offsets[p] += 1
        sent = h.build([fp(p, o) for p, o in sorted(offsets.items())])
        req = request(
            sent.to_send,
            session_id=sent.session_id,
            epoch=sent.session_epoch + (1 if rng.random() < 0.05 and not sent.full else 0),
            forgotten=[f.partition for f in sent.forgotten],
        )
        ctx = c.new_context(req, now_ms=step)
        if rng.random() < 0.05:  # the response is lost
            h.on_error()
            continue
        ok = h.handle_response(sent, ctx.error_code, ctx.session.id if ctx.session else 0)
        assert ok == (ctx.kind is not ContextKind.ERROR)
        if ok and ctx.session is None:
            # No slot: a full fetch whose lost response left an orphan session behind, held
            # until it is idle past eviction_ms (Kafka's too). The follower fetches full again.
            assert sent.full and h.build([]).full
        elif ok:
            answered += 1
            held = {t: cp.fetch for t, cp in ctx.session.partitions.items()}
            assert held == sent.wanted() == h.session
    assert answered > 250
