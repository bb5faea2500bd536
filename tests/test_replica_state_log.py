"""replicas.jsonl rows (minikafka/server/replica_state_log.py): only replicas the controller has
given a state, since the checker refuses a sample without a leader epoch."""

from __future__ import annotations

from minikafka.core.types import TopicPartition
from minikafka.server.local_partition import LocalPartition
from minikafka.server.replica_state_log import replica_rows
from minikafka.storage.log_store import LoadedPartition
from minikafka.testing.memory_node import partition_state


def _partition(p: int) -> LocalPartition:
    return LocalPartition(
        LoadedPartition(
            tp=TopicPartition("exp", p), log_start_offset=0, log_end_offset=5, high_watermark=5,
            epochs=[],
        ),
        local_id=1, lag_max_ms=30_000,
    )  # fmt: skip


def test_a_replica_still_waiting_for_its_leader_and_isr_has_no_row() -> None:
    follower, pending = _partition(0), _partition(1)
    follower.replica.begin_following(
        partition_state("exp", 0, leader=2, isr=[1, 2], leader_epoch=3)
    )
    assert replica_rows([follower, pending]) == [["exp", 0, 3, False, 5, 5, None]]
