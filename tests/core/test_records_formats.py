"""One log, two batch formats (core/records.py): minikafka's msgpack batches and Kafka's
RecordBatch v2, told apart by the magic byte at offset 16, through every function a broker,
a store and a consumer use."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from minikafka.common import TopicPartition
from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import (
    UnsupportedCompression,
    check_payload,
    decode_records,
    iter_batches,
    make_batch,
    peek_header,
    peek_producer,
    peek_shape,
    restamp,
)
from minikafka.errors import CorruptRecordError
from minikafka.storage import AppendWrite, LogStore, ReadSpec, StoreConfig

TS = 1_700_000_000_000
V2_RECORDS = [(TS + i, b"k", b"v%d" % i) for i in range(5)]


def v2_batch(**kw) -> bytes:
    return v2.build(V2_RECORDS, **kw)


def with_attributes(raw: bytes, attributes: int) -> bytes:
    """The batch with other attributes and a CRC that matches them (a client that means it)."""
    body = struct.pack(">h", attributes) + raw[v2.CRC_START + 2 :]
    return raw[: v2.MAGIC_OFFSET + 1] + struct.pack(">I", crc32c.crc32c(body)) + body


def test_a_blob_of_both_formats_splits_into_its_batches():
    native = make_batch([(TS, None, b"a"), (TS, None, b"b")], base_offset=0, producer_id=3)
    kafka = v2_batch(base_offset=2, leader_epoch=4, producer_id=9, producer_epoch=1,
                     base_sequence=0)  # fmt: skip
    views = list(iter_batches(native + kafka))
    assert [(b.base_offset, b.count, b.next_offset) for b in views] == [(0, 2, 2), (2, 5, 7)]
    assert (views[1].leader_epoch, views[1].producer_id, views[1].producer_epoch) == (4, 9, 1)
    assert views[1].raw == kafka
    assert [r.offset for b in views for r in decode_records(b)] == list(range(7))


def test_a_corrupt_v2_batch_in_a_blob_is_refused():
    kafka = bytearray(v2_batch(base_offset=1))
    kafka[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        list(iter_batches(make_batch([(TS, None, b"a")]) + bytes(kafka)))


def test_the_header_functions_read_v2():
    raw = v2_batch(base_offset=10, leader_epoch=2, producer_id=5, producer_epoch=0,
                   base_sequence=7)  # fmt: skip
    assert peek_header(raw) == (10, 2, 5)
    assert peek_shape(raw) == (10, 5)
    assert peek_producer(raw) == (5, 0, 7)
    with pytest.raises(CorruptRecordError, match="claims"):
        peek_shape(raw + b"x")


def test_restamping_a_v2_batch_keeps_its_client_bytes():
    raw = v2_batch(producer_id=5, producer_epoch=0, base_sequence=7)
    stamped = restamp(raw, base_offset=100, leader_epoch=3)
    [view] = iter_batches(stamped)  # the CRC still holds
    assert (view.base_offset, view.leader_epoch) == (100, 3)
    assert restamp(raw, base_offset=1, leader_epoch=1, producer=(5, 0, 7))[16:] == raw[16:]
    with pytest.raises(ValueError, match="client"):
        restamp(raw, base_offset=1, leader_epoch=1, producer=(6, 0, 7))


def test_a_produced_v2_batch_is_validated_record_by_record():
    [good] = iter_batches(v2_batch())
    check_payload(good)
    gzip = v2.build(V2_RECORDS, compression=v2.GZIP)
    check_payload(next(iter_batches(gzip)))
    # a count that disagrees with the records (CRC made to match: a buggy client)
    raw = v2_batch()
    lying = bytearray(raw)
    lying[57:61] = struct.pack(">i", 6)
    lying = with_attributes(bytes(lying), 0)
    with pytest.raises(CorruptRecordError):
        check_payload(next(iter_batches(lying)))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_kafka_lacks_is_refused_as_unsupported_compression(codec):
    raw = with_attributes(v2_batch(), codec)
    [view] = iter_batches(raw)  # the batch itself is well formed
    with pytest.raises(UnsupportedCompression, match=f"compressed with {codec}"):
        check_payload(view)


@pytest.mark.parametrize("codec", [v2.GZIP, v2.SNAPPY, v2.LZ4, v2.ZSTD])
def test_every_kafka_codec_is_validated_and_read(codec):
    [view] = iter_batches(v2_batch(compression=codec))
    check_payload(view)
    assert [(r.timestamp_ms, r.key, r.value) for r in decode_records(view)] == V2_RECORDS


def test_a_null_value_reads_back_as_a_tombstone():
    raw = v2.build([(TS, b"k", None)])
    [record] = decode_records(next(iter_batches(raw)))
    assert (record.key, record.value, record.null_value) == (b"k", b"", True)


def test_a_store_keeps_v2_batches_byte_for_byte_beside_native_ones(tmp_path: Path):
    tp = TopicPartition("mixed", 0)
    native = make_batch([(TS, None, b"a"), (TS, None, b"b")])
    kafka = v2_batch(base_offset=2)
    with LogStore(tmp_path / "node", StoreConfig(map_size_bytes=1 << 28)) as store:
        store.create_partition(tp)
        store.append([AppendWrite(tp=tp, batches=[native, kafka])])
        [blob] = store.read([ReadSpec(tp=tp, fetch_offset=0, max_offset=10**9,
                                      partition_max_bytes=1 << 20)], 1 << 20)  # fmt: skip
        assert blob == native + kafka
        [tail] = store.read([ReadSpec(tp=tp, fetch_offset=4, max_offset=10**9,
                                      partition_max_bytes=1 << 20)], 1 << 20)  # fmt: skip
        assert tail == kafka  # the batch holding offset 4
        with pytest.raises(Exception, match="starts below the log end"):
            store.append([AppendWrite(tp=tp, batches=[v2_batch(base_offset=3)])])


def test_a_v2_batch_with_a_gap_in_its_offset_deltas_is_refused():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    builder.append(0, TS, None, b"a", [])
    builder.append(2, TS, None, b"b", [])  # offset delta 2 where 1 belongs: a compacted batch
    [view] = iter_batches(bytes(builder.build()))
    with pytest.raises(CorruptRecordError, match="offset delta 2"):
        check_payload(view)


def test_only_record_batch_v2_reads_headers_alone():
    from minikafka.core.records import only_record_batch_v2

    kafka = v2_batch(base_offset=0) + v2_batch(base_offset=5)
    assert only_record_batch_v2(kafka) and only_record_batch_v2(b"")
    assert not only_record_batch_v2(kafka + make_batch([(TS, None, b"a")], base_offset=10))
    assert not only_record_batch_v2(make_batch([(TS, None, b"a")]) + kafka)
