"""The steady produce load from a real Kafka client: librdkafka (confluent-kafka) through the
brokers' Kafka listeners (docs/kafka-clients.md), in place of minikafka's own producer.

Same contract as clients.run_load: `rate_bytes_per_s` until `stop` (at most `max_s`), acks=all,
values from `value_for(partition, seq)` sent round-robin over the partitions, so the read-back
checker verifies every acknowledged record as it does the native load's. librdkafka batches the
records itself (its defaults: linger 5 ms, idempotence on); the messages are paced on Trio's
clock, `produce()` and `poll(0)` never block, and delivery reports arrive in `poll`. Each run of
consecutive offsets acknowledged together becomes one `Acked` and one produced.jsonl line.
The pacing loop wakes every REPORT_TICK_S.

Log bytes: a RecordBatch v2 record of this size carries about 10 bytes of framing (varint
lengths, deltas, attributes) and its batch a 61-byte header; RECORD_OVERHEAD spreads that header
over a batch of 8, so the pacing and `bytes_acked` count what the log holds to within a few
percent at 1 KB records (the prediction's inbound rate is in log bytes).
"""

from __future__ import annotations

import time
from functools import partial

import trio

from minikafka.common import TopicPartition
from minikafka.testing.run_folder import RunFolder
from systemtests.harness.clients import (
    LOAD_MAX_S,
    Acked,
    HarnessError,
    LoadStats,
    Workload,
    value_for,
)

RECORD_OVERHEAD = 10 + 61 // 8
# Delivery reports come in `poll`: polled this often, a record's latency (produce() to report)
# is librdkafka's and the brokers', not the pacing loop's. (The native load ticks at 100 ms
# because it sends whole batches; here librdkafka batches.)
REPORT_TICK_S = 0.02


def record_log_bytes(workload: Workload) -> int:
    return workload.record_size + RECORD_OVERHEAD


async def run_kafka_load(
    bootstrap: str,
    workload: Workload,
    folder: RunFolder,
    *,
    rate_bytes_per_s: float,
    stop: trio.Event,
    stats: LoadStats,
    max_s: float = LOAD_MAX_S,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "client.id": "systemtest-load-librdkafka",
            "message.timeout.ms": 60_000,
        }
    )
    size = record_log_bytes(workload)
    failures: list[str] = []
    delivered: list[tuple[int, int, int, float]] = []  # partition, offset, seq, latency s

    def report(seq: int, err, msg) -> None:  # noqa: ANN001 - librdkafka's callback, seq bound
        if err is not None:
            failures.append(str(err))
        else:
            delivered.append((msg.partition(), msg.offset(), seq, msg.latency()))

    def drain() -> None:
        """Turn the reports gathered so far into Acked runs and produced.jsonl lines."""
        runs: dict[int, list[tuple[int, int, float]]] = {}
        for p, offset, seq, latency in delivered:
            runs.setdefault(p, []).append((offset, seq, latency))
        delivered.clear()
        now = time.time()
        for p, items in runs.items():
            items.sort()
            start = 0
            for i in range(1, len(items) + 1):
                contiguous = i < len(items) and (
                    items[i][0] == items[i - 1][0] + 1 and items[i][1] == items[i - 1][1] + 1
                )
                if contiguous:
                    continue
                first_offset, first_seq, _ = items[start]
                count = i - start
                latency = max(lat for _, _, lat in items[start:i])
                tp = TopicPartition(workload.topic, p)
                workload.acked.append(Acked(tp, first_offset, first_seq, count))
                nbytes = count * size
                workload.bytes_acked[p] = workload.bytes_acked.get(p, 0) + nbytes
                stats.bytes_acked += nbytes
                stats.max_latency_ms = max(stats.max_latency_ms, latency * 1000)
                folder.record_produced(
                    ts=now, topic=workload.topic, partition=p, offset=first_offset, count=count,
                    latency_ms=latency * 1000, bytes=nbytes, phase="load",
                )  # fmt: skip
                start = i

    stats.started = folder.event(
        "load_start", bytes_per_s=rate_bytes_per_s, client="librdkafka", record_bytes=size
    )
    start = trio.current_time()
    until = start + max_s
    sent = 0
    task_status.started()
    while not stop.is_set() and trio.current_time() < until:
        due = int(rate_bytes_per_s * (trio.current_time() - start) / size)
        for _ in range(due - sent):
            p = workload.next_partition()
            seq = workload.next_seq.get(p, 0)
            workload.next_seq[p] = seq + 1
            value = value_for(p, seq, workload.record_size)
            producer.produce(
                workload.topic, value=value, partition=p, on_delivery=partial(report, seq)
            )
        sent = max(sent, due)
        producer.poll(0)
        drain()
        if failures:
            raise HarnessError(f"librdkafka failed to deliver: {failures[:3]}")
        with trio.move_on_after(REPORT_TICK_S):
            await stop.wait()
    left = await trio.to_thread.run_sync(producer.flush, 60.0)
    drain()
    if failures or left:
        raise HarnessError(f"librdkafka: {left} undelivered, failures {failures[:3]}")
    stats.batches_due = sent
    stats.ended = folder.event("load_end", bytes_acked=stats.bytes_acked, records=sent)
