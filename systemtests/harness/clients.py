"""The clients of a case: fill, steady produce load, read-back and the acknowledged-writes check.

Record values are derived from (partition, sequence number): `value_for` repeats a header naming
both up to the record size, so every byte of a record read back can be compared with what was
sent without keeping the values in memory. The checker (minikafka/testing/checker.py) compares
16-byte digests of the values, which is the same verdict for any realistic corruption.

Every acknowledged batch goes to clients/produced.jsonl (with `"phase": "fill" | "load"`), every
chunk read back to clients/consumed.jsonl. The load is paced on the clock: by time t after its
start, floor(rate x t / batch size) batches are due; each 100 ms tick sends the ones due, each
batch in a request of its own (`Producer.send_batches`), so its latency is its own, at most
`in_flight` ticks outstanding, so a slow acknowledgement delays the next ticks' batches but never
the average rate. Partitions are served
round-robin, so each partition receives rate / partitions. Both loads are the kit's
(minikafka/testing/load.py), bounded in count and time: the fill by its batches and
`timeout_s`, the steady load by `stop` and `max_s`.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.testing.checker import Verdict, check_acknowledged
from minikafka.testing.load import Bounds, Rate, load_producer, run_senders
from minikafka.testing.run_folder import RunFolder


def harness_producer(client: ClusterClient, *, delivery_timeout_s: float) -> Producer:
    """The load generators' producer: acks=all, idempotence off. They measure replication and
    its throttles, not the producer; the idempotent one (the library's default, KIP-98) keeps
    at most 5 batches per partition in flight, which would change the load these tests' figures
    were calibrated with. Flip it on to run the suite with the default producer."""
    return load_producer(client, acks=-1, idempotence=False, delivery_timeout_s=delivery_timeout_s)


LOAD_TICK_S = 0.1
LOAD_MAX_S = 1800.0  # the steady load's time bound: far past any case's move bound
DIGEST_BYTES = 16


class HarnessError(Exception):
    """A case could not be run as planned (a timeout, a tool that failed): the test fails."""


def value_for(partition: int, seq: int, size: int) -> bytes:
    head = f"p{partition:05d}s{seq:010d};".encode()
    return (head * (size // len(head) + 1))[:size]


def digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=DIGEST_BYTES).digest()


@dataclass(slots=True)
class Acked:
    tp: TopicPartition
    base_offset: int
    first_seq: int
    count: int


@dataclass(slots=True, kw_only=True)
class Workload:
    """What is written to one topic, and what was acknowledged."""

    topic: str
    partitions: int
    record_size: int
    records_per_batch: int
    clock: Callable[[], float] = time.time  # the records' CreateTime: the run folder's clock
    next_seq: dict[int, int] = field(default_factory=dict)
    acked: list[Acked] = field(default_factory=list)
    bytes_acked: dict[int, int] = field(default_factory=dict)  # batch bytes per partition
    _rr: int = 0

    @property
    def batch_bytes(self) -> int:
        """Bytes of one batch in the log (the leader only restamps its header)."""
        value = b"\0" * self.record_size
        return len(make_batch([(0, None, value)] * self.records_per_batch))

    def tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def next_partition(self) -> int:
        p = self._rr % self.partitions
        self._rr += 1
        return p

    def build(self, partition: int) -> tuple[TopicPartition, bytes, int, int]:
        """(tp, batch, count, first seq) of the next batch of `partition`."""
        first = self.next_seq.get(partition, 0)
        self.next_seq[partition] = first + self.records_per_batch
        now = int(self.clock() * 1000)
        records = [
            (now, None, value_for(partition, first + i, self.record_size))
            for i in range(self.records_per_batch)
        ]
        return self.tp(partition), make_batch(records), self.records_per_batch, first

    def expected(self) -> Iterator[tuple[TopicPartition, int, list[bytes]]]:
        for a in self.acked:
            values = [
                digest(value_for(a.tp.partition, a.first_seq + i, self.record_size))
                for i in range(a.count)
            ]
            yield a.tp, a.base_offset, values


async def send(
    producer: Producer,
    workload: Workload,
    items: list[tuple[TopicPartition, bytes, int, int]],
    folder: RunFolder,
    phase: str,
) -> int:
    """Send batches, record the acknowledged ones; -> batch bytes acknowledged."""
    t0 = folder.clock()
    results = await producer.send_batches([(tp, batch, n) for tp, batch, n, _ in items])
    acked_at = folder.clock()
    total = 0
    for (tp, batch, n, first), r in zip(items, results, strict=True):
        workload.acked.append(Acked(tp, r.base_offset, first, n))
        workload.bytes_acked[tp.partition] = workload.bytes_acked.get(tp.partition, 0) + len(batch)
        total += len(batch)
        folder.record_produced(
            ts=acked_at,
            topic=tp.topic,
            partition=tp.partition,
            offset=r.base_offset,
            count=n,
            latency_ms=(acked_at - t0) * 1000,
            bytes=len(batch),
            phase=phase,
        )
    return total


async def fill(
    client: ClusterClient,
    workload: Workload,
    folder: RunFolder,
    *,
    rounds: int,
    timeout_s: float,
    in_flight: int = 4,
    per_request: int = 50,
) -> None:
    """`rounds` batches to every partition, as fast as acks=all allows."""
    producer = harness_producer(client, delivery_timeout_s=timeout_s)
    todo = deque(p for _ in range(rounds) for p in range(workload.partitions))
    folder.event("fill_start", batches=len(todo))
    bounds = Bounds(until=trio.current_time() + timeout_s, max_sends=len(todo), cut=True)
    done = 0

    async def one(_k: int) -> bool:
        nonlocal done
        if not todo:
            return False
        chunk = [workload.build(todo.popleft()) for _ in range(min(per_request, len(todo)))]
        await send(producer, workload, chunk, folder, "fill")
        done += len(chunk)
        return True

    total = len(todo)
    await run_senders(in_flight, one, bounds)
    if done < total:
        raise HarnessError(f"filling {workload.topic} took over {timeout_s} s")
    folder.event("fill_end", bytes=sum(workload.bytes_acked.values()))


@dataclass(slots=True, kw_only=True)
class LoadStats:
    started: float = 0.0  # wall s
    ended: float = 0.0
    bytes_acked: int = 0
    batches_due: int = 0
    max_latency_ms: float = 0.0

    @property
    def bytes_per_s(self) -> float:
        span = self.ended - self.started
        return self.bytes_acked / span if span > 0 else 0.0


async def run_load(
    client: ClusterClient,
    workload: Workload,
    folder: RunFolder,
    *,
    rate_bytes_per_s: float,
    stop: trio.Event,
    stats: LoadStats,
    in_flight: int = 16,
    delivery_timeout_s: float = 60.0,
    max_s: float = LOAD_MAX_S,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Produce `rate_bytes_per_s` (acks=all) until `stop` is set, at most `max_s` (module
    docstring)."""
    producer = harness_producer(client, delivery_timeout_s=delivery_timeout_s)
    size = workload.batch_bytes
    slots = trio.Semaphore(in_flight)
    stats.started = folder.event("load_start", bytes_per_s=rate_bytes_per_s, batch_bytes=size)
    batches = Rate(rate_bytes_per_s / size, trio.current_time())
    until = batches.start + max_s  # the count bound follows: batches.due(until)
    sent = 0
    task_status.started()

    async def alone(item: tuple) -> None:
        t0 = folder.clock()
        stats.bytes_acked += await send(producer, workload, [item], folder, "load")
        stats.max_latency_ms = max(stats.max_latency_ms, (folder.clock() - t0) * 1000)

    async def one(items: list) -> None:
        # Each batch sent and timed on its own, so its latency is its own: sent together, a
        # batch would wait for the slowest of its tick (after a leader change, one retried on
        # its partition's new leader, whose new follower Kafka's lists mode may throttle).
        try:
            async with trio.open_nursery() as sends:
                for item in items:
                    sends.start_soon(alone, item)
        finally:
            slots.release()

    async with trio.open_nursery() as nursery:
        while not stop.is_set() and trio.current_time() < until:
            due = batches.due(trio.current_time())
            if due > sent:
                await slots.acquire()
                items = [workload.build(workload.next_partition()) for _ in range(due - sent)]
                sent = due
                nursery.start_soon(one, items)
            with trio.move_on_after(LOAD_TICK_S):
                await stop.wait()
    stats.batches_due = sent
    stats.ended = folder.event("load_end", bytes_acked=stats.bytes_acked, batches=sent)


async def read_back(
    client: ClusterClient, workload: Workload, folder: RunFolder, *, timeout_s: float
) -> Verdict:
    """Read every partition from its log start to its high watermark; check the acked writes."""
    consumer = Consumer(client, max_wait_ms=100, partition_max_bytes=1 << 20, max_bytes=8 << 20)
    tps = [workload.tp(p) for p in range(workload.partitions)]
    await client.refresh_metadata([workload.topic])
    folder.event("read_start")
    consumed: list[tuple[TopicPartition, int, bytes]] = []
    with trio.move_on_after(timeout_s) as scope:
        positions = await consumer.list_offsets(tps, earliest=True)
        ends = await consumer.list_offsets(tps, earliest=False)
        todo = {tp: pos for tp, pos in positions.items() if pos < ends[tp]}
        while todo:
            got = await consumer.fetch_once(todo)
            for tp, records in got.items():
                if not records:
                    continue
                folder.record_consumed(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=records[0].offset,
                    count=len(records),
                )
                consumed.extend((tp, r.offset, digest(r.value)) for r in records)
                todo[tp] = records[-1].offset + 1
                if todo[tp] >= ends[tp]:
                    del todo[tp]
    if scope.cancelled_caught:
        raise HarnessError(f"reading {workload.topic} back took over {timeout_s} s")
    verdict = check_acknowledged(workload.expected(), consumed)
    folder.event("read_end", records=len(consumed), verdict=verdict.summary())
    return verdict
