"""A broker's Kafka-protocol listener, for Kafka's own clients: what it answers, how it reads
and writes.

The listener is the broker's ordinary one (server/listener.py: framing, max.connections,
connections.max.idle.ms, KIP-219 muting) with Kafka's codec (minikafka/kafka) in place of
msgpack, no cluster gate (nothing of the control plane is served here), and one request in
flight per connection: Kafka's SocketServer mutes a channel until its response is sent, and
clients (librdkafka, kafka-python) match responses to requests in order.

Served so far (minikafka/kafka/codec.py `SUPPORTED`): ApiVersions and Metadata; Produce, Fetch,
ListOffsets, InitProducerId, OffsetForLeaderEpoch (KIP-320) and DeleteRecords (KIP-107); the admin APIs CreateTopics, CreatePartitions, DeleteTopics, DescribeConfigs,
IncrementalAlterConfigs, AlterPartitionReassignments and ListPartitionReassignments;
DescribeCluster; and the classic consumer-group APIs, served by the broker's group coordinator
(server/groups.py). The data and admin APIs are translated to the native requests (minikafka/kafka/*.py) and handed to the
broker's own dispatch, which serves them as it serves minikafka's clients (client quotas and
KIP-219 throttling included) or forwards them to the controller. A request for
an API or version outside that is answered as Kafka answers it: ApiVersions with the v0 error
response listing what is served (KIP-511, so a client retries at a version we have), anything
else by closing the connection (Kafka cannot parse it either).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from minikafka.clock import RunSync
from minikafka.core.dynamic_config import (
    CLEANUP_POLICY,
    DELETE_RETENTION_MS,
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    MAX_COMPACTION_LAG_MS,
    MAX_MESSAGE_BYTES,
    MIN_CLEANABLE_DIRTY_RATIO,
    MIN_COMPACTION_LAG_MS,
    MIN_INSYNC_REPLICAS,
    RETENTION_BYTES,
    RETENTION_MS,
    SEGMENT_BYTES,
    SEGMENT_MS,
    UNCLEAN_LEADER_ELECTION,
)
from minikafka.core.group import OffsetFetch
from minikafka.core.group.messages import LeaveOutcome
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError, RemoteProtocolError
from minikafka.kafka import (
    admin,
    delete_records,
    fetch,
    groups,
    list_offsets,
    offset_for_leader_epoch,
    produce,
    reassignments,
)
from minikafka.kafka.apis import (
    # kio's names come through minikafka.kafka, never from kio directly: that package loads
    # kio first, and without hypothesis (minikafka/kafka/__init__.py).
    ErrorCode as KafkaErrorCode,
)
from minikafka.kafka.apis import (
    api_versions_response,
    describe_cluster_response,
    metadata_response,
    requested_topics,
)
from minikafka.kafka.codec import (
    ALTER_PARTITION_REASSIGNMENTS,
    API_VERSIONS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    LIST_PARTITION_REASSIGNMENTS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SUPPORTED,
    SYNC_GROUP,
    KafkaRequest,
    UnsupportedVersion,
    decode_request,
    encode_response,
)
from minikafka.server.config import NodeConfig
from minikafka.server.groups import GroupService
from minikafka.server.listener import Ordering, Reply, WireCodec
from minikafka.server.metadata_cache import MetadataCache
from minikafka.wire import admin_messages as am
from minikafka.wire import messages
from minikafka.wire.producer_messages import InitProducerIdResponse


class UnsupportedApiVersions:
    """The body of an ApiVersions request at a version we do not serve: answered with the v0
    error response (KIP-511), never decoded further (a newer client's body may not parse)."""


def decode(payload: bytes) -> tuple[KafkaRequest, object]:
    try:
        request = decode_request(payload)
    except UnsupportedVersion as exc:
        if exc.api_key != API_VERSIONS:
            raise RemoteProtocolError(
                f"Kafka API {exc.api_key} v{exc.api_version} is not served "
                f"(served: {', '.join(f'{k} v{lo}-{hi}' for k, (lo, hi) in SUPPORTED.items())})"
            ) from exc
        header = KafkaRequest(
            api_key=exc.api_key,
            api_version=exc.api_version,
            correlation_id=exc.correlation_id,
            client_id=None,
            body=None,
        )
        return header, UnsupportedApiVersions()
    return request, request.body


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response already encoded (header included) off the event loop: see `off_loop`."""

    payload: bytes


def encode(correlation_id: int, response: Any) -> bytes:
    if isinstance(response, Encoded):
        return response.payload
    return encode_response(correlation_id, response)


KAFKA_CODEC = WireCodec(decode=decode, encode=encode, ordered=True)

# A Fetch or Produce naming more partitions than this is translated to minikafka's request, and
# its answer translated back and encoded, in a worker thread (docs/front-door.md): that pure Python work
# costs tens of microseconds a partition (kio's dataclasses check every field), and on the event
# loop a 100,000-partition fetch held every other connection, heartbeats included, for 8 s.
# In a thread it yields the GIL every few milliseconds; below this it is not worth a thread.
LARGE_REQUEST_PARTITIONS = 1000


def partition_count(body: Any) -> int:
    """How many partitions a Kafka Fetch or Produce names (O(topics))."""
    topics = getattr(body, "topics", None)
    if topics is not None:  # Fetch
        return sum(len(t.partitions) for t in topics)
    return sum(len(t.partition_data) for t in body.topic_data)  # Produce


_GROUP_APIS = frozenset(
    {
        FIND_COORDINATOR,
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        LIST_GROUPS,
        DESCRIBE_GROUPS,
    }
)
_NO_COORDINATOR = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
# FindCoordinator key types (KIP-98): 0 group, 1 transaction (not served: no transactions here).
_GROUP_KEY = 0


def topic_config_defaults(config: NodeConfig) -> admin.TopicDefaults:
    """The topic configs minikafka honours (core/dynamic_config.py, KNOWN_CONFIGS) as this
    broker applies them to a topic that sets none, for DescribeConfigs (Kafka's LogConfig
    defaults, taken from the broker's own configs: KafkaConfig.extractLogConfigMap). Source
    STATIC_BROKER_CONFIG where the node's config differs from Kafka's default, else
    DEFAULT_CONFIG. unclean.leader.election.enable is decided by the controller, from its own
    config; a cluster started by `cluster up` gives every node the same."""
    default = NodeConfig(node_id=config.node_id)

    def static(value: object, attr: str) -> tuple[str, int]:
        changed = getattr(config, attr) != getattr(default, attr)
        return str(value), admin.STATIC_BROKER_CONFIG if changed else admin.DEFAULT_CONFIG

    def log(attr: str) -> tuple[str, int]:  # from log.* names, several per setting
        value, kafka = getattr(config.log_config, attr), getattr(default.log_config, attr)
        return str(value), admin.STATIC_BROKER_CONFIG if value != kafka else admin.DEFAULT_CONFIG

    unclean = "true" if config.unclean_leader_election_enable else "false"
    return {
        LEADER_REPLICAS: ("", admin.DEFAULT_CONFIG),
        FOLLOWER_REPLICAS: ("", admin.DEFAULT_CONFIG),
        MIN_INSYNC_REPLICAS: static(config.min_insync_replicas, "min_insync_replicas"),
        MAX_MESSAGE_BYTES: static(config.message_max_bytes, "message_max_bytes"),
        UNCLEAN_LEADER_ELECTION: static(unclean, "unclean_leader_election_enable"),
        RETENTION_MS: log("retention_ms"),
        RETENTION_BYTES: log("retention_bytes"),
        SEGMENT_BYTES: log("segment_bytes"),
        SEGMENT_MS: log("segment_ms"),
        CLEANUP_POLICY: log("cleanup_policy"),
        DELETE_RETENTION_MS: log("delete_retention_ms"),
        MIN_COMPACTION_LAG_MS: log("min_compaction_lag_ms"),
        MAX_COMPACTION_LAG_MS: log("max_compaction_lag_ms"),
        MIN_CLEANABLE_DIRTY_RATIO: log("min_cleanable_ratio"),
    }


class NativeDispatch(Protocol):
    """What the Kafka listener asks of its broker (server/broker.py `Broker.dispatch`): the
    answer to a native request, translated from Kafka's, or a listener `Reply` carrying a
    client-quota throttle (Produce, Fetch)."""

    async def __call__(
        self, body: object, *, client_id: str = "", order: Ordering | None = None
    ) -> object: ...


# A Kafka API's handler: the request's header and body, and its place on the connection.
KafkaHandler = Callable[[KafkaRequest, Any, Ordering | None], Awaitable[Any]]


class KafkaApis:
    """The handlers of the Kafka listener (Kafka's KafkaApis), over the broker's own state."""

    def __init__(
        self,
        *,
        cache: MetadataCache,
        cluster_id: str,
        broker: NativeDispatch | None = None,
        groups: GroupService | None = None,
        topic_defaults: admin.TopicDefaults | None = None,
        run_sync: RunSync = trio.to_thread.run_sync,
    ) -> None:
        """`broker` is the broker's native dispatch (Broker.dispatch: `(body, client_id=...)`),
        which serves the data APIs and forwards the admin ones to the controller; without it
        those answer NETWORK_EXCEPTION (the admin APIs) or close the connection. `groups` is
        the broker's group coordinator (server/groups.py); without it the group APIs answer
        COORDINATOR_NOT_AVAILABLE. `topic_defaults`: what DescribeConfigs lists for a topic
        config the topic does not set (`topic_config_defaults`)."""
        self.cache = cache
        self.cluster_id = cluster_id
        self.broker = broker
        self.groups = groups
        self.topic_defaults = topic_defaults or {}
        self.run_sync = run_sync  # worker threads; inline under a MockClock (tests)
        # Each API key's handler (Kafka's KafkaApis.handle), built once.
        self.handlers: dict[int, KafkaHandler] = {
            API_VERSIONS: self.api_versions,
            METADATA: self.metadata,
            PRODUCE: self.produce,
            FETCH: self.fetch,
            LIST_OFFSETS: self.list_offsets,
            INIT_PRODUCER_ID: self.init_producer_id,
            OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            DELETE_RECORDS: self.delete_records,
            CREATE_TOPICS: self.create_topics,
            DELETE_TOPICS: self.delete_topics,
            CREATE_PARTITIONS: self.create_partitions,
            DESCRIBE_CONFIGS: self.describe_configs,
            INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
            LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments,
            DESCRIBE_CLUSTER: self.describe_cluster,
            **dict.fromkeys(_GROUP_APIS, self.group_api),
        }

    async def dispatch(
        self, header: KafkaRequest, body: object, *, order: Ordering | None = None
    ) -> Any:
        """The answer to one request. `order`: its place on the connection (the listener's
        `Ordering`): a produce releases it once its batches are queued for the log."""
        if isinstance(body, UnsupportedApiVersions):
            return api_versions_response(0, error_code=KafkaErrorCode.unsupported_version)
        # decode_request lets only SUPPORTED keys through, and each has a handler (a test
        # holds the table's keys equal to SUPPORTED's).
        return await self.handlers[header.api_key](header, body, order)

    async def api_versions(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        return api_versions_response(header.api_version)

    async def list_offsets(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        refused = list_offsets.fenced(body, self.leader_epoch)
        request = list_offsets.to_native(body, refused)
        native: object = messages.ListOffsetsResponse(partitions=[])
        if request.partitions:
            native = await self._native(request)
        assert isinstance(native, messages.ListOffsetsResponse), native
        return list_offsets.to_kafka(header.api_version, list_offsets.with_refused(native, refused))

    def leader_epoch(self, topic: str, partition: int) -> int | None:
        """The partition's leader epoch in this broker's metadata (None: not known here)."""
        state = (self.cache.partitions_of(topic) or {}).get(partition)
        return None if state is None else state.leader_epoch

    async def offset_for_leader_epoch(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        """KIP-320 position validation, answered by this broker's replicas (node.py routes it
        to server/offset_for_leader_epoch.py)."""
        native = offset_for_leader_epoch.to_native(body)
        answer = await self._per_topic(native, offset_for_leader_epoch.failed)
        assert isinstance(answer, messages.OffsetForLeaderEpochResponse), answer
        return offset_for_leader_epoch.to_kafka(header.api_version, answer)

    async def delete_records(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        """KIP-107, served by the broker for the partitions it leads (server/delete_records.py)."""
        native = delete_records.to_native(body)
        answer = await self._per_topic(native, delete_records.failed)
        assert isinstance(answer, messages.DeleteRecordsResponse), answer
        return delete_records.to_kafka(header.api_version, answer)

    async def init_producer_id(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        native = await self._native(produce.init_producer_id_to_native(body))
        assert isinstance(native, InitProducerIdResponse), native
        return produce.init_producer_id_to_kafka(header.api_version, native)

    async def describe_cluster(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        endpoints = self.endpoints()
        return describe_cluster_response(
            header.api_version,
            cluster_id=self.cluster_id,
            controller_id=min(endpoints, default=-1),
            endpoints=endpoints,
        )

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """The live brokers' Kafka listeners, by broker id."""
        return {
            b.node_id: (b.kafka_host or b.host, b.kafka_port)
            for b in self.cache.brokers.values()
            if b.kafka_port > 0
        }

    async def metadata(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        version = header.api_version
        endpoints = self.endpoints()
        native = self.cache.response(requested_topics(body))
        # Admin requests go to the controller the response names. In KRaft mode the controller
        # quorum is not reachable by clients, so a broker names a random live broker
        # (KRaftMetadataCache.getRandomAliveBrokerId) and forwards what needs the controller;
        # we name the lowest live broker with a Kafka listener, which does the same.
        controller = min(endpoints, default=-1)
        native = dataclasses.replace(native, controller_id=controller)
        return metadata_response(
            version, body, native, cluster_id=self.cluster_id, endpoints=endpoints
        )

    # ------------------------------------------------------------------------ data APIs

    async def off_loop(self, large: bool, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args), in a worker thread for a large request (LARGE_REQUEST_PARTITIONS)."""
        if not large:
            return fn(*args)
        return await self.run_sync(fn, *args)

    def encoded(self, large: bool, header: KafkaRequest, response: Any) -> Any:
        """What the listener writes: for a large request, the response already encoded here
        (`Encoded`, in the worker thread that calls this), else the response itself."""
        if not large:
            return response
        return Encoded(encode_response(header.correlation_id, response))

    async def produce(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Reply:
        """The broker's answer (and its KIP-219 throttle) in Kafka's terms; with acks=0 none,
        as Kafka sends none."""
        version, client_id = header.api_version, header.client_id or ""
        large = partition_count(body) > LARGE_REQUEST_PARTITIONS
        translated = await self.off_loop(large, produce.to_native, body)
        result: object = None
        if translated.native is not None:
            result = await self._native(translated.native, client_id=client_id, order=order)
        reply = result if isinstance(result, Reply) else Reply(response=result)
        if int(body.acks) == 0:
            return Reply(response=None, throttle_ms=reply.throttle_ms)
        answer = reply.response
        assert answer is None or isinstance(answer, messages.ProduceResponse), answer
        response = await self.off_loop(
            large,
            lambda: self.encoded(large, header, produce.to_kafka(version, translated, answer)),
        )
        return Reply(response=response, throttle_ms=reply.throttle_ms)

    async def fetch(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Reply:
        version, client_id = header.api_version, header.client_id or ""
        large = partition_count(body) > LARGE_REQUEST_PARTITIONS
        if fetch.is_follower_fetch(body):
            return Reply(response=fetch.refuse_follower(version, body))
        native = await self.off_loop(large, fetch.to_native, body)
        result = await self._native(native, client_id=client_id)
        reply = result if isinstance(result, Reply) else Reply(response=result)
        answer = reply.response
        assert isinstance(answer, messages.FetchResponse), answer
        response = await self.off_loop(
            large, lambda: self.encoded(large, header, fetch.to_kafka(version, answer))
        )
        return Reply(response=response, throttle_ms=reply.throttle_ms)

    # ------------------------------------------------------------------------ admin APIs

    async def _native(
        self, request: object, *, client_id: str = "", order: Ordering | None = None
    ) -> object:
        """The broker's answer to a native admin request. Failing to reach the controller is
        answered, not raised: BrokerError keeps its code, anything else is NETWORK_EXCEPTION
        (retriable), the code Broker._forward uses."""
        if self.broker is None:
            raise BrokerError(ErrorCode.NETWORK_EXCEPTION, "no broker dispatch on this listener")
        return await self.broker(request, client_id=client_id, order=order)

    async def create_topics(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        version = header.api_version
        translated = admin.create_topics_request(body)
        native = None
        if translated.native is not None:
            native = await self._per_topic(translated.native, admin.create_topics_failed)
            assert isinstance(native, messages.CreateTopicsResponse), native
        return admin.create_topics_response(version, body, translated, native)

    async def delete_topics(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        version = header.api_version
        native = admin.delete_topics_request(body)
        answer = await self._per_topic(native, admin.delete_topics_failed)
        assert isinstance(answer, messages.DeleteTopicsResponse), answer
        return admin.delete_topics_response(version, answer)

    async def create_partitions(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        version = header.api_version
        native = admin.create_partitions_request(body)
        answer = await self._per_topic(native, admin.create_partitions_failed)
        assert isinstance(answer, messages.CreatePartitionsResponse), answer
        return admin.create_partitions_response(version, answer)

    async def _per_topic(self, native: Any, failed: Callable[[Any, int, str], object]) -> object:
        """The controller's per-topic answer; a failed forward answers every topic with its
        error (NETWORK_EXCEPTION, retriable, when it is not a broker's code)."""
        try:
            return await self._native(native)
        except BrokerError as exc:
            return failed(native, exc.code, str(exc))
        except MiniKafkaError as exc:
            return failed(native, ErrorCode.NETWORK_EXCEPTION, str(exc))

    async def describe_configs(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        version = header.api_version
        translated = admin.describe_configs_request(body)
        native = await self._forwarded(translated, am.DescribeConfigsResponse)
        return admin.describe_configs_response(
            version, body, translated, native, self.topic_defaults
        )

    async def incremental_alter_configs(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        version = header.api_version
        translated = admin.incremental_alter_configs_request(body)
        native = await self._forwarded(translated, am.IncrementalAlterConfigsResponse)
        return admin.incremental_alter_configs_response(version, body, translated, native)

    async def alter_partition_reassignments(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        version = header.api_version
        translated = reassignments.alter_partition_reassignments_request(body)
        native = await self._forwarded(translated, am.AlterPartitionReassignmentsResponse)
        return reassignments.alter_partition_reassignments_response(version, body, native)

    async def list_partition_reassignments(
        self, header: KafkaRequest, body: Any, order: Ordering | None
    ) -> Any:
        version = header.api_version
        translated = reassignments.list_partition_reassignments_request(body)
        native = await self._forwarded(translated, am.ListPartitionReassignmentsResponse)
        return reassignments.list_partition_reassignments_response(version, body, native)

    async def _forwarded(self, translated: admin.Translated, response_type: type) -> Any:
        """The native response (None when everything was refused before forwarding); a failed
        forward becomes a response with that top-level error_code, as Broker._forward answers."""
        if translated.native is None:
            return None
        try:
            native = await self._native(translated.native)
        except BrokerError as exc:
            return response_type(error_code=exc.code)
        except MiniKafkaError:
            return response_type(error_code=ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(native, response_type), native
        return native

    # ------------------------------------------------------------------------ group APIs

    async def group_api(self, header: KafkaRequest, body: Any, order: Ordering | None) -> Any:
        """The classic consumer-group protocol, served by the broker's GroupService."""
        v, key, svc = header.api_version, header.api_key, self.groups
        client_id = header.client_id or ""
        if key == FIND_COORDINATOR:
            key_type, group_id = groups.find_coordinator_request(body)
            if key_type != _GROUP_KEY:
                return groups.find_coordinator_response(
                    v,
                    error=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    message="transactions are not served by minikafka",
                )
            if svc is None:
                return groups.find_coordinator_response(v, error=_NO_COORDINATOR)
            code, broker = svc.find_coordinator(group_id)
            if broker is None:
                return groups.find_coordinator_response(v, error=code)
            return groups.find_coordinator_response(
                v,
                error=code,
                node_id=broker.node_id,
                host=broker.kafka_host or broker.host,
                port=broker.kafka_port,
            )
        if key == LIST_GROUPS:
            code, listed = (_NO_COORDINATOR, ()) if svc is None else svc.list_groups()
            return groups.list_groups_response(v, listed, error=code)
        if key == DESCRIBE_GROUPS:
            summaries, errors = [], {}
            for group_id in groups.describe_groups_request(body):
                code, summary = (_NO_COORDINATOR, None) if svc is None else svc.describe(group_id)
                if code or summary is None:
                    errors[group_id] = code
                else:
                    summaries.append(summary)
            return groups.describe_groups_response(v, summaries, errors=errors)
        if svc is None:  # a listener built without a coordinator (unit tests): close
            raise BrokerError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no group coordinator here")
        if key == JOIN_GROUP:
            group_id, kwargs = groups.join_group_request(body, client_id=client_id, client_host="")
            return groups.join_group_response(v, await svc.join(group_id, kwargs))
        if key == SYNC_GROUP:
            group_id, kwargs = groups.sync_group_request(body)
            return groups.sync_group_response(v, await svc.sync(group_id, kwargs))
        if key == HEARTBEAT:
            return groups.heartbeat_response(v, svc.heartbeat(*groups.heartbeat_request(body)))
        if key == LEAVE_GROUP:
            code, members = svc.leave(*groups.leave_group_request(body))
            return groups.leave_group_response(v, LeaveOutcome(error=code, members=members))
        if key == OFFSET_COMMIT:
            errors = await svc.commit(*groups.offset_commit_request(body))
            return groups.offset_commit_response(v, body, errors)
        assert key == OFFSET_FETCH, key
        group_id, partitions = groups.offset_fetch_request(body)
        code, results = svc.fetch_offsets(group_id, partitions)
        if code:
            # OffsetFetchRequest.getErrorResponse: v1 has no group error, each partition has it.
            results = {tp: OffsetFetch(offset=-1, error=code) for tp in partitions or ()}
        return groups.offset_fetch_response(v, results, error=code)
