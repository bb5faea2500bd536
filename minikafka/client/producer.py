"""The producer: record batches to partition leaders, with acks, retries and metadata refresh.

`send_batches` takes ready batches (one per partition or several), groups them by leader into
one Produce request per broker, sends those concurrently, and retries the partitions whose error
is retriable (Kafka's RetriableException codes: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a
broken connection ...) after refreshing metadata, with a backoff, until `delivery_timeout_s`.
Non-retriable errors fail at once. Callers pipeline by running several sends concurrently
(tools/perf.py keeps a window of them in flight).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.core.records import make_batch
from minikafka.core.types import TopicPartition
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError, error_name
from minikafka.wire.messages import ProducePartition, ProduceRequest, ProduceResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResult:
    tp: TopicPartition
    base_offset: int  # -1 for acks=0
    record_count: int
    retries: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    acks: int = -1
    request_timeout_ms: int = 30_000
    delivery_timeout_s: float = 120.0
    retry_backoff_ms: int = 100


class Producer:
    def __init__(self, client: ClusterClient, config: ProducerConfig = ProducerConfig()) -> None:
        if config.acks not in (0, 1, -1):
            raise MiniKafkaError(f"acks={config.acks}: expected 0, 1 or -1 (all)")
        self.client = client
        self.config = config
        self.retries = 0
        # Client quotas: the throttle times the brokers reported (KIP-13). The connection to that
        # broker waited each one out before its next request (KIP-219, client/connection.py).
        self.throttle_time_ms_total = 0
        self.last_throttle_time_ms = 0

    async def send_batches(
        self, batches: Sequence[tuple[TopicPartition, bytes, int]]
    ) -> list[ProduceResult]:
        """Send (tp, batch bytes, record count) items; returns one result per item, in order.
        Raises BrokerError when an item fails for good."""
        results: dict[int, ProduceResult] = {}
        todo = list(range(len(batches)))
        attempts = 0
        with trio.fail_after(self.config.delivery_timeout_s):
            while todo:
                if attempts:
                    await trio.sleep(self.config.retry_backoff_ms / 1000)
                    await self.client.refresh_metadata(sorted({batches[i][0].topic for i in todo}))
                elif any(self.client.leader_of(batches[i][0]) < 0 for i in todo):
                    await self.client.refresh_metadata(sorted({batches[i][0].topic for i in todo}))
                todo = await self._send_round(batches, todo, results, attempts)
                attempts += 1
                self.retries += len(todo)
        return [results[i] for i in range(len(batches))]

    async def _send_round(
        self, batches, todo: list[int], results: dict[int, ProduceResult], attempt: int
    ) -> list[int]:  # noqa: ANN001
        by_leader: dict[int, list[int]] = {}
        retry: list[int] = []
        for i in todo:
            leader = self.client.leader_of(batches[i][0])
            if leader < 0:
                retry.append(i)
            else:
                by_leader.setdefault(leader, []).append(i)

        async def one(leader: int, items: list[int]) -> None:
            try:
                failed = await self._send_to(leader, batches, items, results, attempt)
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                failed = items
            retry.extend(failed)

        async with trio.open_nursery() as nursery:
            for leader, items in by_leader.items():
                nursery.start_soon(one, leader, items)
        return retry

    async def _send_to(
        self,
        leader: int,
        batches,
        items: list[int],
        results: dict[int, ProduceResult],
        attempt: int,
    ) -> list[int]:  # noqa: ANN001
        req = ProduceRequest(
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            partitions=[
                ProducePartition(
                    topic=batches[i][0].topic,
                    partition=batches[i][0].partition,
                    records=batches[i][1],
                )
                for i in items
            ],
        )
        conn = await self.client.node_connection(leader)
        if self.config.acks == 0:
            await conn.send_oneway(req)
            for i in items:
                results[i] = ProduceResult(
                    tp=batches[i][0], base_offset=-1, record_count=batches[i][2], retries=attempt
                )
            return []
        resp = await conn.request(req, timeout_s=self.config.request_timeout_ms / 1000 + 5)
        assert isinstance(resp, ProduceResponse)
        self.last_throttle_time_ms = resp.throttle_time_ms
        self.throttle_time_ms_total += resp.throttle_time_ms
        failed = []
        for i, pr in zip(items, resp.partitions, strict=True):
            if pr.error_code == ErrorCode.NONE:
                results[i] = ProduceResult(
                    tp=batches[i][0],
                    base_offset=pr.base_offset,
                    record_count=batches[i][2],
                    retries=attempt,
                )
            elif BrokerError(pr.error_code).retriable:
                failed.append(i)
            else:
                raise BrokerError(
                    pr.error_code,
                    f"{batches[i][0]}: {pr.error_message or error_name(pr.error_code)}",
                )
        return failed

    async def send_records(
        self, tp: TopicPartition, records: Sequence[tuple[int, bytes | None, bytes]]
    ) -> ProduceResult:
        """One batch of (timestamp_ms, key, value) records to one partition."""
        (result,) = await self.send_batches([(tp, make_batch(records), len(records))])
        return result
