"""core/partitioner.py against Kafka's own vectors (UtilsTest.testMurmur2) and kafka-python."""

from __future__ import annotations

import random

import pytest

from minikafka.core.partitioner import murmur2, partition_for_key

KAFKA_UTILS_TEST = {  # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), KAFKA_UTILS_TEST.items())
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_every_tail_length_and_byte_value_matches_kafka_python() -> None:
    """kafka-python's port of the same Java function, over random keys of every length mod 4
    and bytes above 0x7f (Java's bytes are signed: the port must mask them as Kafka does)."""
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    rng = random.Random(7)
    for length in range(0, 40):
        for _ in range(20):
            key = bytes(rng.randrange(256) for _ in range(length))
            theirs = kafka_python_murmur2(key)  # unsigned there
            assert murmur2(key) & 0xFFFFFFFF == theirs & 0xFFFFFFFF, key


def test_partition_for_key_is_to_positive_mod_n() -> None:
    # toPositive(-790332482) = -790332482 & 0x7fffffff = 1357151166; % 10 = 6
    assert partition_for_key(b"foobar", 10) == 6
    assert all(0 <= partition_for_key(k, 7) < 7 for k in KAFKA_UTILS_TEST)
    with pytest.raises(ValueError, match="positive"):
        partition_for_key(b"x", 0)
