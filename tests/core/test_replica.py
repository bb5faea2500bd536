"""Stories of the broker's replica machine (core/replica.py), without Trio: what the shell tests
(tests/server/test_broker.py, test_storage_failures.py, test_idempotence.py) check through
memory streams, checked here on the decisions and effects alone.

Broker 1 is this broker throughout; replica.lag.time.max.ms is 10 s."""

from __future__ import annotations

import pytest

from minikafka.common import TopicPartition
from minikafka.core.leader_and_isr import LeaderAndIsrAction, classify_leader_and_isr
from minikafka.core.producer_state import ProducerStateManager
from minikafka.core.records import iter_batches, make_batch
from minikafka.core.replica import LocalReplica
from minikafka.core.replica_effects import (
    PersistEpochs,
    ProposeIsr,
    ReplicaEvent,
    StartFetching,
    StopFetching,
    WakeWaiters,
)
from minikafka.errors import ErrorCode
from minikafka.wire.messages import PartitionState

TP = TopicPartition("t", 0)
LAG_MAX = 10_000


def state(
    *,
    leader: int,
    isr: list[int],
    replicas: list[int] | None = None,
    leader_epoch: int = 1,
    partition_epoch: int = 1,
) -> PartitionState:
    return PartitionState(
        topic=TP.topic,
        partition=TP.partition,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=isr,
        partition_epoch=partition_epoch,
        replicas=replicas if replicas is not None else isr,
    )


def replica(*, leo: int = 0, hw: int = 0, epochs: list[tuple[int, int]] | None = None):
    return LocalReplica(
        tp=TP,
        local_id=1,
        lag_max_ms=LAG_MAX,
        log_start_offset=0,
        log_end_offset=leo,
        high_watermark=hw,
        epochs=epochs or [],
        producers=ProducerStateManager(),
    )


def lead(r: LocalReplica, st: PartitionState, now_ms: int = 0) -> list:
    """Both steps, and the epoch write committed (as the shell does)."""
    effects = r.begin_leading(st) + r.become_leader(st, now_ms)
    for e in effects:
        if isinstance(e, PersistEpochs):
            r.on_append_committed(end_offset=None, epochs=e.epochs)
    return effects


def names(effects: list) -> list[str]:
    return [e.name for e in effects if isinstance(e, ReplicaEvent)]


def proposals(effects: list) -> list[ProposeIsr]:
    return [e for e in effects if isinstance(e, ProposeIsr)]


# ---------------------------------------------------------------------------- LeaderAndIsr


@pytest.mark.parametrize(
    ("current", "new", "action"),
    [
        (None, state(leader=1, isr=[1, 2]), LeaderAndIsrAction.LEAD),
        (None, state(leader=2, isr=[1, 2]), LeaderAndIsrAction.FOLLOW),
        (None, state(leader=2, isr=[2, 3]), LeaderAndIsrAction.IGNORE),
        (state(leader=1, isr=[1, 2]), state(leader=2, isr=[2, 3], leader_epoch=2),
         LeaderAndIsrAction.STOP),
        (state(leader=1, isr=[1], leader_epoch=3), state(leader=2, isr=[1, 2], leader_epoch=2),
         LeaderAndIsrAction.FENCED),
        (state(leader=1, isr=[1], partition_epoch=4), state(leader=1, isr=[1], partition_epoch=3),
         LeaderAndIsrAction.FENCED),
        # The same state again is a resend, not stale; a newer leader epoch wins over a lower
        # partition epoch.
        (state(leader=1, isr=[1]), state(leader=1, isr=[1]), LeaderAndIsrAction.LEAD),
        (state(leader=1, isr=[1], partition_epoch=9),
         state(leader=2, isr=[1, 2], leader_epoch=2, partition_epoch=1), LeaderAndIsrAction.FOLLOW),
    ],
)  # fmt: skip
def test_what_a_leader_and_isr_does_to_a_partition(current, new, action) -> None:
    assert classify_leader_and_isr(current, new, 1) is action


def test_a_new_leader_starts_its_epoch_at_the_log_end_and_persists_it() -> None:
    r = replica(leo=5, hw=3, epochs=[(0, 0)])
    st = state(leader=1, isr=[1, 2], leader_epoch=4)
    effects = r.begin_leading(st) + r.become_leader(st, now_ms=100)
    assert StopFetching() in effects
    assert PersistEpochs(epochs=((0, 0), (4, 5))) in effects
    assert names(effects) == ["become_leader"]
    assert WakeWaiters() in effects
    # The cache changes only when the write is committed (a failed write is retried by the
    # next append, which carries the entry: epochs_for_append).
    assert r.epochs == [(0, 0)]
    assert r.epochs_for_append() == [(0, 0), (4, 5)]
    r.on_append_committed(end_offset=None, epochs=[(0, 0), (4, 5)])
    assert r.epochs == [(0, 0), (4, 5)]
    # The HW is the one it had (the follower still has to fetch), the next offset the LEO.
    assert (r.is_leader, r.high_watermark, r.next_offset) == (True, 3, 5)


def test_a_leader_alone_in_the_isr_moves_the_hw_with_each_commit() -> None:
    r = replica(leo=2, hw=1)
    lead(r, state(leader=1, isr=[1]))
    assert r.high_watermark == 2  # at once: the ISR is the leader alone
    assert r.reserve(3) == 2 and r.reserve(1) == 5  # handed out ahead of the disk
    assert (r.next_offset, r.log_end_offset) == (6, 2)
    assert r.on_append_committed(end_offset=5) == [WakeWaiters()]
    assert (r.log_end_offset, r.high_watermark, r.next_offset) == (5, 5, 6)


def test_a_failed_write_gives_back_its_offsets_and_its_producer_batches() -> None:
    r = replica(leo=4, hw=4)
    lead(r, state(leader=1, isr=[1]))
    first = r.reserve(2)
    second = r.reserve(3)
    r.on_append_failed(second)
    assert r.next_offset == first + 2  # only the failed write's offsets come back
    r.on_append_failed(first)
    assert r.next_offset == 4 == r.log_end_offset
    # Never behind what is durable, whatever order the failures come in.
    r.on_append_failed(0)
    assert r.next_offset == 4


def test_acks_all_the_hw_waits_for_the_follower_and_wakes_the_waiters_when_it_moves() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1, 2]), now_ms=0)
    r.reserve(10)
    r.on_append_committed(end_offset=10)
    assert r.high_watermark == 0  # broker 2 has not fetched
    assert r.on_follower_fetch(2, 4, now_ms=10) == [WakeWaiters()]
    assert r.high_watermark == 4
    assert r.on_follower_fetch(2, 4, now_ms=20) == []  # nothing moved: nobody is woken
    r.on_follower_fetch(2, 10, now_ms=30)
    assert r.high_watermark == 10


def test_only_a_follower_of_the_partition_may_fetch_as_a_replica() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1, 2], replicas=[1, 2]))
    assert r.follower_fetch_error(2) == ErrorCode.NONE
    assert r.follower_fetch_error(3) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert r.follower_fetch_error(1) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # the leader itself
    r.begin_following(state(leader=2, isr=[1, 2], leader_epoch=2))
    assert r.follower_fetch_error(2) == ErrorCode.NOT_LEADER_OR_FOLLOWER


# ---------------------------------------------------------------------------- ISR


def test_a_lagging_follower_is_proposed_out_exactly_after_lag_max_and_the_hw_then_moves() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1, 2]), now_ms=0)
    r.reserve(5)
    r.on_append_committed(end_offset=5)
    # Caught up at 0 (makeLeader), behind ever since: due at 0 + lag max + 1.
    assert r.next_deadline_ms() == LAG_MAX + 1
    assert r.on_deadline(LAG_MAX) == []  # exactly lag max behind is still in sync
    effects = r.on_deadline(LAG_MAX + 1)
    assert proposals(effects) == [ProposeIsr(isr=(1,), why="shrink")]
    assert names(effects) == ["isr_change_proposed"]
    assert r.next_deadline_ms() is None  # one proposal at a time
    assert r.high_watermark == 0  # the controller has not accepted it yet (KIP-497)
    effects = r.on_alter_partition_result(leader_epoch=1, accepted=True, isr=[1], partition_epoch=2)
    assert names(effects) == ["isr_shrink"] and WakeWaiters() in effects
    assert (r.leader.isr, r.high_watermark) == ((1,), 5)


def test_a_fetching_follower_never_falls_out() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1, 2]), now_ms=0)
    for t in range(0, 5 * LAG_MAX, 1000):
        r.reserve(1)
        r.on_append_committed(end_offset=r.next_offset)
        r.on_follower_fetch(2, r.log_end_offset, now_ms=t)
        assert r.on_deadline(t) == []
    assert r.leader.isr == (1, 2)


def test_a_caught_up_follower_is_proposed_back_and_a_refusal_is_proposed_again() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1], replicas=[1, 2]), now_ms=0)
    r.reserve(3)
    r.on_append_committed(end_offset=3)
    assert proposals(r.on_follower_fetch(2, 1, now_ms=1)) == []  # below the HW
    effects = r.on_follower_fetch(2, 3, now_ms=2)
    assert proposals(effects) == [ProposeIsr(isr=(1, 2), why="expand")]
    refused = r.on_alter_partition_result(
        leader_epoch=1, accepted=False, error_code=ErrorCode.INVALID_UPDATE_VERSION
    )
    assert names(refused) == ["isr_change_rejected"]
    assert refused[0].fields == {"error_code": int(ErrorCode.INVALID_UPDATE_VERSION)}
    assert proposals(r.on_follower_fetch(2, 3, now_ms=3)) == [ProposeIsr(isr=(1, 2), why="expand")]


def test_a_dropped_expansion_stops_holding_the_hw_back() -> None:
    # The pending member holds the HW (maximal ISR); if the proposal never leaves the broker,
    # forgetting it lets the HW follow the committed ISR again, and the waiters hear of it.
    r = replica()
    lead(r, state(leader=1, isr=[1], replicas=[1, 2]), now_ms=0)
    r.on_follower_fetch(2, 0, now_ms=1)  # caught up with an empty log: proposed
    assert r.leader.pending_isr == (1, 2)
    r.reserve(4)
    r.on_append_committed(end_offset=4)
    assert r.high_watermark == 0
    assert r.on_proposal_dropped() == [WakeWaiters()]
    assert (r.leader.pending_isr, r.high_watermark) == (None, 4)


def test_an_answer_for_another_leader_epoch_is_ignored() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1, 2], leader_epoch=3), now_ms=0)
    r.on_deadline(LAG_MAX + 1)
    assert (
        r.on_alter_partition_result(leader_epoch=2, accepted=True, isr=[1], partition_epoch=5) == []
    )
    assert r.leader.pending_isr == (1,) and r.leader.isr == (1, 2)


def test_the_controller_changing_isr_and_replicas_within_the_epoch_is_adopted() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1, 2], replicas=[1, 2]), now_ms=0)
    moved = state(leader=1, isr=[1], replicas=[1, 2, 3], partition_epoch=2)
    effects = r.on_controller_state(moved, now_ms=5)
    assert names(effects) == ["replicas_updated_by_controller", "isr_updated_by_controller"]
    assert r.state == moved and r.leader.replicas == (1, 2, 3)
    # The same by LeaderAndIsr (same leader epoch): adopted, not a new leadership.
    again = state(leader=1, isr=[1, 3], replicas=[1, 2, 3], partition_epoch=3)
    effects = lead(r, again, now_ms=6)
    assert not any(isinstance(e, PersistEpochs) for e in effects)
    assert names(effects) == ["isr_updated_by_controller"]
    # An older partition epoch, or a follower, changes nothing.
    assert r.on_controller_state(moved, now_ms=7) == [WakeWaiters()]
    assert r.leader.isr == (1, 3)
    f = replica()
    f.begin_following(state(leader=2, isr=[1, 2]))
    assert f.on_controller_state(state(leader=2, isr=[2], partition_epoch=2), now_ms=0) == []


# ---------------------------------------------------------------------------- role changes


def test_a_leader_that_loses_the_partition_stops_at_once_and_fetches_from_its_log_end() -> None:
    r = replica(epochs=[(0, 0)])
    lead(r, state(leader=1, isr=[1]), now_ms=0)
    r.reserve(4)  # queued, not yet durable
    r.on_append_committed(end_offset=2)
    step_one = r.begin_following(state(leader=2, isr=[1, 2], leader_epoch=2))
    assert StopFetching() in step_one and WakeWaiters() in step_one
    assert not r.is_leader  # produces waiting on it learn at once
    assert r.high_watermark == 2  # handed over, not lost
    r.on_append_committed(end_offset=4)  # the writer barrier: the queue drains
    step_two = r.become_follower()
    assert StartFetching(leader=2, leader_epoch=2, fetch_offset=4, last_fetched_epoch=1) in (
        step_two
    )
    assert names(step_two) == ["become_follower"]
    assert r.next_offset == 4
    with pytest.raises(ValueError, match="only the leader"):
        r.reserve(1)


def test_a_follower_keeps_its_fetcher_when_only_the_isr_changes() -> None:
    r = replica()
    assert StopFetching() in r.begin_following(state(leader=2, isr=[1, 2]))
    r.become_follower()
    again = r.begin_following(state(leader=2, isr=[2], partition_epoch=2))
    assert again == [WakeWaiters()]  # same leader and epoch: no restart


def test_a_new_epoch_for_a_partition_already_led_stops_stamping_before_the_barrier() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1], leader_epoch=1), now_ms=0)
    r.reserve(3)
    step_one = r.begin_leading(state(leader=1, isr=[1], leader_epoch=3))
    assert not r.is_leader and WakeWaiters() in step_one
    r.on_append_committed(end_offset=3)
    effects = r.become_leader(state(leader=1, isr=[1], leader_epoch=3), now_ms=1)
    assert PersistEpochs(epochs=((1, 0), (3, 3))) in effects
    assert r.reserve(1) == 3  # the new epoch's offsets start after the drained queue


def test_stop_and_offline_serve_no_more() -> None:
    r = replica()
    lead(r, state(leader=1, isr=[1]))
    assert r.stop() == [StopFetching(), WakeWaiters()]
    assert (r.is_leader, r.state) == (False, None)
    r2 = replica()
    lead(r2, state(leader=1, isr=[1]))
    r2.go_offline()
    assert r2.offline and not r2.is_leader


# ---------------------------------------------------------------------------- follower side


def test_a_followers_hw_follows_the_leader_capped_by_its_own_log_and_never_back() -> None:
    r = replica(leo=5, hw=1)
    r.begin_following(state(leader=2, isr=[1, 2]))
    r.on_leader_high_watermark(9)
    assert r.high_watermark == 5
    r.on_leader_high_watermark(3)
    assert r.high_watermark == 5


def test_fetched_batches_bring_their_epochs_producers_and_hw_and_a_failure_undoes_them() -> None:
    r = replica(leo=2, epochs=[(0, 0)])
    r.begin_following(state(leader=2, isr=[1, 2], leader_epoch=3))
    raw = make_batch(
        [(0, None, b"a"), (0, None, b"b")],
        base_offset=2,
        leader_epoch=3,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    batches = list(iter_batches(raw))
    epochs, hw = r.stage_fetched(batches, leader_high_watermark=10)
    assert epochs == [(0, 0), (3, 2)] and hw == 4  # the leader's HW capped by their end
    assert 7 in r.producers.entries
    r.on_append_failed(2)
    assert 7 not in r.producers.entries and r.epochs == [(0, 0)]
    again, _hw = r.stage_fetched(batches, leader_high_watermark=10)
    assert again == [(0, 0), (3, 2)]  # retried with the same cache: it was never adopted
    r.on_append_committed(end_offset=4, epochs=again)
    assert (r.log_end_offset, r.epochs) == (4, [(0, 0), (3, 2)])


def test_a_divergence_truncates_the_log_the_epochs_and_the_hw() -> None:
    r = replica(leo=8, hw=6, epochs=[(0, 0), (2, 5)])
    r.begin_following(state(leader=2, isr=[1, 2], leader_epoch=3))
    offset, epochs = r.truncation(diverging_epoch=0, diverging_end_offset=4)
    assert (offset, epochs) == (4, [(0, 0)])
    r.on_truncated(offset, epochs)
    assert (r.log_end_offset, r.next_offset, r.high_watermark, r.epochs) == (4, 4, 4, [(0, 0)])
    reloaded = ProducerStateManager()
    r.on_truncated(3, [(0, 0)], reloaded)
    assert r.producers is reloaded


# ---------------------------------------------------------------------------- the log start


def test_the_log_start_offset_only_moves_forward_and_wakes_the_waiters():
    changes = []
    r = LocalReplica(
        tp=TP, local_id=1, lag_max_ms=LAG_MAX, log_start_offset=5, log_end_offset=20,
        high_watermark=20, epochs=[], producers=ProducerStateManager(),
        on_change=lambda: changes.append(r.log_start_offset),
    )  # fmt: skip
    assert r.on_log_start_offset_moved(12) == [WakeWaiters()]
    assert r.log_start_offset == 12 and changes == [12]
    assert r.on_log_start_offset_moved(12) == [] and r.on_log_start_offset_moved(7) == []
    assert r.log_start_offset == 12 and changes == [12]


def test_a_followers_reported_log_start_wakes_the_waiters_of_the_low_watermark():
    r = replica(leo=10, hw=10)
    r.become_leader(state(leader=1, isr=[1, 2], replicas=[1, 2]), now_ms=0)
    assert r.low_watermark(alive={1, 2}) == -1
    assert WakeWaiters() in r.on_follower_fetch(2, 10, now_ms=1, log_start_offset=4)
    assert r.low_watermark(alive={1, 2}) == 0  # the leader's log start is 0
    assert r.on_follower_fetch(2, 10, now_ms=2, log_start_offset=4) == []
