"""Reading a `__consumer_offsets` partition for the group coordinator (server/groups.py): its
records, in log order, whatever the log holds.

A batch whose records do not decode is skipped and reported, and the read goes on with the next
batch: a RecordBatch v2 is checked at produce only as far as Kafka's LogValidator checks it
(lengths and offset deltas), so a record's key or value bytes can be junk that only a full
decode finds, and that must not stop the load (GroupMetadataManager loads what it can use).
Bytes that do not even split into batches end the read there, reported.
"""

from __future__ import annotations

from minikafka.common import TopicPartition
from minikafka.core.records import decode_records, iter_batches
from minikafka.errors import CorruptRecordError
from minikafka.server.local_partition import LocalPartition
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import ReadSpec

READ_BYTES = 1 << 20

Record = tuple[int, bytes | None, bytes | None]  # (log offset, key, value or None)


async def read_partition(
    rm: ReplicaManager, lp: LocalPartition, tp: TopicPartition, target: int
) -> tuple[list[Record], list[tuple[int, str]]]:
    """Every record of `tp` from its log start up to `target`, and (log offset, why) for each
    batch that could not be read."""
    records: list[Record] = []
    problems: list[tuple[int, str]] = []
    offset = lp.log_start_offset
    while offset < target:
        spec = ReadSpec(
            tp=tp, fetch_offset=offset, max_offset=target, partition_max_bytes=READ_BYTES
        )
        (blob,) = await rm.run_sync(rm.store.read, [spec], READ_BYTES)
        if not blob:
            break
        start = offset
        try:
            for batch in iter_batches(blob):
                offset = batch.next_offset
                try:
                    decoded = decode_records(batch)
                except CorruptRecordError as exc:
                    problems.append((batch.base_offset, f"batch does not decode: {exc}"))
                    continue
                records.extend(
                    (r.offset, r.key, None if r.null_value else r.value) for r in decoded
                )
        except CorruptRecordError as exc:
            problems.append((offset, f"log bytes do not split into batches: {exc}"))
            break
        if offset == start:
            break  # no progress: nothing more to read
    return records, problems
