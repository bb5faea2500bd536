"""Each partition's log start offset, high watermark and log end offset, from its leader: what
`minikafka topics describe` shows beside the leader and ISR.

Three ListOffsets requests per leader: EARLIEST (the log start offset), LATEST as a consumer
(the high watermark) and LATEST as Kafka's DEBUGGING_REPLICA_ID (the leader's log end offset,
which no consumer sees). A partition whose leader cannot answer gets its error code instead of
offsets; the others are still shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.client.cluster_client import ClusterClient
from minikafka.common import TopicPartition
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
)

_QUERIES = (  # (field, timestamp, replica id)
    ("log_start_offset", EARLIEST_TIMESTAMP, CONSUMER_REPLICA_ID),
    ("high_watermark", LATEST_TIMESTAMP, CONSUMER_REPLICA_ID),
    ("log_end_offset", LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOffsets:
    log_start_offset: int | None = None
    high_watermark: int | None = None
    log_end_offset: int | None = None
    error_code: int = ErrorCode.NONE  # the first error the leader answered, if any


async def log_offsets(
    client: ClusterClient, tps: Sequence[TopicPartition], *, timeout_s: float = 10.0
) -> dict[TopicPartition, LogOffsets]:
    """The three offsets of each partition (all None, with an error code, where there is no
    leader or it answered an error). Uses the client's current metadata for leaders."""
    found: dict[TopicPartition, dict[str, int]] = {tp: {} for tp in tps}
    errors: dict[TopicPartition, int] = {}
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        leader = client.leader_of(tp)
        if leader < 0:
            errors[tp] = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            by_leader.setdefault(leader, []).append(tp)
    for leader, group in by_leader.items():
        try:
            conn = await client.node_connection(leader)
            for field, timestamp, replica_id in _QUERIES:
                req = ListOffsetsRequest(
                    partitions=[
                        ListOffsetsPartition(
                            topic=tp.topic, partition=tp.partition, timestamp=timestamp
                        )
                        for tp in group
                    ],
                    replica_id=replica_id,
                )
                resp = await conn.request(req, timeout_s=timeout_s)
                for r in resp.partitions:
                    tp = TopicPartition(r.topic, r.partition)
                    if r.error_code != ErrorCode.NONE:
                        errors.setdefault(tp, r.error_code)
                    else:
                        found[tp][field] = r.offset
        except BrokerError as exc:  # the leader is unreachable: its partitions say so
            for tp in group:
                errors.setdefault(tp, exc.code)
    return {
        tp: LogOffsets(error_code=errors[tp]) if tp in errors else LogOffsets(**found[tp])
        for tp in tps
    }
