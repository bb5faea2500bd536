"""DeleteRecords on the leader (KIP-107; Kafka's ReplicaManager.deleteRecords,
Partition.deleteRecordsOnLeader and DelayedDeleteRecords).

Per partition, once this broker is found to lead it (server/local_partition.py
`leader_error`), core/log_retention.py `delete_records_on_leader` decides: -1 means the high
watermark; an offset past it is OFFSET_OUT_OF_RANGE; an internal topic is
INVALID_TOPIC_EXCEPTION, a topic whose cleanup.policy lacks `delete` POLICY_VIOLATION. A new
log start offset is written by the log writer (the batches wholly below it go, a bounded number
per transaction, storage/log_store.py) before the replica machine takes it, so a fetch below
it is OFFSET_OUT_OF_RANGE from then on.

The answer then waits, as DelayedDeleteRecords does, until each partition's low watermark (the
smallest log start offset of the leader and of its followers on live brokers, as their fetches
report it: Partition.lowWatermarkIfLeader) reaches the offset asked for, or the request's
timeout passes (REQUEST_TIMED_OUT). Either way the answer carries the low watermark.
"""

from __future__ import annotations

from collections.abc import Callable, Container

import trio

from minikafka.common import TopicPartition
from minikafka.core.controller.topics import INTERNAL_TOPICS
from minikafka.core.log_config import LogConfig
from minikafka.core.log_retention import (
    LogStartOffsetIncrementReason,
    delete_records_on_leader,
    delete_records_satisfied,
)
from minikafka.errors import ErrorCode
from minikafka.server.local_partition import LocalPartition, leader_error, wait_for_change
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import StorageError
from minikafka.wire.messages import (
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)

CLIENT_RECORD_DELETION = LogStartOffsetIncrementReason.CLIENT_RECORD_DELETION


async def handle_delete_records(
    rm: ReplicaManager,
    req: DeleteRecordsRequest,
    known_topic: frozenset[str] | set[str],
    *,
    alive: Callable[[], Container[int]],
    log_config: Callable[[str], LogConfig],
) -> DeleteRecordsResponse:
    """`alive()`: the brokers the metadata says are live; `log_config(topic)`: the topic's
    effective log config (its cleanup.policy)."""
    answers: dict[int, DeleteRecordsPartitionResponse] = {}
    waiting: list[tuple[int, LocalPartition, int]] = []  # (index, partition, offset asked)
    for i, dp in enumerate(req.partitions):
        tp = TopicPartition(dp.topic, dp.partition)
        p = rm.partitions.get(tp)
        code = leader_error(p, dp.topic, known_topic)
        if code != ErrorCode.NONE:
            answers[i] = _answer(tp, code)
            continue
        assert p is not None
        result = delete_records_on_leader(
            dp.offset,
            high_watermark=p.high_watermark,
            log_start_offset=p.log_start_offset,
            delete_enabled=log_config(dp.topic).delete_enabled,
            internal_topic=dp.topic in INTERNAL_TOPICS,
        )
        if result.error != ErrorCode.NONE:
            answers[i] = _answer(tp, result.error)
            continue
        if result.log_start_offset > p.log_start_offset:
            try:
                await rm.writer.advance_log_start(tp, result.log_start_offset)
            except StorageError as exc:
                rm.on_log_error(tp, exc, during="delete_records")
                answers[i] = _answer(tp, ErrorCode.KAFKA_STORAGE_ERROR)
                continue
            rm.log_start_moved(p, result.log_start_offset, reason=CLIENT_RECORD_DELETION.value)
        waiting.append((i, p, result.requested_offset))
    deadline = trio.current_time() + req.timeout_ms / 1000
    while True:
        pending = [p for _i, p, offset in waiting if not _done(p, offset, alive())]
        if not pending or trio.current_time() >= deadline:
            break
        await wait_for_change(pending, deadline)
    for i, p, offset in waiting:
        if not p.is_leader:
            answers[i] = _answer(p.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            continue
        low = p.replica.low_watermark(alive())
        done = delete_records_satisfied(low, offset)
        answers[i] = _answer(p.tp, ErrorCode.NONE if done else ErrorCode.REQUEST_TIMED_OUT, low)
    return DeleteRecordsResponse(partitions=[answers[i] for i in range(len(req.partitions))])


def _done(p: LocalPartition, offset: int, alive: Container[int]) -> bool:
    """Answered now: satisfied, or no longer this broker's to wait on."""
    return not p.is_leader or delete_records_satisfied(p.replica.low_watermark(alive), offset)


def _answer(
    tp: TopicPartition, code: ErrorCode, low_watermark: int = -1
) -> DeleteRecordsPartitionResponse:
    return DeleteRecordsPartitionResponse(
        topic=tp.topic, partition=tp.partition, error_code=code, low_watermark=low_watermark
    )
