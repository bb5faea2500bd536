"""core/producer_state.py expiry (KIP-854) and snapshot decisions, and the snapshot bytes
(core/producer_snapshot_codec.py): plain functions of the state and now_ms.

Kafka's ProducerStateManagerTest.testProducerIdExpiration / testRemoveExpiredPidsOnReload: a
producer not seen for producer.id.expiration.ms is forgotten, and one that writes again is an
unknown producer (sequence 0 starts it afresh).
"""

from __future__ import annotations

import random
import zlib

import pytest

from minikafka.core.producer_snapshot_codec import (
    SnapshotFormatError,
    decode_entries,
    encode_entries,
)
from minikafka.core.producer_state import (
    Accept,
    ProducerBatch,
    ProducerStateManager,
    Refuse,
    SnapshotMark,
    rebuild,
    snapshot_due,
)
from minikafka.errors import ErrorCode

EXPIRE = 1_000  # producer.id.expiration.ms in these stories


def batch(pid: int, seq: int, offset: int, *, count: int = 1, epoch: int = 0) -> ProducerBatch:
    return ProducerBatch(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, base_offset=offset, count=count
    )


def settled(*batches: ProducerBatch) -> ProducerStateManager:
    """A state with `batches` applied and all of them under the HW (trimmed)."""
    state = ProducerStateManager()
    for b in batches:
        state.apply(b)
    state.trim(max((b.base_offset + b.count for b in batches), default=0))
    return state


def test_a_producer_idle_for_the_expiration_is_forgotten_at_a_check() -> None:
    state = settled(batch(1, 0, 0), batch(2, 0, 1))
    assert state.remove_expired(0, EXPIRE) == []  # both seen at this first check
    state.apply(batch(2, 1, 2))
    state.trim(3)
    assert state.remove_expired(600, EXPIRE) == []  # producer 2 seen again, at 600
    assert state.remove_expired(999, EXPIRE) == []  # 999 ms idle: not yet
    assert state.remove_expired(1_000, EXPIRE) == [1]  # Kafka's `>=`: exactly the expiration
    assert set(state.entries) == {2}
    assert state.remove_expired(1_599, EXPIRE) == []
    assert state.remove_expired(1_600, EXPIRE) == [2]
    assert state.entries == {} and state.removals == 2


def test_a_write_counts_as_seen_at_the_next_check_never_earlier() -> None:
    """The core has no clock at `apply`: a producer is stamped at the first check after its
    batch, so it is never expired before a full expiration since that check."""
    state = settled()
    state.remove_expired(0, EXPIRE)
    state.apply(batch(1, 0, 0))  # written somewhere in (0, 500]
    state.trim(1)
    assert state.remove_expired(500, EXPIRE) == []
    assert state.remove_expired(1_499, EXPIRE) == []
    assert state.remove_expired(1_500, EXPIRE) == [1]


def test_a_loaded_state_is_seen_at_its_first_check() -> None:
    """After a restart (snapshot + log) no monotonic time survives: every producer starts a
    full expiration at the first check (a restart postpones expiry, never shortens it)."""
    state = rebuild({}, [batch(1, 0, 0), batch(2, 0, 1)], log_end_offset=2)
    assert state.remove_expired(50_000, EXPIRE) == []
    assert state.remove_expired(50_999, EXPIRE) == []
    assert sorted(state.remove_expired(51_000, EXPIRE)) == [1, 2]


def test_a_producer_with_a_batch_above_the_hw_is_kept() -> None:
    """Its batch may still be rolled back (a failed write, a truncation) or be left out of a
    snapshot at the HW: its entry is needed, as Kafka keeps a producer in a transaction."""
    state = settled(batch(1, 0, 0))
    state.remove_expired(0, EXPIRE)
    state.apply(batch(1, 1, 1))  # not trimmed: above the HW
    state.remove_expired(100, EXPIRE)
    assert state.remove_expired(5_000, EXPIRE) == []  # kept, seen again at 5,000
    state.trim(2)
    assert state.remove_expired(5_999, EXPIRE) == []
    assert state.remove_expired(6_000, EXPIRE) == [1]


def test_a_rolled_back_new_producer_is_not_reported_expired() -> None:
    state = settled()
    state.apply(batch(9, 0, 0))
    state.rollback(0)  # the write failed: producer 9 was never here
    assert state.remove_expired(0, EXPIRE) == []
    assert state.remove_expired(10_000, EXPIRE) == []
    assert state.removals == 0


def test_an_expired_producer_is_an_unknown_producer_again() -> None:
    """Sequence 0 starts it afresh (any epoch: no entry remembers the old one); a later
    sequence is UNKNOWN_PRODUCER_ID, the answer on which the client bumps its epoch and
    restarts at 0 (KIP-360)."""
    state = settled(batch(1, 0, 0, count=5, epoch=3))
    state.remove_expired(0, EXPIRE)
    assert state.check(1, 3, 5, 1) == Accept()  # in sequence while remembered
    assert state.remove_expired(EXPIRE, EXPIRE) == [1]
    refused = state.check(1, 3, 5, 1)
    assert isinstance(refused, Refuse)
    assert refused.error_code == ErrorCode.UNKNOWN_PRODUCER_ID
    assert state.check(1, 3, 0, 1) == Accept()
    assert state.check(1, 0, 0, 1) == Accept()  # an older epoch: nothing left to fence it
    state.apply(batch(1, 0, 5, epoch=4))
    assert state.entries[1].epoch == 4 and state.entries[1].last_seq == 0


def test_expired_producers_are_not_in_the_state_at_the_hw() -> None:
    state = settled(batch(1, 0, 0), batch(2, 0, 1))
    state.remove_expired(0, EXPIRE)
    state.apply(batch(2, 1, 2))
    state.trim(3)
    state.remove_expired(500, EXPIRE)
    state.remove_expired(1_000, EXPIRE)
    assert set(state.state_at(3)) == {2}


def test_a_zero_expiration_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        settled().remove_expired(0, 0)


def test_random_stories_expire_exactly_the_idle_producers() -> None:
    """Against a model: a producer's stamp is the first check after its last batch; at a check
    it goes iff now - stamp >= the expiration and no batch of it is above the HW."""
    for seed in range(200):
        rng = random.Random(seed)
        state, offset, hw, now = ProducerStateManager(), 0, 0, 0
        seqs: dict[int, int] = {}
        stamp: dict[int, int] = {}
        unstamped: set[int] = set()
        above: dict[int, list[int]] = {}  # pid -> offsets of its batches above the HW
        for _ in range(60):
            step = rng.random()
            if step < 0.5:
                pid = rng.randrange(6)
                state.apply(batch(pid, seqs.get(pid, -1) + 1, offset))
                seqs[pid] = seqs.get(pid, -1) + 1
                unstamped.add(pid)
                above.setdefault(pid, []).append(offset)
                offset += 1
            elif step < 0.7:
                hw = rng.randint(hw, offset)
                state.trim(hw)
                for pid in list(above):
                    above[pid] = [o for o in above[pid] if o >= hw]
                    if not above[pid]:
                        del above[pid]
            else:
                now += rng.randrange(0, 2 * EXPIRE)
                for pid in unstamped:
                    stamp[pid] = now
                unstamped.clear()
                want = sorted(p for p in seqs if now - stamp[p] >= EXPIRE and p not in above)
                for p in seqs:
                    if p in above and now - stamp[p] >= EXPIRE:
                        stamp[p] = now
                assert sorted(state.remove_expired(now, EXPIRE)) == want, seed
                for p in want:
                    del seqs[p], stamp[p]
            assert set(state.entries) == set(seqs), seed


# ---------------------------------------------------------------------------- snapshots


def marked(state: ProducerStateManager, offset: int) -> ProducerStateManager:
    state.snapshot_mark = SnapshotMark(offset=offset, removals=state.removals)
    return state


def test_a_state_without_a_saved_snapshot_is_due() -> None:
    assert snapshot_due(settled(), 0)
    assert snapshot_due(settled(batch(1, 0, 0)), 1)


def test_an_unchanged_state_is_not_written_again() -> None:
    state = marked(settled(batch(1, 0, 0), batch(2, 0, 1)), 2)
    assert not snapshot_due(state, 2)
    assert not snapshot_due(state, 1_000_000)  # only batches without a producer since


def test_an_empty_state_advances_with_the_hw() -> None:
    """A few bytes, and a restart replays only the log after it (as before snapshots expired)."""
    state = marked(settled(), 0)
    assert not snapshot_due(state, 0)
    assert snapshot_due(state, 1)


def test_a_changed_state_is_written_once_the_log_grew_by_its_size() -> None:
    """At most one encoded entry per record appended, however many producers there are."""
    state = marked(settled(*(batch(p, 0, p) for p in range(10))), 10)
    state.apply(batch(3, 1, 10))
    state.trim(11)
    assert not snapshot_due(state, 11)  # 1 record since the snapshot, 10 producers
    assert not snapshot_due(state, 19)
    assert snapshot_due(state, 20)


def test_an_expiry_changes_the_state() -> None:
    state = marked(settled(batch(1, 0, 0), batch(2, 0, 1)), 2)
    state.remove_expired(0, EXPIRE)
    state.remove_expired(EXPIRE, EXPIRE)
    assert state.removals == 2 and state.entries == {}
    assert snapshot_due(state, 3)


def test_a_truncation_below_the_saved_snapshot_is_due() -> None:
    state = marked(settled(batch(1, 0, 0)), 5)
    assert snapshot_due(state, 4)


def test_snapshot_bytes_round_trip() -> None:
    state = settled(
        batch(1, 0, 0, count=3, epoch=2),
        *(batch(2, s, 10 + s, epoch=1) for s in range(7)),  # 5 batches retained
        batch(2**62, 2**31 - 2, 2**40, count=2),  # sequence wrap, large ids and offsets
    )
    raw = encode_entries(state.entries.values())
    assert decode_entries(raw) == state.entries
    assert decode_entries(encode_entries([])) == {}


GOOD = encode_entries(settled(batch(1, 0, 0), batch(2, 0, 1, count=2)).entries.values())


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x02" + GOOD[1:],  # another version
        GOOD[:5],  # the header of a snapshot alone: its CRC is not that of nothing
        GOOD[:-1],  # cut short
        GOOD[:-1] + bytes([GOOD[-1] ^ 1]),  # one bit flipped (Kafka's CRC check)
        b"\x01" + zlib.crc32(b"\x00").to_bytes(4, "little") + b"\x00",  # a right CRC, cut
    ],
)
def test_snapshot_bytes_that_are_not_a_snapshot_are_refused(raw: bytes) -> None:
    with pytest.raises(SnapshotFormatError):
        decode_entries(raw)


def test_expiry_in_steps_ends_where_one_call_does() -> None:
    """The shell expires in steps of a bounded number of ids, yielding between them."""
    for budget in (1, 2, 3, 7, 100):
        state = settled(*(batch(p, 0, p) for p in range(20)))
        whole = settled(*(batch(p, 0, p) for p in range(20)))
        steps = 0
        more = True
        while more:
            _gone, more = state.expire_some(0, EXPIRE, budget=budget)
            steps += 1
        assert steps >= 20 // budget
        whole.remove_expired(0, EXPIRE)
        for p in range(0, 20, 2):  # half of them write again
            state.apply(batch(p, 1, 20 + p))
            whole.apply(batch(p, 1, 20 + p))
        gone, more = [], True
        while more:
            step, more = state.expire_some(500, EXPIRE, budget=budget)
            gone += step
        assert gone == whole.remove_expired(500, EXPIRE) == []
        while True:
            step, more = state.expire_some(1_000, EXPIRE, budget=budget)
            gone += step
            assert len(step) <= budget
            if not more:
                break
        assert sorted(gone) == whole.remove_expired(1_000, EXPIRE) == list(range(1, 20, 2))
        assert state.entries.keys() == whole.entries.keys()


def test_an_expiry_step_of_no_ids_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        settled().expire_some(0, EXPIRE, budget=0)
