"""Groups that clients create are bounded (core/group/coordinator.py, group_offsets.py, load.py):
a refused JoinGroup leaves no group, Empty groups and their offsets expire as KIP-211 says, no
request or wake costs work in proportion to the number of groups, and a group's metadata
record brings a Stable group back at a new coordinator without a rebalance."""

from __future__ import annotations

import itertools

import pytest

from minikafka.core.group import (
    COORDINATOR_NOT_AVAILABLE,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNSUPPORTED_VERSION,
    ExpireGroup,
    Group,
    GroupConfig,
    GroupCoordinator,
    OffsetAndMetadata,
    PersistGroup,
    SyncResponse,
)
from minikafka.core.group.load import LoadedPartition

MIN = 60_000
RETENTION = 60 * MIN  # offsets.retention.minutes = 60
TICK = 10 * MIN  # offsets.retention.check.interval.ms
SESSION = 10_000
T0 = ("t", 0)


def coordinator(**cfg: object) -> GroupCoordinator:
    counter = itertools.count(1)
    config = dict(
        initial_rebalance_delay_ms=0,
        offsets_retention_ms=RETENTION,
        retention_check_interval_ms=TICK,
    )
    config.update(cfg)
    return GroupCoordinator(
        config=GroupConfig(**config),  # type: ignore[arg-type]
        id_factory=lambda: f"id{next(counter)}",
    )


def join(c: GroupCoordinator, group: str, member_id: str = "", now: int = 0, **kw: object):
    args: dict[str, object] = dict(
        member_id=member_id,
        client_id="c",
        protocol_type="consumer",
        protocols=[("range", b"sub")],
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=30_000,
        require_known_member_id=False,
        now_ms=now,
    )
    args.update(kw)
    return c.join(group, **args)


def stable(c: GroupCoordinator, group: str, now: int = 0) -> str:
    """One member, generation 1, Stable at `now` (its record stored)."""
    mid = join(c, group, now=now).member_id
    c.on_deadline(now)  # the initial delay (0) completes the join
    assert c.sync(group, member_id=mid, generation_id=1, assignments={mid: b"A"}, now_ms=now)
    (effect,) = [e for e in c.take_effects() if isinstance(e, PersistGroup)]
    c.group_stored(group, generation_id=effect.record.generation_id, error=NONE, now_ms=now)
    assert c.describe(group).state == "Stable"
    return mid


def commit(c: GroupCoordinator, group: str, offset: int, now: int, member: str = "", gen=-1):
    out = c.commit(group, member_id=member, generation_id=gen, offsets={T0: (offset, "")}, now_ms=now)
    for e in out.effects:
        c.restore(group, e.offsets, log_offset=now)  # the append succeeded
    return out


# ------------------------------------------------------------------- a refused join: no group


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        (dict(session_timeout_ms=10), INVALID_SESSION_TIMEOUT),
        (dict(session_timeout_ms=1_800_001), INVALID_SESSION_TIMEOUT),
        (dict(group_instance_id="static"), UNSUPPORTED_VERSION),
        (dict(protocol_type=""), INCONSISTENT_GROUP_PROTOCOL),
        (dict(protocols=[]), INCONSISTENT_GROUP_PROTOCOL),
    ],
)
def test_a_refused_join_leaves_no_group_behind(kw, code):
    c = coordinator()
    for i in range(100):
        assert join(c, f"g{i}", **kw).response.error == code
    assert c.groups == {} and c.list_groups() == ()
    assert c.next_deadline_ms() is None


def test_an_accepted_or_pending_join_creates_the_group():
    c = coordinator()
    assert join(c, "pending", require_known_member_id=True).response.error == MEMBER_ID_REQUIRED
    join(c, "joined")
    assert set(c.groups) == {"pending", "joined"}


def test_a_standalone_commit_creates_a_group_only_with_an_offset_to_store():
    c = coordinator()
    big = c.commit("s", member_id="", generation_id=-1, offsets={T0: (1, "x" * 5000)}, now_ms=0)
    assert big.errors == {T0: OFFSET_METADATA_TOO_LARGE} and "s" not in c.groups
    assert c.commit("s", member_id="", generation_id=-1, offsets={}, now_ms=0).errors == {}
    assert "s" not in c.groups
    commit(c, "s", 5, now=0)
    assert c.describe("s").state == "Empty" and c.fetch_offsets("s")[T0].offset == 5


# ------------------------------------------------------------------- expiry (KIP-211)


def test_a_standalone_groups_offsets_expire_retention_after_each_commit():
    c = coordinator()
    commit(c, "s", 5, now=0)
    c.commit("s", member_id="", generation_id=-1, offsets={("t", 1): (7, "")}, now_ms=30 * MIN)
    c.restore("s", {("t", 1): OffsetAndMetadata(offset=7, commit_timestamp_ms=30 * MIN)}, 1)
    c.take_effects()
    # T0 expires at 60 min, which is a check tick; ("t", 1) at 90 min, also a tick.
    assert c.next_deadline_ms() == RETENTION
    c.on_deadline(RETENTION - 1)
    assert set(c.fetch_offsets("s")) == {T0, ("t", 1)}
    c.on_deadline(RETENTION)
    assert set(c.fetch_offsets("s")) == {("t", 1)}
    assert c.take_effects() == [ExpireGroup(group_id="s", partitions=(T0,), group_removed=False)]
    assert c.next_deadline_ms() == 90 * MIN
    c.on_deadline(90 * MIN)
    # Gone; generation 0 never wrote a metadata record, so none is tombstoned (Kafka's rule).
    assert "s" not in c.groups and c.describe("s").state == "Dead"
    assert c.take_effects() == [
        ExpireGroup(group_id="s", partitions=(("t", 1),), group_removed=False)
    ]
    assert c.next_deadline_ms() is None


def test_an_expiry_waits_for_the_next_check_tick():
    c = coordinator()
    commit(c, "s", 5, now=7)  # expires at 60 min + 7 ms: the next check is at 70 min
    assert c.next_deadline_ms() == RETENTION + TICK
    c.on_deadline(RETENTION + 7)
    assert "s" in c.groups


def test_an_empty_consumer_groups_offsets_expire_retention_after_it_became_empty():
    c = coordinator()
    mid = stable(c, "g")
    commit(c, "g", 42, now=1000, member=mid, gen=1)
    # The member stays 5 hours: offsets older than the retention do not expire while it does.
    now = 0
    while now < 5 * RETENTION:
        now += 5000
        assert c.heartbeat("g", member_id=mid, generation_id=1, now_ms=now) == NONE
        c.on_deadline(now)
    assert c.fetch_offsets("g")[T0].offset == 42
    left = now
    c.leave("g", member_ids=[mid], now_ms=left)
    assert c.describe("g").state == "Empty"
    (effect,) = c.take_effects()  # the Empty group is stored (no wait)
    assert isinstance(effect, PersistGroup) and not effect.awaited
    assert effect.record.state_timestamp_ms == left and effect.record.members == ()
    due = -(-(left + RETENTION) // TICK) * TICK
    assert c.next_deadline_ms() == due
    c.on_deadline(due - 1)
    assert c.fetch_offsets("g")[T0].offset == 42
    c.on_deadline(due)
    assert "g" not in c.groups
    assert c.take_effects() == [ExpireGroup(group_id="g", partitions=(T0,), group_removed=True)]


def test_an_empty_group_without_offsets_is_removed_at_the_next_check():
    c = coordinator()
    mid = stable(c, "g", now=5)
    c.leave("g", member_ids=[mid], now_ms=6)
    c.take_effects()
    assert c.next_deadline_ms() == TICK
    c.on_deadline(TICK)
    assert "g" not in c.groups
    assert c.take_effects() == [ExpireGroup(group_id="g", partitions=(), group_removed=True)]


def test_a_commit_in_flight_holds_expiry_back():
    c = coordinator()
    commit(c, "s", 5, now=0)
    pending = c.commit("s", member_id="", generation_id=-1, offsets={T0: (6, "")}, now_ms=1)
    assert pending.effects
    c.on_deadline(10 * RETENTION)
    assert c.fetch_offsets("s")[T0].offset == 5  # nothing expired while the append is pending
    c.commit_failed("s", now_ms=10 * RETENTION)
    c.on_deadline(11 * RETENTION)
    assert "s" not in c.groups


def test_a_group_with_members_keeps_its_offsets():
    c = coordinator()
    mid = stable(c, "g")
    commit(c, "g", 1, now=0, member=mid, gen=1)
    for now in range(5000, 3 * RETENTION, 5000):
        c.heartbeat("g", member_id=mid, generation_id=1, now_ms=now)
        c.on_deadline(now)
    assert c.fetch_offsets("g")[T0].offset == 1


# ------------------------------------------------------------------- work per request / wake


class Counted:
    """Counts the groups a coordinator visits (Group.on_deadline, next_deadline_ms, expiry)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.visits = 0
        for name in ("on_deadline", "next_deadline_ms", "expiry_ms"):
            original = getattr(Group, name)

            def counting(group, *a, _original=original, **kw):
                self.visits += 1
                return _original(group, *a, **kw)

            monkeypatch.setattr(Group, name, counting)


@pytest.mark.parametrize("n", [100, 3000])
def test_a_request_and_a_wake_visit_only_the_groups_concerned(monkeypatch, n):
    """`n` groups (half with a member past its join, half Empty standalone with an offset);
    one heartbeat, then what the service's timer task does per round: the next deadline, and
    the wake at it firing the one due group. The groups visited do not grow with n (before
    the heap: every group, twice per round)."""
    c = coordinator()
    members = {}
    for i in range(n // 2):
        members[f"m{i}"] = join(c, f"m{i}", now=i).member_id
        c.on_deadline(i)  # the initial delay (0) completes the join: CompletingRebalance
        out = c.commit(f"s{i}", member_id="", generation_id=-1, offsets={T0: (1, "")}, now_ms=i)
        c.restore(f"s{i}", out.effects[0].offsets, log_offset=i)
    counted = Counted(monkeypatch)
    now = n // 2 + 100
    assert c.heartbeat("m0", member_id=members["m0"], generation_id=1, now_ms=now) == NONE
    c.next_deadline_ms()
    c.on_deadline(now)
    assert counted.visits <= 4
    counted.visits = 0
    # The earliest session (m1's; m0 just beat) expires: that group alone is visited.
    due = c.next_deadline_ms()
    assert due == 1 + SESSION
    c.on_deadline(due)
    assert c.describe("m1").state == "Empty"  # its only member expired
    assert counted.visits <= 6


# ------------------------------------------------------------------- storing and loading


def test_a_failed_store_answers_the_syncs_and_rebalances():
    c = coordinator()
    a = join(c, "g", client_id="a").member_id
    b = join(c, "g", client_id="b").member_id
    c.on_deadline(0)
    c.on_deadline(0)  # b joined during the initial delay: one more (of 0 ms)
    assert c.sync("g", member_id=b, generation_id=1, now_ms=1).response is None
    assert c.sync("g", member_id=a, generation_id=1, assignments={a: b"x"}, now_ms=1).response is None
    (effect,) = c.take_effects()
    assert effect.awaited
    done = c.group_stored("g", generation_id=1, error=COORDINATOR_NOT_AVAILABLE, now_ms=2)
    assert sorted((r.member_id, r.error) for r in done) == [
        (a, COORDINATOR_NOT_AVAILABLE),
        (b, COORDINATOR_NOT_AVAILABLE),
    ]
    assert c.describe("g").state == "PreparingRebalance"
    assert c.heartbeat("g", member_id=a, generation_id=1, now_ms=3) == REBALANCE_IN_PROGRESS
    # A late answer for a generation the group has left changes nothing.
    assert c.group_stored("g", generation_id=1, error=NONE, now_ms=4) == ()


def test_a_loaded_stable_group_serves_its_members_without_a_rebalance():
    old = coordinator()
    a = join(old, "g", client_id="a").member_id
    b = join(old, "g", client_id="b").member_id
    old.on_deadline(0)
    old.on_deadline(0)  # b joined during the initial delay: one more (of 0 ms)
    old.sync("g", member_id=a, generation_id=1, assignments={a: b"for-a", b: b"for-b"}, now_ms=1)
    (effect,) = old.take_effects()
    old.group_stored("g", generation_id=1, error=NONE, now_ms=1)
    commit_out = old.commit("g", member_id=a, generation_id=1, offsets={T0: (9, "m")}, now_ms=2)
    offsets = commit_out.effects[0].offsets

    new = coordinator()
    new.load(LoadedPartition(offsets={"g": offsets}, groups={"g": effect.record}), now_ms=100)
    s = new.describe("g")
    assert (s.state, s.protocol_type, s.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.assignment) for m in s.members] == [(a, b"for-a"), (b, b"for-b")]
    assert new.heartbeat("g", member_id=a, generation_id=1, now_ms=200) == NONE
    got = new.sync("g", member_id=b, generation_id=1, now_ms=200).response
    assert isinstance(got, SyncResponse) and (got.error, got.assignment) == (NONE, b"for-b")
    assert new.fetch_offsets("g")[T0].offset == 9
    # Sessions run at the new coordinator: a keeps beating, b falls silent and is expelled.
    assert new.heartbeat("g", member_id=a, generation_id=1, now_ms=5000) == NONE
    assert new.next_deadline_ms() == 200 + SESSION
    assert new.on_deadline(200 + SESSION) == ()
    assert [m.member_id for m in new.describe("g").members] == [a]
