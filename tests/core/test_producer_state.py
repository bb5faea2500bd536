"""core/producer_state.py: the leader's idempotence checks (KIP-98), pure and exhaustive.

Stories follow Kafka's ProducerStateManagerTest: duplicates of the last 5 batches answered with
their original offsets, gaps, older and newer epochs, unknown producers, sequence wrap, and the
undo log that makes failed writes and tail truncations exact.
"""

from __future__ import annotations

import random

import pytest

from minikafka.core.producer_state import (
    BATCHES_RETAINED,
    MAX_SEQUENCE,
    Accept,
    BatchMetadata,
    Duplicate,
    ProducerBatch,
    ProducerStateManager,
    Refuse,
    check_append,
    entries_from_doc,
    entries_to_doc,
    in_sequence,
    increment_sequence,
    rebuild,
)
from minikafka.errors import ErrorCode

PID = 7


def batch(seq: int, count: int, offset: int, *, epoch: int = 0, pid: int = PID) -> ProducerBatch:
    return ProducerBatch(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, base_offset=offset, count=count
    )


def written(batches: list[ProducerBatch]) -> ProducerStateManager:
    state = ProducerStateManager()
    for b in batches:
        assert isinstance(
            state.check(b.producer_id, b.producer_epoch, b.base_sequence, b.count), Accept
        )
        state.apply(b)
    return state


def code(decision: object) -> ErrorCode | None:
    return decision.error_code if isinstance(decision, Refuse) else None


# ---------------------------------------------------------------------------- sequence arithmetic


def test_sequences_wrap_after_int_max_as_kafka_does() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1  # MAX-1 -> MAX, 0, 1
    assert in_sequence(MAX_SEQUENCE, 0)
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6) and not in_sequence(4, 4) and not in_sequence(MAX_SEQUENCE, 1)


# ---------------------------------------------------------------------------- decisions


def test_an_unknown_producer_must_start_at_sequence_0() -> None:
    assert isinstance(check_append(None, producer_epoch=0, first_seq=0, count=3), Accept)
    # KIP-360's leader accepts any sequence here (retention may have deleted the producer's
    # batches); minikafka deletes none, so a later sequence means lost batches: 59.
    assert code(check_append(None, producer_epoch=0, first_seq=3, count=1)) == (
        ErrorCode.UNKNOWN_PRODUCER_ID
    )


def test_the_next_batch_continues_the_sequence_and_a_gap_is_out_of_order() -> None:
    state = written([batch(0, 3, 0)])
    assert isinstance(state.check(PID, 0, 3, 2), Accept)
    assert code(state.check(PID, 0, 4, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # gap
    assert code(state.check(PID, 0, 1, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlap
    assert code(state.check(PID, 0, 0, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # not exact


def test_a_retry_of_any_of_the_last_5_batches_is_a_duplicate_with_its_original_offsets() -> None:
    batches = [batch(seq, 2, 100 + 10 * i) for i, seq in enumerate(range(0, 14, 2))]  # 7 batches
    state = written(batches)
    for b in batches[-BATCHES_RETAINED:]:
        d = state.check(PID, 0, b.base_sequence, b.count)
        assert d == Duplicate(batch=b.metadata())
        assert d.batch.first_offset == b.base_offset and d.batch.last_offset == b.base_offset + 1
    # The 6th newest is forgotten (Kafka keeps 5): out of order, not a duplicate.
    for b in batches[:-BATCHES_RETAINED]:
        assert code(state.check(PID, 0, b.base_sequence, b.count)) == (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        )
    assert len(state.entries[PID].batches) == BATCHES_RETAINED


def test_a_duplicate_needs_the_same_epoch() -> None:
    state = written([batch(0, 2, 0, epoch=1)])
    assert isinstance(state.check(PID, 1, 0, 2), Duplicate)
    assert code(state.check(PID, 0, 0, 2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert isinstance(state.check(PID, 2, 0, 2), Accept)  # a bumped epoch restarts at 0


def test_an_older_epoch_is_fenced_and_a_newer_one_must_start_at_0() -> None:
    state = written([batch(0, 1, 0, epoch=3), batch(1, 1, 1, epoch=3)])
    assert code(state.check(PID, 2, 2, 1)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code(state.check(PID, 4, 2, 1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert isinstance(state.check(PID, 4, 0, 1), Accept)
    state.apply(batch(0, 1, 2, epoch=4))
    entry = state.entries[PID]
    assert entry.epoch == 4 and [b.first_seq for b in entry.batches] == [0]  # history restarts
    assert code(state.check(PID, 3, 2, 1)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_producers_are_independent() -> None:
    state = written([batch(0, 1, 0, pid=1), batch(0, 1, 1, pid=2), batch(1, 1, 2, pid=1)])
    assert isinstance(state.check(1, 0, 2, 1), Accept)
    assert isinstance(state.check(2, 0, 1, 1), Accept)
    assert isinstance(state.check(2, 0, 0, 1), Duplicate)
    assert code(state.check(3, 0, 1, 1)) == ErrorCode.UNKNOWN_PRODUCER_ID


def test_the_sequence_wraps_to_0_after_int_max() -> None:
    start = MAX_SEQUENCE - 2
    state = ProducerStateManager()
    state.apply(batch(start, 3, 0))  # last sequence = MAX
    assert state.entries[PID].last_seq == MAX_SEQUENCE
    assert isinstance(state.check(PID, 0, 0, 5), Accept)
    assert code(state.check(PID, 0, MAX_SEQUENCE, 1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    state.apply(batch(0, 5, 3))
    # A batch spanning the wrap: MAX-1, MAX, 0, 1.
    state2 = ProducerStateManager()
    state2.apply(batch(MAX_SEQUENCE - 1, 4, 10))
    assert state2.entries[PID].batches[0] == BatchMetadata(
        first_seq=MAX_SEQUENCE - 1, last_seq=1, first_offset=10, last_offset=13
    )
    assert isinstance(state2.check(PID, 0, 2, 1), Accept)
    assert isinstance(state2.check(PID, 0, MAX_SEQUENCE - 1, 4), Duplicate)


@pytest.mark.parametrize(
    ("epoch", "seq", "count"),
    [(-1, 0, 1), (0, -1, 1), (0, 0, 0), (2**15, 0, 1), (0, 2**31, 1)],
)
def test_malformed_producer_fields_are_invalid_records(epoch: int, seq: int, count: int) -> None:
    assert code(check_append(None, producer_epoch=epoch, first_seq=seq, count=count)) == (
        ErrorCode.INVALID_RECORD
    )


def test_batches_without_a_producer_id_leave_no_state() -> None:
    state = ProducerStateManager()
    state.apply(batch(-1, 3, 0, pid=-1, epoch=-1))
    assert state.entries == {} and state.undo_records == 0


# ---------------------------------------------------------------------------- undo, snapshots


def test_rollback_undoes_a_failed_write_exactly() -> None:
    state = written([batch(0, 2, 0), batch(2, 2, 2)])
    state.trim(4)  # durable and replicated
    before = dict(state.entries)
    state.apply(batch(4, 2, 4))
    state.apply(batch(0, 1, 6, pid=8))
    state.rollback(4)
    assert state.entries == before
    assert isinstance(state.check(PID, 0, 4, 2), Accept)  # the retry is new again, not a dup
    assert code(state.check(8, 0, 1, 1)) == ErrorCode.UNKNOWN_PRODUCER_ID


def test_rollback_is_exact_only_above_the_trimmed_offset() -> None:
    state = written([batch(s, 1, s) for s in range(10)])  # 10 one-record batches
    state.trim(7)
    assert state.can_roll_back_to(7) and not state.can_roll_back_to(6)
    state.rollback(7)
    assert state.entries[PID].last_seq == 6
    # The 5 retained batches end at 6; the ones kept before the undone tail are all there.
    assert [b.first_seq for b in state.entries[PID].batches] == [2, 3, 4, 5, 6]


def test_state_at_an_offset_is_the_state_of_the_log_up_to_it() -> None:
    # Three producers interleaved, one record per batch, each counting from sequence 0.
    log = [batch(i // 3, 1, i, pid=1 + i % 3) for i in range(12)]
    state = written(log)
    for offset in range(0, 13):
        assert state.state_at(offset) == rebuild({}, log[:offset], log_end_offset=offset).entries


def test_snapshot_documents_round_trip() -> None:
    state = written([batch(0, 2, 0), batch(2, 3, 2), batch(0, 1, 5, pid=9, epoch=4)])
    doc = entries_to_doc(state.entries)
    assert entries_from_doc(doc) == state.entries


def test_random_stories_leader_state_equals_a_rebuild_from_the_log() -> None:
    """A leader that checks, applies, fails writes and truncates its tail ends with the same
    state as a replica that rebuilds from what stayed in the log (snapshot + tail)."""
    for seed in range(200):
        rng = random.Random(seed)
        state = ProducerStateManager()
        log: list[ProducerBatch] = []
        next_seq = {pid: 0 for pid in (1, 2, 3)}
        epochs = {pid: 0 for pid in (1, 2, 3)}
        hw = 0
        for _ in range(60):
            roll = rng.random()
            leo = log[-1].base_offset + log[-1].count if log else 0
            if roll < 0.7:
                pid = rng.choice((1, 2, 3))
                count = rng.randint(1, 3)
                retry = log and rng.random() < 0.3
                if retry:
                    mine = [b for b in log if b.producer_id == pid][-BATCHES_RETAINED:]
                    mine = [b for b in mine if b.producer_epoch == mine[-1].producer_epoch]
                    if mine:
                        old = rng.choice(mine)
                        d = state.check(pid, old.producer_epoch, old.base_sequence, old.count)
                        assert d == Duplicate(batch=old.metadata()), seed
                    continue
                if rng.random() < 0.05:
                    epochs[pid] += 1
                    next_seq[pid] = 0
                b = batch(next_seq[pid], count, leo, pid=pid, epoch=epochs[pid])
                d = state.check(pid, b.producer_epoch, b.base_sequence, b.count)
                assert isinstance(d, Accept), (seed, d)
                state.apply(b)
                log.append(b)
                next_seq[pid] = increment_sequence(next_seq[pid], count)
            elif roll < 0.85 and log:
                # The HW falls on batch boundaries (every replica's LEO does).
                hw = rng.choice(
                    [hw] + [b.base_offset + b.count for b in log if b.base_offset >= hw]
                )
                state.trim(hw)
            elif log:
                cut = rng.randint(hw, leo)
                log = [b for b in log if b.base_offset + b.count <= cut]
                new_leo = log[-1].base_offset + log[-1].count if log else 0
                assert state.can_roll_back_to(new_leo)
                state.rollback(new_leo)
                for pid in next_seq:  # producers resume after what survived
                    mine = [b for b in log if b.producer_id == pid]
                    if mine:
                        epochs[pid] = mine[-1].producer_epoch
                        next_seq[pid] = increment_sequence(mine[-1].metadata().last_seq, 1)
                    else:
                        next_seq[pid] = 0
            snap_at = hw
            snapshot = state.state_at(snap_at) if state.can_roll_back_to(snap_at) else None
            if snapshot is not None:
                tail = [b for b in log if b.base_offset >= snap_at]
                leo = log[-1].base_offset + log[-1].count if log else 0
                assert rebuild(snapshot, tail, log_end_offset=leo).entries == state.entries, seed
        leo = log[-1].base_offset + log[-1].count if log else 0
        assert rebuild({}, log, log_end_offset=leo).entries == state.entries, seed
