"""The vocabulary every layer shares, on the lowest floor with `minikafka.errors`: a topic's
partition and Kafka's sentinels (as Kafka keeps TopicPartition in org.apache.kafka.common).
The wire, the core, the shell and the clients all name partitions and sentinels the same way,
and none of them has to import another to do so (tests/repo/test_layering.py, the floor table)."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# (leader_epoch, start_offset) entries of a leader-epoch cache, ascending in both.
EpochEntry = tuple[int, int]

# Kafka's sentinels, one definition each: the wire, the controller and the log share them.
# A leader epoch nobody knows (RecordBatch.NO_PARTITION_LEADER_EPOCH, LeaderAndIsr's -1): a
# fetcher that sends it skips the epoch fencing.
UNDEFINED_EPOCH = -1
# A partition without a leader (LeaderAndIsr.NO_LEADER, MetadataResponse's -1).
NO_LEADER = -1
UNDEFINED_OFFSET = -1
