"""Kafka's Fetch (v4-11) for consumers on the Kafka listener: kio requests to minikafka's
FetchRequest, and the answer back with every batch in RecordBatch v2. Pure.

- Consumers only: a fetch naming a replica id (a follower's) is refused with
  CLUSTER_AUTHORIZATION_FAILED, since the Kafka listener never proves cluster membership
  (followers fetch on the native listener, through the cluster gate).
- Sessionless (KIP-227 allows a broker to decline): every fetch is answered in full with
  session id 0, so a client that asks for a session goes on sending full fetches. Forgotten
  topics therefore change nothing.
- Batches Kafka clients produced are stored as RecordBatch v2 and go out as they are; a batch
  minikafka's own producer wrote is converted to v2 on the way out, as Kafka down-converts
  messages for an older consumer (its offsets, leader epoch and producer fields kept).
- No transactions: the last stable offset is the high watermark and no transaction is
  aborted; read_committed and read_uncommitted read the same.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64

from minikafka.core import record_batch_v2 as v2
from minikafka.core.records import decode_records, iter_batches, only_record_batch_v2
from minikafka.errors import ErrorCode
from minikafka.kafka import codec
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
)

NO_SESSION = 0


def is_follower_fetch(request: Any) -> bool:
    return int(request.replica_id) >= 0


def refuse_follower(version: int, request: Any) -> Any:
    """Every partition of a follower's fetch, refused (module docstring)."""
    answer = FetchResponse(
        partitions=[
            FetchPartitionResponse(
                topic=str(t.topic),
                partition=int(p.partition),
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            )
            for t in request.topics
            for p in t.partitions
        ]
    )
    return to_kafka(version, answer)


def to_native(request: Any) -> FetchRequest:
    return FetchRequest(
        replica_id=CONSUMER_REPLICA_ID,
        max_wait_ms=int(request.max_wait / timedelta(milliseconds=1)),
        min_bytes=int(request.min_bytes),
        max_bytes=int(request.max_bytes),
        partitions=[
            FetchPartition(
                topic=str(t.topic),
                partition=int(p.partition),
                fetch_offset=int(p.fetch_offset),
                partition_max_bytes=int(p.partition_max_bytes),
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
            )
            for t in request.topics
            for p in t.partitions
        ],
    )


def as_record_batch_v2(blob: bytes) -> bytes:
    """The batches of `blob` with every native batch converted to RecordBatch v2 (a blob of v2
    batches only comes back as it is, without a copy)."""
    if only_record_batch_v2(blob):  # what Kafka clients produced: sent as stored
        return blob
    out = []
    for b in iter_batches(blob, check_crc=False):  # checked when they were produced
        if v2.is_v2(b.raw):
            out.append(b.raw)
            continue
        records = decode_records(b)
        out.append(
            v2.build(
                [(r.timestamp_ms, r.key, None if r.null_value else r.value) for r in records],
                base_offset=b.base_offset,
                leader_epoch=b.leader_epoch,
                producer_id=b.producer_id,
                producer_epoch=b.producer_epoch,
                base_sequence=b.base_sequence,
            )
        )
    return b"".join(out)


def to_kafka(version: int, answer: FetchResponse) -> Any:
    mod = codec.response_module(codec.FETCH, version)
    names = mod.PartitionData.__dataclass_fields__
    topics: dict[str, list[Any]] = {}
    for p in answer.partitions:
        fields: dict[str, Any] = {
            "partition_index": i32(p.partition),
            "error_code": KafkaErrorCode(int(p.error_code)),
            "high_watermark": i64(p.high_watermark),
            "last_stable_offset": i64(p.high_watermark),
            "aborted_transactions": None,
            # Never null: Kafka answers an empty or failed partition with MemoryRecords.EMPTY
            # (zero bytes), and kafka-python's MemoryRecords fails on a null records field.
            "records": as_record_batch_v2(p.records) if p.records else b"",
        }
        if "log_start_offset" in names:
            fields["log_start_offset"] = i64(p.log_start_offset)
        if "preferred_read_replica" in names:
            fields["preferred_read_replica"] = BrokerId(-1)
        topics.setdefault(p.topic, []).append(mod.PartitionData(**fields))
    kwargs: dict[str, Any] = {
        "throttle_time": timedelta(milliseconds=answer.throttle_time_ms),
        "responses": tuple(
            mod.FetchableTopicResponse(topic=TopicName(t), partitions=tuple(ps))
            for t, ps in topics.items()
        ),
    }
    if "error_code" in mod.FetchResponse.__dataclass_fields__:
        kwargs["error_code"] = KafkaErrorCode(int(answer.error_code))
        kwargs["session_id"] = i32(NO_SESSION)
    return mod.FetchResponse(**kwargs)
