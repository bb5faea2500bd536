"""Fetch and ListOffsets on the leader (Kafka's ReplicaManager.fetchMessages + DelayedFetch).

- Each partition is checked first (leader here, epochs, divergence, offset range: core/log.py).
  For a follower (replica_id >= 0) the fetch offset is its log end offset: the leader records it
  at once (HW advance, ISR tracking: core/partition.py) even if nothing is returned.
- Followers read up to the log end offset, consumers up to the high watermark.
- Reads run in one LMDB read transaction in a worker thread with the KIP-74 caps: partitions
  filled in request order, `partition_max_bytes` each, `max_bytes` in all, the first batch of
  the first non-empty partition always whole (core/fetch_limits.py).
- Long poll: while fewer than `min_bytes` are available and `max_wait_ms` has not passed, the
  request waits for any of its partitions to change, then reads again.
"""

from __future__ import annotations

import trio

from minikafka.core.log import check_follower_fetch
from minikafka.core.types import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.server.local_partition import LocalPartition, wait_for_change
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import ReadSpec
from minikafka.wire.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)


async def handle_fetch(
    rm: ReplicaManager, req: FetchRequest, known_topic: frozenset[str] | set[str]
) -> FetchResponse:
    is_follower = req.replica_id >= 0
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    answers: dict[int, FetchPartitionResponse] = {}
    readable: list[tuple[int, FetchPartition, LocalPartition]] = []
    from minikafka.server.clock import now_ms

    t = now_ms()
    for i, fp in enumerate(req.partitions):
        p = rm.partitions.get(TopicPartition(fp.topic, fp.partition))
        code = _leader_error(p, fp.topic, known_topic)
        if code != ErrorCode.NONE:
            answers[i] = FetchPartitionResponse(
                topic=fp.topic, partition=fp.partition, error_code=code
            )
            continue
        assert p is not None and p.leader is not None
        check = check_follower_fetch(
            epochs=p.epochs,
            log_start_offset=p.log_start_offset,
            log_end_offset=p.log_end_offset,
            leader_epoch=p.leader_epoch,
            fetch_offset=fp.fetch_offset,
            current_leader_epoch=fp.current_leader_epoch,
            last_fetched_epoch=fp.last_fetched_epoch if is_follower else -1,
        )
        if check.error_code != ErrorCode.NONE or check.diverging_epoch is not None:
            div = check.diverging_epoch
            answers[i] = FetchPartitionResponse(
                topic=fp.topic,
                partition=fp.partition,
                error_code=check.error_code,
                high_watermark=p.high_watermark,
                log_start_offset=p.log_start_offset,
                diverging_epoch=EpochEndOffset(epoch=div[0], end_offset=div[1]) if div else None,
            )
            continue
        if is_follower:
            if req.replica_id not in p.leader.replicas or req.replica_id == p.leader.local_id:
                answers[i] = FetchPartitionResponse(
                    topic=fp.topic,
                    partition=fp.partition,
                    error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                )
                continue
            if p.leader.on_follower_fetch(req.replica_id, fp.fetch_offset, t):
                p.high_watermark = p.leader.high_watermark
                p.notify()
            rm.maybe_expand_isr(p)
        readable.append((i, fp, p))

    data = await _read_until_enough(rm, req, readable, is_follower, deadline, early=bool(answers))
    for (i, fp, p), records in zip(readable, data, strict=True):
        answers[i] = FetchPartitionResponse(
            topic=fp.topic,
            partition=fp.partition,
            error_code=ErrorCode.NONE if p.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER,
            high_watermark=p.high_watermark,
            log_start_offset=p.log_start_offset,
            records=records if p.is_leader else b"",
        )
    sent = sum(len(a.records) for a in answers.values())
    rm.metrics.inc("replication_bytes_out" if is_follower else "bytes_out", sent)
    return FetchResponse(partitions=[answers[i] for i in range(len(req.partitions))])


async def _read_until_enough(
    rm: ReplicaManager,
    req: FetchRequest,
    readable: list[tuple[int, FetchPartition, LocalPartition]],
    is_follower: bool,
    deadline: float,
    early: bool,
) -> list[bytes]:
    """Read; while below min_bytes and before the deadline, wait for a change and read again.
    A response that already carries an error or a divergence is answered at once (early)."""
    while True:
        specs = [
            ReadSpec(
                tp=p.tp,
                fetch_offset=fp.fetch_offset,
                max_offset=p.log_end_offset if is_follower else p.high_watermark,
                partition_max_bytes=fp.partition_max_bytes,
            )
            for _i, fp, p in readable
        ]
        data = await trio.to_thread.run_sync(rm.store.read, specs, req.max_bytes) if specs else []
        total = sum(len(d) for d in data)
        if early or total >= req.min_bytes or trio.current_time() >= deadline or not readable:
            return data
        if any(not p.is_leader for _i, _fp, p in readable):
            return data
        await wait_for_change([p for _i, _fp, p in readable], deadline)


def _leader_error(
    p: LocalPartition | None, topic: str, known_topic: frozenset[str] | set[str]
) -> ErrorCode:
    if p is None:
        return (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if topic in known_topic
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
    return ErrorCode.NONE if p.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER


def handle_list_offsets(
    rm: ReplicaManager, req: ListOffsetsRequest, known_topic: frozenset[str] | set[str]
) -> ListOffsetsResponse:
    out = []
    for lp in req.partitions:
        p = rm.partitions.get(TopicPartition(lp.topic, lp.partition))
        code = _leader_error(p, lp.topic, known_topic)
        if code == ErrorCode.NONE and lp.timestamp not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
            code = ErrorCode.INVALID_REQUEST
        if code != ErrorCode.NONE:
            out.append(
                ListOffsetsPartitionResponse(
                    topic=lp.topic, partition=lp.partition, error_code=code
                )
            )
            continue
        assert p is not None
        if lp.timestamp == EARLIEST_TIMESTAMP:
            offset = p.log_start_offset
        else:  # consumers see up to the HW, replicas up to the LEO
            offset = p.log_end_offset if req.replica_id >= 0 else p.high_watermark
        out.append(
            ListOffsetsPartitionResponse(
                topic=lp.topic,
                partition=lp.partition,
                error_code=ErrorCode.NONE,
                offset=offset,
                leader_epoch=p.leader_epoch,
            )
        )
    return ListOffsetsResponse(partitions=out)
