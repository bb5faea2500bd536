"""Kafka's Produce (v3-8) and InitProducerId (v0-1) on the Kafka listener: kio requests to minikafka's ProduceRequest and
back. Pure: the shell (server/kafka_apis.py) hands the native request to the broker.

From v3 every partition carries exactly one RecordBatch v2 (KIP-98; Kafka's
LogValidator.validateOneBatchRecords), which minikafka stores as it is (core/records.py); the
idempotent producer's fields travel in that batch's header, so they are copied to the native
entry, where the broker's producer state checks them (server/produce.py). What the broker
answers per partition comes back with Kafka's codes; what is refused here (several batches, a
transactional batch, acks outside -1/0/1) never reaches the broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i16, i32, i64

from minikafka.core import record_batch_v2 as v2
from minikafka.core.controller.topics import INTERNAL_TOPICS  # Kafka's Topic.isInternal
from minikafka.errors import CorruptRecordError, ErrorCode
from minikafka.kafka import codec
from minikafka.wire.messages import (
    ProducePartition,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)
from minikafka.wire.producer_messages import InitProducerIdRequest, InitProducerIdResponse

NO_OFFSET = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class Translated:
    """A Kafka Produce as the broker takes it, and the partitions answered here already."""

    native: ProduceRequest | None  # None: nothing goes to the broker
    refused: list[ProducePartitionResponse] = field(default_factory=list)
    order: list[tuple[str, int]] = field(default_factory=list)  # the request's partitions


def _refusal(topic: str, partition: int, code: ErrorCode, message: str):
    return ProducePartitionResponse(
        topic=topic, partition=partition, error_code=code, error_message=message
    )


def to_native(request: Any) -> Translated:
    """The native request for a kio ProduceRequest, and the partitions refused here. When the
    request as a whole cannot be served (acks other than -1, 0, 1: Kafka's
    INVALID_REQUIRED_ACKS; a transactional id: transactions are not served) every partition is
    refused and nothing goes to the broker."""
    order = [(str(t.name), int(p.index)) for t in request.topic_data for p in t.partition_data]
    whole: tuple[ErrorCode, str] | None = None
    if int(request.acks) not in (-1, 0, 1):
        whole = (ErrorCode.INVALID_REQUIRED_ACKS, f"acks={request.acks}: expected -1, 0 or 1")
    elif request.transactional_id is not None:
        whole = (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactions are not served by minikafka",
        )
    if whole is not None:
        refused = [_refusal(t, p, *whole) for t, p in order]
        return Translated(native=None, refused=refused, order=order)
    entries: list[ProducePartition] = []
    refused: list[ProducePartitionResponse] = []
    for topic in request.topic_data:
        for part in topic.partition_data:
            name, index = str(topic.name), int(part.index)
            records = bytes(part.records or b"")
            if name in INTERNAL_TOPICS:
                # ReplicaManager.appendToLocalLog: clients may not write an internal topic (its
                # records are the group coordinator's, read back when it loads).
                refused.append(
                    _refusal(
                        name,
                        index,
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"cannot append to internal topic {name}",
                    )
                )
                continue
            try:
                entries.append(_entry(name, index, records))
            except CorruptRecordError as exc:
                refused.append(_refusal(name, index, ErrorCode.INVALID_RECORD, str(exc)))
    native = ProduceRequest(
        acks=int(request.acks),
        timeout_ms=int(request.timeout / timedelta(milliseconds=1)),
        partitions=entries,
    )
    return Translated(native=native if entries else None, refused=refused, order=order)


def _entry(topic: str, partition: int, records: bytes) -> ProducePartition:
    if not v2.is_v2(records):
        raise CorruptRecordError("a Kafka produce carries RecordBatch v2 (magic 2) only")
    header = v2.read_header(records)
    if header.size != len(records):
        raise CorruptRecordError(
            "Produce v3 and later carry exactly one record batch per partition"
        )
    if header.attributes & (v2.TRANSACTIONAL | v2.CONTROL):
        raise CorruptRecordError("transactional and control batches are not served")
    producer: dict[str, int] = {}
    if header.producer_id >= 0:
        producer = dict(
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
        )
    return ProducePartition(topic=topic, partition=partition, records=records, **producer)


def to_kafka(version: int, translated: Translated, answer: ProduceResponse | None) -> Any:
    """The kio ProduceResponse at `version`: the broker's answers and the refusals, in the
    request's order, grouped by topic."""
    mod = codec.response_module(codec.PRODUCE, version)
    answer = answer or ProduceResponse(partitions=[])
    by_key = {(p.topic, p.partition): p for p in [*answer.partitions, *translated.refused]}
    topics: dict[str, list[Any]] = {}
    for key in translated.order or list(by_key):
        p = by_key[key]
        fields: dict[str, Any] = {
            "index": i32(p.partition),
            "error_code": KafkaErrorCode(int(p.error_code)),
            "base_offset": i64(p.base_offset if p.error_code == ErrorCode.NONE else NO_OFFSET),
            "log_append_time": None,  # CreateTime topics: -1 (Kafka's default timestamp type)
        }
        names = mod.PartitionProduceResponse.__dataclass_fields__
        if "log_start_offset" in names:
            fields["log_start_offset"] = i64(p.log_start_offset)
        if "error_message" in names:
            fields["error_message"] = p.error_message
        if "record_errors" in names:
            fields["record_errors"] = ()
        topics.setdefault(p.topic, []).append(mod.PartitionProduceResponse(**fields))
    return mod.ProduceResponse(
        responses=tuple(
            mod.TopicProduceResponse(name=TopicName(name), partition_responses=tuple(parts))
            for name, parts in topics.items()
        ),
        throttle_time=timedelta(milliseconds=answer.throttle_time_ms),
    )


# ---------------------------------------------------------------------------- InitProducerId


def init_producer_id_to_native(request: Any) -> InitProducerIdRequest:
    """KIP-98's InitProducerId (v0-1): an idempotent producer asks any broker for its id.
    A transactional id passes through: the broker refuses it (transactions are not served)."""
    return InitProducerIdRequest(
        transactional_id=request.transactional_id,
        transaction_timeout_ms=int(request.transaction_timeout / timedelta(milliseconds=1)),
    )


def init_producer_id_to_kafka(version: int, answer: InitProducerIdResponse) -> Any:
    mod = codec.response_module(codec.INIT_PRODUCER_ID, version)
    return mod.InitProducerIdResponse(
        throttle_time=timedelta(milliseconds=answer.throttle_time_ms),
        error_code=KafkaErrorCode(int(answer.error_code)),
        producer_id=ProducerId(answer.producer_id),
        producer_epoch=i16(answer.producer_epoch),
    )
