"""Record batches (core/records.py): the produce-time payload check."""

from __future__ import annotations

import zlib

import msgpack
import pytest

from minikafka.core.records import HEADER, check_payload, iter_batches, make_batch
from minikafka.errors import CorruptRecordError


def with_header_count(payload: bytes, count: int) -> bytes:
    """A batch whose header (CRC included) is valid for `payload` but claims `count` records."""
    return HEADER.pack(0, -1, count, -1, -1, -1, len(payload), zlib.crc32(payload)) + payload


def one(blob: bytes):
    [batch] = iter_batches(blob)
    return batch


def test_a_batch_made_by_make_batch_passes():
    check_payload(one(make_batch([(1, None, b"a"), (2, b"k", b"b")])))


@pytest.mark.parametrize("claimed", [1, 3, 100])
def test_a_count_that_disagrees_with_the_payload_is_corrupt(claimed):
    payload = msgpack.packb([[1, None, b"a"], [2, None, b"b"]], use_bin_type=True)
    batch = one(with_header_count(payload, claimed))  # header and CRC are fine
    with pytest.raises(CorruptRecordError, match=f"says {claimed} records, its payload holds 2"):
        check_payload(batch)


@pytest.mark.parametrize(
    "items",
    [
        {"a": 1},  # not a list
        [[1, None]],  # a record of two fields
        [["t", None, b"v"]],  # a timestamp that is not an integer
        [[1, "key", b"v"]],  # a key that is text, not bytes
        [[1, None, "v"]],  # a value that is text, not bytes (None is a null value)
    ],
)
def test_a_payload_that_is_not_a_list_of_records_is_corrupt(items):
    payload = msgpack.packb(items, use_bin_type=True)
    with pytest.raises(CorruptRecordError):
        check_payload(one(with_header_count(payload, 1)))


def test_bytes_that_are_not_msgpack_are_corrupt():
    payload = b"\xc1" * 8  # 0xc1 is never used in msgpack
    with pytest.raises(CorruptRecordError, match="not msgpack"):
        check_payload(one(with_header_count(payload, 1)))
