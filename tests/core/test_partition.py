"""The leader's view of one partition (minikafka.core.partition), in the spirit of Kafka's
PartitionTest and ReplicaTest: HW over the maximal ISR (KIP-497), the caught-up rule of
Replica.updateFetchState, ISR shrink/expand proposals and their deadlines.

Unless a test says otherwise: leader 1 of replicas [1, 2, 3], ISR [1, 2, 3], leader epoch 5,
partition epoch 10, leader LEO = epoch start offset = 100, HW 90, created at now 0, lag max 10 s.
"""

from __future__ import annotations

import pytest

from minikafka.common import TopicPartition
from minikafka.core.partition import PartitionLeaderState

TP = TopicPartition("t", 0)
LAG = 10_000


def make(**kw) -> PartitionLeaderState:
    args = dict(
        tp=TP,
        local_id=1,
        replicas=[1, 2, 3],
        isr=[1, 2, 3],
        leader_epoch=5,
        partition_epoch=10,
        leader_epoch_start_offset=100,
        log_end_offset=100,
        high_watermark=90,
        now_ms=0,
    )
    args.update(kw)
    return PartitionLeaderState(**args)


# ---------------------------------------------------------------------------- construction


def test_initial_state():
    p = make()
    assert p.replicas == (1, 2, 3) and p.isr == (1, 2, 3) and p.pending_isr is None
    assert p.effective_isr() == frozenset({1, 2, 3})
    assert (p.leader_epoch, p.partition_epoch) == (5, 10)
    assert (p.log_end_offset, p.high_watermark) == (100, 90)
    # followers' LEOs are unknown until they fetch (Kafka resetReplicaState, new leader)
    assert [p.follower_log_end_offset(r) for r in (1, 2, 3)] == [100, -1, -1]


@pytest.mark.parametrize(
    "kw",
    [
        {"local_id": 4},  # leader not a replica
        {"isr": [2, 3]},  # leader not in the ISR
        {"isr": [1, 4]},  # ISR member not a replica
        {"high_watermark": 101},  # HW beyond LEO
        {"high_watermark": -1},
    ],
)
def test_constructor_rejects_inconsistent_state(kw):
    with pytest.raises(ValueError):
        make(**kw)


# ---------------------------------------------------------------------------- high watermark


def test_hw_advances_only_when_every_isr_member_has_the_offset():
    p = make()
    assert p.on_leader_append(110) is False  # min(110, ?, ?) : followers unknown (-1)
    assert p.on_follower_fetch(2, 105, now_ms=10) is False  # min(110, 105, -1) = -1
    assert p.high_watermark == 90
    assert p.on_follower_fetch(3, 100, now_ms=10) is True  # min(110, 105, 100) = 100
    assert p.high_watermark == 100
    assert p.on_follower_fetch(3, 110, now_ms=20) is True  # min(110, 105, 110) = 105
    assert p.high_watermark == 105
    assert p.on_follower_fetch(2, 110, now_ms=20) is True  # min(110, 110, 110) = 110
    assert p.high_watermark == 110
    assert p.on_follower_fetch(2, 110, now_ms=30) is False  # nothing new


def test_hw_is_capped_by_the_leader_leo():
    p = make(log_end_offset=100, high_watermark=100)
    p.on_follower_fetch(2, 100, now_ms=1)
    p.on_follower_fetch(3, 100, now_ms=1)
    assert p.high_watermark == 100  # min(100, 100, 100): followers cannot be ahead


def test_hw_never_moves_back():
    p = make()  # HW 90, followers unknown: the minimum (-1) is below it
    assert p.maybe_advance_hw() is False and p.high_watermark == 90
    # the controller commits an ISR with a replica that is behind the HW
    p = make(isr=[1, 2], high_watermark=100)
    p.on_follower_fetch(2, 100, now_ms=1)
    p.on_follower_fetch(3, 60, now_ms=1)
    p.propose_isr([1, 2, 3])  # (as if the controller asked for it)
    assert p.on_alter_partition_result(accepted=True, isr=[1, 2, 3], partition_epoch=11) is False
    assert p.high_watermark == 100  # min(100, 100, 60) = 60 < 100: stays


def test_followers_outside_the_isr_do_not_hold_the_hw():
    p = make(isr=[1, 2])
    p.on_follower_fetch(3, 0, now_ms=1)  # far behind, but not in the ISR
    assert p.on_follower_fetch(2, 100, now_ms=1) is True  # min(100, 100) = 100
    assert p.high_watermark == 100


@pytest.mark.parametrize("replicas", [[1], [1, 2, 3]])
def test_leader_only_isr_advances_hw_on_append(replicas):
    p = make(replicas=replicas, isr=[1], high_watermark=100)
    assert p.on_leader_append(110) is True  # min over {1} = 110
    assert p.high_watermark == 110
    assert p.on_leader_append(110) is False  # same LEO: nothing new
    assert p.on_leader_append(125) is True and p.high_watermark == 125


def test_leader_leo_cannot_move_back():
    p = make()
    with pytest.raises(ValueError):
        p.on_leader_append(99)


# ---------------------------------------------------------------------------- pending ISR (KIP-497)


def _stall_replica_2():
    """ISR [1, 2, 3]; replica 2 stops at 100 while 3 keeps up with the leader at 110."""
    p = make()
    p.on_follower_fetch(2, 100, now_ms=0)  # at the leader LEO 100: caught up at 0
    p.on_leader_append(110)
    p.on_follower_fetch(3, 110, now_ms=0)  # HW = min(110, 100, 110) = 100
    assert p.high_watermark == 100
    return p


def test_pending_shrink_keeps_the_hw_conservative():
    p = _stall_replica_2()
    # at 10_001 ms replica 2 was last caught up 10_001 > 10_000 ms ago
    proposal = p.shrink_proposal(now_ms=10_001, lag_max_ms=LAG)
    assert proposal == [1, 3]
    p.propose_isr(proposal)
    assert p.pending_isr == (1, 3)
    # committed [1, 2, 3] ∪ pending [1, 3]: replica 2 still holds the HW
    assert p.effective_isr() == frozenset({1, 2, 3})
    assert p.maybe_advance_hw() is False and p.high_watermark == 100
    assert p.on_follower_fetch(3, 110, now_ms=10_002) is False
    # the controller commits the shrink: HW = min(110, 110) over {1, 3}
    assert p.on_alter_partition_result(accepted=True, isr=[1, 3], partition_epoch=11) is True
    assert (p.isr, p.pending_isr, p.partition_epoch, p.high_watermark) == ((1, 3), None, 11, 110)
    assert not p.is_in_sync(2)


def test_rejected_shrink_changes_nothing_but_the_pending_flag():
    p = _stall_replica_2()
    p.propose_isr(p.shrink_proposal(now_ms=10_001, lag_max_ms=LAG))
    assert p.on_alter_partition_result(accepted=False) is False
    assert (p.isr, p.pending_isr, p.partition_epoch, p.high_watermark) == ((1, 2, 3), None, 10, 100)
    # and a new proposal may be made
    assert p.shrink_proposal(now_ms=10_002, lag_max_ms=LAG) == [1, 3]


def test_pending_expand_already_holds_the_hw():
    p = make(isr=[1, 2], high_watermark=100)
    p.on_follower_fetch(2, 100, now_ms=1)
    p.on_follower_fetch(3, 100, now_ms=1)  # 3 reaches HW 100 = epoch start offset
    proposal = p.expand_proposal()
    assert proposal == [1, 2, 3]
    p.propose_isr(proposal)
    assert p.effective_isr() == frozenset({1, 2, 3})  # committed [1, 2] ∪ pending [1, 2, 3]
    p.on_leader_append(120)
    assert p.on_follower_fetch(2, 120, now_ms=2) is False  # min(120, 120, 100) over maximal ISR
    assert p.high_watermark == 100
    assert p.on_follower_fetch(3, 115, now_ms=2) is True  # min(120, 120, 115) = 115
    assert p.on_alter_partition_result(accepted=True, isr=[1, 2, 3], partition_epoch=11) is False
    assert p.is_in_sync(3) and p.high_watermark == 115


def test_one_proposal_at_a_time():
    p = _stall_replica_2()
    p.propose_isr([1, 3])
    assert p.shrink_proposal(now_ms=50_000, lag_max_ms=LAG) is None
    assert p.expand_proposal() is None
    assert p.next_deadline_ms(LAG) is None
    with pytest.raises(ValueError):
        p.propose_isr([1, 2, 3])


@pytest.mark.parametrize("bad", [[2, 3], [1, 4]])
def test_propose_isr_validates(bad):
    p = make()
    with pytest.raises(ValueError):
        p.propose_isr(bad)  # without the leader / with a stranger
    assert p.pending_isr is None


def test_alter_partition_answers_that_are_stale_or_incomplete():
    p = make()
    assert p.on_alter_partition_result(accepted=True, isr=[1], partition_epoch=99) is False
    assert p.isr == (1, 2, 3)  # nothing in flight: ignored
    p.propose_isr([1, 2])
    with pytest.raises(ValueError):
        p.on_alter_partition_result(accepted=True)  # accepted needs isr and partition epoch
    # a partition epoch older than ours is ignored (Kafka: "we have a newer version")
    assert p.on_alter_partition_result(accepted=True, isr=[1, 2], partition_epoch=9) is False
    assert (p.isr, p.partition_epoch, p.pending_isr) == ((1, 2, 3), 10, None)


# ---------------------------------------------------------------------------- expand


@pytest.mark.parametrize(
    ("fetch_offset", "expected"),
    [
        (89, None),  # below HW 90
        (95, None),  # >= HW but below the epoch start offset 100
        (100, [1, 2, 3]),  # has everything before this epoch
    ],
)
def test_expand_needs_hw_and_epoch_start_offset(fetch_offset, expected):
    p = make(isr=[1, 2], log_end_offset=120)
    p.on_follower_fetch(3, fetch_offset, now_ms=1)
    assert p.expand_proposal() == expected


def test_expand_after_catching_up():
    p = make(isr=[1], high_watermark=100)
    assert p.expand_proposal() is None  # nobody has fetched
    p.on_follower_fetch(3, 50, now_ms=1)
    assert p.expand_proposal() is None  # 50 < HW 100
    p.on_follower_fetch(3, 100, now_ms=2)
    p.on_follower_fetch(2, 100, now_ms=2)
    assert p.expand_proposal() == [1, 2, 3]  # committed ISR, then newcomers in replica order


# ---------------------------------------------------------------------------- caught-up rule


def test_steady_follower_one_batch_behind_stays_in_sync():
    # Leader appends 10 records every second; replica 2 fetches every second from what it had,
    # always 10 behind the leader's LEO, but always at the leader's LEO of its previous fetch,
    # so it was caught up one second ago (Kafka Replica.updateFetchState, second branch).
    p = make(replicas=[1, 2], isr=[1, 2])
    leo = 100
    p.on_follower_fetch(2, 100, now_ms=0)  # at LEO 100: caught up at 0
    for t in range(1_000, 60_001, 1_000):
        leo += 10
        p.on_leader_append(leo)
        p.on_follower_fetch(2, leo - 10, now_ms=t)  # >= leader LEO at the previous fetch
        assert p.shrink_proposal(now_ms=t, lag_max_ms=LAG) is None
        assert p.next_deadline_ms(LAG) == (t - 1_000) + LAG + 1
    assert p.replica_lag(2) == 10


def test_slow_follower_falls_out_even_though_it_keeps_fetching():
    # Leader appends 20/s; replica 2 gains only 5/s. Fetch k (at k s) is at 100 + 5k while the
    # leader's LEO at fetch k-1 was 100 + 20(k-1): only k = 1 reaches it (105 >= 100), proving
    # the follower caught up at 0; from k = 2 on (110 < 120, ...) last_caught_up stays 0.
    p = make(replicas=[1, 2], isr=[1, 2])
    p.on_follower_fetch(2, 100, now_ms=0)  # at LEO 100: caught up at 0
    leo, got = 100, 100
    for t in range(1_000, 10_001, 1_000):
        leo, got = leo + 20, got + 5
        p.on_leader_append(leo)
        p.on_follower_fetch(2, got, now_ms=t)
    assert (leo, got) == (300, 150)
    assert p.next_deadline_ms(LAG) == 0 + LAG + 1
    assert p.shrink_proposal(now_ms=10_000, lag_max_ms=LAG) is None  # 10_000 - 0 <= 10_000
    p.on_leader_append(leo + 20)
    p.on_follower_fetch(2, got + 5, now_ms=10_001)  # 155 < 300 (LEO at the previous fetch)
    assert p.shrink_proposal(now_ms=10_001, lag_max_ms=LAG) == [1]  # 10_001 - 0 > 10_000


@pytest.mark.parametrize(("now", "expected"), [(13_000, None), (13_001, [1, 3])])
def test_stalled_follower_boundary(now, expected):
    # Replica 2 last caught up at 3_000 (fetched at the leader's LEO) then stops fetching.
    p = make()
    p.on_follower_fetch(2, 100, now_ms=3_000)
    p.on_follower_fetch(3, 100, now_ms=3_000)
    p.on_leader_append(105)
    p.on_follower_fetch(3, 105, now_ms=12_000)
    assert p.next_deadline_ms(LAG) == 3_000 + LAG + 1 == 13_001
    # exactly lag_max behind (13_000 - 3_000 = 10_000) is still in sync; one ms more is out
    assert p.shrink_proposal(now_ms=now, lag_max_ms=LAG) == expected


def test_follower_at_the_leader_leo_never_falls_out():
    # Kafka isCaughtUp: leaderEndOffset == logEndOffset, whatever the time since.
    p = make(replicas=[1, 2], isr=[1, 2])
    p.on_follower_fetch(2, 100, now_ms=0)
    assert p.next_deadline_ms(LAG) is None
    assert p.shrink_proposal(now_ms=1_000_000, lag_max_ms=LAG) is None
    p.on_leader_append(101)  # now it is behind, caught up last at 0: due at 0 + 10_000 + 1
    assert p.next_deadline_ms(LAG) == 10_001
    assert p.shrink_proposal(now_ms=1_000_000, lag_max_ms=LAG) == [1]


def test_isr_followers_start_caught_up_at_creation_and_the_leader_stays():
    p = make(now_ms=5_000)  # followers 2 and 3 in the ISR: caught up at 5_000, LEO unknown
    assert p.next_deadline_ms(LAG) == 15_001
    assert p.shrink_proposal(now_ms=15_000, lag_max_ms=LAG) is None
    assert p.shrink_proposal(now_ms=15_001, lag_max_ms=LAG) == [1]  # never the leader itself


def test_next_deadline_is_the_earliest_and_skips_non_isr_followers():
    p = make(isr=[1, 2])
    p.on_follower_fetch(2, 100, now_ms=2_000)  # caught up at 2_000
    p.on_leader_append(110)
    p.on_follower_fetch(3, 0, now_ms=1)  # not in the ISR: no deadline for it
    assert p.next_deadline_ms(LAG) == 12_001
    assert p.next_deadline_ms(500) == 2_501
    assert make(replicas=[1], isr=[1]).next_deadline_ms(LAG) is None


def test_committed_follower_that_never_caught_up_is_due_at_once():
    # The controller commits replica 3, whose only fetch was behind the leader: Kafka's
    # lastCaughtUpTimeMs is 0 (ancient), so it is out at the next check.
    p = make(isr=[1, 2], log_end_offset=120, high_watermark=100)
    p.on_follower_fetch(2, 100, now_ms=7_000)  # in the ISR since creation: caught up at 0
    p.on_follower_fetch(3, 100, now_ms=7_000)  # first fetch, below LEO 120: never caught up
    p.propose_isr(p.expand_proposal())  # 100 >= HW 100 and >= epoch start 100
    p.on_alter_partition_result(accepted=True, isr=[1, 2, 3], partition_epoch=11)
    # replica 2 is due at 0 + 10_000 + 1; replica 3 at once: the latest now_ms seen, 7_000
    assert p.next_deadline_ms(LAG) == 7_000
    assert p.shrink_proposal(now_ms=7_000, lag_max_ms=LAG) == [1, 2]


# ---------------------------------------------------------------------------- reads and errors


def test_unknown_replicas():
    p = make()
    with pytest.raises(ValueError):
        p.on_follower_fetch(9, 100, now_ms=1)
    with pytest.raises(ValueError):
        p.follower_log_end_offset(9)
    with pytest.raises(ValueError):
        p.replica_lag(9)
    assert p.is_in_sync(9) is False
    with pytest.raises(ValueError):
        p.on_follower_fetch(1, 100, now_ms=1)  # the leader does not fetch from itself


@pytest.mark.parametrize("offset", [-1, 101])
def test_fetch_offset_outside_the_leader_log_is_rejected(offset):
    p = make()
    with pytest.raises(ValueError):
        p.on_follower_fetch(2, offset, now_ms=1)
    assert p.follower_log_end_offset(2) == -1  # nothing recorded


def test_replica_lag():
    p = make(log_end_offset=120, high_watermark=100)
    assert p.replica_lag(1) == 0  # the leader itself
    assert p.replica_lag(2) == 120  # not fetched yet: counts as having nothing
    p.on_follower_fetch(2, 95, now_ms=1)
    assert p.replica_lag(2) == 25  # 120 - 95
    p.on_leader_append(130)
    assert p.replica_lag(2) == 35  # 130 - 95


def test_is_in_sync_is_the_committed_isr():
    p = make(isr=[1, 2])
    p.on_follower_fetch(3, 100, now_ms=1)
    p.propose_isr(p.expand_proposal())
    assert p.is_in_sync(2) and not p.is_in_sync(3)  # pending does not count
    p.on_alter_partition_result(accepted=True, isr=[1, 2, 3], partition_epoch=11)
    assert p.is_in_sync(3)


def test_snapshot_is_plain_values():
    p = _stall_replica_2()
    p.propose_isr([1, 3])
    snap = p.snapshot()
    assert snap["topic"] == "t" and snap["partition"] == 0 and snap["leader"] == 1
    assert snap["isr"] == [1, 2, 3] and snap["pending_isr"] == [1, 3]
    assert (snap["log_end_offset"], snap["high_watermark"]) == (110, 100)
    assert snap["followers"] == [
        {"replica": 2, "log_end_offset": 100, "lag": 10, "last_caught_up_ms": 0,
         "last_fetch_ms": 0, "in_sync": True},
        {"replica": 3, "log_end_offset": 110, "lag": 0, "last_caught_up_ms": 0,
         "last_fetch_ms": 0, "in_sync": True},
    ]  # fmt: skip


# ---------------------------------------------------------------- controller-made ISR changes


def _leader_of_three() -> PartitionLeaderState:
    return make(
        leader_epoch=4,
        partition_epoch=7,
        leader_epoch_start_offset=0,
        log_end_offset=10,
        high_watermark=0,
    )


def test_controller_removing_a_dead_follower_unblocks_the_hw():
    st = _leader_of_three()
    st.on_follower_fetch(2, 10, now_ms=1)  # follower 2 has everything; 3 never fetched
    assert st.high_watermark == 0  # 3 is in the ISR with LEO unknown: HW held at 0
    # The controller fences broker 3: ISR [1, 2] at partition epoch 8, same leader epoch.
    assert st.apply_controller_state(replicas=[1, 2, 3], isr=[1, 2], partition_epoch=8, now_ms=2)
    assert st.high_watermark == 10 and st.isr == (1, 2) and st.partition_epoch == 8


def test_controller_state_drops_a_pending_proposal_and_ignores_old_epochs():
    st = _leader_of_three()
    st.propose_isr([1, 2])
    assert not st.apply_controller_state(
        replicas=[1, 2, 3], isr=[1, 3], partition_epoch=7, now_ms=1
    )
    assert st.pending_isr == (1, 2)  # epoch 7 is not newer: nothing changed
    st.apply_controller_state(replicas=[1, 2, 3], isr=[1, 3], partition_epoch=9, now_ms=1)
    assert st.pending_isr is None and st.isr == (1, 3)
    # The in-flight answer arriving late is ignored (nothing pending any more).
    assert not st.on_alter_partition_result(accepted=True, isr=[1, 2], partition_epoch=8)
    assert st.isr == (1, 3)


def test_controller_state_keeps_follower_progress():
    st = _leader_of_three()
    st.on_follower_fetch(2, 10, now_ms=5)
    st.apply_controller_state(replicas=[1, 2, 3, 4], isr=[1, 2], partition_epoch=8, now_ms=6)
    assert st.follower_log_end_offset(2) == 10
    assert st.follower_log_end_offset(4) == -1


# ---------------------------------------------------------------------------- low watermark


def test_the_low_watermark_is_the_smallest_log_start_of_the_live_replicas():
    """Partition.lowWatermarkIfLeader: a live follower that never reported one counts as -1."""
    p = make()
    assert p.low_watermark(50, alive={1, 2, 3}) == -1
    assert p.on_follower_log_start(2, 30) and not p.on_follower_log_start(2, 30)
    assert not p.on_follower_log_start(3, -1)  # a fetch that reports none changes nothing
    assert p.low_watermark(50, alive={1, 2}) == 30  # broker 3 is not alive: not waited for
    assert p.on_follower_log_start(3, 70)
    assert p.low_watermark(50, alive={1, 2, 3}) == 30
    assert p.on_follower_log_start(2, 60)
    assert p.low_watermark(50, alive={1, 2, 3}) == 50  # the leader's own is the smallest
