"""Kafka's own client against minikafka's Kafka listener, beside minikafka's native client, in the
same run on the same cluster (the performance check: the Kafka path at least 0.5 x the
native MB/s).

A local cluster (controller + 3 brokers, log.sync on); topics of `--partitions` partitions at
replication factor 2, one per path and producer configuration. Produce: `--records` records of
`--record-size` random bytes with acks=all, twice: with the clients' default idempotence (off in
librdkafka, which "the client's default batching" leaves as the client ships it; the
native producer told the same) and with idempotence on both paths (minikafka's producer has it
on by default with acks=all, as Kafka's Java producer). The native path goes through
tools/perf.py (its default batching: 100 kB batches, 8 requests in flight), the Kafka path
through confluent-kafka (librdkafka) with the client's default batching (linger.ms 5, batch.size
1 MB; with idempotence librdkafka allows 5 requests in flight per connection). Consume: every
record of the first produce back from the start, the native path with minikafka's consumer
(testing/load.py `read_to_end`), the Kafka path with a librdkafka consumer assigned to every
partition (no group). MB are 10**6 bytes of record values; each path is timed from its first
send (or fetch) to its last acknowledgement (or record). Beside the rates, the CPU each path cost
per MB, the three brokers' and the client process's (librdkafka's threads included), from /proc:
on a machine of few cores the client and the brokers share them, so a client that costs more CPU
per MB leaves less to the brokers. The Kafka producer asks for failed deliveries only
(`delivery.report.only.error`, its callback set once in the config rather than passed with every
record: 0.57 against 0.83 us per produce() call, measured with the records only queued) and
polls every 1,000 records; the Kafka consumer pauses 10 ms, not librdkafka's 1 s, when its local
queue is full (`fetch.queue.backoff.ms`, see kafka_consume).

    .venv/bin/python benchmarks/kafka_client_bench.py [--records 1000000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.common import TopicPartition
from minikafka.testing.load import read_to_end
from minikafka.tools.perf import PerfSpec, run_produce_perf

TARGET_RATIO = 0.5
TIMEOUT_S = 300


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


TOPICS = ("bench-native", "bench-kafka", "bench-native-idempotent", "bench-kafka-idempotent")


async def create_topics(bootstrap: str, partitions: int) -> None:
    async with open_client(bootstrap) as client:
        admin = Admin(client)
        for topic in TOPICS:
            await admin.create_topic(topic, partitions=partitions, replication_factor=2)


def native_produce(
    bootstrap: str, records: int, size: int, *, idempotence: bool, topic: str
) -> dict[str, Any]:
    spec = PerfSpec(
        topic=topic,
        num_records=records,
        record_size=size,
        idempotence=idempotence,
        max_s=TIMEOUT_S,
    )
    report = trio.run(run_produce_perf, bootstrap, spec)
    assert report["idempotence"] is idempotence, report
    return {"mb_per_s": float(report["mb_per_s"]), "seconds": float(report["elapsed_s"])}


def kafka_produce(
    bootstrap: str, records: int, size: int, *, idempotence: bool, topic: str
) -> dict[str, Any]:
    from confluent_kafka import Producer

    value = os.urandom(size)
    errors: list[str] = []

    def report(err, _msg) -> None:  # noqa: ANN001
        if err is not None:
            errors.append(str(err))

    config = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "delivery.report.only.error": True,
        "on_delivery": report,
    }
    if idempotence:  # else librdkafka's default (off)
        config["enable.idempotence"] = True
    producer = Producer(config)
    producer.list_topics(topic, timeout=10)  # metadata first, as the native path has it
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value)
                break
            except BufferError:  # the client's queue is full: let deliveries drain
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)  # serve delivery reports (only failures: see the config)
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
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException
    from confluent_kafka import TopicPartition as KafkaTP

    # librdkafka stops fetching for `fetch.queue.backoff.ms` (1 s by default) whenever its
    # local queue holds `queued.min.messages` (100,000): a reader that drains that in 0.1 s
    # then idles 0.9 s of every second (measured: 14.6 MB/s at the default, 92 MB/s at 10 ms,
    # with the brokers' answers 5 ms apart in both). The client's pause, not the broker's:
    # set short here so the figure is the Kafka listener's.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
         "fetch.queue.backoff.ms": 10}
    )  # fmt: skip
    try:
        # confluent-kafka requires a group.id even for assigned partitions, and librdkafka then
        # looks for the group's coordinator: the cluster's first FindCoordinator creates
        # __consumer_offsets (50 partitions x 3 replicas). Done before the clock starts, by
        # asking for the group's committed offsets until the coordinator answers.
        tps = [KafkaTP("bench-kafka", p) for p in range(partitions)]
        ready_by = time.monotonic() + 60
        while True:
            try:
                consumer.committed(tps, timeout=5)
                break
            except KafkaException:
                if time.monotonic() > ready_by:
                    raise
                time.sleep(0.5)
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


def cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + system) of a process: this one (every thread: librdkafka's too) or
    `pid` (a broker), from /proc."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(lc: LocalCluster, fn: Any, megabytes: float) -> dict[str, Any]:
    """`fn()`'s result with the CPU it cost per MB: the brokers' and this process's."""
    pids = [n.node_id for n in lc.spec.brokers]
    brokers0, client0 = sum(cpu_s(lc.pid(i)) for i in pids), cpu_s()
    result = fn()
    brokers = sum(cpu_s(lc.pid(i)) for i in pids) - brokers0
    client = cpu_s() - client0
    result["broker_cpu_ms_per_mb"] = round(brokers * 1000 / megabytes, 1)
    result["client_cpu_ms_per_mb"] = round(client * 1000 / megabytes, 1)
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="minikafka-kbench-") as tmp:
        spec = plan_cluster(base_dir=Path(tmp) / "c", brokers=3, seed=args.seed)
        with LocalCluster.up(spec, ready_timeout_s=30) as lc:
            trio.run(create_topics, lc.bootstrap(), args.partitions)
            kafka = lc.kafka_bootstrap()
            mb = args.records * args.record_size / 1e6
            produce: dict[str, Any] = {}
            for idempotence, suffix in ((False, ""), (True, "-idempotent")):
                say(f"native produce{suffix}: {args.records} records of {args.record_size} B")
                common = dict(records=args.records, size=args.record_size, idempotence=idempotence)
                np = measured(
                    lc,
                    partial(
                        native_produce, lc.bootstrap(), topic=f"bench-native{suffix}", **common
                    ),
                    mb,
                )
                say(f"Kafka produce{suffix} (confluent-kafka) to {kafka}")
                kp = measured(
                    lc, partial(kafka_produce, kafka, topic=f"bench-kafka{suffix}", **common), mb
                )
                produce[f"produce{suffix}"] = {
                    "idempotence": idempotence,
                    "native": np,
                    "kafka": kp,
                    "ratio": kp["mb_per_s"] / np["mb_per_s"],
                }
            say("native consume")
            nc = measured(
                lc, lambda: native_consume(lc.bootstrap(), args.partitions, args.record_size), mb
            )
            say("Kafka consume (confluent-kafka)")
            kc = measured(
                lc,
                lambda: kafka_consume(kafka, args.partitions, args.records, args.record_size),
                mb,
            )
    from confluent_kafka import libversion

    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "librdkafka": libversion()[0],
        **produce,
        "consume": {"native": nc, "kafka": kc, "ratio": kc["mb_per_s"] / nc["mb_per_s"]},
        "target_ratio": TARGET_RATIO,
    }


ROWS = (  # (key, label, judged against the target)
    ("produce", "produce", True),
    ("produce-idempotent", "produce, idempotent", False),
    ("consume", "consume", True),
)


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Kafka client bench {r['date']}: {r['records']} records x {r['record_size']} B, "
        f"{r['partitions']} partitions r=2, acks=all, librdkafka {r['librdkafka']}",
        f"{'':20}{'native MB/s':>12}{'Kafka MB/s':>12}{'Kafka/native':>14}"
        f"  target >= {TARGET_RATIO}",
    ]
    for key, label, judged in ROWS:
        row = r[key]
        met = ("met" if row["ratio"] >= TARGET_RATIO else "NOT met") if judged else "(reported)"
        lines.append(
            f"{label:20}{row['native']['mb_per_s']:12.1f}{row['kafka']['mb_per_s']:12.1f}"
            f"{row['ratio']:14.2f}  {met}"
        )
    lines.append(f"{'CPU ms per MB':20}native: brokers  client     Kafka: brokers  client")
    for key, label, _judged in ROWS:
        n, k = r[key]["native"], r[key]["kafka"]
        lines.append(
            f"{label:20}{n['broker_cpu_ms_per_mb']:15.1f}{n['client_cpu_ms_per_mb']:8.1f}"
            f"{k['broker_cpu_ms_per_mb']:18.1f}{k['client_cpu_ms_per_mb']:8.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
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
