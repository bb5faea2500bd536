"""Consume in a consumer group with Kafka's own client (kafka-python) from a minikafka cluster.

    .venv/bin/python examples/kafka_group_consume.py BOOTSTRAP [TOPIC] [GROUP] [SECONDS]

Run it twice at once: the two members share the topic's partitions. Each commits after every
batch it read, and reads until SECONDS pass with nothing new; run it again and it resumes from
the group's committed offsets.
"""

from __future__ import annotations

import sys
import time

from kafka import KafkaConsumer


def main() -> int:
    bootstrap = sys.argv[1]
    topic = sys.argv[2] if len(sys.argv) > 2 else "orders"
    group = sys.argv[3] if len(sys.argv) > 3 else "order-readers"
    quiet_s = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.subscribe([topic])
    # Joining takes a few seconds: the first FindCoordinator creates __consumer_offsets, and
    # the coordinator waits group.initial.rebalance.delay.ms (3 s) for more members.
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=500, max_records=1, update_offsets=False)
    read, last_new = 0, time.monotonic()
    first: dict[int, int] = {}
    while time.monotonic() - last_new < quiet_s:
        polled = consumer.poll(timeout_ms=500)
        for tp, messages in polled.items():
            first.setdefault(tp.partition, messages[0].offset)
            read += len(messages)
            last_new = time.monotonic()
        if polled:
            consumer.commit()
    assigned = sorted(tp.partition for tp in consumer.assignment())
    committed = {p: consumer.committed(tp) for tp in consumer.assignment() for p in [tp.partition]}
    print(f"group {group}: read {read} records from partitions {assigned}")
    for p in assigned:
        print(f"  partition {p}: started at offset {first.get(p, '-')}, committed {committed[p]}")
    consumer.close(autocommit=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
