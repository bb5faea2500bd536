"""Kafka's ListOffsets translated (minikafka/kafka/list_offsets.py)."""

from __future__ import annotations

import importlib

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i64

from minikafka.kafka.codec import encode_response
from minikafka.kafka.list_offsets import to_kafka, to_native
from minikafka.wire.messages import ListOffsetsPartitionResponse, ListOffsetsResponse


@pytest.mark.parametrize("version", [1, 2, 5, 6, 7])
def test_list_offsets_both_ways(version):
    mod = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    names = mod.ListOffsetsPartition.__dataclass_fields__
    extra = {"current_leader_epoch": i32(-1)} if "current_leader_epoch" in names else {}
    parts = tuple(
        mod.ListOffsetsPartition(partition_index=i32(i), timestamp=i64(ts), **extra)
        for i, ts in ((0, -1), (1, -2))
    )
    kwargs = dict(replica_id=BrokerId(-1),
                  topics=(mod.ListOffsetsTopic(name=TopicName("t"), partitions=parts),))  # fmt: skip
    if "isolation_level" in mod.ListOffsetsRequest.__dataclass_fields__:
        kwargs["isolation_level"] = i8(1)
    native = to_native(mod.ListOffsetsRequest(**kwargs))
    assert [(p.topic, p.partition, p.timestamp) for p in native.partitions] == [
        ("t", 0, -1),
        ("t", 1, -2),
    ]
    answer = ListOffsetsResponse(
        partitions=[
            ListOffsetsPartitionResponse(topic="t", partition=0, error_code=0, offset=120),
            ListOffsetsPartitionResponse(topic="t", partition=1, error_code=6),
        ]
    )
    payload = encode_response(1, to_kafka(version, answer))
    rmod = importlib.import_module(f"kio.schema.list_offsets.v{version}.response")
    _h, used = entity_reader(rmod.ListOffsetsResponse.__header_schema__)(payload, 0)
    decoded, _ = entity_reader(rmod.ListOffsetsResponse)(payload, used)
    got = [
        (int(p.partition_index), p.error_code, int(p.offset)) for p in decoded.topics[0].partitions
    ]
    assert got == [(0, KafkaErrorCode.none, 120), (1, KafkaErrorCode.not_leader_or_follower, -1)]


@pytest.mark.parametrize("version", [1, 5, 7])
def test_a_found_record_goes_out_with_its_timestamp(version):
    """KIP-79: offsetsForTimes reads the record's timestamp beside its offset (it went out as
    -1 whatever the broker found)."""
    answer = ListOffsetsResponse(
        partitions=[
            ListOffsetsPartitionResponse(
                topic="t", partition=0, error_code=0, offset=4, timestamp=1_700_000_000_900
            ),
            ListOffsetsPartitionResponse(topic="t", partition=1, error_code=0),  # none found
        ]
    )
    response = to_kafka(version, answer)
    got = [(int(p.offset), int(p.timestamp)) for p in response.topics[0].partitions]
    assert got == [(4, 1_700_000_000_900), (-1, -1)]
