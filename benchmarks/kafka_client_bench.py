"""Kafka's own client against minikafka's Kafka listener, beside minikafka's native client, in the
same run on the same cluster (issue 14's performance check: the Kafka path at least 0.5 x the
native MB/s).

A local cluster (controller + 3 brokers, log.sync on); two topics of `--partitions` partitions at
replication factor 2, one per path. Produce: `--records` records of `--record-size` random bytes
with acks=all and idempotence on, the native path through tools/perf.py (its default batching:
100 kB batches, 8 requests in flight), the Kafka path through confluent-kafka (librdkafka) with
the client's default batching (linger.ms 5, batch.size 1 MB). Consume: every record back from
the start, the native path with minikafka's consumer (testing/load.py `read_to_end`), the Kafka
path with a librdkafka consumer assigned to every partition (no group). MB are 10**6 bytes of
record values; each path is timed from its first send (or fetch) to its last acknowledgement
(or record).

    .venv/bin/python benchmarks/kafka_client_bench.py [--records 500000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.core.types import TopicPartition
from minikafka.testing.load import read_to_end
from minikafka.tools.perf import PerfSpec, run_produce_perf

TARGET_RATIO = 0.5
TIMEOUT_S = 300


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


async def create_topics(bootstrap: str, partitions: int) -> None:
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        for topic in ("bench-native", "bench-kafka"):
            await admin.create_topic(topic, partitions=partitions, replication_factor=2)


def native_produce(bootstrap: str, records: int, size: int) -> dict[str, Any]:
    spec = PerfSpec(topic="bench-native", num_records=records, record_size=size, max_s=TIMEOUT_S)
    report = trio.run(run_produce_perf, bootstrap, spec)
    return {"mb_per_s": float(report["mb_per_s"]), "seconds": float(report["elapsed_s"])}


def kafka_produce(bootstrap: str, records: int, size: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    value = os.urandom(size)
    errors: list[str] = []

    def report(err, _msg) -> None:  # noqa: ANN001
        if err is not None:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    producer.list_topics("bench-kafka", timeout=10)  # metadata first, as the native path has it
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce("bench-kafka", value=value, on_delivery=report)
                break
            except BufferError:  # the client's queue is full: let deliveries drain
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(TIMEOUT_S) != 0:
        raise RuntimeError(f"librdkafka still holds messages after {TIMEOUT_S} s")
    seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} deliveries failed, e.g. {errors[0]}")
    return {"mb_per_s": records * size / seconds / 1e6, "seconds": round(seconds, 3)}


def native_consume(bootstrap: str, partitions: int, size: int) -> dict[str, Any]:
    async def run() -> tuple[int, float]:
        async with open_client(bootstrap) as client:
            tps = [TopicPartition("bench-native", p) for p in range(partitions)]
            started = time.perf_counter()
            rows = await read_to_end(client, tps, timeout_s=TIMEOUT_S, max_wait_ms=100)
            return len(rows), time.perf_counter() - started

    count, seconds = trio.run(run)
    return {"records": count, "mb_per_s": count * size / seconds / 1e6, "seconds": seconds}


def kafka_consume(bootstrap: str, partitions: int, records: int, size: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaTP("bench-kafka", p, OFFSET_BEGINNING) for p in range(partitions)])
        count = 0
        started = time.perf_counter()
        deadline = started + TIMEOUT_S
        while count < records and time.perf_counter() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is None:
                    count += 1
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    return {"records": count, "mb_per_s": count * size / seconds / 1e6, "seconds": seconds}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="minikafka-kbench-") as tmp:
        spec = plan_cluster(base_dir=Path(tmp) / "c", brokers=3, seed=args.seed)
        with LocalCluster.up(spec, ready_timeout_s=30) as lc:
            trio.run(create_topics, lc.bootstrap(), args.partitions)
            kafka = lc.kafka_bootstrap()
            say(f"native produce: {args.records} records of {args.record_size} B")
            np = native_produce(lc.bootstrap(), args.records, args.record_size)
            say(f"Kafka produce (confluent-kafka) to {kafka}")
            kp = kafka_produce(kafka, args.records, args.record_size)
            say("native consume")
            nc = native_consume(lc.bootstrap(), args.partitions, args.record_size)
            say("Kafka consume (confluent-kafka)")
            kc = kafka_consume(kafka, args.partitions, args.records, args.record_size)
    from confluent_kafka import libversion

    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "librdkafka": libversion()[0],
        "produce": {"native": np, "kafka": kp, "ratio": kp["mb_per_s"] / np["mb_per_s"]},
        "consume": {"native": nc, "kafka": kc, "ratio": kc["mb_per_s"] / nc["mb_per_s"]},
        "target_ratio": TARGET_RATIO,
    }


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Kafka client bench {r['date']}: {r['records']} records x {r['record_size']} B, "
        f"{r['partitions']} partitions r=2, acks=all, librdkafka {r['librdkafka']}",
        f"{'':9}{'native MB/s':>12}{'Kafka MB/s':>12}{'Kafka/native':>14}  target >= {TARGET_RATIO}",
    ]
    for name in ("produce", "consume"):
        row = r[name]
        met = "met" if row["ratio"] >= TARGET_RATIO else "NOT met"
        lines.append(
            f"{name:9}{row['native']['mb_per_s']:12.1f}{row['kafka']['mb_per_s']:12.1f}"
            f"{row['ratio']:14.2f}  {met}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = run(args)
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
