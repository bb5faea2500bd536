"""ListOffsets on the leader (Kafka's KafkaApis.handleListOffsetRequest ->
ReplicaManager.fetchOffset -> Partition.fetchOffsetForTimestamp).

Per partition, once this broker is found to lead it (server/local_partition.py `leader_error`):

- LATEST (-1): the last offset the asker may read, a consumer's high watermark (no
  transactions: also its last stable offset), a replica's or a debugging tool's
  (DEBUGGING_REPLICA_ID) log end offset; timestamp -1.
- EARLIEST (-2) and EARLIEST_LOCAL (-4, KIP-1005: no tiered storage, so the same): the log
  start offset, with the first cached leader epoch when it covers it; timestamp -1.
- LATEST_TIERED (-5): nothing is tiered, so offset -1, timestamp -1 (Kafka's answer when remote
  storage is off).
- MAX_TIMESTAMP (-3, KIP-734) and any other timestamp (KIP-79, `offsetsForTimes`): looked up in
  the log's time index (storage/time_index.py, decided by core/time_index.py) in a worker
  thread, then kept only if its offset is below the last offset the asker may read, as Kafka's
  Partition filters it: otherwise offset -1 and timestamp -1, with no error.

The log start offset bounds the search as it bounds Kafka's (records below it are gone).

A leader just elected may hold records its high watermark does not cover yet: the HW reaches
the start of its epoch only once a follower's fetch shows them replicated. Until then a
consumer's LATEST, and a time lookup that finds nothing below the HW, get OFFSET_NOT_AVAILABLE
(KIP-207; Kafka's `maybeOffsetsError` in Partition.fetchOffsetForTimestamp), a retriable error:
answering the lagging HW would tell a reader that records already acknowledged to a producer
are not there.
"""

from __future__ import annotations

from minikafka.common import TopicPartition
from minikafka.core.log import earliest_offset_epoch
from minikafka.core.time_index import NO_TIMESTAMP, TimestampAndOffset, fetchable
from minikafka.errors import ErrorCode
from minikafka.server.local_partition import LocalPartition, leader_error
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import LogDirError, LogStore, StorageError
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

UNKNOWN_OFFSET = -1  # ListOffsetsResponse.UNKNOWN_OFFSET


def _lookups(
    store: LogStore, wanted: list[tuple[TopicPartition, int, int]]
) -> list[TimestampAndOffset | None | ErrorCode]:
    """Every time lookup of one request (run in a worker thread): the record found, or None, or
    the error a partition's storage answered."""
    out: list[TimestampAndOffset | None | ErrorCode] = []
    for tp, target, start in wanted:
        try:
            out.append(store.find_timestamp(tp, target, start).found)
        except LogDirError:
            out.append(ErrorCode.KAFKA_STORAGE_ERROR)
        except StorageError:  # deleted since it was checked
            out.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return out


def _answer(
    lp: ListOffsetsPartition, offset: int, timestamp: int = NO_TIMESTAMP, epoch: int = -1
) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        topic=lp.topic,
        partition=lp.partition,
        error_code=ErrorCode.NONE,
        offset=offset,
        timestamp=timestamp,
        leader_epoch=epoch,
    )


def _not_available(lp: ListOffsetsPartition) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        topic=lp.topic, partition=lp.partition, error_code=ErrorCode.OFFSET_NOT_AVAILABLE
    )


def _lagging(p: LocalPartition, consumer: bool) -> bool:
    """A consumer asks, and our HW is below the start of our leader epoch (module doc)."""
    leader = p.leader
    return consumer and leader is not None and leader.leader_epoch_start_offset > p.high_watermark


def _special(
    lp: ListOffsetsPartition, p: LocalPartition, end: int, lagging: bool
) -> ListOffsetsPartitionResponse:
    """The answer to a timestamp that names an offset rather than a time (`_SPECIAL`)."""
    if lp.timestamp == LATEST_TIMESTAMP:
        return _not_available(lp) if lagging else _answer(lp, end, epoch=p.leader_epoch)
    if lp.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        # The first cached epoch, if it covers the log start (UnifiedLog.fetchOffsetByTimestamp).
        return _answer(
            lp, p.log_start_offset, epoch=earliest_offset_epoch(p.epochs, p.log_start_offset)
        )
    return _answer(lp, UNKNOWN_OFFSET)  # LATEST_TIERED: nothing is in remote storage


_SPECIAL = frozenset({LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP,
                      LATEST_TIERED_TIMESTAMP})  # fmt: skip


async def handle_list_offsets(
    rm: ReplicaManager, req: ListOffsetsRequest, known_topic: frozenset[str] | set[str]
) -> ListOffsetsResponse:
    # Consumers read up to the HW; replicas and debugging tools up to the LEO (Kafka's
    # Partition.fetchOffsetForTimestamp: no isolation level but a consumer's).
    consumer = req.replica_id == CONSUMER_REPLICA_ID
    answers: dict[int, ListOffsetsPartitionResponse] = {}
    timed: list[tuple[int, ListOffsetsPartition, LocalPartition]] = []
    for i, lp in enumerate(req.partitions):
        p = rm.partitions.get(TopicPartition(lp.topic, lp.partition))
        code = leader_error(p, lp.topic, known_topic)
        if code != ErrorCode.NONE:
            answers[i] = ListOffsetsPartitionResponse(
                topic=lp.topic, partition=lp.partition, error_code=code
            )
        elif lp.timestamp in _SPECIAL:
            assert p is not None
            end = p.high_watermark if consumer else p.log_end_offset
            answers[i] = _special(lp, p, end, _lagging(p, consumer))
        else:
            assert p is not None
            timed.append((i, lp, p))
    if timed:
        wanted = [(p.tp, lp.timestamp, p.log_start_offset) for _i, lp, p in timed]
        found = await rm.run_sync(_lookups, rm.store, wanted)
        for (i, lp, p), got in zip(timed, found, strict=True):
            if isinstance(got, ErrorCode):
                answers[i] = ListOffsetsPartitionResponse(
                    topic=lp.topic, partition=lp.partition, error_code=got
                )
                continue
            # The bound is read after the lookup: a HW that moved meanwhile only lets more in.
            hit = fetchable(got, p.high_watermark if consumer else p.log_end_offset)
            if hit is not None:
                answers[i] = _answer(lp, hit.offset, hit.timestamp, max(hit.leader_epoch, -1))
            else:  # nothing readable found: maybe only because our HW lags
                lagging = _lagging(p, consumer)
                answers[i] = _not_available(lp) if lagging else _answer(lp, UNKNOWN_OFFSET)
    return ListOffsetsResponse(partitions=[answers[i] for i in range(len(req.partitions))])
