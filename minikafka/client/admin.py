"""The admin client: create and describe topics, alter and describe dynamic configs, alter and
list partition reassignments (requests go to any broker, which forwards admin requests to the
controller), and delete records (KIP-107: to each partition's leader).

Config and reassignment requests are retried while the answer is a retriable whole-request error
(a broker that cannot reach the controller, e.g. during a controller restart), up to `wait_s`;
per-resource and per-partition errors are answers, never retried."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.common import TopicPartition
from minikafka.errors import BrokerError, ErrorCode, is_retriable
from minikafka.wire.messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterPartitionReassignmentsRequest,
    ConfigEntity,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteRecordsPartition,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    MetadataResponse,
    OngoingPartitionReassignment,
    ReassignablePartition,
    ReassignablePartitionResponse,
)

RETRY_BACKOFF_S = 0.2


class Admin:
    def __init__(self, client: ClusterClient) -> None:
        self.client = client

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        wait_s: float = 30.0,
    ) -> None:
        """Create a topic and wait until every partition has a leader in the metadata."""
        req = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=dict(configs or {}),
                )
            ]
        )
        resp = await self.client.request_any(req)
        _raise_unless_done(resp.topics, f"cannot create topic {name!r}")
        await self._wait_for_leaders(name, partitions, wait_s)

    async def create_partitions(
        self,
        name: str,
        count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        wait_s: float = 30.0,
    ) -> None:
        """Grow a topic to `count` partitions (Kafka's CreatePartitions; `assignments`: the new
        partitions' replicas, else the controller places them), and wait until every partition
        has a leader in the metadata."""
        req = CreatePartitionsRequest(
            topics=[
                CreatePartitionsTopic(
                    name=name,
                    count=count,
                    assignments=None if assignments is None else [list(a) for a in assignments],
                )
            ]
        )
        resp = await self.client.request_any(req)
        _raise_unless_done(resp.results, f"cannot add partitions to {name!r}")
        await self._wait_for_leaders(name, count, wait_s)

    async def delete_topic(self, name: str, *, wait_s: float = 30.0) -> None:
        """Delete a topic (Kafka's DeleteTopics) and wait until the metadata no longer has it."""
        resp = await self.client.request_any(DeleteTopicsRequest(topics=[name]))
        _raise_unless_done(resp.results, f"cannot delete {name!r}")
        with trio.fail_after(wait_s):
            while True:
                md = await self.client.refresh_metadata([name])
                if all(t.name != name or t.error_code != ErrorCode.NONE for t in md.topics):
                    return
                await trio.sleep(0.05)

    async def _wait_for_leaders(self, name: str, partitions: int, wait_s: float) -> None:
        with trio.fail_after(wait_s):
            while True:
                md = await self.client.refresh_metadata([name])
                topic = next((t for t in md.topics if t.name == name), None)
                if (
                    topic is not None
                    and len(topic.partitions) == partitions
                    and all(p.leader >= 0 for p in topic.partitions)
                ):
                    return
                await trio.sleep(0.05)

    async def describe(self, topics: list[str] | None = None) -> MetadataResponse:
        return await self.client.refresh_metadata(topics)

    # ------------------------------------------------------------------------ dynamic configs

    async def alter_configs(
        self,
        entity_type: str,
        entity_name: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
        validate_only: bool = False,
        wait_s: float = 30.0,
    ) -> None:
        """Set and delete configs of one entity ("" = the default); BrokerError if refused."""
        ops = [AlterableConfig(name=k, op="set", value=v) for k, v in (set_configs or {}).items()]
        ops += [AlterableConfig(name=k, op="delete") for k in delete_configs]
        resource = AlterConfigsResource(
            resource_type=entity_type, resource_name=entity_name, configs=ops
        )
        (result,) = await self.alter_configs_many(
            [resource], validate_only=validate_only, wait_s=wait_s
        )
        if result.error_code != ErrorCode.NONE:
            raise BrokerError(result.error_code, result.error_message or "")

    async def alter_configs_many(
        self,
        resources: Sequence[AlterConfigsResource],
        *,
        validate_only: bool = False,
        wait_s: float = 30.0,
    ) -> list[AlterConfigsResourceResponse]:
        """IncrementalAlterConfigs: one response per resource, errors included (not raised)."""
        req = IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only)
        resp = await self._config_request(req, wait_s)
        return resp.responses

    async def describe_configs(
        self, entity_type: str, entity_name: str | None = None, *, wait_s: float = 30.0
    ) -> list[DescribeConfigsResult]:
        """One entity's configs (with inherited defaults), or every configured entity of a type
        when `entity_name` is None. BrokerError if the entity is refused (e.g. unknown topic)."""
        req = DescribeConfigsRequest(
            resources=[
                DescribeConfigsResource(resource_type=entity_type, resource_name=entity_name)
            ]
        )
        resp = await self._config_request(req, wait_s)
        for result in resp.results:
            if result.error_code != ErrorCode.NONE:
                raise BrokerError(result.error_code, result.error_message or "")
        return resp.results

    # ------------------------------------------------------------------------ reassignments

    async def alter_partition_reassignments(
        self,
        moves: Mapping[TopicPartition, Sequence[int] | None],
        *,
        throttle_configs: Sequence[ConfigEntity] = (),
        wait_s: float = 30.0,
    ) -> dict[TopicPartition, ReassignablePartitionResponse]:
        """Move each partition to its new replicas (the first is the preferred leader), or
        cancel its move (None). `throttle_configs` records the dynamic configs set for this
        reassignment: the controller removes them when its last partition is done.

        -> one response per partition, errors included (not raised); BrokerError when the
        request as a whole is refused (e.g. malformed throttle_configs)."""
        req = AlterPartitionReassignmentsRequest(
            partitions=[
                ReassignablePartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    replicas=None if replicas is None else list(replicas),
                )
                for tp, replicas in moves.items()
            ],
            timeout_ms=int(wait_s * 1000),
            throttle_configs=list(throttle_configs),
        )
        resp = await self._config_request(req, wait_s)
        return {TopicPartition(r.topic, r.partition): r for r in resp.responses}

    async def list_partition_reassignments(
        self, topics: Sequence[str] | None = None, *, wait_s: float = 30.0
    ) -> dict[TopicPartition, OngoingPartitionReassignment]:
        """The partitions being moved (of `topics`, or of every topic), with their replicas
        (target first), adding and removing replicas. Empty when nothing moves."""
        req = ListPartitionReassignmentsRequest(
            topics=None if topics is None else list(topics), timeout_ms=int(wait_s * 1000)
        )
        resp = await self._config_request(req, wait_s)
        return {TopicPartition(r.topic, r.partition): r for r in resp.reassignments}

    async def delete_records(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int = 30_000,
        wait_s: float = 60.0,
    ) -> dict[TopicPartition, DeleteRecordsPartitionResponse]:
        """Move each partition's log start offset to its offset (-1: the high watermark), as
        Kafka's AdminClient.deleteRecords does: one request per leader; a partition whose
        answer is retriable (its leader moved) is asked again after a metadata refresh, until
        `wait_s`. -> each partition's answer: its error code and low watermark."""
        todo = dict(offsets)
        out: dict[TopicPartition, DeleteRecordsPartitionResponse] = {}
        topics = sorted({tp.topic for tp in offsets})
        with trio.move_on_after(wait_s):
            while todo:
                if any(self.client.leader_of(tp) < 0 for tp in todo):
                    await self.client.refresh_metadata(topics)
                by_leader: dict[int, list[TopicPartition]] = {}
                for tp in todo:
                    by_leader.setdefault(self.client.leader_of(tp), []).append(tp)
                for leader, tps in sorted(by_leader.items()):
                    if leader < 0:
                        continue
                    req = DeleteRecordsRequest(
                        partitions=[
                            DeleteRecordsPartition(
                                topic=tp.topic, partition=tp.partition, offset=todo[tp]
                            )
                            for tp in tps
                        ],
                        timeout_ms=timeout_ms,
                    )
                    try:
                        conn = await self.client.node_connection(leader)
                        resp = await conn.request(req, timeout_s=timeout_ms / 1000 + 30)
                    except BrokerError as exc:
                        if not exc.retriable:
                            raise
                        continue
                    for r in resp.partitions:
                        tp = TopicPartition(r.topic, r.partition)
                        if not is_retriable(r.error_code):
                            out[tp] = r
                            todo.pop(tp, None)
                if todo:
                    await self.client.refresh_metadata(topics)
                    await trio.sleep(RETRY_BACKOFF_S)
        for tp in todo:  # never answered within wait_s
            out[tp] = DeleteRecordsPartitionResponse(
                topic=tp.topic, partition=tp.partition, error_code=ErrorCode.REQUEST_TIMED_OUT
            )
        return out

    async def _config_request(self, req: object, wait_s: float) -> object:
        last: BrokerError | None = None
        with trio.move_on_after(wait_s):
            while True:
                try:
                    resp = await self.client.request_any(req)
                except BrokerError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
                else:
                    code = getattr(resp, "error_code", ErrorCode.NONE)
                    if code == ErrorCode.NONE:
                        return resp
                    message = getattr(resp, "error_message", None)
                    last = BrokerError(code, message or "the controller did not answer")
                    if not last.retriable:
                        raise last
                await trio.sleep(RETRY_BACKOFF_S)
        raise BrokerError(ErrorCode.REQUEST_TIMED_OUT, f"no answer in {wait_s} s (last: {last})")


def _raise_unless_done(results: Sequence[object], what: str) -> None:
    """The one per-topic result of a single-topic admin request: a BrokerError unless NONE."""
    (result,) = results
    code = result.error_code  # type: ignore[attr-defined]
    if code != ErrorCode.NONE:
        raise BrokerError(code, result.error_message or what)  # type: ignore[attr-defined]
