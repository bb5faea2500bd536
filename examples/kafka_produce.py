"""Produce with Kafka's own client (confluent-kafka, librdkafka) to a minikafka cluster.

    .venv/bin/python examples/kafka_produce.py BOOTSTRAP [TOPIC] [COUNT]

BOOTSTRAP is the "Kafka clients: bootstrap.servers=..." line of `minikafka cluster up`.
acks=all and idempotence on; prints where the records went.
"""

from __future__ import annotations

import sys
from collections import Counter

from confluent_kafka import Producer


def main() -> int:
    bootstrap = sys.argv[1]
    topic = sys.argv[2] if len(sys.argv) > 2 else "orders"
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    delivered: Counter[int] = Counter()
    failed: list[str] = []

    def report(err, msg) -> None:  # noqa: ANN001 - librdkafka's callback
        if err is not None:
            failed.append(str(err))
        else:
            delivered[msg.partition()] += 1

    for i in range(count):
        producer.produce(topic, key=f"customer-{i % 100}", value=f"order {i}", on_delivery=report)
        producer.poll(0)
    left = producer.flush(30)
    print(f"delivered {sum(delivered.values())} of {count} to {topic}, {left} undelivered")
    for partition, n in sorted(delivered.items()):
        print(f"  partition {partition}: {n}")
    if failed:
        print(f"failed: {failed[:3]}")
    return 0 if not failed and not left else 1


if __name__ == "__main__":
    sys.exit(main())
