"""Replica assignment for new topics: Kafka's rack-unaware placement, exactly.

Mirrors `kafka.admin.AdminUtils.assignReplicasToBrokers` /
`assignReplicasToBrokersRackUnaware` (the ZooKeeper-era placer, still the reference for the
classic layout). The brokers are sorted by id; the first replica of partition p is broker
`(p + startIndex) % n`, so leaders go round-robin; the followers are placed at an offset
`1 + (nextReplicaShift + j) % (n - 1)` from the first replica, and `nextReplicaShift` grows by
one every time the partition id wraps around the broker list, so that the followers of a
broker's leaderships are spread over the other brokers too.

`startIndex` and `nextReplicaShift` are drawn from the caller's `random.Random` (two draws,
in Kafka's order) unless `fixed_start_index` pins both, as Kafka's tests do.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from minikafka.errors import ConfigError, ErrorCode


class AssignmentError(ConfigError):
    """The requested assignment is impossible; `code` is the CreateTopics error to answer with.

    Kafka throws InvalidPartitionsException / InvalidReplicationFactorException here.
    """

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def assign_replicas(
    broker_ids: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
) -> list[list[int]]:
    """Replicas of partitions `max(0, start_partition_id) ...`, one list per partition.

    The first replica of each list is the preferred leader. Raises AssignmentError (a
    ConfigError, so a ValueError) with Kafka's messages when the request cannot be met.
    """
    if num_partitions <= 0:
        raise AssignmentError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise AssignmentError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    brokers = sorted(broker_ids)
    if len(set(brokers)) != len(brokers):
        raise AssignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Broker ids must be unique, got {brokers}."
        )
    n = len(brokers)
    if replication_factor > n:
        raise AssignmentError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {n}.",
        )
    # Kafka: `rand.nextInt(brokerArray.length)` twice, start index first.
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    result: list[list[int]] = []
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        result.append(replicas)
        partition_id += 1
    return result


def _replica_index(first_replica_index: int, shift: int, j: int, n: int) -> int:
    # AdminUtils.replicaIndex: never 0 away from the first replica, so never a duplicate.
    return (first_replica_index + 1 + (shift + j) % (n - 1)) % n
