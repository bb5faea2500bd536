"""How big a move is: estimated log sizes, and the bytes each broker copies in or sends out.

Rules:
- Log sizes are ESTIMATES, and say so wherever they are printed (`SIZE_NOTE`): no API reports a
  partition's size in bytes, and this tool adds nothing to the server. size = (high watermark -
  log start offset) x bytes per record of the partition's first batch (one Fetch per partition
  with partition_max_bytes=1: KIP-74 returns the first batch whole). Exact when every batch has
  the same record count and size (a perf-tool load), off by the spread of batch sizes otherwise.
- A broker's traffic counts both sides (`traffic_per_broker`): KIP-73's MoveTime counts what a
  broker receives, but a leader sending to several destinations sends more than any of them
  receives, under its own leader throttle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.client.consumer import Consumer
from minikafka.common import TopicPartition
from minikafka.core.records import iter_batches
from minikafka.errors import BrokerError, ErrorCode, is_retriable
from minikafka.tools.reassign.moves import PartitionMove
from minikafka.wire.messages import CONSUMER_REPLICA_ID, FetchPartition, FetchRequest, FetchResponse

VALUE = dict(frozen=True, slots=True, kw_only=True)

SIZE_NOTE = (
    "estimate: (high watermark - log start offset) x bytes per record of each partition's "
    "first batch"
)


@dataclass(**VALUE)
class LogSize:
    """A partition's estimated size: records x bytes per record (module docstring)."""

    records: int
    bytes_per_record: float

    @property
    def bytes(self) -> int:
        return round(self.records * self.bytes_per_record)


async def estimate_log_sizes(
    client: ClusterClient, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, LogSize]:
    wanted = sorted(set(tps))
    if not wanted:
        return {}
    consumer = Consumer(client)
    starts = await consumer.list_offsets(wanted, earliest=True)
    ends = await consumer.list_offsets(wanted, earliest=False)
    per_record: dict[TopicPartition, float] = {}
    limiter = trio.CapacityLimiter(8)

    async def one(tp: TopicPartition) -> None:
        async with limiter:
            per_record[tp] = await _bytes_per_record(client, tp, starts[tp])

    async with trio.open_nursery() as nursery:
        for tp in wanted:
            if ends[tp] > starts[tp]:
                nursery.start_soon(one, tp)
    return {
        tp: LogSize(records=max(0, ends[tp] - starts[tp]), bytes_per_record=per_record.get(tp, 0.0))
        for tp in wanted
    }


async def _bytes_per_record(client: ClusterClient, tp: TopicPartition, offset: int) -> float:
    """Bytes per record of the batch at `offset`, from one consumer Fetch to the leader."""
    last = "no leader"
    for _attempt in range(3):
        leader = client.leader_of(tp)
        if leader >= 0:
            conn = await client.node_connection(leader)
            req = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1,
                partitions=[
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=1,
                    )
                ],
            )
            resp = await conn.request(req, timeout_s=30)
            assert isinstance(resp, FetchResponse)
            (pr,) = resp.partitions
            if pr.error_code == ErrorCode.NONE:
                for batch in iter_batches(pr.records, check_crc=False):
                    return len(batch.raw) / batch.count
                return 0.0
            if not is_retriable(pr.error_code):
                raise BrokerError(pr.error_code, f"fetching the first batch of {tp}")
            last = f"error {pr.error_code}"
        await client.refresh_metadata([tp.topic])
    raise BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, f"cannot read a batch of {tp}: {last}")


def sizes_in_bytes(sizes: Mapping[TopicPartition, LogSize]) -> dict[TopicPartition, int]:
    return {tp: s.bytes for tp, s in sizes.items()}


# ---------------------------------------------------------------------------- plan inputs


@dataclass(**VALUE)
class BrokerTraffic:
    """What one broker moves: copies in (a destination, under its follower throttle) and sends
    (the current leader of a moving partition, under its leader throttle)."""

    broker: int
    copies_in: int
    sends_out: int

    @property
    def bytes(self) -> int:
        """The two throttles are separate and work in parallel: the larger one takes longest."""
        return max(self.copies_in, self.sends_out)


def traffic_per_broker(
    moves: Mapping[TopicPartition, PartitionMove],
    sizes: Mapping[TopicPartition, int],
    leaders: Mapping[TopicPartition, int],
) -> dict[int, BrokerTraffic]:
    """Per throttled broker (every source or destination of a move), sorted by id.

    KIP-73's MoveTime counts what each broker receives; a leader sending one partition to two
    destinations, or several moving partitions, sends more than any destination receives, and
    its leader throttle caps that at T too, so both sides are counted.
    """
    copies: dict[int, int] = {}
    sends: dict[int, int] = {}
    brokers: set[int] = set()
    for tp, move in moves.items():
        if not move.moving:
            continue
        size = sizes.get(tp, 0)
        brokers.update(move.sources, move.destinations)
        for b in move.destinations:
            copies[b] = copies.get(b, 0) + size
        leader = leaders.get(tp, -1)
        if leader in move.sources:
            sends[leader] = sends.get(leader, 0) + size * len(move.destinations)
    return {
        b: BrokerTraffic(broker=b, copies_in=copies.get(b, 0), sends_out=sends.get(b, 0))
        for b in sorted(brokers)
    }
