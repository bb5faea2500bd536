"""The acknowledged-writes checker catches each anomaly it names."""

from minikafka.core.types import TopicPartition
from minikafka.testing.checker import check_acknowledged

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
