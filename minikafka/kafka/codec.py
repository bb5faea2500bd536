"""Decode Kafka requests and encode Kafka responses with kio, for real Kafka clients.

A request payload starts with api_key (int16), api_version (int16) and correlation_id (int32)
whatever its header version (Kafka's RequestHeader v0-v2), so we peek at those before choosing a
schema. kio picks the header version per message (`__header_schema__`), including Kafka's
quirks: ApiVersionsResponse always uses ResponseHeader v0 (KIP-511: a client that does not yet
know the broker's versions must be able to parse the answer), and RequestHeader.client_id keeps
the legacy non-compact string even in flexible header v2.
"""

from __future__ import annotations

import functools
import io
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.static.primitive import i32

from minikafka.errors import RemoteProtocolError
from minikafka.kafka import KIO_IMPORTS
from minikafka.kafka.bounds import check_request, entity_shape
from minikafka.kafka.lenient import metadata_request_v9

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
INIT_PRODUCER_ID = 22
CREATE_TOPICS = 19
CREATE_PARTITIONS = 37
DELETE_TOPICS = 20
DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DESCRIBE_CLUSTER = 60
DELETE_RECORDS = 21
OFFSET_FOR_LEADER_EPOCH = 23

# The API versions this listener serves (Kafka's ApiVersionsResponse.api_keys), key -> (min, max).
# Metadata goes to v9, its first flexible version: clients trust a partition's leader epoch only
# from v9 on (KAFKA-9212: librdkafka's rd_kafka_has_reliable_leader_epochs, kafka-python's
# ClusterMetadata and the Java client drop it from older responses), and without it they never
# validate their positions (KIP-320). v9 is v8's fields, flexible; librdkafka 2.16, kafka-python
# 3.0.12 and aiokafka 0.14 negotiate it or below (tests/integration/test_kafka_clients.py,
# test_kafka_truncation.py).
SUPPORTED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    METADATA: (0, 9),
    # Data (minikafka/kafka/produce.py, fetch.py, list_offsets.py): from the first version of
    # each that carries RecordBatch v2 (librdkafka needs Produce 3 and Fetch 4 for it) to the
    # last non-flexible one; InitProducerId 0-1 serves the idempotent producer (KIP-98).
    PRODUCE: (3, 8),
    FETCH: (4, 11),
    LIST_OFFSETS: (1, 7),  # v6 is flexible; v7: MAX_TIMESTAMP (-3, KIP-734)
    INIT_PRODUCER_ID: (0, 1),
    # KIP-320 position validation (minikafka/kafka/offset_for_leader_epoch.py): kio carries
    # v2-4 (KIP-896 removed v0-1) and v4 is flexible. librdkafka asks v2, kafka-python v3.
    OFFSET_FOR_LEADER_EPOCH: (2, 3),
    # KIP-107 (minikafka/kafka/delete_records.py), to each partition's leader; v2 is flexible.
    DELETE_RECORDS: (0, 1),
    # Admin APIs (minikafka/kafka/admin.py), forwarded to the controller. CreateTopics and
    # DescribeConfigs stop before their first flexible version (v5, v4): librdkafka asks
    # CreateTopics v4, aiokafka v3. IncrementalAlterConfigs v1 and both reassignment APIs
    # (KIP-455: flexible from v0) are flexible; kio handles the tagged fields.
    CREATE_TOPICS: (2, 4),
    CREATE_PARTITIONS: (0, 1),  # v2 is flexible
    DELETE_TOPICS: (1, 3),  # Kafka 4.0 serves 1 and up (KIP-896); v4 is flexible
    DESCRIBE_CONFIGS: (1, 3),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # DescribeCluster (KIP-700) is flexible from v0; v0 is what admin clients ask first.
    DESCRIBE_CLUSTER: (0, 0),
    # The classic consumer-group protocol (minikafka/kafka/groups.py, core/group), from Kafka
    # 4.0's oldest versions (KIP-896 removed JoinGroup v0-1, OffsetCommit v0-1, OffsetFetch v0)
    # to the last non-flexible one of each.
    FIND_COORDINATOR: (0, 2),
    JOIN_GROUP: (2, 5),
    SYNC_GROUP: (0, 3),
    HEARTBEAT: (0, 3),
    LEAVE_GROUP: (0, 3),
    OFFSET_COMMIT: (2, 7),
    OFFSET_FETCH: (1, 5),
    LIST_GROUPS: (0, 2),
    DESCRIBE_GROUPS: (0, 4),
}

_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id


# kio's schemas are imported when first used, one API version at a time. kio generates a
# package per message version (kio.schema.fetch.v11 holds request.py and response.py, each with
# its nested dataclasses), and importing one costs 7-18 ms; the listener serves 90 versions of
# 23 APIs, and a client uses one version of the few APIs it needs. So no schema of an API is
# imported when a node starts (tests/repo/test_node_startup.py holds it): kio's index (module paths
# only) names the module the first time a request of that API and version is decoded or
# answered, and the class is kept here. kio's index (it imports the four header schemas) and
# its readers and writers (kio.serial, which imports asyncio for a type alias) wait for the
# first request too, or for `preload_schemas`: a node that never serves Kafka's protocol (a
# controller, a broker without kafka.listen) never imports them.


#
# Those imports happen on two threads: `preload_schemas` runs in a worker while the event loop
# may decode a client's first request. Python's import locks are per module, so two threads
# importing modules of one kio package that import each other can each hold one lock and wait
# for the other's; importlib then raises _DeadlockError in one of them, which crashed a node
# (seen in CI: kio.schema.api_versions.v0). Every kio import here is made under one lock, so
# only one thread imports kio at a time; the loop waits at most one preload (about 60 ms),
# once.
_IMPORTS = KIO_IMPORTS


@functools.cache
def request_schema(api_key: int, api_version: int) -> type:
    """The kio request class of this API at this version (e.g. FetchRequest v11)."""
    with _IMPORTS:
        from kio.index import load_request_schema

        return load_request_schema(api_key, api_version)


@functools.cache
def response_schema(api_key: int, api_version: int) -> type:
    """The kio response class of this API at this version (e.g. FetchResponse v11)."""
    with _IMPORTS:
        from kio.index import load_response_schema

        return load_response_schema(api_key, api_version)


def response_module(api_key: int, api_version: int) -> ModuleType:
    """The kio module of this API's response at this version: the response class and the
    classes nested in it (e.g. kio.schema.fetch.v11.response: FetchResponse, PartitionData)."""
    return sys.modules[response_schema(api_key, api_version).__module__]


@functools.cache
def entity_reader(schema: type) -> Callable[[Any, int], tuple[Any, int]]:
    """kio's reader of `schema`: (entity, bytes consumed) from (buffer, offset)."""
    with _IMPORTS:
        from kio.serial import entity_reader as kio_reader

        return kio_reader(schema)


@functools.cache
def entity_writer(schema: type) -> Callable[[Any, Any], None]:
    """kio's writer of `schema`: (binary stream, entity)."""
    with _IMPORTS:
        from kio.serial import entity_writer as kio_writer

        return kio_writer(schema)


# What every client sends first, at the versions a current client picks (the highest both
# sides serve: ours), and ApiVersions v0 (the KIP-511 answer to kafka-python's v4 probe).
FIRST_REQUESTS: tuple[tuple[int, int], ...] = (
    (API_VERSIONS, 0),
    (API_VERSIONS, SUPPORTED[API_VERSIONS][1]),
    (METADATA, SUPPORTED[METADATA][1]),
    (PRODUCE, SUPPORTED[PRODUCE][1]),
    (FETCH, SUPPORTED[FETCH][1]),
)


def preload_schemas(versions: tuple[tuple[int, int], ...] = FIRST_REQUESTS) -> None:
    """Import the schemas of `versions` now (blocking: about 60 ms for FIRST_REQUESTS). A node
    runs it in a worker thread once its Kafka listener is up, so that a client's first
    requests do not wait for their imports on the event loop; any other version is imported
    by the first request that uses it."""
    for api_key, api_version in versions:
        for schema, build in (
            (request_schema(api_key, api_version), entity_reader),
            (response_schema(api_key, api_version), entity_writer),
        ):
            build(schema.__header_schema__)
            build(schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request dataclass, e.g. kio.schema.metadata.v8.request.MetadataRequest


class UnsupportedVersion(Exception):
    """An api key or version outside SUPPORTED.

    Not a RemoteProtocolError: Kafka answers an unsupported ApiVersions version with a v0 error
    response (KIP-511; kafka-python probes with v4 first), and closes the connection for any
    other API (SocketServer/KafkaApis cannot parse a header it does not know).
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"unsupported api {api_key} v{api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


def decode_request(payload: bytes) -> KafkaRequest:
    """Decode one request frame payload (no length prefix).

    Raises UnsupportedVersion for keys/versions outside SUPPORTED and RemoteProtocolError for
    bytes that do not decode exactly (short, garbage, or trailing bytes).
    """
    if len(payload) < _PREFIX.size:
        raise RemoteProtocolError(f"kafka request of {len(payload)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(payload)
    lo, hi = SUPPORTED.get(api_key, (0, -1))
    if not lo <= api_version <= hi:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    schema = request_schema(api_key, api_version)
    try:
        return _decode(schema, api_key, api_version, correlation_id, payload)
    except RemoteProtocolError:
        if (api_key, api_version) != (METADATA, 9):
            raise
        # Read as Kafka reads it (kafka/lenient.py: librdkafka's all-topics Metadata v9), the
        # header's lengths checked before kio reads it, as in _decode.
        header_schema = schema.__header_schema__
        entity_shape(header_schema)[0](payload, 0, len(payload))
        try:
            header, used = entity_reader(header_schema)(payload, 0)
            body = metadata_request_v9(schema, payload, used)
        except (ValueError, KeyError) as exc:  # UnicodeDecodeError is a ValueError
            raise RemoteProtocolError(f"undecodable kafka {schema.__name__} v9: {exc}") from exc
        return KafkaRequest(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=getattr(header, "client_id", None),
            body=body,
        )


def _decode(
    schema: type, api_key: int, api_version: int, correlation_id: int, payload: bytes
) -> KafkaRequest:
    header_schema = schema.__header_schema__
    # Every length against the bytes left, before kio's native readers size anything from it:
    # a length they trust can abort the process (kafka/bounds.py).
    check_request(schema, header_schema, payload, 0)
    try:
        # kio readers return (entity, bytes consumed), not the absolute end offset.
        header, used = entity_reader(header_schema)(payload, 0)
        body, body_used = entity_reader(schema)(payload, used)
    except Exception as exc:  # kio raises SerialError, ValueError, UnicodeDecodeError...
        raise RemoteProtocolError(
            f"undecodable kafka {schema.__name__} v{api_version}: {exc}"
        ) from exc
    except BaseException as exc:
        # A panic in kio's native code arrives as pyo3's PanicException, a BaseException: the
        # peer's bytes found a bug there, and it is still that connection's fault alone.
        if type(exc).__name__ != "PanicException":
            raise
        raise RemoteProtocolError(
            f"undecodable kafka {schema.__name__} v{api_version}: {exc}"
        ) from exc
    extra = len(payload) - used - body_used
    if extra:
        raise RemoteProtocolError(
            f"kafka {schema.__name__} v{api_version} has {extra} trailing bytes"
        )
    return KafkaRequest(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=getattr(header, "client_id", None),
        body=body,
    )


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Header (kio's `__header_schema__` for this response's version) then body, no length."""
    schema = type(response)
    header_schema = schema.__header_schema__
    out = io.BytesIO()
    entity_writer(header_schema)(out, header_schema(correlation_id=i32(correlation_id)))
    entity_writer(schema)(out, response)
    return out.getvalue()
