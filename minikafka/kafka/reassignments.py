"""Kafka's partition reassignment APIs on the Kafka listener (KIP-455): AlterPartitionReassignments
(45) v0 and ListPartitionReassignments (46) v0, kio requests to minikafka's native admin
messages and back. Pure, on kafka/admin.py's helpers and rules (order kept, names echoed, a
native top-level error becomes every entity's error).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from minikafka.kafka import codec
from minikafka.kafka.admin import Translated, kafka_error, timeout_ms
from minikafka.wire import admin_messages as am


def alter_partition_reassignments_request(request: Any) -> Translated:
    """kio AlterPartitionReassignmentsRequest v0 (KIP-455) -> native, flattened per partition;
    null replicas cancel that partition's move."""
    partitions = [
        am.ReassignablePartition(
            topic=str(t.name),
            partition=int(p.partition_index),
            replicas=None if p.replicas is None else [int(b) for b in p.replicas],
        )
        for t in request.topics
        for p in t.partitions
    ]
    return Translated(
        native=am.AlterPartitionReassignmentsRequest(
            partitions=partitions, timeout_ms=max(0, timeout_ms(request.timeout))
        )
    )


def alter_partition_reassignments_response(
    version: int, request: Any, native: am.AlterPartitionReassignmentsResponse
) -> Any:
    """native -> kio AlterPartitionReassignmentsResponse, grouped by topic as requested.

    A top-level error (controller unreachable, the request refused as a whole) is kept at the
    top, where Kafka puts it, and repeated on every partition, which is where clients that
    report per partition look."""
    mod = codec.response_module(codec.ALTER_PARTITION_REASSIGNMENTS, version)
    top = kafka_error(native.error_code)
    by_tp = {(r.topic, r.partition): r for r in native.responses}
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            r = by_tp.get((str(t.name), int(p.partition_index)))
            if top is not KafkaErrorCode.none:
                code, message = top, native.error_message
            elif r is None:
                code, message = KafkaErrorCode.unknown_server_error, "no answer for this partition"
            else:
                code, message = kafka_error(r.error_code), r.error_message
            parts.append(
                mod.ReassignablePartitionResponse(
                    partition_index=i32(int(p.partition_index)),
                    error_code=code,
                    error_message=message,
                )
            )
        topics.append(mod.ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return mod.AlterPartitionReassignmentsResponse(
        throttle_time=timedelta(0),
        error_code=top,
        error_message=native.error_message,
        responses=tuple(topics),
    )


def list_partition_reassignments_request(request: Any) -> Translated:
    """kio ListPartitionReassignmentsRequest v0 -> native: null topics lists every partition
    being moved; otherwise the native request names the topics and the response keeps only the
    requested partitions (Kafka lists exactly those)."""
    topics = None if request.topics is None else [str(t.name) for t in request.topics]
    return Translated(
        native=am.ListPartitionReassignmentsRequest(
            topics=topics, timeout_ms=max(0, timeout_ms(request.timeout))
        )
    )


def list_partition_reassignments_response(
    version: int, request: Any, native: am.ListPartitionReassignmentsResponse
) -> Any:
    """native -> kio ListPartitionReassignmentsResponse, one entry per topic being moved."""
    mod = codec.response_module(codec.LIST_PARTITION_REASSIGNMENTS, version)
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(str(t.name), int(p)) for t in request.topics for p in t.partition_indexes}
    by_topic: dict[str, list[Any]] = {}
    for r in native.reassignments:
        if wanted is not None and (r.topic, r.partition) not in wanted:
            continue
        by_topic.setdefault(r.topic, []).append(
            mod.OngoingPartitionReassignment(
                partition_index=i32(r.partition),
                replicas=_ids(r.replicas),
                adding_replicas=_ids(r.adding_replicas),
                removing_replicas=_ids(r.removing_replicas),
            )
        )
    return mod.ListPartitionReassignmentsResponse(
        throttle_time=timedelta(0),
        error_code=kafka_error(native.error_code),
        error_message=native.error_message,
        topics=tuple(
            mod.OngoingTopicReassignment(name=TopicName(name), partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )


def _ids(brokers: Sequence[int]) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(b) for b in brokers)
