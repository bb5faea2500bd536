"""Kafka's ListOffsets translated (minikafka/kafka/list_offsets.py)."""

from __future__ import annotations

import importlib

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i64

from minikafka.errors import ErrorCode
from minikafka.kafka.codec import encode_response
from minikafka.kafka.list_offsets import fenced, to_kafka, to_native, with_refused
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


def _request(version: int, *parts: tuple[str, int, int, int]) -> object:
    """(topic, partition, timestamp, current_leader_epoch) each."""
    mod = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    names = mod.ListOffsetsPartition.__dataclass_fields__
    topics: dict[str, list[object]] = {}
    for t, p, ts, cur in parts:
        extra = {"current_leader_epoch": i32(cur)} if "current_leader_epoch" in names else {}
        topics.setdefault(t, []).append(
            mod.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(ts), **extra)
        )
    kwargs = dict(replica_id=BrokerId(-1), topics=tuple(
        mod.ListOffsetsTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in topics.items()
    ))  # fmt: skip
    if "isolation_level" in mod.ListOffsetsRequest.__dataclass_fields__:
        kwargs["isolation_level"] = i8(0)
    return mod.ListOffsetsRequest(**kwargs)


EPOCHS = {("t", 0): 5, ("t", 1): 5, ("t", 2): 5}


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (5, {}),
        (-1, {}),  # not given (v4+ clients send -1 without a known epoch)
        (4, {("t", 0): ErrorCode.FENCED_LEADER_EPOCH}),
        (6, {("t", 0): ErrorCode.UNKNOWN_LEADER_EPOCH}),
    ],
)
def test_current_leader_epoch_is_fenced_as_kafka_fences_it(current, expected):
    """Partition.localLogWithEpochOrThrow: an older epoch than the broker's is
    FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; a partition this broker's metadata
    does not know is left to the broker (it answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER)."""
    body = _request(7, ("t", 0, -1, current), ("u", 0, -1, current))
    refused = fenced(body, lambda t, p: EPOCHS.get((t, p)))
    assert refused == expected
    native = to_native(body, refused)
    assert [(p.topic, p.partition) for p in native.partitions] == [
        tp for tp in (("t", 0), ("u", 0)) if tp not in expected
    ]


def test_versions_before_4_carry_no_current_epoch_and_are_never_fenced():
    body = _request(3, ("t", 0, -1, 4))
    assert fenced(body, lambda t, p: 5) == {}


@pytest.mark.parametrize("version", [4, 5, 7])
def test_answers_carry_the_brokers_leader_epochs_and_refused_partitions(version):
    answer = ListOffsetsResponse(
        partitions=[
            ListOffsetsPartitionResponse(topic="t", partition=0, error_code=0, offset=120,
                                         leader_epoch=5),
            ListOffsetsPartitionResponse(topic="t", partition=1, error_code=0, offset=4,
                                         leader_epoch=2, timestamp=1000),
        ]
    )  # fmt: skip
    merged = with_refused(answer, {("t", 2): ErrorCode.FENCED_LEADER_EPOCH})
    response = to_kafka(version, merged)
    got = [
        (int(p.partition_index), p.error_code, int(p.offset), int(p.leader_epoch))
        for p in response.topics[0].partitions
    ]
    assert got == [
        (0, KafkaErrorCode.none, 120, 5),
        (1, KafkaErrorCode.none, 4, 2),
        (2, KafkaErrorCode.fenced_leader_epoch, -1, -1),
    ]


async def test_the_shell_answers_fenced_partitions_without_asking_the_broker():
    from minikafka.kafka.codec import KafkaRequest
    from minikafka.server.kafka_apis import KafkaApis
    from minikafka.server.metadata_cache import MetadataCache
    from minikafka.testing.memory_node import partition_state

    cache = MetadataCache()
    cache.update(brokers=None, partitions=[partition_state("t", 0, leader=1, isr=[1],
                                                            leader_epoch=5)])  # fmt: skip
    seen: list[object] = []

    async def native(request, *, client_id="", order=None):  # noqa: ANN001, ANN202
        seen.append(request)
        raise AssertionError("a fully fenced request is not forwarded")

    apis = KafkaApis(cache=cache, cluster_id="c", broker=native)
    body = _request(7, ("t", 0, -1, 4))
    header = KafkaRequest(api_key=2, api_version=7, correlation_id=1, client_id="x", body=body)
    response = await apis.dispatch(header, body)
    [p] = response.topics[0].partitions
    assert p.error_code == KafkaErrorCode.fenced_leader_epoch
    assert seen == []
