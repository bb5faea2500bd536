"""Produce on the leader, as plain decisions: whether a batch is admitted, its checks, its
stamping (offsets, epoch, idempotent producers' sequence), and the acks verdict. Kafka's
`ReplicaManager.appendRecords` checks, `UnifiedLog.analyzeAndValidateRecords`,
`ProducerStateManager` and `DelayedProduce`.

Every refusal is a value, `Refusal(code, message)`, answered for its entry alone; the shell
(server/produce.py) reads the partitions, runs the compressed payloads' checks off the event
loop, appends what is stamped, waits while `still_waiting`, and answers with `outcome`.

- Admission: INVALID_REQUIRED_ACKS for acks other than 0, 1, -1; an internal topic only for
  the broker's own appends (INVALID_TOPIC_EXCEPTION); the partition's leader error; and for
  acks=-1, NOT_ENOUGH_REPLICAS when the ISR is below `min.insync.replicas`.
- Checks: at least one batch; each at most the topic's `max.message.bytes` (else the broker's
  `message.max.bytes`; MESSAGE_TOO_LARGE, Kafka's RecordTooLargeException, on which a Java
  producer splits and retries); CRC, shape and record count (CORRUPT_MESSAGE); a compression
  we do not read (UNSUPPORTED_COMPRESSION_TYPE).
- Idempotent producers (KIP-98): an entry with a producer id holds exactly one batch, whose
  RecordBatch v2 header carries the entry's producer fields (INVALID_RECORD otherwise); a retry
  of one of the producer's last 5 batches is a `Duplicate` answered from the original's
  offsets; a sequence gap, an older epoch or an unknown producer are refused (45, 47, 59).
- The verdict: acks=-1 waits until the HW covers the batch, the leader loses the partition
  (NOT_LEADER_OR_FOLLOWER) or the timeout passes (REQUEST_TIMED_OUT); an ISR that shrank below
  the minimum meanwhile is NOT_ENOUGH_REPLICAS_AFTER_APPEND.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.core.compression import NONE, DecompressedTooLarge
from minikafka.core.controller.topics import INTERNAL_TOPICS  # Kafka's Topic.isInternal
from minikafka.core.log import EpochEntry
from minikafka.core.producer_state import BatchMetadata, Duplicate, ProducerBatch, Refuse
from minikafka.core.record_batch_v2 import is_v2, read_header
from minikafka.core.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchView,
    UnsupportedCompression,
    check_payload,
    decode_records,
    iter_batches,
    restamp,
)
from minikafka.core.replica import LocalReplica
from minikafka.errors import CorruptRecordError, ErrorCode
from minikafka.wire.messages import ProducePartition

ACKS = (0, 1, -1)
_NO_PRODUCER = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
MAX_PRODUCER_ID = 2**63 - 1  # the batch header's int64
MAX_NATIVE_PRODUCER_ID = 2**56 - 1  # a native header's byte 16, the format byte, stays 0x00


@dataclass(frozen=True, slots=True)
class Refusal:
    """An entry refused, with nothing of it written. `by_producer_state`: refused by the
    idempotence checks (the broker counts those as `produce_sequence_errors`)."""

    code: ErrorCode
    message: str | None = None
    by_producer_state: bool = False


def admit(
    *,
    acks: int,
    topic: str,
    internal: bool,
    leader_code: ErrorCode,
    isr_size: int,
    min_insync_replicas: int,
) -> Refusal | None:
    """Whether this broker takes a batch for the partition now (`leader_code`: the partition's
    own answer, NONE when it is led here; `isr_size` read only then)."""
    if acks not in ACKS:
        return Refusal(ErrorCode.INVALID_REQUIRED_ACKS)
    if topic in INTERNAL_TOPICS and not internal:
        # KafkaApis.handleProduceRequest / ReplicaManager.appendToLocalLog: a client's records
        # there would be read back by a loading coordinator and rewrite, or break, its groups.
        return Refusal(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {topic}"
        )
    if leader_code != ErrorCode.NONE:
        return Refusal(leader_code)
    if acks == -1 and isr_size < min_insync_replicas:
        return Refusal(ErrorCode.NOT_ENOUGH_REPLICAS)
    return None


def min_insync_replicas(topic_value: int | None, broker_value: int) -> int:
    """The topic's `min.insync.replicas` overrides the broker's, as Kafka's LogConfig does."""
    return broker_value if topic_value is None else topic_value


def max_batch_bytes(topic_value: int | None, broker_value: int, fetchable: int) -> int:
    """The topic's `max.message.bytes`, else the broker's `message.max.bytes`. A topic's value
    is honoured up to what a fetch response can carry (`fetchable`), as the broker's own is
    checked at start, so every accepted batch can be read back."""
    return broker_value if topic_value is None else min(topic_value, fetchable)


def compressed(b: BatchView) -> bool:
    return is_v2(b.raw) and read_header(b.raw).compression != NONE


def check_batches(records: bytes, *, max_bytes: int) -> list[BatchView] | Refusal:
    """The entry's batches, each checked for shape, CRC and size, and its payload unless it is
    compressed: that check (`check_compressed`) may inflate a batch up to its bound, so the
    shell runs it off the event loop."""
    try:
        batches = list(iter_batches(records))
        if not batches:
            return Refusal(ErrorCode.CORRUPT_MESSAGE, "no record batch in the request")
        for b in batches:
            if b.size > max_bytes:
                return Refusal(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"a record batch of {b.size} bytes is larger than the {max_bytes} bytes "
                    "accepted (max.message.bytes of the topic, else message.max.bytes; at most "
                    "socket.max.frame.bytes less 1 MiB, so that a fetch can carry it)",
                )
            if not compressed(b):
                check_payload(b)
    except CorruptRecordError as exc:
        return _corrupt(exc)
    return batches


def check_keys(batches: list[BatchView]) -> Refusal | None:
    """A compacted topic's rule (Kafka's LogValidator.validateKey): every record has a key,
    else INVALID_RECORD. Decodes the records, so the shell runs it off the event loop when a
    batch is compressed."""
    try:
        for b in batches:
            if any(r.key is None for r in decode_records(b)):
                return Refusal(
                    ErrorCode.INVALID_RECORD,
                    "Compacted topic cannot accept message without key "
                    "(cleanup.policy=compact: a record without a key would be removed unread)",
                )
    except CorruptRecordError as exc:
        return _corrupt(exc)
    return None


def check_compressed(batches: list[BatchView]) -> Refusal | None:
    """The payload check of the compressed batches (bounded: Kafka's ChunkedBytesStream)."""
    try:
        for b in batches:
            if compressed(b):
                check_payload(b)
    except DecompressedTooLarge as exc:
        return Refusal(ErrorCode.MESSAGE_TOO_LARGE, str(exc))
    except CorruptRecordError as exc:
        return _corrupt(exc)
    return None


def _corrupt(exc: CorruptRecordError) -> Refusal:
    if isinstance(exc, UnsupportedCompression):  # a CorruptRecordError, named apart
        return Refusal(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc))
    return Refusal(ErrorCode.CORRUPT_MESSAGE, str(exc))


@dataclass(slots=True)
class Pending:
    """A stamped entry awaiting its answer, read against its replica as it is when asked."""

    replica: LocalReplica
    base_offset: int
    end_offset: int
    leader_epoch: int
    size: int
    entry: int  # its index in the request
    # A duplicate (producer id, the original's metadata): answered only if the original is
    # still in the log when the answer is due (its write may yet fail and be undone).
    duplicate: tuple[int, BatchMetadata] | None = None


@dataclass(frozen=True, slots=True)
class Stamped:
    """An admitted entry: the batches to append with their offsets, epoch and producer fields
    (None: a duplicate, nothing to write), the epoch cache to write with them (None: unchanged),
    and what its answer waits on."""

    batches: list[bytes] | None
    epochs: list[EpochEntry] | None
    pending: Pending


def _refuse_by_producer(message: str, code: ErrorCode = ErrorCode.INVALID_RECORD) -> Refusal:
    return Refusal(code, message, by_producer_state=True)


def _producer_refusal(pp: ProducePartition, batches: list[BatchView]) -> Refusal | None:
    """The idempotent producer's fields, checked before its sequence (KIP-98)."""
    entry_producer = (
        (pp.producer_id, pp.producer_epoch, pp.base_sequence)
        if pp.producer_id >= 0
        else _NO_PRODUCER
    )
    for b in batches:
        # A RecordBatch v2 carries its producer fields under its CRC; they are the ones checked.
        if is_v2(b.raw) and (b.producer_id, b.producer_epoch, b.base_sequence) != entry_producer:
            return _refuse_by_producer(
                "a RecordBatch v2's producer id, epoch and sequence must be its produce entry's"
            )
    if pp.producer_id < 0:
        return None
    if pp.producer_id > MAX_PRODUCER_ID:
        return _refuse_by_producer(f"producer id {pp.producer_id} > int64")
    if pp.producer_id > MAX_NATIVE_PRODUCER_ID and not all(is_v2(b.raw) for b in batches):
        # Stamped into a native batch, its first byte would land on the byte that tells the two
        # formats apart (core/records.py): the stored batch would read as a broken RecordBatch
        # v2 and wedge every fetch of the partition.
        return _refuse_by_producer(
            f"producer id {pp.producer_id} does not fit a native batch (at most 2**56 - 1)"
        )
    if len(batches) != 1:
        return _refuse_by_producer(
            f"an idempotent produce carries exactly one record batch, not {len(batches)}"
        )
    return None


def stamp(
    replica: LocalReplica, pp: ProducePartition, batches: list[BatchView], *, entry: int
) -> Stamped | Refusal:
    """Check the producer fields and sequence of the checked batches, give them their offsets
    and the leader's epoch, and reserve the offsets. Nothing is reserved if any batch is
    refused; a duplicate of an idempotent producer's batch is answered from its original
    offsets with no write. An accepted producer batch is applied to the producer state now;
    the writer's failure hook undoes it if the write fails."""
    refused = _producer_refusal(pp, batches)
    if refused is not None:
        return refused
    # Without a producer id the stored header says none, whatever the client wrote there: the
    # fields followers rebuild state from are only ever the ones checked here.
    producer = _NO_PRODUCER
    if pp.producer_id >= 0:
        decision = replica.producers.check(
            pp.producer_id, pp.producer_epoch, pp.base_sequence, batches[0].count
        )
        if isinstance(decision, Refuse):
            return _refuse_by_producer(decision.message, decision.error_code)
        if isinstance(decision, Duplicate):
            original = Pending(
                replica=replica,
                base_offset=decision.batch.first_offset,
                end_offset=decision.batch.last_offset + 1,
                leader_epoch=replica.leader_epoch,
                size=0,
                entry=entry,
                duplicate=(pp.producer_id, decision.batch),
            )
            return Stamped(batches=None, epochs=None, pending=original)
        producer = (pp.producer_id, pp.producer_epoch, pp.base_sequence)
    base = offset = replica.reserve(sum(b.count for b in batches))
    stamped = []
    for b in batches:
        stamped.append(
            restamp(b.raw, base_offset=offset, leader_epoch=replica.leader_epoch, producer=producer)
        )
        offset += b.count
    if producer is not _NO_PRODUCER:
        replica.producers.apply(
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
    epochs = replica.epochs_for_append()
    pending = Pending(
        replica=replica,
        base_offset=base,
        end_offset=offset,
        leader_epoch=replica.leader_epoch,
        size=len(pp.records),
        entry=entry,
    )
    return Stamped(
        batches=stamped, epochs=epochs if epochs != replica.epochs else None, pending=pending
    )


def original_kept(item: Pending) -> bool:
    """Is the batch a duplicate was answered from still the producer's, at its offsets?"""
    if item.duplicate is None:
        return True
    producer_id, original = item.duplicate
    entry = item.replica.producers.entries.get(producer_id)
    return entry is not None and original in entry.batches


def _still_led(item: Pending) -> bool:
    r = item.replica
    return r.is_leader and r.leader_epoch == item.leader_epoch and original_kept(item)


def still_waiting(item: Pending) -> bool:
    """acks=-1: the HW has not reached the batch's end, and nothing has ended the wait."""
    return _still_led(item) and item.replica.high_watermark < item.end_offset


def awaiting_durable(item: Pending) -> bool:
    """acks=1, a duplicate: the original is still on its way to the leader's disk."""
    return _still_led(item) and item.replica.log_end_offset < item.end_offset


def outcome(item: Pending, *, acks: int, min_insync_replicas: int) -> ErrorCode:
    """The entry's answer once the wait is over (Kafka's DelayedProduce.tryComplete)."""
    r = item.replica
    if not r.is_leader or r.leader_epoch != item.leader_epoch:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if not original_kept(item) or (item.duplicate and r.log_end_offset < item.end_offset):
        # The original's write failed (and was undone) or is not durable in time: retriable.
        return ErrorCode.REQUEST_TIMED_OUT
    if acks != -1:
        return ErrorCode.NONE
    if r.high_watermark < item.end_offset:
        return ErrorCode.REQUEST_TIMED_OUT
    assert r.leader is not None
    if len(r.leader.isr) < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE
