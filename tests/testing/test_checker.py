"""The acknowledged-writes checker catches each anomaly it names."""

import pytest

from minikafka.common import TopicPartition
from minikafka.testing.checker import check_acknowledged
from minikafka.testing.seeds import derive_rng

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
ACKED = [(T0, 0, [b"a", b"b"]), (T1, 5, [b"c"])]
GOOD = [(T0, 0, b"a"), (T0, 1, b"b"), (T1, 5, b"c")]


def test_a_faithful_log_passes():
    v = check_acknowledged(ACKED, GOOD)
    assert v.ok and v.acknowledged == 3 and v.read == 3 and "OK" in v.summary()


def test_a_missing_acknowledged_record_is_lost():
    v = check_acknowledged(ACKED, GOOD[:1] + GOOD[2:])
    assert not v.ok and v.lost == [(T0, 1)]


def test_a_different_value_at_an_acknowledged_offset_is_corruption():
    v = check_acknowledged(ACKED, [(T0, 0, b"a"), (T0, 1, b"X"), (T1, 5, b"c")])
    assert not v.ok and v.corrupted == [(T0, 1)]


def test_one_offset_read_with_two_values_is_caught():
    v = check_acknowledged(ACKED, [*GOOD, (T1, 5, b"z")])
    assert not v.ok and v.duplicated_offsets == [(T1, 5)]


def test_a_retry_duplicate_is_reported_but_legal():
    v = check_acknowledged(ACKED, [*GOOD, (T0, 7, b"a")])
    assert v.ok and v.duplicates == 1


def test_the_same_value_in_another_partition_is_not_a_duplicate():
    v = check_acknowledged(ACKED, [*GOOD, (T1, 6, b"a")])
    assert v.ok and v.duplicates == 0


# ------------------------------------- the offsets read from the one checker (checker/anomalies.py)


def test_a_partition_read_empty_loses_everything_acknowledged_there():
    v = check_acknowledged(ACKED, GOOD[2:])
    assert v.lost == [(T0, 0), (T0, 1)] and not v.corrupted


def test_a_value_stored_elsewhere_with_its_offset_missing_is_lost():
    v = check_acknowledged(ACKED, [(T0, 0, b"a"), (T0, 2, b"b"), (T1, 5, b"c")])
    assert v.lost == [(T0, 1)] and not v.corrupted


def test_a_first_attempt_below_the_acknowledged_offset_is_a_retry_duplicate():
    """Without idempotence: attempt 1 written at 0, its answer lost; the retry written at 2 and
    acknowledged there. Legal, reported (the system tests' producer has idempotence off)."""
    v = check_acknowledged([(T0, 2, [b"a"])], [(T0, 0, b"a"), (T0, 1, b"x"), (T0, 2, b"a")])
    assert v.ok and v.duplicates == 1


def test_every_instance_is_listed_not_only_the_first_examples():
    acked = [(T0, 0, [b"%d" % i for i in range(100)])]
    v = check_acknowledged(acked, [(T0, i, b"%d" % i) for i in range(50)])
    assert v.lost == [(T0, i) for i in range(50, 100)]


def test_a_value_acknowledged_twice_is_refused():
    with pytest.raises(ValueError, match="unique"):
        check_acknowledged([(T0, 0, [b"a"]), (T0, 1, [b"a"])], [])


def _reference(acked, consumed):  # the former offset-by-offset implementation, as an oracle
    log, count, v = {}, {}, check_acknowledged([], [])
    for tp, offset, value in consumed:
        v.read += 1
        if log.get((tp, offset), value) != value:
            v.duplicated_offsets.append((tp, offset))
        log[(tp, offset)] = value
        count[(tp, value)] = count.get((tp, value), 0) + 1
    for tp, base, values in acked:
        for i, value in enumerate(values):
            v.acknowledged += 1
            found = log.get((tp, base + i))
            if found is None:
                v.lost.append((tp, base + i))
            elif found != value:
                v.corrupted.append((tp, base + i))
            elif count[(tp, value)] > 1:
                v.duplicates += 1
    return v


@pytest.mark.parametrize("seed", range(40))
def test_the_same_verdict_as_checking_offset_by_offset(seed):
    """Random logs with losses, corruptions, retry duplicates and moved values (one anomaly per
    offset): the one checker's findings, read as offsets, are the former checker's."""
    rng = derive_rng(seed, "acknowledged-writes")
    acked, log = [], {}
    for tp in (T0, T1):
        offset = 0
        for b in range(rng.randrange(1, 6)):
            values = [b"%s-%d-%d" % (str(tp).encode(), b, i) for i in range(rng.randrange(1, 4))]
            if rng.random() < 0.2:  # a retry duplicate: the first attempt landed first
                log.update({(tp, offset + i): v for i, v in enumerate(values)})
                offset += len(values)
            acked.append((tp, offset, values))
            log.update({(tp, offset + i): v for i, v in enumerate(values)})
            offset += len(values)
        for o in range(offset):
            r = rng.random()
            if r < 0.08:
                del log[(tp, o)]  # lost
            elif r < 0.14:
                log[(tp, o)] = b"other-%d" % o  # corrupted
            elif r < 0.18:
                log[(tp, offset + 10 + o)] = log.pop((tp, o))  # moved away: its offset lost
    consumed = [(tp, o, v) for (tp, o), v in sorted(log.items(), key=lambda kv: kv[0][1])]
    rng.shuffle(consumed)
    got, want = check_acknowledged(acked, consumed), _reference(acked, consumed)
    assert (sorted(got.lost), sorted(got.corrupted)) == (sorted(want.lost), sorted(want.corrupted))
    assert (got.duplicates, got.acknowledged, got.read) == (
        want.duplicates,
        want.acknowledged,
        want.read,
    )
