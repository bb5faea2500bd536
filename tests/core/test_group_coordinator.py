"""Story tests for the classic consumer-group state machine (core/group_coordinator.py)."""

from __future__ import annotations

import itertools

import pytest

from minikafka.core.group import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
    ExpireGroup,
    GroupConfig,
    GroupCoordinator,
    JoinResponse,
    OffsetAndMetadata,
    PersistGroup,
    PersistOffsets,
    SyncResponse,
)

G = "g"
SESSION = 10_000
REBALANCE = 30_000
DELAY = 3_000
FORM = 2 * DELAY  # two members joined during the delay: Kafka waits one more delay
RANGE = [("range", b"r-meta")]


def coordinator(**cfg: object) -> GroupCoordinator:
    counter = itertools.count(1)
    return GroupCoordinator(
        config=GroupConfig(**cfg),  # type: ignore[arg-type]
        id_factory=lambda: f"id{next(counter)}",
    )


def form(c: GroupCoordinator) -> tuple[object, ...]:
    """Fire the initial delay and its one extension (members joined at 0 and during it)."""
    assert c.on_deadline(DELAY) == ()
    return c.on_deadline(FORM)


def join(c: GroupCoordinator, member_id: str = "", now: int = 0, **kw: object):
    args: dict[str, object] = dict(
        member_id=member_id,
        client_id=kw.pop("client_id", "c"),
        protocol_type="consumer",
        protocols=RANGE,
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=REBALANCE,
        require_known_member_id=False,
        now_ms=now,
    )
    args.update(kw)
    return c.join(G, **args)


def leader_sync(
    c: GroupCoordinator, member_id: str, generation_id: int, assignments: dict, now: int
) -> tuple[SyncResponse, tuple[object, ...]]:
    """The leader's SyncGroup, and the append of the group's metadata record that it asks for
    succeeding (storeGroup): -> the leader's answer, and the other parked syncs answered."""
    out = c.sync(
        G, member_id=member_id, generation_id=generation_id, assignments=assignments, now_ms=now
    )
    assert out.response is None  # parked until the record is durable
    (effect,) = [e for e in c.take_effects() if isinstance(e, PersistGroup)]
    assert effect.awaited and effect.record.generation_id == generation_id
    done = c.group_stored(G, generation_id=generation_id, error=NONE, now_ms=now)
    mine = [r for r in done if r.member_id == member_id]
    assert len(mine) == 1 and isinstance(mine[0], SyncResponse)
    return mine[0], tuple(r for r in done if r.member_id != member_id)


def stable_pair(c: GroupCoordinator) -> tuple[str, str]:
    """Two members, generation 1, Stable at t=FORM, a leads."""
    a = join(c, client_id="a").member_id
    b = join(c, client_id="b", now=100).member_id
    done = form(c)
    assert {r.member_id for r in done} == {a, b}
    c.sync(G, member_id=b, generation_id=1, now_ms=FORM)
    response, _ = leader_sync(c, a, 1, {a: b"A", b: b"B"}, FORM)
    assert response.assignment == b"A"
    assert c.describe(G).state == "Stable"
    return a, b


def test_one_member_waits_the_initial_delay_then_leads_generation_1():
    c = coordinator()
    out = join(c)
    assert out.member_id == "c-id1" and out.response is None
    assert c.describe(G).state == "PreparingRebalance"
    assert c.next_deadline_ms() == DELAY
    assert c.on_deadline(DELAY - 1) == ()
    assert c.describe(G).state == "PreparingRebalance"
    (resp,) = c.on_deadline(DELAY)
    assert isinstance(resp, JoinResponse)
    assert resp.error == NONE and resp.generation_id == 1
    assert resp.leader_id == resp.member_id == "c-id1"
    assert resp.protocol_type == "consumer" and resp.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in resp.members] == [("c-id1", b"r-meta")]
    assert c.describe(G).state == "CompletingRebalance"
    response, _ = leader_sync(c, "c-id1", 1, {"c-id1": b"x"}, DELAY)
    assert response == SyncResponse(
        group_id=G,
        member_id="c-id1",
        error=NONE,
        assignment=b"x",
        protocol_type="consumer",
        protocol_name="range",
    )
    assert c.describe(G).state == "Stable"


def test_member_id_required_round_trip():
    c = coordinator()
    first = join(c, require_known_member_id=True)
    assert first.response is not None and first.response.error == MEMBER_ID_REQUIRED
    assert first.response.member_id == "c-id1"
    assert c.describe(G).members == ()  # pending, not a member yet
    again = join(c, member_id="c-id1", require_known_member_id=True)
    assert again.member_id == "c-id1" and again.response is None
    (resp,) = c.on_deadline(DELAY)
    assert resp.member_id == "c-id1" and resp.error == NONE


def test_pending_member_that_never_returns_expires_and_stops_holding_the_rebalance():
    c = coordinator()
    a, b = stable_pair(c)
    pending = join(c, require_known_member_id=True, now=FORM).response
    assert pending is not None and pending.error == MEMBER_ID_REQUIRED
    # a leader rejoin starts a rebalance; b rejoins too, but the pending id is still awaited
    assert join(c, member_id=a, now=FORM).response is None
    assert join(c, member_id=b, now=FORM).response is None
    assert c.describe(G).state == "PreparingRebalance"
    assert c.next_deadline_ms() == FORM + SESSION  # the pending member's deadline
    done = c.on_deadline(FORM + SESSION)
    assert {r.member_id for r in done} == {a, b}
    assert all(r.generation_id == 2 for r in done)


def test_two_members_leader_gets_metadata_follower_none_and_sync_waits_for_leader():
    c = coordinator()
    a = join(c, client_id="a").member_id
    b = join(c, client_id="b", now=100, protocols=[("range", b"b-meta")]).member_id
    done = {r.member_id: r for r in form(c)}
    assert done[a].leader_id == a and done[b].leader_id == a
    assert [(m.member_id, m.metadata) for m in done[a].members] == [
        (a, b"r-meta"),
        (b, b"b-meta"),
    ]
    assert done[b].members == ()
    # the follower's sync parks until the leader's assignment arrives
    follower = c.sync(G, member_id=b, generation_id=1, now_ms=FORM + 1)
    assert follower.response is None and follower.completed == ()
    response, completed = leader_sync(c, a, 1, {a: b"A", b: b"B"}, FORM + 2)
    assert response.assignment == b"A"
    (other,) = completed
    assert isinstance(other, SyncResponse)
    assert other.member_id == b and other.assignment == b"B" and other.error == NONE
    # a late sync in Stable gets the stored assignment
    late = c.sync(G, member_id=b, generation_id=1, now_ms=FORM + 3)
    assert late.response is not None and late.response.assignment == b"B"


def test_rebalance_completes_at_once_when_all_known_members_rejoin():
    c = coordinator()
    a, b = stable_pair(c)
    assert join(c, member_id=a, now=5000).response is None  # leader rejoins: rebalance
    assert c.heartbeat(G, member_id=b, generation_id=1, now_ms=5001) == REBALANCE_IN_PROGRESS
    out = join(c, member_id=b, now=5002)
    assert out.response is not None and out.response.generation_id == 2
    (other,) = out.completed
    assert other.member_id == a and other.generation_id == 2 and other.leader_id == a


def test_sync_and_heartbeat_errors():
    c = coordinator()
    a, b = stable_pair(c)
    bad = c.sync(G, member_id="nobody", generation_id=1, now_ms=FORM)
    assert bad.response is not None and bad.response.error == UNKNOWN_MEMBER_ID
    bad = c.sync(G, member_id=a, generation_id=0, now_ms=FORM)
    assert bad.response is not None and bad.response.error == ILLEGAL_GENERATION
    assert c.sync("other", member_id=a, generation_id=1, now_ms=0).response.error == (
        UNKNOWN_MEMBER_ID
    )
    assert c.heartbeat(G, member_id=a, generation_id=1, now_ms=FORM) == NONE
    assert c.heartbeat(G, member_id=a, generation_id=2, now_ms=FORM) == ILLEGAL_GENERATION
    assert c.heartbeat(G, member_id="x", generation_id=1, now_ms=FORM) == UNKNOWN_MEMBER_ID
    assert c.heartbeat("other", member_id=a, generation_id=1, now_ms=0) == UNKNOWN_MEMBER_ID
    join(c, member_id=a, now=FORM)  # PreparingRebalance
    bad = c.sync(G, member_id=b, generation_id=1, now_ms=FORM)
    assert bad.response is not None and bad.response.error == REBALANCE_IN_PROGRESS


def test_third_member_triggers_rebalance_existing_learn_by_heartbeat_generation_2():
    c = coordinator()
    a, b = stable_pair(c)
    t = FORM + 1000
    third = join(c, client_id="z", now=t)
    assert third.response is None and c.describe(G).state == "PreparingRebalance"
    z = third.member_id
    assert c.heartbeat(G, member_id=a, generation_id=1, now_ms=t) == REBALANCE_IN_PROGRESS
    assert c.heartbeat(G, member_id=b, generation_id=1, now_ms=t) == REBALANCE_IN_PROGRESS
    assert join(c, member_id=b, now=t + 1).response is None
    out = join(c, member_id=a, now=t + 2)
    assert out.response is not None and out.response.generation_id == 2
    assert out.response.leader_id == a
    assert {m.member_id for m in out.response.members} == {a, b, z}
    assert {r.member_id for r in out.completed} == {b, z}
    assert c.describe(G).state == "CompletingRebalance"
    assert c.heartbeat(G, member_id=z, generation_id=2, now_ms=t + 3) == NONE


def test_member_not_rejoining_within_rebalance_timeout_is_removed():
    c = coordinator()
    a, b = stable_pair(c)
    t = 10_000
    join(c, member_id=a, now=t)
    # b keeps heartbeating (its session stays alive) but never rejoins
    for beat in (5000, 14000, 23000, 29000):
        assert c.heartbeat(G, member_id=b, generation_id=1, now_ms=t + beat) == (
            REBALANCE_IN_PROGRESS
        )
        assert c.on_deadline(t + beat) == ()
    assert c.next_deadline_ms() == t + REBALANCE
    assert c.on_deadline(t + REBALANCE - 1) == ()
    (resp,) = c.on_deadline(t + REBALANCE)
    assert resp.member_id == a and resp.generation_id == 2
    assert [m.member_id for m in resp.members] == [a]
    assert [m.member_id for m in c.describe(G).members] == [a]
    assert c.heartbeat(G, member_id=b, generation_id=2, now_ms=t + REBALANCE) == UNKNOWN_MEMBER_ID


def test_leader_not_rejoining_hands_leadership_to_a_member_that_did():
    c = coordinator()
    a, b = stable_pair(c)
    join(c, member_id=b, now=10_000, protocols=[("range", b"new")])  # new metadata: rebalance
    (resp,) = c.on_deadline(10_000 + REBALANCE)
    assert resp.member_id == b and resp.leader_id == b
    assert [(m.member_id, m.metadata) for m in resp.members] == [(b, b"new")]


def test_session_expiry_removes_member_and_rebalances():
    c = coordinator()
    a, b = stable_pair(c)
    # both sessions were renewed at sync time (FORM); a keeps beating, b goes silent
    assert c.next_deadline_ms() == FORM + SESSION
    assert c.heartbeat(G, member_id=a, generation_id=1, now_ms=FORM + 5000) == NONE
    assert c.next_deadline_ms() == FORM + SESSION  # still b's
    assert c.on_deadline(FORM + SESSION - 1) == ()
    assert c.on_deadline(FORM + SESSION) == ()
    assert [m.member_id for m in c.describe(G).members] == [a]
    assert c.describe(G).state == "PreparingRebalance"
    out = join(c, member_id=a, now=FORM + SESSION + 1)
    assert out.response is not None and out.response.generation_id == 2


def test_parked_members_are_kept_alive_past_their_session():
    c = coordinator()
    a = join(c).member_id
    # the join is parked for the initial delay, longer than nothing else: no session timer
    assert c.next_deadline_ms() == DELAY
    c.on_deadline(DELAY)
    response, _ = leader_sync(c, a, 1, {}, DELAY)
    assert response.error == NONE


def test_leave_group_rebalances_and_last_leave_empties():
    c = coordinator()
    a, b = stable_pair(c)
    out = c.leave(G, member_ids=[b, "ghost"], now_ms=5000)
    assert out.error == NONE and out.members == {b: NONE, "ghost": UNKNOWN_MEMBER_ID}
    assert c.describe(G).state == "PreparingRebalance"
    resp = join(c, member_id=a, now=5001).response
    assert resp is not None and resp.generation_id == 2 and resp.leader_id == a
    leader_sync(c, a, 2, {a: b"all"}, 5002)
    out = c.leave(G, member_ids=[a], now_ms=6000)
    summary = c.describe(G)
    assert summary.state == "Empty" and summary.members == ()
    assert c.groups[G].generation_id == 3
    # No timer left; the next cleanup (offsets.retention.check.interval.ms) removes the Empty
    # group, which has no offsets, with a tombstone for its metadata record.
    c.take_effects()
    assert c.next_deadline_ms() == 600_000
    assert c.on_deadline(600_000) == () and G not in c.groups
    assert c.take_effects() == [ExpireGroup(group_id=G, partitions=(), group_removed=True)]
    assert c.next_deadline_ms() is None
    assert c.leave("nope", member_ids=["x"], now_ms=0).members == {"x": UNKNOWN_MEMBER_ID}


def test_leave_answers_the_leavers_parked_join_and_completes_the_others():
    c = coordinator()
    a, b = stable_pair(c)
    join(c, member_id=a, now=5000)
    join(c, client_id="z", now=5000)  # parked new member
    z = "z-id3"
    out = c.leave(G, member_ids=[z, b], now_ms=5001)
    by_member = {r.member_id: r for r in out.completed}
    assert by_member[z].error == UNKNOWN_MEMBER_ID
    assert by_member[a].error == NONE and by_member[a].generation_id == 2


def test_rebalance_during_completing_answers_parked_syncs_rebalance_in_progress():
    c = coordinator()
    a = join(c, client_id="a").member_id
    b = join(c, client_id="b").member_id
    form(c)
    assert c.sync(G, member_id=b, generation_id=1, now_ms=FORM).response is None
    out = join(c, client_id="z", now=FORM + 1)
    (parked,) = out.completed
    assert isinstance(parked, SyncResponse)
    assert parked.member_id == b and parked.error == REBALANCE_IN_PROGRESS
    assert a != b


def test_rejoin_with_same_metadata_repeats_the_current_generation():
    c = coordinator()
    a = join(c, client_id="a").member_id
    b = join(c, client_id="b").member_id
    form(c)
    # CompletingRebalance: a lost its response and rejoins unchanged
    again = join(c, member_id=a, now=FORM + 1).response
    assert again is not None and again.generation_id == 1 and len(again.members) == 2
    leader_sync(c, a, 1, {}, FORM + 2)
    # Stable: a follower rejoining unchanged gets the current generation, no rebalance
    resp = join(c, member_id=b, now=FORM + 3).response
    assert resp is not None and resp.generation_id == 1 and resp.members == ()
    assert c.describe(G).state == "Stable"


def test_protocol_selection_by_votes():
    c = coordinator()
    rr, rg = ("roundrobin", b"rr"), ("range", b"rg")
    sticky = ("sticky", b"st")
    a = join(c, client_id="a", protocols=[rr, rg]).member_id
    join(c, client_id="b", protocols=[rg, rr])
    join(c, client_id="c", protocols=[rg, sticky, rr])
    done = {r.member_id: r for r in form(c)}
    assert {r.protocol_name for r in done.values()} == {"range"}
    assert [m.metadata for m in done[a].members] == [b"rg", b"rg", b"rg"]


def test_protocol_selection_tie_goes_to_first_members_preference():
    c = coordinator()
    join(c, client_id="a", protocols=[("x", b""), ("y", b"")])
    join(c, client_id="b", protocols=[("y", b""), ("x", b"")])
    assert {r.protocol_name for r in form(c)} == {"x"}


def test_inconsistent_group_protocol():
    c = coordinator()
    join(c, client_id="a")
    out = join(c, client_id="b", protocols=[("roundrobin", b"")])
    assert out.response is not None and out.response.error == INCONSISTENT_GROUP_PROTOCOL
    out = join(c, client_id="b", protocol_type="connect")
    assert out.response is not None and out.response.error == INCONSISTENT_GROUP_PROTOCOL
    out = join(coordinator(), protocols=[])
    assert out.response is not None and out.response.error == INCONSISTENT_GROUP_PROTOCOL


def test_join_refusals():
    c = coordinator(max_size=1)
    assert join(c, session_timeout_ms=10).response.error == INVALID_SESSION_TIMEOUT
    assert join(c, group_instance_id="i").response.error == UNSUPPORTED_VERSION
    assert join(c, member_id="who").response.error == UNKNOWN_MEMBER_ID  # no such group
    join(c)
    # acceptJoiningMember runs first: a stranger to a full group is refused for size
    assert join(c, member_id="who").response.error == GROUP_MAX_SIZE_REACHED
    assert join(c).response.error == GROUP_MAX_SIZE_REACHED
    roomy = coordinator()
    join(roomy)
    assert join(roomy, member_id="who").response.error == UNKNOWN_MEMBER_ID
    assert c.join("", member_id="").response.error == 24  # INVALID_GROUP_ID


def test_initial_delay_is_extended_while_members_keep_arriving():
    c = coordinator()
    join(c, client_id="a", now=0)
    join(c, client_id="b", now=1000)  # a new member during the delay
    assert c.on_deadline(DELAY) == ()
    assert c.next_deadline_ms() == 2 * DELAY
    assert len(c.on_deadline(2 * DELAY)) == 2


def test_initial_delay_extension_stops_at_the_rebalance_timeout():
    c = coordinator()
    join(c, client_id="a", rebalance_timeout_ms=4000)  # remaining = 1000
    join(c, client_id="b", now=1)
    assert c.on_deadline(DELAY) == ()
    assert c.next_deadline_ms() == DELAY + 1000
    join(c, client_id="c", now=DELAY + 1)
    assert len(c.on_deadline(DELAY + 1000)) == 3


def test_offset_commit_with_right_and_wrong_generation():
    c = coordinator()
    a, b = stable_pair(c)
    out = c.commit(G, member_id=a, generation_id=1, offsets={("t", 0): (42, "m")}, now_ms=7)
    assert out.errors == {("t", 0): NONE}
    # Pending until durable (Kafka's pendingOffsetCommits): not served before the shell's append.
    assert c.fetch_offsets(G, [("t", 0)])[("t", 0)].offset == -1
    c.restore(G, out.effects[0].offsets)
    assert out.effects == (
        PersistOffsets(
            group_id=G,
            offsets={("t", 0): OffsetAndMetadata(offset=42, metadata="m", commit_timestamp_ms=7)},
        ),
    )
    bad = c.commit(G, member_id=a, generation_id=0, offsets={("t", 0): (1, "")}, now_ms=8)
    assert bad.errors == {("t", 0): ILLEGAL_GENERATION} and bad.effects == ()
    bad = c.commit(G, member_id="x", generation_id=1, offsets={("t", 0): (1, "")}, now_ms=8)
    assert bad.errors == {("t", 0): UNKNOWN_MEMBER_ID}
    bad = c.commit(G, member_id="", generation_id=-1, offsets={("t", 0): (1, "")}, now_ms=8)
    assert bad.errors == {("t", 0): UNKNOWN_MEMBER_ID}  # not Empty: no simple commits
    big = c.commit(G, member_id=a, generation_id=1, offsets={("t", 1): (1, "x" * 5000)}, now_ms=9)
    assert big.errors == {("t", 1): OFFSET_METADATA_TOO_LARGE} and big.effects == ()
    assert c.fetch_offsets(G, [("t", 0), ("t", 1)])[("t", 0)].offset == 42
    # PreparingRebalance still accepts; CompletingRebalance answers REBALANCE_IN_PROGRESS
    join(c, member_id=a, now=10)
    ok = c.commit(G, member_id=b, generation_id=1, offsets={("t", 0): (43, "")}, now_ms=11)
    assert ok.errors == {("t", 0): NONE}
    join(c, member_id=b, now=12)
    busy = c.commit(G, member_id=b, generation_id=2, offsets={("t", 0): (44, "")}, now_ms=13)
    assert busy.errors == {("t", 0): REBALANCE_IN_PROGRESS}


def test_simple_commit_fetch_and_restore():
    c = coordinator()
    out = c.commit("s", member_id="", generation_id=-1, offsets={("t", 0): (5, "")}, now_ms=1)
    assert out.errors == {("t", 0): NONE} and c.describe("s").state == "Empty"
    c.restore("s", out.effects[0].offsets)  # the append succeeded
    stale = c.commit("new", member_id="m", generation_id=3, offsets={("t", 0): (5, "")}, now_ms=1)
    assert stale.errors == {("t", 0): ILLEGAL_GENERATION} and "new" not in c.groups
    got = c.fetch_offsets("s", [("t", 0), ("t", 9)])
    assert got[("t", 0)].offset == 5 and got[("t", 9)].offset == -1
    assert c.fetch_offsets("missing", [("t", 0)])[("t", 0)].offset == -1
    assert c.fetch_offsets("missing") == {}
    # a commit whose append failed is never restored: the old offset stays
    lost = c.commit("s", member_id="", generation_id=-1, offsets={("t", 0): (9, "")}, now_ms=2)
    assert lost.errors == {("t", 0): NONE}
    assert c.fetch_offsets("s", [("t", 0)])[("t", 0)].offset == 5
    # restore on a fresh coordinator rebuilds what PersistOffsets carried
    fresh = coordinator()
    fresh.restore("s", out.effects[0].offsets)
    assert {tp: f.offset for tp, f in fresh.fetch_offsets("s").items()} == {("t", 0): 5}


def test_describe_list_and_delete():
    c = coordinator()
    a, b = stable_pair(c)
    s = c.describe(G)
    assert (s.state, s.protocol_type, s.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.metadata, m.assignment) for m in s.members] == [
        (a, "a", b"r-meta", b"A"),
        (b, "b", b"r-meta", b"B"),
    ]
    join(c, member_id=a, now=FORM)
    s = c.describe(G)
    assert s.protocol == "" and all(m.metadata == b"" for m in s.members)
    assert c.describe("nope").state == "Dead"
    c.commit("s", member_id="", generation_id=-1, offsets={("t", 0): (1, "")}, now_ms=0)
    assert {(g.group_id, g.state) for g in c.list_groups()} == {
        (G, "PreparingRebalance"),
        ("s", "Empty"),
    }
    assert c.delete_groups([G, "s", "nope"]) == {
        G: NON_EMPTY_GROUP,
        "s": NONE,
        "nope": GROUP_ID_NOT_FOUND,
    }


def test_dead_group_answers_coordinator_not_available():
    c = coordinator()
    c.commit("s", member_id="", generation_id=-1, offsets={("t", 0): (1, "")}, now_ms=0)
    group = c.groups["s"]
    c.delete_groups(["s"])
    assert group.describe().state == "Dead"
    kw = dict(client_id="c", protocol_type="consumer", protocols=RANGE)
    resp = group.join(
        member_id="",
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=REBALANCE,
        require_known_member_id=False,
        now_ms=0,
        **kw,
    ).response
    assert resp is not None and resp.error == COORDINATOR_NOT_AVAILABLE
    assert group.heartbeat(member_id="m", generation_id=1, now_ms=0) == COORDINATOR_NOT_AVAILABLE
    assert group.sync(member_id="m", generation_id=1, now_ms=0).response.error == (
        COORDINATOR_NOT_AVAILABLE
    )
    assert group.leave(member_ids=["m"], now_ms=0).error == COORDINATOR_NOT_AVAILABLE
    assert group.commit(
        member_id="", generation_id=-1, offsets={("t", 0): (1, "")}, now_ms=0
    ).errors == {("t", 0): COORDINATOR_NOT_AVAILABLE}


def test_heartbeat_in_empty_group_is_unknown_member():
    c = coordinator()
    c.commit("s", member_id="", generation_id=-1, offsets={("t", 0): (1, "")}, now_ms=0)
    assert c.heartbeat("s", member_id="m", generation_id=0, now_ms=0) == UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("seed", range(30))
def test_deadline_is_exactly_the_earliest_timer_and_nothing_happens_before_it(seed: int):
    """Random walks: next_deadline_ms() equals the earliest session / rebalance / initial-delay
    / pending deadline, on_deadline before it changes nothing, and at it something fires."""
    import random

    rng = random.Random(seed)
    tick = 10**12  # the cleanup (expiry) comes after the walk: only the timers are walked
    c = coordinator(retention_check_interval_ms=tick)
    now = 0
    for _ in range(40):
        group = c.groups.get(G)
        members = list(group.members) if group else []
        action = rng.randrange(6)
        if action == 0 or not members:
            join(
                c, client_id=rng.choice("abc"), now=now, require_known_member_id=rng.random() < 0.3
            )
        elif action == 1:
            join(c, member_id=rng.choice(members), now=now)
        elif action == 2:
            mid = rng.choice(members)
            gen = group.generation_id
            c.sync(G, member_id=mid, generation_id=gen, assignments={mid: b"x"}, now_ms=now)
            for e in c.take_effects():
                # The store of the group's record succeeds, fails, or is still in flight.
                if isinstance(e, PersistGroup) and e.awaited and rng.random() < 0.8:
                    error = NONE if rng.random() < 0.8 else COORDINATOR_NOT_AVAILABLE
                    gen = e.record.generation_id
                    c.group_stored(G, generation_id=gen, error=error, now_ms=now)
        elif action == 3:
            c.heartbeat(
                G, member_id=rng.choice(members), generation_id=group.generation_id, now_ms=now
            )
        elif action == 4:
            c.leave(G, member_ids=[rng.choice(members)], now_ms=now)
        else:
            deadline = c.next_deadline_ms()
            if deadline is not None and deadline < tick:
                before = c.describe(G), c.groups[G].generation_id, c.next_deadline_ms()
                if deadline > now:
                    assert c.on_deadline(deadline - 1) == ()
                    assert (c.describe(G), c.groups[G].generation_id) == before[:2]
                    assert c.next_deadline_ms() == deadline
                now = max(now, deadline)
                c.on_deadline(now)
                nxt = c.next_deadline_ms()
                assert nxt is None or nxt > now
        g = c.groups[G]
        expected = list(g.pending_members.values())
        if g.state.value == "PreparingRebalance":
            expected.append(g._join_deadline_ms)
        expected += [
            m.session_deadline_ms
            for m in g.members.values()
            if not m.awaiting_join and not m.awaiting_sync
        ]
        timer = c.next_deadline_ms()
        assert (None if timer == tick else timer) == (min(expected) if expected else None)
        # invariants
        assert (g.leader_id in g.members) if g.members else g.leader_id is None
        if g.state.value in ("CompletingRebalance", "Stable"):
            assert not any(m.awaiting_join for m in g.members.values())
        if g.state.value != "CompletingRebalance":
            assert not any(m.awaiting_sync for m in g.members.values())
        now += rng.randrange(0, 4000)


def test_unload_answers_parked_members_not_coordinator():
    """The offsets partition moved away: the groups go, and members parked in a join or a
    sync learn NOT_COORDINATOR at once (GroupMetadataManager.removeGroupsForPartition)."""
    c = coordinator()
    a, b = stable_pair(c)
    join(c, member_id=a, now=FORM)  # a rebalance: a's join is parked
    out = c.unload([G, "absent"])
    assert [(type(r).__name__, r.member_id, r.error) for r in out] == [
        ("JoinResponse", a, NOT_COORDINATOR)
    ]
    assert G not in c.groups and c.describe(G).state == "Dead"


def test_a_commit_written_earlier_in_the_log_never_replaces_a_later_one():
    """Appends of one offsets partition may be acknowledged in any order: the group serves the
    commit written last, as a reload of the log would (GroupMetadata.onOffsetCommitAppend)."""
    c = coordinator()
    first = OffsetAndMetadata(offset=100, metadata="", commit_timestamp_ms=1)
    second = OffsetAndMetadata(offset=200, metadata="", commit_timestamp_ms=2)
    c.restore("s", {("t", 0): second}, log_offset=8)
    c.restore("s", {("t", 0): first, ("t", 1): first}, log_offset=7)  # acknowledged later
    got = c.fetch_offsets("s", [("t", 0), ("t", 1)])
    assert (got[("t", 0)].offset, got[("t", 1)].offset) == (200, 100)
    c.restore("s", {("t", 0): first}, log_offset=9)  # written after: it replaces
    assert c.fetch_offsets("s", [("t", 0)])[("t", 0)].offset == 100
