"""Stories of a produce on the leader (core/produce.py), without Trio: admission, the checks,
stamping, idempotent producers and the acks verdict, against a real replica machine
(core/replica.py). The shell's own tests (tests/server/test_produce_guards.py,
tests/server/test_idempotence.py, tests/server/test_broker.py) run the same rules through a broker.

Broker 1 leads t-0 with replicas 1 and 2; min.insync.replicas is 2 where acks=-1 asks for it.
"""

from __future__ import annotations

import pytest

from minikafka.common import TopicPartition
from minikafka.core import produce as rules
from minikafka.core import record_batch_v2 as v2
from minikafka.core.compression import GZIP
from minikafka.core.produce import Refusal, Stamped
from minikafka.core.producer_state import ProducerStateManager
from minikafka.core.records import iter_batches, make_batch
from minikafka.core.replica import LocalReplica
from minikafka.core.replica_effects import PersistEpochs
from minikafka.errors import ErrorCode
from minikafka.wire.messages import PartitionState, ProducePartition

TP = TopicPartition("t", 0)
E = ErrorCode


def leading(*, isr: list[int] = [1, 2], epoch: int = 3) -> LocalReplica:  # noqa: B006
    r = LocalReplica(
        tp=TP,
        local_id=1,
        lag_max_ms=10_000,
        log_start_offset=0,
        log_end_offset=0,
        high_watermark=0,
        epochs=[],
        producers=ProducerStateManager(),
    )
    st = PartitionState(
        topic=TP.topic,
        partition=0,
        leader=1,
        leader_epoch=epoch,
        isr=isr,
        partition_epoch=1,
        replicas=[1, 2],
    )
    for e in r.begin_leading(st) + r.become_leader(st, 0):
        if isinstance(e, PersistEpochs):
            r.on_append_committed(end_offset=None, epochs=e.epochs)
    return r


def entry(count: int = 3, *, producer: tuple[int, int, int] | None = None) -> ProducePartition:
    pid, pepoch, seq = producer or (-1, -1, -1)
    records = make_batch(
        [(0, None, b"v%d" % i) for i in range(count)],
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
    )
    return ProducePartition(
        topic=TP.topic,
        partition=0,
        records=records,
        producer_id=pid,
        producer_epoch=pepoch,
        base_sequence=seq,
    )


def admit(**kw) -> Refusal | None:
    args = {
        "acks": -1,
        "topic": "t",
        "internal": False,
        "leader_code": E.NONE,
        "isr_size": 2,
        "min_insync_replicas": 2,
    }
    return rules.admit(**{**args, **kw})


def stamped(r: LocalReplica, pp: ProducePartition, key: int = 0) -> Stamped:
    batches = rules.check_batches(pp.records, max_bytes=1 << 20)
    assert not isinstance(batches, Refusal)
    out = rules.stamp(r, pp, batches, entry=key)
    assert isinstance(out, Stamped), out
    return out


def commit(r: LocalReplica, s: Stamped) -> None:
    r.on_append_committed(end_offset=s.pending.end_offset, epochs=s.epochs)


# ---------------------------------------------------------------------------- admission


def test_admission_refuses_in_kafkas_order():
    assert admit() is None
    assert admit(acks=2) == Refusal(E.INVALID_REQUIRED_ACKS)
    assert admit(acks=2, leader_code=E.NOT_LEADER_OR_FOLLOWER).code == E.INVALID_REQUIRED_ACKS
    refused = admit(topic="__consumer_offsets")
    assert refused is not None and refused.code == E.INVALID_TOPIC_EXCEPTION
    assert "internal topic" in (refused.message or "")
    assert admit(topic="__consumer_offsets", internal=True) is None
    assert admit(leader_code=E.NOT_LEADER_OR_FOLLOWER) == Refusal(E.NOT_LEADER_OR_FOLLOWER)


def test_acks_all_needs_min_insync_replicas_and_the_others_do_not():
    assert admit(isr_size=1) == Refusal(E.NOT_ENOUGH_REPLICAS)
    assert admit(isr_size=1, acks=1) is None
    assert admit(isr_size=1, acks=0) is None
    assert rules.min_insync_replicas(None, 2) == 2
    assert rules.min_insync_replicas(1, 2) == 1  # the topic's overrides the broker's


def test_a_topics_max_message_bytes_is_honoured_up_to_what_a_fetch_can_carry():
    assert rules.max_batch_bytes(None, 1_000, 500) == 1_000  # the broker's, checked at start
    assert rules.max_batch_bytes(2_000, 1_000, 5_000) == 2_000
    assert rules.max_batch_bytes(9_000, 1_000, 5_000) == 5_000


# ---------------------------------------------------------------------------- checks


def test_a_batch_over_the_limit_is_too_large_and_a_broken_one_corrupt():
    pp = entry(10)
    size = len(pp.records)
    assert not isinstance(rules.check_batches(pp.records, max_bytes=size), Refusal)
    too_large = rules.check_batches(pp.records, max_bytes=size - 1)
    assert isinstance(too_large, Refusal) and too_large.code == E.MESSAGE_TOO_LARGE
    assert str(size) in (too_large.message or "")
    broken = bytearray(pp.records)
    broken[-1] ^= 0xFF
    corrupt = rules.check_batches(bytes(broken), max_bytes=1 << 20)
    assert isinstance(corrupt, Refusal) and corrupt.code == E.CORRUPT_MESSAGE
    assert rules.check_batches(b"", max_bytes=1 << 20) == Refusal(
        E.CORRUPT_MESSAGE, "no record batch in the request"
    )


def test_an_uncompressed_entry_has_nothing_left_for_the_compressed_check():
    (batch,) = rules.check_batches(entry().records, max_bytes=1 << 20)
    assert not rules.compressed(batch)
    assert rules.check_compressed([batch]) is None


# ---------------------------------------------------------------------------- stamping


def test_stamping_gives_consecutive_offsets_and_the_leaders_epoch():
    r = leading(epoch=3)
    first = stamped(r, entry(3), key=0)
    second = stamped(r, entry(2), key=1)
    assert (first.pending.base_offset, first.pending.end_offset) == (0, 3)
    assert (second.pending.base_offset, second.pending.end_offset) == (3, 5)
    assert first.batches is not None
    (batch,) = iter_batches(first.batches[0])
    assert (batch.base_offset, batch.leader_epoch) == (0, 3)
    assert second.pending.entry == 1 and second.pending.size == len(entry(2).records)


def test_a_duplicate_of_an_idempotent_batch_is_answered_from_the_original():
    r = leading()
    original = stamped(r, entry(3, producer=(7, 0, 0)))
    retry = stamped(r, entry(3, producer=(7, 0, 0)))
    assert retry.batches is None  # nothing to write
    assert (retry.pending.base_offset, retry.pending.end_offset) == (0, 3)
    assert retry.pending.duplicate is not None and retry.pending.size == 0
    assert original.batches is not None


@pytest.mark.parametrize(
    ("pp", "code"),
    [
        (entry(3, producer=(7, 1, 5)), E.OUT_OF_ORDER_SEQUENCE_NUMBER),  # a gap after 0-2
        (entry(3, producer=(7, 0, 3)), E.INVALID_PRODUCER_EPOCH),  # an older epoch
    ],
)
def test_the_producer_state_refuses_and_reserves_nothing(pp, code):
    r = leading()
    stamped(r, entry(3, producer=(7, 1, 0)))
    batches = rules.check_batches(pp.records, max_bytes=1 << 20)
    refused = rules.stamp(r, pp, batches, entry=0)
    assert isinstance(refused, Refusal) and refused.code == code and refused.by_producer_state
    assert r.reserve(1) == 3  # the refused entry took no offset


def test_an_idempotent_entry_holds_one_batch_whose_header_is_the_entrys():
    r = leading()
    one = entry(2, producer=(7, 0, 0))
    two = ProducePartition(
        topic="t",
        partition=0,
        records=one.records + one.records,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    refused = rules.stamp(r, two, list(iter_batches(two.records)), entry=0)
    assert isinstance(refused, Refusal) and refused.code == E.INVALID_RECORD
    assert "exactly one record batch" in (refused.message or "")
    lying = ProducePartition(
        topic="t", partition=0, records=one.records, producer_id=8, producer_epoch=0
    )
    refused = rules.stamp(r, lying, list(iter_batches(lying.records)), entry=0)
    assert isinstance(refused, Refusal) and refused.code == E.INVALID_RECORD
    assert refused.by_producer_state


# ---------------------------------------------------------------------------- the verdict


def test_acks_all_waits_for_the_high_watermark_then_answers_none():
    r = leading()
    s = stamped(r, entry(3))
    commit(r, s)
    item = s.pending
    assert rules.still_waiting(item)  # durable here, the follower has not fetched it
    assert rules.outcome(item, acks=-1, min_insync_replicas=2) == E.REQUEST_TIMED_OUT
    assert rules.outcome(item, acks=1, min_insync_replicas=2) == E.NONE
    r.on_follower_fetch(2, 3, 10)  # the follower's LEO reaches 3: so does the HW
    assert not rules.still_waiting(item)
    assert rules.outcome(item, acks=-1, min_insync_replicas=2) == E.NONE


def test_an_isr_below_the_minimum_after_the_append_is_not_enough_replicas_after_append():
    r = leading(isr=[1])
    s = stamped(r, entry(3))
    commit(r, s)  # alone in the ISR: the HW follows the leader's LEO
    assert not rules.still_waiting(s.pending)
    assert rules.outcome(s.pending, acks=-1, min_insync_replicas=2) == (
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    )
    assert rules.outcome(s.pending, acks=-1, min_insync_replicas=1) == E.NONE


def test_a_leader_that_steps_down_ends_the_wait_with_not_leader():
    r = leading()
    s = stamped(r, entry(3))
    commit(r, s)
    st = PartitionState(
        topic="t", partition=0, leader=2, leader_epoch=4, isr=[1, 2], partition_epoch=2,
        replicas=[1, 2],
    )  # fmt: skip
    r.begin_following(st)
    r.become_follower()
    assert not rules.still_waiting(s.pending)
    assert rules.outcome(s.pending, acks=-1, min_insync_replicas=2) == E.NOT_LEADER_OR_FOLLOWER


def test_a_duplicate_waits_for_its_original_to_be_durable():
    r = leading()
    original = stamped(r, entry(3, producer=(7, 0, 0)))
    retry = stamped(r, entry(3, producer=(7, 0, 0))).pending
    assert rules.awaiting_durable(retry)
    assert rules.outcome(retry, acks=1, min_insync_replicas=1) == E.REQUEST_TIMED_OUT
    commit(r, original)
    assert not rules.awaiting_durable(retry)
    assert rules.outcome(retry, acks=1, min_insync_replicas=1) == E.NONE


def test_a_duplicate_whose_original_was_undone_is_retriable():
    r = leading()
    stamped(r, entry(3, producer=(7, 0, 0)))
    retry = stamped(r, entry(3, producer=(7, 0, 0))).pending
    r.on_append_failed(0)  # the original's write failed: the producer state is undone
    assert not rules.original_kept(retry)
    assert rules.outcome(retry, acks=1, min_insync_replicas=1) == E.REQUEST_TIMED_OUT


def test_a_compressed_batch_is_left_to_the_check_off_the_event_loop():
    raw = v2.build([(0, None, b"v" * 100)] * 5, compression=GZIP)
    (batch,) = rules.check_batches(raw, max_bytes=1 << 20)
    assert rules.compressed(batch)
    assert rules.check_compressed([batch]) is None
