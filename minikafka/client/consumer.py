"""The consumer: fetch records from partition leaders, from given offsets, up to the HW.

Partitions are assigned by the caller (no group coordination). `fetch_once` sends one Fetch per
leader concurrently and returns the decoded records in offset order per partition, skipping
records below the requested offset (a fetch returns whole batches). Retriable errors refresh
metadata; the partition is fetched again at the same offset next time.

A position outside the partition's log (below its log start, after retention or DeleteRecords
removed what it pointed at, or past its end) is OFFSET_OUT_OF_RANGE. As Kafka's consumer does
with `auto.offset.reset`, the position is then moved in the caller's `positions` to the log
start (`earliest`) or the high watermark (`latest`, Kafka's default), and `on_reset` hears of it;
with `none` the fetch raises OffsetOutOfRange (Kafka's OffsetOutOfRangeException) instead.

`fetched_to` says, per partition, where the next fetch should start: past the last batch a
fetch returned, not past its last record. In a compacted log (core/compaction.py) a batch's
last records, or whole batches, may be gone, and a position at the last record + 1 would fetch
the same batch for ever.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.common import TopicPartition
from minikafka.core.records import Record, decode_records, iter_batches
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
)

RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
AUTO_OFFSET_RESETS = ("earliest", "latest", "none")  # Kafka's auto.offset.reset values

OnReset = Callable[[TopicPartition, int, int], None]  # (partition, from, to)


class OffsetOutOfRange(BrokerError):
    """A position is outside its partition's log and auto.offset.reset is `none`."""

    def __init__(self, positions: dict[TopicPartition, int]) -> None:
        where = ", ".join(
            f"{tp.topic}-{tp.partition} at {o}" for tp, o in sorted(positions.items())
        )
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, f"{where} (auto.offset.reset is none)")
        self.positions = positions


class Consumer:
    def __init__(
        self,
        client: ClusterClient,
        *,
        max_wait_ms: int = 500,
        partition_max_bytes: int = 1 << 20,
        max_bytes: int = 50 << 20,
        auto_offset_reset: str = "latest",
        on_reset: OnReset | None = None,
    ) -> None:
        if auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(
                f"auto.offset.reset={auto_offset_reset!r}: expected one of {AUTO_OFFSET_RESETS}"
            )
        self.client = client
        self.auto_offset_reset = auto_offset_reset
        self.on_reset = on_reset
        self.max_wait_ms = max_wait_ms
        self.partition_max_bytes = partition_max_bytes
        self.max_bytes = max_bytes
        self.fetched_to: dict[TopicPartition, int] = {}  # next offset past the last batch fetched
        # Client quotas: the throttle times the brokers reported (KIP-13), each waited out by the
        # connection to that broker before its next request (KIP-219, client/connection.py).
        self.throttle_time_ms_total = 0
        self.last_throttle_time_ms = 0

    async def list_offsets(
        self, tps: list[TopicPartition], *, earliest: bool, timeout_s: float = 60.0
    ) -> dict[TopicPartition, int]:
        """Log start (earliest) or high watermark (latest) of each partition, from its leader.

        A retriable error (a leader moving; a new leader whose HW has not reached its epoch's
        start, KIP-207's OFFSET_NOT_AVAILABLE) refreshes metadata and asks that partition again
        after RETRY_BACKOFF_S, as Kafka's consumer does until default.api.timeout.ms (60 s);
        any other error, or `timeout_s` passing, raises BrokerError."""
        ts = EARLIEST_TIMESTAMP if earliest else LATEST_TIMESTAMP
        out: dict[TopicPartition, int] = {}
        todo = list(tps)
        last = BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, "list offsets: no leader known")
        with trio.move_on_after(timeout_s):
            while True:
                if any(self.client.leader_of(tp) < 0 for tp in todo):
                    await self.client.refresh_metadata(sorted({tp.topic for tp in todo}))
                again = [tp for tp in todo if self.client.leader_of(tp) < 0]
                for leader, group in _by_leader(self.client, todo).items():
                    conn = await self.client.node_connection(leader)
                    resp = await conn.request(
                        ListOffsetsRequest(
                            partitions=[
                                ListOffsetsPartition(
                                    topic=tp.topic, partition=tp.partition, timestamp=ts
                                )
                                for tp in group
                            ]
                        ),
                        timeout_s=30,
                    )
                    for r in resp.partitions:
                        tp = TopicPartition(r.topic, r.partition)
                        if r.error_code == ErrorCode.NONE:
                            out[tp] = r.offset
                            continue
                        last = BrokerError(r.error_code, f"list offsets {r.topic}-{r.partition}")
                        if not last.retriable:
                            raise last
                        again.append(tp)
                if not again:
                    return out
                todo = again
                await self.client.refresh_metadata(sorted({tp.topic for tp in todo}))
                await trio.sleep(RETRY_BACKOFF_S)
        raise last

    async def fetch_once(
        self, positions: MutableMapping[TopicPartition, int]
    ) -> dict[TopicPartition, list[Record]]:
        """One round of fetches; partitions with errors come back empty (metadata refreshed),
        a position out of range is reset in `positions`, `fetched_to` says where each partition
        fetched got to (module docstring)."""
        for tp in positions:
            self.fetched_to.pop(tp, None)  # a reset since may have moved the position back
        if any(self.client.leader_of(tp) < 0 for tp in positions):
            await self.client.refresh_metadata(sorted({tp.topic for tp in positions}))
        out: dict[TopicPartition, list[Record]] = {tp: [] for tp in positions}
        stale = False
        out_of_range: dict[TopicPartition, int] = {}

        async def one(leader: int, group: list[TopicPartition]) -> None:
            nonlocal stale
            req = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=self.max_wait_ms,
                min_bytes=1,
                max_bytes=self.max_bytes,
                partitions=[
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=positions[tp],
                        partition_max_bytes=self.partition_max_bytes,
                    )
                    for tp in group
                ],
            )
            try:
                conn = await self.client.node_connection(leader)
                resp = await conn.request(req, timeout_s=self.max_wait_ms / 1000 + 30)
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                stale = True
                return
            self.last_throttle_time_ms = resp.throttle_time_ms
            self.throttle_time_ms_total += resp.throttle_time_ms
            for pr in resp.partitions:
                tp = TopicPartition(pr.topic, pr.partition)
                if pr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range[tp] = positions[tp]
                    continue
                if pr.error_code != ErrorCode.NONE:
                    stale = True
                    continue
                start = positions[tp]
                batches = list(iter_batches(pr.records))
                out[tp] = [r for b in batches for r in decode_records(b) if r.offset >= start]
                if batches:  # past the last batch, gaps included (Kafka's nextFetchOffset)
                    self.fetched_to[tp] = max(start, batches[-1].next_offset)

        async with trio.open_nursery() as nursery:
            for leader, group in _by_leader(self.client, list(positions)).items():
                nursery.start_soon(one, leader, group)
        if stale:
            await self.client.refresh_metadata(sorted({tp.topic for tp in positions}))
        if out_of_range:
            await self._reset(out_of_range, positions)
        return out

    async def _reset(
        self, asked: dict[TopicPartition, int], positions: MutableMapping[TopicPartition, int]
    ) -> None:
        """Kafka's Fetcher on OFFSET_OUT_OF_RANGE: reset as auto.offset.reset says."""
        if self.auto_offset_reset == "none":
            raise OffsetOutOfRange(asked)
        earliest = self.auto_offset_reset == "earliest"
        for tp, to in (await self.list_offsets(sorted(asked), earliest=earliest)).items():
            if positions.get(tp) == asked[tp]:  # not moved by the caller meanwhile
                positions[tp] = to
                if self.on_reset is not None:
                    self.on_reset(tp, asked[tp], to)


def _by_leader(client: ClusterClient, tps: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
    groups: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        leader = client.leader_of(tp)
        if leader >= 0:
            groups.setdefault(leader, []).append(tp)
    return groups
