"""Produce on the leader: validate, stamp offsets and epoch, append, and answer by `acks`.

- acks=0: append, answer nothing (Kafka sends no response).
- acks=1: answer once the batch is durable in the leader's log.
- acks=-1 (all): refuse up front with NOT_ENOUGH_REPLICAS when the ISR is smaller than
  `min.insync.replicas`; otherwise append and wait (Kafka's DelayedProduce) until the high
  watermark covers the batch, the leader loses the partition (NOT_LEADER_OR_FOLLOWER), or the
  request's timeout passes (REQUEST_TIMED_OUT). If the ISR shrank below the minimum meanwhile, the
  answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND.
A partition that fails validation (not led here, unknown, corrupt batch) gets its error code and
nothing of it is written; the other partitions of the request go on. A batch larger than the
topic's `max.message.bytes` (else the broker's `message.max.bytes`) is MESSAGE_TOO_LARGE (Kafka's
RecordTooLargeException, code 10); a header whose record count disagrees with its payload is
CORRUPT_MESSAGE (core/records.py `check_payload`). The topic's `min.insync.replicas` overrides
the broker's, as Kafka's LogConfig does. A partition whose log cannot be written (MDB_MAP_FULL,
ENOSPC: a StorageError) is KAFKA_STORAGE_ERROR (56, retriable) and fails alone: the request is
one writer op, and the writer retries a failed commit partition by partition, so the others of
the request are still written (and a LogDirError takes that replica offline).

Idempotent producers (KIP-98): an entry carrying a producer id holds exactly one batch (as
Kafka's produce v3+ requires, else INVALID_RECORD) and is checked against the partition's
producer state (core/producer_state.py) when it is stamped: a retry of one of the producer's
last 5 batches is answered with that batch's ORIGINAL base offset and nothing is appended (with
acks=all it still waits for the HW to cover the original, as Kafka's DelayedProduce does); a
sequence gap, an older epoch or an unknown producer is refused (45, 47, 59). An accepted batch is
stored with the producer fields in its header, so followers and restarts rebuild the state.

Client quota (`producer_byte_rate`, KIP-13): when the answer is ready (at once for acks=0 and
acks=1, after the replication wait for acks=-1, as Kafka's sendResponseCallback records it) the
request's bytes are recorded for its client id and the throttle time computed. The answer goes
out at once with `throttle_time_ms`, and the connection is muted for that time (KIP-219: the
returned `Reply`); with acks=0 there is no answer, only the mute, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.core.compression import NONE, DecompressedTooLarge
from minikafka.core.controller.topics import INTERNAL_TOPICS  # Kafka's Topic.isInternal
from minikafka.core.producer_state import BatchMetadata, Duplicate, ProducerBatch, Refuse
from minikafka.core.record_batch_v2 import is_v2, read_header
from minikafka.core.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchView,
    UnsupportedCompression,
    check_payload,
    iter_batches,
    restamp,
)
from minikafka.errors import CorruptRecordError, ErrorCode
from minikafka.server.config import FRAME_HEADROOM_BYTES
from minikafka.server.listener import Reply, release_order
from minikafka.server.local_partition import LocalPartition, leader_error, wait_for_change
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import AppendWrite, StorageError
from minikafka.wire.messages import (
    ProducePartition,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)

ACKS = (0, 1, -1)


@dataclass(slots=True)
class _Pending:
    p: LocalPartition
    base_offset: int
    end_offset: int
    leader_epoch: int
    size: int
    entry: int  # its index in the request
    # A duplicate (producer id, the original's metadata): answered only if the original is
    # still in the log when the answer is due (its write may yet fail and be undone).
    duplicate: tuple[int, BatchMetadata] | None = None


async def handle_produce(
    rm: ReplicaManager,
    req: ProduceRequest,
    known_topic: set[str] | frozenset[str],
    client_id: str = "",
    *,
    internal: bool = False,
) -> Reply:
    """The answer (a ProduceResponse, or none for acks=0) and the client-quota throttle time.
    `internal=True` for the broker's own appends (the group coordinator's commits), which Kafka
    makes through ReplicaManager: no client is charged, and the connection whose request led
    to them keeps its strict order.

    Answers are per entry of the request, in its order: one partition may appear twice (two
    batches, appended in order, each answered with its own base offset)."""
    answers: dict[int, ProducePartitionResponse] = {}  # entry index -> its answer
    pending: list[_Pending] = []
    writes: list[AppendWrite] = []
    # First every entry's batches are checked, compressed ones off the event loop (a batch
    # may inflate to decompressed_limit; zlib, lz4 and zstd release the GIL). Only then are
    # they stamped, all of them with no await between, and queued at once: offsets stamped
    # in order must reach the log writer in order, and another request stamping the same
    # partition during such an await would get there first.
    checked: dict[int, list[BatchView]] = {}
    for key, pp in enumerate(req.partitions):
        code, message = _admit(rm, req.acks, pp, known_topic, internal)
        if code == ErrorCode.NONE:
            try:
                batches = _checked(pp, max_bytes=_max_bytes(rm, pp.topic))
                compressed = [b for b in batches if _compressed(b)]
                if compressed:
                    await rm.run_sync(_check_payloads, compressed)
                checked[key] = batches
            except (_TooLarge, DecompressedTooLarge, CorruptRecordError) as exc:
                code, message = _refusal(exc)
        if code != ErrorCode.NONE:
            answers[key] = _answer(pp.topic, pp.partition, code, message)
    for key, batches in checked.items():
        pp = req.partitions[key]
        code, message = _admit(rm, req.acks, pp, known_topic, internal)  # afresh, after awaits
        if code == ErrorCode.NONE:
            try:
                p = rm.partitions[TopicPartition(pp.topic, pp.partition)]
                write, item = _stamp(p, pp, batches, entry=key)
            except (_TooLarge, CorruptRecordError, _Refused) as exc:
                code, message = _refusal(exc)
                if isinstance(exc, _Refused):
                    rm.metrics.inc("produce_sequence_errors")
        if code != ErrorCode.NONE:
            answers[key] = _answer(pp.topic, pp.partition, code, message)
            continue
        if write is None:
            rm.metrics.inc("produce_duplicates")
        else:
            writes.append(write)
        pending.append(item)
    if not internal and rm.dynamic.client_quota(client_id)[0] is None:
        # Stamped, and queued for the log at the next step: on a Kafka connection the next
        # request may start (no throttle can follow this one; server/listener.py).
        release_order()
    if writes:
        failed = await _append_per_partition(rm, writes)
        for item in pending:
            if item.p.tp in failed:
                code, message = failed[item.p.tp]
                answers[item.entry] = _answer(item.p.tp.topic, item.p.tp.partition, code, message)
        pending = [item for item in pending if item.p.tp not in failed]
        rm.metrics.inc("bytes_in", sum(i.size for i in pending))
        t = now_ms()
        for item in pending:
            item.p.bytes_in.record(item.size, t)
        rm.metrics.inc("messages_in_batches", len(writes))
    nbytes = sum(len(pp.records) for pp in req.partitions)
    if req.acks == 0:
        return Reply(response=None, throttle_ms=_client_throttle(rm, client_id, nbytes))
    if req.acks == -1 and pending:
        await _wait_while(pending, req.timeout_ms, _still_waiting)
    elif req.acks == 1 and any(i.duplicate for i in pending):
        # A retry of a batch still queued for the disk: answered once the original is durable.
        await _wait_while([i for i in pending if i.duplicate], req.timeout_ms, _awaiting_durable)
    for item in pending:
        code = _outcome(rm, item, req.acks)
        answers[item.entry] = ProducePartitionResponse(
            topic=item.p.tp.topic,
            partition=item.p.tp.partition,
            error_code=code,
            base_offset=item.base_offset if code == ErrorCode.NONE else -1,
            log_start_offset=item.p.log_start_offset,
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


class _TooLarge(Exception):
    pass


_NO_PRODUCER = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
MAX_PRODUCER_ID = 2**63 - 1  # the batch header's int64
MAX_NATIVE_PRODUCER_ID = 2**56 - 1  # a native header's byte 16, the format byte, stays 0x00


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _min_insync_replicas(rm: ReplicaManager, topic: str) -> int:
    own = rm.dynamic.topic_overrides(topic).min_insync_replicas
    return rm.config.min_insync_replicas if own is None else own


def _max_bytes(rm: ReplicaManager, topic: str) -> int:
    """The topic's max.message.bytes, else the broker's message.max.bytes; a topic's value is
    honoured up to what a fetch response can carry (socket.max.frame.bytes less the headers'
    room, as config.check_caps holds the broker's to), so every accepted batch can be read."""
    own = rm.dynamic.topic_overrides(topic).max_message_bytes
    if own is None:
        return rm.config.message_max_bytes
    return min(own, rm.config.socket_max_frame_bytes - FRAME_HEADROOM_BYTES)


def _refusal(exc: Exception) -> tuple[ErrorCode, str]:
    """The answer to a batch refused by its checks or its producer's sequence."""
    if isinstance(exc, _TooLarge | DecompressedTooLarge):
        # Kafka's RecordTooLargeException: a Java producer splits the batch and retries.
        return ErrorCode.MESSAGE_TOO_LARGE, str(exc)
    if isinstance(exc, UnsupportedCompression):  # a CorruptRecordError, named apart
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)
    if isinstance(exc, _Refused):
        return exc.code, str(exc)
    return ErrorCode.CORRUPT_MESSAGE, str(exc)


def _admit(
    rm: ReplicaManager,
    acks: int,
    pp: ProducePartition,
    known_topic: set[str] | frozenset[str],
    internal: bool,
) -> tuple[ErrorCode, str | None]:
    """Whether this broker takes a batch for `pp` now, else the code and message."""
    if acks not in ACKS:
        return ErrorCode.INVALID_REQUIRED_ACKS, None
    if pp.topic in INTERNAL_TOPICS and not internal:
        # KafkaApis.handleProduceRequest / ReplicaManager.appendToLocalLog: only the broker's
        # own coordinators append to an internal topic (its records are read back when a
        # coordinator loads: a client's would rewrite, or break, every group of the partition).
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {pp.topic}"
    p = rm.partitions.get(TopicPartition(pp.topic, pp.partition))
    code = leader_error(p, pp.topic, known_topic)
    if code == ErrorCode.NONE and acks == -1:
        assert p is not None and p.leader is not None
        if len(p.leader.isr) < _min_insync_replicas(rm, pp.topic):
            code = ErrorCode.NOT_ENOUGH_REPLICAS
    return code, None


def _compressed(b: BatchView) -> bool:
    return is_v2(b.raw) and read_header(b.raw).compression != NONE


def _check_payloads(batches: list[BatchView]) -> None:
    for b in batches:
        check_payload(b)


def _checked(pp: ProducePartition, *, max_bytes: int) -> list[BatchView]:
    """The entry's batches, each checked for shape, CRC and size, and its payload unless it is
    compressed (that check is the caller's, off the event loop)."""
    batches = list(iter_batches(pp.records))
    if not batches:
        raise CorruptRecordError("no record batch in the request")
    for b in batches:
        if b.size > max_bytes:
            raise _TooLarge(
                f"a record batch of {b.size} bytes is larger than the {max_bytes} bytes "
                "accepted (max.message.bytes of the topic, else message.max.bytes; at most "
                "socket.max.frame.bytes less 1 MiB, so that a fetch can carry it)"
            )
        if not _compressed(b):
            check_payload(b)
    return batches


def _stamp(
    p: LocalPartition, pp: ProducePartition, batches: list[BatchView], *, entry: int
) -> tuple[AppendWrite | None, _Pending]:
    """Check the producer fields and sequence of the checked batches, give them their offsets
    and the leader's epoch, and reserve the offsets. Nothing is reserved if any batch is
    refused; a duplicate of an idempotent producer's batch is answered from its original
    offsets with no write (None)."""
    # Without a producer id the stored header says none, whatever the client wrote there: the
    # fields followers rebuild state from are only ever the ones checked here.
    producer = _NO_PRODUCER
    entry_producer = (
        (pp.producer_id, pp.producer_epoch, pp.base_sequence) if pp.producer_id >= 0 else producer
    )
    for b in batches:
        # A RecordBatch v2 carries its producer fields under its CRC; they are the ones checked.
        if is_v2(b.raw) and (b.producer_id, b.producer_epoch, b.base_sequence) != entry_producer:
            raise _Refused(
                ErrorCode.INVALID_RECORD,
                "a RecordBatch v2's producer id, epoch and sequence must be its produce entry's",
            )
    if pp.producer_id >= 0:
        if pp.producer_id > MAX_PRODUCER_ID:
            raise _Refused(ErrorCode.INVALID_RECORD, f"producer id {pp.producer_id} > int64")
        if pp.producer_id > MAX_NATIVE_PRODUCER_ID and not all(is_v2(b.raw) for b in batches):
            # Stamped into a native batch, its first byte would land on the byte that tells
            # the two formats apart (core/records.py): the stored batch would read as a broken
            # RecordBatch v2 and wedge every fetch of the partition.
            raise _Refused(
                ErrorCode.INVALID_RECORD,
                f"producer id {pp.producer_id} does not fit a native batch (at most 2**56 - 1)",
            )
        if len(batches) != 1:
            raise _Refused(
                ErrorCode.INVALID_RECORD,
                f"an idempotent produce carries exactly one record batch, not {len(batches)}",
            )
        decision = p.producers.check(
            pp.producer_id, pp.producer_epoch, pp.base_sequence, batches[0].count
        )
        if isinstance(decision, Refuse):
            raise _Refused(decision.error_code, decision.message)
        if isinstance(decision, Duplicate):
            return None, _Pending(
                p=p,
                base_offset=decision.batch.first_offset,
                end_offset=decision.batch.last_offset + 1,
                leader_epoch=p.leader_epoch,
                size=0,
                entry=entry,
                duplicate=(pp.producer_id, decision.batch),
            )
        producer = (pp.producer_id, pp.producer_epoch, pp.base_sequence)
    base = offset = p.replica.reserve(sum(b.count for b in batches))
    stamped = []
    for b in batches:
        stamped.append(
            restamp(b.raw, base_offset=offset, leader_epoch=p.leader_epoch, producer=producer)
        )
        offset += b.count
    if producer is not _NO_PRODUCER:
        # Applied now, undone by the writer's failure hook if the write fails (replica_manager).
        p.producers.apply(
            ProducerBatch(
                producer_id=pp.producer_id,
                producer_epoch=pp.producer_epoch,
                base_sequence=pp.base_sequence,
                base_offset=base,
                count=batches[0].count,
            )
        )
    # Until the leader's epoch entry is durable (its write at makeLeader may have failed), every
    # append carries it: the entry reaches the disk with the first batch stamped with its epoch.
    epochs = p.replica.epochs_for_append()
    item = _Pending(
        p=p,
        base_offset=base,
        end_offset=offset,
        leader_epoch=p.leader_epoch,
        size=len(pp.records),
        entry=entry,
    )
    write = AppendWrite(tp=p.tp, batches=stamped, epochs=epochs if epochs != p.epochs else None)
    return write, item


async def _wait_while(
    pending: list[_Pending], timeout_ms: int, waits: Callable[[_Pending], bool]
) -> None:
    """Until no item `waits` any more, or the request's timeout (Kafka's DelayedProduce)."""
    deadline = trio.current_time() + timeout_ms / 1000
    while trio.current_time() < deadline:
        waiting = [i.p for i in pending if waits(i)]
        if not waiting:
            return
        await wait_for_change(waiting, deadline)


def _awaiting_durable(item: _Pending) -> bool:
    p = item.p
    return (
        p.is_leader
        and p.leader_epoch == item.leader_epoch
        and p.log_end_offset < item.end_offset
        and _original_kept(item)
    )


def _original_kept(item: _Pending) -> bool:
    """Is the batch a duplicate was answered from still the producer's, at its offsets?"""
    if item.duplicate is None:
        return True
    producer_id, original = item.duplicate
    entry = item.p.producers.entries.get(producer_id)
    return entry is not None and original in entry.batches


def _still_waiting(item: _Pending) -> bool:
    p = item.p
    return (
        p.is_leader
        and p.leader_epoch == item.leader_epoch
        and p.high_watermark < item.end_offset
        and _original_kept(item)
    )


def _outcome(rm: ReplicaManager, item: _Pending, acks: int) -> ErrorCode:
    p = item.p
    if not p.is_leader or p.leader_epoch != item.leader_epoch:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if not _original_kept(item) or (item.duplicate and p.log_end_offset < item.end_offset):
        # The original's write failed (and was undone) or is not durable in time: retriable.
        return ErrorCode.REQUEST_TIMED_OUT
    if acks != -1:
        return ErrorCode.NONE
    if p.high_watermark < item.end_offset:
        return ErrorCode.REQUEST_TIMED_OUT
    assert p.leader is not None
    if len(p.leader.isr) < _min_insync_replicas(rm, p.tp.topic):
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE


def _answer(
    topic: str, partition: int, code: ErrorCode, message: str | None = None
) -> ProducePartitionResponse:
    return ProducePartitionResponse(
        topic=topic, partition=partition, error_code=code, error_message=message
    )
