"""The experiment's clients: producers of unique values, live consumers, and the final read.

Every operation goes to history.jsonl in Jepsen's form (see minikafka/checker/history.py):
an `invoke`, then `ok`, `fail` (definitely not written) or `info` (indeterminate).

- Values are unique integers from one counter; a send never retries (a retry would be a new
  op with new values), so a value seen twice in a log is a real duplicate. With `retries` on,
  a send is instead the library's Producer (client/producer.py) retrying one batch until it is
  acknowledged or `delivery_timeout_s` passes, as applications send: the real-world source of
  duplicates (a retry of a batch whose first attempt was written), which the idempotent
  producer (`idempotence`, on by default, KIP-98) must remove. Such a send ends `ok` or `info`
  (an attempt may have been written). A record's bytes are
  the value in ASCII, `|`, then padding up to the record size. Records have no key, unless
  `keys` K > 0 (a compacted topic, which refuses keyless records): value v then has the key
  `k<v % K>` (`key_of`), so the checker derives every value's key from the value alone
  (minikafka/checker/compaction.py) and history.jsonl keeps its format.
- Without `retries`, a send is one attempt of the library's Producer to the partition's leader
  (testing/load.py `attempt_once`, which says how its outcome is read): ok; `fail` when it
  never reached a broker or was refused before any append; `info` otherwise (timeouts,
  NOT_LEADER_OR_FOLLOWER, which a leader that appended and then lost the partition answers).
- Producers are paced (testing/load.py `Turns`): producer k of n sends its batches
  `n / batch_rate` seconds apart and skips the turns it missed instead of bursting, so a stall
  never turns into a flood; each stops at the deadline and after at most the turns it allows.
- Consumers each own some partitions and poll them from offset 0 to the end of the run; polls
  that return records are written (an empty poll says nothing). A consumer, like the final
  read, goes on from past the last batch it fetched (the library Consumer's `fetched_to`,
  Kafka's next fetch offset), not past the last record: in a compacted log a batch's last
  records, or whole batches, may be gone. In a log without gaps the two are the same offset.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.common import TopicPartition
from minikafka.errors import MiniKafkaError
from minikafka.testing.load import Turns, attempt_once, batch_of, load_producer
from minikafka.testing.run_folder import JsonLines

METADATA_REFRESH_S = 0.25  # at most this often per client after errors


class History:
    """history.jsonl (`JsonLines`, one flushed line per op): ops numbered in order, `time` in
    seconds since the run started (`started_at` on `clock`, the wall clock of the node logs:
    time.time, or the simulation's)."""

    def __init__(
        self, path: Path, started_at: float, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.started_at = started_at
        self.clock = clock
        self._out = JsonLines(path)

    def elapsed(self) -> float:
        """Seconds since the run started, on the run's clock."""
        return self.clock() - self.started_at

    @property
    def count(self) -> int:
        return self._out.count

    def op(self, process: str, type_: str, f: str, **fields: Any) -> None:
        self._out.write(
            {
                "index": self._out.count,
                "time": round(self.elapsed(), 4),
                "process": process,
                "type": type_,
                "f": f,
                **fields,
            }
        )

    def close(self) -> None:
        self._out.close()


def encode_value(value: int, size: int) -> bytes:
    head = b"%d|" % value
    return head + b"x" * max(0, size - len(head))


def decode_value(raw: bytes) -> int:
    return int(bytes(raw).split(b"|", 1)[0])


def key_of(value: int, keys: int) -> bytes:
    """The key of `value` in a keyed workload of `keys` keys (module docstring)."""
    return b"k%d" % (value % keys)


def _keys(spec: WorkloadSpec, values: Sequence[int]) -> list[bytes | None] | None:
    return [key_of(v, spec.keys) for v in values] if spec.keys else None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSpec:
    topic: str
    partitions: int
    producers: int = 4
    consumers: int = 2
    records_per_s: float = 1000.0  # over all producers
    batch_records: int = 10
    record_bytes: int = 100
    acks: int = -1
    request_timeout_s: float = 5.0
    retries: bool = False  # sends retry through the library's Producer (see above)
    idempotence: bool = True  # with retries: Kafka's enable.idempotence (needs acks=all)
    delivery_timeout_s: float = 30.0  # with retries: how long one send may retry
    keys: int = 0  # > 0: value v has the key k<v % keys> (module docstring); 0: no keys

    def __post_init__(self) -> None:
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 0:
            raise ValueError(f"keys {self.keys!r}: expected an integer >= 0 (0: no keys)")


class _Values:
    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> list[int]:
        first, self.next = self.next, self.next + n
        return list(range(first, first + n))


class _Metadata:
    """Refreshes the client's metadata after errors, at most every METADATA_REFRESH_S."""

    def __init__(self, client: ClusterClient, topic: str) -> None:
        self.client = client
        self.topic = topic
        self._last = float("-inf")

    async def refresh(self) -> None:
        if trio.current_time() - self._last < METADATA_REFRESH_S:
            return
        self._last = trio.current_time()
        try:
            await self.client.refresh_metadata([self.topic])
        except MiniKafkaError:
            pass  # no broker answered: the next error tries again


def _producer(client: ClusterClient, spec: WorkloadSpec) -> Producer:
    """With `retries`, the library's retrying Producer (idempotent unless turned off, and only
    with acks=all); without, one attempt per send."""
    return load_producer(
        client,
        acks=spec.acks,
        idempotence=spec.idempotence if spec.acks == -1 else False,
        request_timeout_s=spec.request_timeout_s,
        delivery_timeout_s=spec.delivery_timeout_s,
        attempts=None if spec.retries else 1,
    )


async def send_retrying(
    producer: Producer, spec: WorkloadSpec, tp: TopicPartition, values: Sequence[int], now_ms: int
) -> tuple[str, dict[str, Any]]:
    """One send that retries until acknowledged -> (type, fields) of its completion op: `ok`, or
    `info` when it gave up (an attempt may have been written). Its records are stamped
    `now_ms`."""
    batch, count = batch_of(
        [encode_value(v, spec.record_bytes) for v in values],
        now_ms=now_ms,
        keys=_keys(spec, values),
    )
    try:
        (result,) = await producer.send_batches([(tp, batch, count)])
    except (MiniKafkaError, trio.TooSlowError) as exc:
        return "info", {"error": str(exc) or type(exc).__name__}
    return "ok", {"offset": result.base_offset, "retries": result.retries}


async def run_producer(
    client: ClusterClient,
    spec: WorkloadSpec,
    history: History,
    values: _Values,
    index: int,
    deadline: float,
    on_ack: Callable[[TopicPartition, int, int, float], None] | None = None,
) -> dict[str, int]:
    """Producer `index`: paced sends until `deadline` (trio.current_time()); -> outcome counts.
    `on_ack(tp, base offset, count, latency_ms)` is told of every acknowledged send."""
    process = f"producer-{index}"
    metadata = _Metadata(client, spec.topic)
    batch_rate = spec.records_per_s / spec.batch_records
    period = spec.producers / batch_rate
    counts = {"ok": 0, "fail": 0, "info": 0}
    turns = Turns(period, trio.current_time() + period * index / spec.producers)
    max_turns = math.ceil(max(0.0, deadline - trio.current_time()) / period) + 1  # a count bound
    partition = index % spec.partitions
    producer = _producer(client, spec)
    for _ in range(max_turns):
        if not await turns.wait(deadline):
            break
        tp = TopicPartition(spec.topic, partition)
        partition = (partition + spec.producers) % spec.partitions
        batch = values.take(spec.batch_records)
        history.op(process, "invoke", "send", topic=tp.topic, partition=tp.partition, values=batch)
        sent = trio.current_time()
        stamp = int(history.clock() * 1000)  # the records' CreateTime, on the run's clock
        if spec.retries:
            type_, fields = await send_retrying(producer, spec, tp, batch, stamp)
        else:
            raw, count = batch_of(
                [encode_value(v, spec.record_bytes) for v in batch], now_ms=stamp,
                keys=_keys(spec, batch),
            )  # fmt: skip
            type_, fields = await attempt_once(producer, tp, raw, count)
        if type_ == "ok" and on_ack is not None:
            on_ack(tp, fields["offset"], len(batch), (trio.current_time() - sent) * 1000)
        history.op(process, type_, "send", topic=tp.topic, partition=tp.partition, **fields)
        counts[type_] += 1
        if type_ != "ok":
            await metadata.refresh()
    return counts


async def run_consumer(
    client: ClusterClient,
    spec: WorkloadSpec,
    history: History,
    index: int,
    stop: trio.Event,
) -> int:
    """Consumer `index`: polls its partitions from offset 0 until `stop`; -> records read."""
    process = f"consumer-{index}"
    mine = [
        TopicPartition(spec.topic, p) for p in range(spec.partitions) if p % spec.consumers == index
    ]
    if not mine:
        return 0
    consumer = Consumer(client, max_wait_ms=200, partition_max_bytes=256 * 1024, max_bytes=4 << 20)
    positions = {tp: 0 for tp in mine}
    read = 0
    metadata = _Metadata(client, spec.topic)
    while not stop.is_set():
        got: dict[TopicPartition, list] = {}
        failed = False
        try:
            with trio.move_on_after(spec.request_timeout_s + 2):
                got = await consumer.fetch_once(positions)
        except* MiniKafkaError:  # fetch_once asks every leader at once: errors come grouped
            failed = True
        if failed:
            await metadata.refresh()
            await trio.sleep(0.1)
            continue
        for tp, records in got.items():
            past = _next_offset(consumer, tp, records)
            if past is not None:
                # The position may move over a compacted gap without a record (module docstring).
                if records:
                    history.op(
                        process, "invoke", "poll", topic=tp.topic, partition=tp.partition,
                        offset=positions[tp],
                    )  # fmt: skip
                    history.op(
                        process, "ok", "poll", topic=tp.topic, partition=tp.partition,
                        records=[[r.offset, decode_value(r.value)] for r in records],
                    )  # fmt: skip
                positions[tp] = past
            read += len(records)
        if not any(got.values()):
            await trio.sleep(0.05)
    return read


async def final_read(
    client: ClusterClient, spec: WorkloadSpec, history: History, timeout_s: float
) -> dict[int, int]:
    """Read every partition from its log start to its high watermark; one op per partition.
    Errors are retried until `timeout_s`; a partition not read to its end by then (no leader,
    say) gets a `fail` op and the others are still checked. -> partition -> records read."""
    consumer = Consumer(client, max_wait_ms=100, partition_max_bytes=1 << 20, max_bytes=8 << 20)
    tps = [TopicPartition(spec.topic, p) for p in range(spec.partitions)]
    records: dict[TopicPartition, list[list[int]]] = {tp: [] for tp in tps}
    ends: dict[TopicPartition, int] = {}  # the high watermark each partition is read up to
    starts: dict[TopicPartition, int] = {}  # its log start offset then (the checker's `deleted`)
    todo: dict[TopicPartition, int] = {}  # next offset of the partitions still being read
    # One process per partition: a Jepsen process has one open op at a time.
    for tp in tps:
        history.op(_reader(tp), "invoke", "final-read", topic=tp.topic, partition=tp.partition)
    with trio.move_on_after(timeout_s):
        while len(ends) < len(tps) or todo:
            progress = False
            try:
                unknown = [tp for tp in tps if tp not in ends]
                if unknown:
                    await client.refresh_metadata([spec.topic])
                    led = [tp for tp in unknown if client.leader_of(tp) >= 0]
                    if led:
                        start = await consumer.list_offsets(led, earliest=True)
                        end = await consumer.list_offsets(led, earliest=False)
                        for tp in led:
                            ends[tp], starts[tp] = end[tp], start[tp]
                            if start[tp] < end[tp]:
                                todo[tp] = start[tp]
                        progress = True
                if todo:
                    for tp, rs in (await consumer.fetch_once(todo)).items():
                        past = _next_offset(consumer, tp, rs)
                        if past is not None and past > todo[tp]:
                            records[tp].extend([r.offset, decode_value(r.value)] for r in rs)
                            todo[tp] = past
                            if todo[tp] >= ends[tp]:
                                del todo[tp]
                            progress = True
            except* MiniKafkaError:  # a leader moved or is gone: ask again
                pass
            if not progress:
                await trio.sleep(0.2)
    out = {}
    for tp in tps:
        if tp in ends and tp not in todo:
            history.op(
                _reader(tp), "ok", "final-read", topic=tp.topic, partition=tp.partition,
                records=records[tp], log_end_offset=ends[tp], log_start_offset=starts[tp],
            )  # fmt: skip
            out[tp.partition] = len(records[tp])
        else:
            history.op(
                _reader(tp), "fail", "final-read", topic=tp.topic, partition=tp.partition,
                error=f"not read to its end within {timeout_s:.0f} s",
            )  # fmt: skip
    return out


def _next_offset(consumer: Consumer, tp: TopicPartition, records: Sequence[Any]) -> int | None:
    """Where the next fetch of `tp` starts after `fetch_once` returned `records`: past the last
    batch it fetched (gaps included), or past the last record; None if nothing was fetched."""
    past = consumer.fetched_to.get(tp)
    if past is None and records:
        past = records[-1].offset + 1
    return past


def _reader(tp: TopicPartition) -> str:
    return f"final-reader-{tp.partition}"
