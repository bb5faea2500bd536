"""Produce on the leader, carried out: read the partitions, check, stamp, append, wait, and
answer by `acks` (acks=0: nothing; 1: once durable in the leader's log; -1: once the HW covers
the batch). Every decision (admission, checks, stamping, idempotent producers, the verdict) is
core/produce.py's; this module runs the compressed payloads' checks off the event loop, queues
the stamped batches for the log writer in stamping order, and waits.

A partition that fails gets its error code and nothing of it is written; the other partitions
of the request go on. A partition whose log cannot be written (MDB_MAP_FULL, ENOSPC: a
StorageError) is KAFKA_STORAGE_ERROR (56, retriable) and fails alone: the request is one writer
op, and the writer retries a failed commit partition by partition, so the others of the request
are still written (and a LogDirError takes that replica offline).

Client quota (`producer_byte_rate`, KIP-13): when the answer is ready (at once for acks=0 and
acks=1, after the replication wait for acks=-1, as Kafka's sendResponseCallback records it) the
request's bytes are recorded for its client id and the throttle time computed. The answer goes
out at once with `throttle_time_ms`, and the connection is muted for that time (KIP-219: the
returned `Reply`); with acks=0 there is no answer, only the mute, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.core import produce as rules
from minikafka.core.produce import Pending, Refusal, Stamped
from minikafka.core.records import BatchView
from minikafka.errors import ErrorCode
from minikafka.server.config import FRAME_HEADROOM_BYTES
from minikafka.server.listener import Ordering, Reply
from minikafka.server.local_partition import LocalPartition, leader_error, wait_for_change
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import AppendWrite, StorageError
from minikafka.wire.messages import (
    ProducePartition,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)


async def handle_produce(
    rm: ReplicaManager,
    req: ProduceRequest,
    known_topic: set[str] | frozenset[str],
    client_id: str = "",
    *,
    internal: bool = False,
    order: Ordering | None = None,
) -> Reply:
    """The answer (a ProduceResponse, or none for acks=0) and the client-quota throttle time.
    `internal=True` for the broker's own appends (the group coordinator's commits), which Kafka
    makes through ReplicaManager: no client is charged. `order`: a Kafka connection's ordering,
    released once the batches are queued (server/listener.py `Ordering`); the broker's own
    appends get none, so the connection whose request led to them keeps its strict order.

    Answers are per entry of the request, in its order: one partition may appear twice (two
    batches, appended in order, each answered with its own base offset)."""
    answers: dict[int, ProducePartitionResponse] = {}  # entry index -> its answer
    # First every entry's batches are checked, compressed ones off the event loop (a batch
    # may inflate to decompressed_limit; zlib, lz4 and zstd release the GIL). Only then are
    # they stamped, all of them with no await between, and queued at once: offsets stamped
    # in order must reach the log writer in order, and another request stamping the same
    # partition during such an await would get there first.
    checked: dict[int, list[BatchView]] = {}
    for key, pp in enumerate(req.partitions):
        max_bytes = _max_bytes(rm, pp.topic)
        verdict = _admit(rm, req.acks, pp, known_topic, internal)
        if verdict is None:
            verdict = rules.check_batches(pp.records, max_bytes=max_bytes)
            if not isinstance(verdict, Refusal) and any(map(rules.compressed, verdict)):
                batches = verdict
                verdict = await rm.run_sync(rules.check_compressed, batches) or batches
            if not isinstance(verdict, Refusal) and rm.log_config(pp.topic).compact_enabled:
                batches = verdict
                if any(map(rules.compressed, batches)):
                    verdict = await rm.run_sync(rules.check_keys, batches) or batches
                else:
                    verdict = rules.check_keys(batches) or batches
        if isinstance(verdict, Refusal):
            answers[key] = _refused(pp, verdict)
        else:
            checked[key] = verdict
    pending: list[tuple[LocalPartition, Pending]] = []
    writes: list[AppendWrite] = []
    for key, batches in checked.items():
        pp = req.partitions[key]
        verdict = _admit(rm, req.acks, pp, known_topic, internal)  # afresh, after awaits
        p = rm.partitions.get(TopicPartition(pp.topic, pp.partition))
        if verdict is None and p is not None:
            verdict = rules.stamp(p.replica, pp, batches, entry=key)
        if isinstance(verdict, Refusal):
            answers[key] = _refused(pp, verdict)
            if verdict.by_producer_state:
                rm.metrics.inc("produce_sequence_errors")
            continue
        assert isinstance(verdict, Stamped) and p is not None
        if verdict.batches is None:
            rm.metrics.inc("produce_duplicates")
        else:
            writes.append(AppendWrite(tp=p.tp, batches=verdict.batches, epochs=verdict.epochs))
        pending.append((p, verdict.pending))
    if order is not None and rm.dynamic.client_quota(client_id)[0] is None:
        # Stamped, and queued for the log at the next step: on a Kafka connection the next
        # request may start (no throttle can follow this one; server/listener.py `Ordering`).
        order.release()
    if writes:
        failed = await _append_per_partition(rm, writes)
        for p, item in pending:
            if p.tp in failed:
                code, message = failed[p.tp]
                answers[item.entry] = _answer(p.tp.topic, p.tp.partition, code, message)
        pending = [(p, item) for p, item in pending if p.tp not in failed]
        rm.metrics.inc("bytes_in", sum(item.size for _p, item in pending))
        t = now_ms()
        for p, item in pending:
            p.bytes_in.record(item.size, t)
        rm.metrics.inc("messages_in_batches", len(writes))
    nbytes = sum(len(pp.records) for pp in req.partitions)
    if req.acks == 0:
        return Reply(response=None, throttle_ms=_client_throttle(rm, client_id, nbytes))
    if req.acks == -1 and pending:
        await _wait_while(pending, req.timeout_ms, rules.still_waiting)
    elif req.acks == 1 and any(item.duplicate for _p, item in pending):
        # A retry of a batch still queued for the disk: answered once the original is durable.
        duplicates = [(p, item) for p, item in pending if item.duplicate]
        await _wait_while(duplicates, req.timeout_ms, rules.awaiting_durable)
    for p, item in pending:
        code = rules.outcome(
            item, acks=req.acks, min_insync_replicas=_min_insync_replicas(rm, p.tp.topic)
        )
        answers[item.entry] = ProducePartitionResponse(
            topic=p.tp.topic,
            partition=p.tp.partition,
            error_code=code,
            base_offset=item.base_offset if code == ErrorCode.NONE else -1,
            log_start_offset=p.log_start_offset,
        )
    throttle_ms = 0 if internal else _client_throttle(rm, client_id, nbytes)
    response = ProduceResponse(
        partitions=[answers[k] for k in range(len(req.partitions))],
        throttle_time_ms=throttle_ms,
    )
    return Reply(response=response, throttle_ms=throttle_ms)


async def _append_per_partition(
    rm: ReplicaManager, writes: list[AppendWrite]
) -> dict[TopicPartition, tuple[ErrorCode, str]]:
    """Append the request's writes as one writer op (queued at once: offsets stamped in order
    are written in order); a partition whose log cannot be written fails alone (the writer
    retries partition by partition) and the others are served. Returns the failed ones.

    A StorageError (MDB_MAP_FULL, ENOSPC, ...) is KAFKA_STORAGE_ERROR, retriable, as Kafka's
    ReplicaManager.appendToLocalLog answers a KafkaStorageException; anything else is ours."""
    try:
        errors = await rm.writer.append_each(writes)
    except Exception as exc:  # noqa: BLE001 - the writer stopped: every partition fails
        errors = {w.tp: exc for w in writes}
    failed: dict[TopicPartition, tuple[ErrorCode, str]] = {}
    for tp, exc in errors.items():
        code = (
            ErrorCode.KAFKA_STORAGE_ERROR
            if isinstance(exc, StorageError)
            else ErrorCode.UNKNOWN_SERVER_ERROR
        )
        failed[tp] = (code, str(exc))
        rm.on_log_error(tp, exc, during="produce")
        rm.events.emit("append_failed", topic=tp.topic, partition=tp.partition, error=str(exc))
        rm.metrics.inc("append_failures")
    return failed


def _client_throttle(rm: ReplicaManager, client_id: str, nbytes: int) -> int:
    bound = rm.dynamic.client_quota(client_id)[0]
    return rm.produce_quotas.record_and_throttle(client_id, nbytes, bound, now_ms())


def _min_insync_replicas(rm: ReplicaManager, topic: str) -> int:
    own = rm.dynamic.topic_overrides(topic).min_insync_replicas
    return rules.min_insync_replicas(own, rm.config.min_insync_replicas)


def _max_bytes(rm: ReplicaManager, topic: str) -> int:
    """At most what a fetch response can carry: socket.max.frame.bytes less the headers' room,
    as config.check_caps holds the broker's message.max.bytes to."""
    own = rm.dynamic.topic_overrides(topic).max_message_bytes
    fetchable = rm.config.socket_max_frame_bytes - FRAME_HEADROOM_BYTES
    return rules.max_batch_bytes(own, rm.config.message_max_bytes, fetchable)


def _admit(
    rm: ReplicaManager,
    acks: int,
    pp: ProducePartition,
    known_topic: set[str] | frozenset[str],
    internal: bool,
) -> Refusal | None:
    """Whether this broker takes a batch for `pp` now (core/produce.py `admit`)."""
    p = rm.partitions.get(TopicPartition(pp.topic, pp.partition))
    code = leader_error(p, pp.topic, known_topic)
    led = code == ErrorCode.NONE and p is not None and p.leader is not None
    return rules.admit(
        acks=acks,
        topic=pp.topic,
        internal=internal,
        leader_code=code,
        isr_size=len(p.leader.isr) if led else 0,
        min_insync_replicas=_min_insync_replicas(rm, pp.topic) if led else 0,
    )


async def _wait_while(
    pending: list[tuple[LocalPartition, Pending]],
    timeout_ms: int,
    waits: Callable[[Pending], bool],
) -> None:
    """Until no item `waits` any more, or the request's timeout (Kafka's DelayedProduce)."""
    deadline = trio.current_time() + timeout_ms / 1000
    while trio.current_time() < deadline:
        waiting = [p for p, item in pending if waits(item)]
        if not waiting:
            return
        await wait_for_change(waiting, deadline)


def _refused(pp: ProducePartition, refusal: Refusal) -> ProducePartitionResponse:
    return _answer(pp.topic, pp.partition, refusal.code, refusal.message)


def _answer(
    topic: str, partition: int, code: ErrorCode, message: str | None = None
) -> ProducePartitionResponse:
    return ProducePartitionResponse(
        topic=topic, partition=partition, error_code=code, error_message=message
    )
