"""Each replica's log as it lies on disk, for the checker's replica comparison.

Read after the cluster is stopped, through `LogStore` (the only owner of the LMDB layout): one
dict per (node, partition) of the experiment's topic, with the checkpointed high watermark, the
log end offset and every record as [offset, value].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minikafka.core.records import decode_records, iter_batches
from minikafka.storage import LogStore, ReadSpec, StoreConfig

READ_CHUNK_BYTES = 8 << 20


def dump_replicas(
    data_dirs: Mapping[int, Path], topic: str, decode: Callable[[bytes], int]
) -> list[dict[str, Any]]:
    """Every replica of `topic` held by the brokers whose data dirs are given (node -> dir)."""
    out = []
    for node, data_dir in sorted(data_dirs.items()):
        path = Path(data_dir) / "lmdb"
        if not path.exists():
            continue
        with LogStore(path, StoreConfig(sync=False)) as store:
            for tp in sorted(t for t in store.list_partitions() if t.topic == topic):
                loaded = store.load_partition(tp)
                records: list[list[int]] = []
                offset = loaded.log_start_offset
                while offset < loaded.log_end_offset:
                    (chunk,) = store.read(
                        [ReadSpec(tp=tp, fetch_offset=offset, max_offset=loaded.log_end_offset,
                                  partition_max_bytes=READ_CHUNK_BYTES)],
                        READ_CHUNK_BYTES,
                    )  # fmt: skip
                    batch_records = [r for b in iter_batches(chunk) for r in decode_records(b)]
                    if not batch_records:
                        break  # a hole: the checker sees the records missing
                    records.extend(
                        [r.offset, decode(r.value)] for r in batch_records if r.offset >= offset
                    )
                    offset = batch_records[-1].offset + 1
                out.append(
                    {
                        "node": node,
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "high_watermark": loaded.high_watermark,
                        "log_end_offset": loaded.log_end_offset,
                        "records": records,
                    }
                )
    return out
