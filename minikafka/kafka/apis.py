"""Pure Kafka API handlers: kio responses built from arguments only, no broker state.

The shell (the Kafka listener) decodes with `codec.decode_request`, asks minikafka for what it
needs (e.g. its metadata cache, via `requested_topics`), and calls these to build the reply.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16, i32

from minikafka.kafka import codec
from minikafka.kafka.codec import SUPPORTED
from minikafka.wire import messages

# Kafka's MetadataResponse default when authorized operations were not requested (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
NO_LEADER = -1


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _has(cls: type, name: str) -> bool:
    """Whether this version's message has the field (asked once per partition: cached)."""
    return name in _field_names(cls)


def api_versions_response(version: int, *, error_code: ErrorCode = ErrorCode.none) -> Any:
    """ApiVersionsResponse listing every SUPPORTED api (18 itself included).

    For an unsupported ApiVersions version the caller sends
    `api_versions_response(0, error_code=ErrorCode.unsupported_version)`: Kafka answers in v0
    with the full list so the client can retry with a version it sees there (KIP-511;
    kafka-python probes with v4 first).
    """
    mod = codec.response_module(codec.API_VERSIONS, version)
    keys = tuple(
        mod.ApiVersion(api_key=i16(key), min_version=i16(lo), max_version=i16(hi))
        for key, (lo, hi) in sorted(SUPPORTED.items())
    )
    kwargs: dict[str, Any] = {"error_code": error_code, "api_keys": keys}
    if _has(mod.ApiVersionsResponse, "throttle_time"):
        kwargs["throttle_time"] = timedelta(0)
    return mod.ApiVersionsResponse(**kwargs)


def requested_topics(request: Any) -> list[str] | None:
    """The topics a kio MetadataRequest asks for; None means every topic.

    Kafka's MetadataRequest: in v0 `topics` is not nullable and an empty array means all
    topics; from v1 a null array means all and an empty array means none
    (MetadataRequest.isAllTopics).
    """
    topics = request.topics
    if topics is None or (request.__version__ == 0 and not topics):
        return None
    return [str(t.name) for t in topics]


def metadata_response(
    version: int,
    request: Any,
    native: messages.MetadataResponse,
    *,
    cluster_id: str,
    endpoints: Mapping[int, tuple[str, int]],
) -> Any:
    """Translate minikafka's MetadataResponse to Kafka's MetadataResponse at `version`.

    `endpoints` maps broker id -> its Kafka-listener (host, port). Only those brokers are
    advertised, at that address: Kafka clients connect to whatever Metadata says, and the
    native address speaks minikafka's own protocol. A leader without a Kafka endpoint becomes
    leader -1 / LEADER_NOT_AVAILABLE (retriable: the client refreshes metadata), as Kafka does
    for a leader not alive on the listener (MetadataCache.getPartitionMetadata).

    `request.allow_auto_topic_creation` (v4+) is ignored: minikafka never auto-creates, and the
    native response already carries UNKNOWN_TOPIC_OR_PARTITION for unknown topics.
    """
    del request  # the topic list was already applied by the shell via requested_topics()
    mod = codec.response_module(codec.METADATA, version)
    response_cls, topic_cls = mod.MetadataResponse, mod.MetadataResponseTopic
    partition_cls = mod.MetadataResponsePartition
    brokers = tuple(
        mod.MetadataResponseBroker(
            node_id=BrokerId(b.node_id),
            host=endpoints[b.node_id][0],
            port=i32(endpoints[b.node_id][1]),
        )
        for b in native.brokers
        if b.node_id in endpoints
    )
    topics = tuple(
        topic_cls(
            **_topic_fields(topic_cls, t),
            partitions=tuple(_partition(partition_cls, p, endpoints) for p in t.partitions),
        )
        for t in native.topics
    )
    kwargs: dict[str, Any] = {"brokers": brokers, "topics": topics}
    if _has(response_cls, "throttle_time"):
        kwargs["throttle_time"] = timedelta(0)
    if _has(response_cls, "cluster_id"):
        kwargs["cluster_id"] = cluster_id
    if _has(response_cls, "controller_id"):
        # Admin clients send CreateTopics etc. to this id, so it must be an advertised broker.
        controller = native.controller_id if native.controller_id in endpoints else NO_LEADER
        kwargs["controller_id"] = BrokerId(controller)
    if _has(response_cls, "cluster_authorized_operations"):
        kwargs["cluster_authorized_operations"] = i32(AUTHORIZED_OPERATIONS_OMITTED)
    return response_cls(**kwargs)


def _topic_fields(cls: type, topic: messages.TopicMetadata) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "error_code": ErrorCode(int(topic.error_code)),  # minikafka's codes are Kafka's numbers
        "name": TopicName(topic.name),
    }
    if _has(cls, "is_internal"):
        fields["is_internal"] = False
    if _has(cls, "topic_authorized_operations"):
        fields["topic_authorized_operations"] = i32(AUTHORIZED_OPERATIONS_OMITTED)
    return fields


def _partition(
    cls: type, p: messages.PartitionMetadata, endpoints: Mapping[int, tuple[str, int]]
) -> Any:
    leader, error = p.leader, ErrorCode(int(p.error_code))
    if leader not in endpoints:
        leader = NO_LEADER
        if error is ErrorCode.none:
            error = ErrorCode.leader_not_available
    fields: dict[str, Any] = {
        "error_code": error,
        "partition_index": i32(p.partition),
        "leader_id": BrokerId(leader),
        "replica_nodes": tuple(BrokerId(r) for r in p.replicas),
        "isr_nodes": tuple(BrokerId(r) for r in p.isr),
    }
    if _has(cls, "leader_epoch"):
        # KIP-320 (v7+): the partition's leader epoch. Clients put it in their fetches
        # (current_leader_epoch, fenced by the leader) and in their positions, which they
        # validate with OffsetForLeaderEpoch after a leader change (kafka/offset_for_leader_epoch.py).
        fields["leader_epoch"] = i32(p.leader_epoch)
    if _has(cls, "offline_replicas"):
        fields["offline_replicas"] = tuple(BrokerId(r) for r in p.offline_replicas)
    return cls(**fields)


def describe_cluster_response(
    version: int,
    *,
    cluster_id: str,
    controller_id: int,
    endpoints: Mapping[int, tuple[str, int]],
    throttle_ms: int = 0,
) -> Any:
    """DescribeClusterResponse (KIP-700) listing the brokers of `endpoints` (id -> Kafka-listener
    host and port) by id, without racks.

    As in metadata_response, a controller without a Kafka endpoint goes out as -1: admin clients
    send controller-bound requests to this id, so it must be an advertised broker (KRaft Kafka
    answers a random alive broker here for the same reason, KafkaApis.handleDescribeCluster).
    """
    mod = codec.response_module(codec.DESCRIBE_CLUSTER, version)
    brokers = tuple(
        mod.DescribeClusterBroker(broker_id=BrokerId(node), host=host, port=i32(port), rack=None)
        for node, (host, port) in sorted(endpoints.items())
    )
    return mod.DescribeClusterResponse(
        throttle_time=timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode.none,
        error_message=None,
        cluster_id=cluster_id,
        controller_id=BrokerId(controller_id if controller_id in endpoints else NO_LEADER),
        brokers=brokers,
        cluster_authorized_operations=i32(AUTHORIZED_OPERATIONS_OMITTED),
    )
