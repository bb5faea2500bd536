"""OffsetForLeaderEpoch on an in-process broker (server/offset_for_leader_epoch.py) under the
autojump MockClock: the leader's epoch cache answers where each epoch ends (KIP-320), a stale
current epoch is fenced, and ListOffsets EARLIEST names the first cached epoch."""

from __future__ import annotations

from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.fetch_serve import handle_fetch, handle_list_offsets
from minikafka.server.offset_for_leader_epoch import handle_offset_for_leader_epoch
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MemoryBroker, partition_state
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    ProducePartition,
    ProduceRequest,
)


async def _produce(broker: MemoryBroker, n: int) -> None:
    batch = make_batch([(1000 + i, None, b"v") for i in range(n)])
    req = ProduceRequest(
        acks=1, timeout_ms=1000,
        partitions=[ProducePartition(topic="t", partition=0, records=batch)],
    )  # fmt: skip
    await handle_produce(broker.replica_manager, req, broker.topics)


async def test_the_leader_answers_from_its_epoch_cache(autojump_clock, tmp_path):
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], leader_epoch=1)])
        await _produce(broker, 4)
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], leader_epoch=3)])
        await _produce(broker, 2)
        assert broker.partition("t").epochs == [(1, 0), (3, 4)]

        def ask(*parts: tuple[str, int, int]):  # (topic, current epoch, asked epoch)
            req = OffsetForLeaderEpochRequest(
                replica_id=CONSUMER_REPLICA_ID,
                partitions=[
                    OffsetForLeaderEpochPartition(
                        topic=t, partition=0, current_leader_epoch=cur, leader_epoch=e
                    )
                    for t, cur, e in parts
                ],
            )
            resp = handle_offset_for_leader_epoch(
                broker.replica_manager.partitions, req, broker.topics
            )
            return [(p.error_code, p.leader_epoch, p.end_offset) for p in resp.partitions]

        assert ask(("t", 3, 1), ("t", 3, 3), ("t", -1, 2), ("t", 3, 4)) == [
            (ErrorCode.NONE, 1, 4),
            (ErrorCode.NONE, 3, 6),  # the current epoch ends at the log end
            (ErrorCode.NONE, 1, 4),  # never had epoch 2: epoch 1's end
            (ErrorCode.NONE, -1, -1),  # above every epoch known
        ]
        assert ask(("t", 1, 1), ("t", 4, 1), ("nope", -1, 1)) == [
            (ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
            (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
            (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]

        req = ListOffsetsRequest(
            partitions=[
                ListOffsetsPartition(topic="t", partition=0, timestamp=EARLIEST_TIMESTAMP),
                ListOffsetsPartition(topic="t", partition=0, timestamp=LATEST_TIMESTAMP),
                ListOffsetsPartition(topic="t", partition=0, timestamp=1002),
            ]
        )
        resp = await handle_list_offsets(broker.replica_manager, req, broker.topics)
        # EARLIEST: the first cached epoch; LATEST: the leader's; by time: the record's batch's.
        assert [(p.offset, p.leader_epoch) for p in resp.partitions] == [(0, 1), (6, 3), (2, 1)]


async def test_a_consumers_fetch_is_fenced_by_its_current_leader_epoch(autojump_clock, tmp_path):
    """KIP-320: a consumer's Fetch (v9+ on the Kafka listener) names the leader epoch it knows;
    the leader answers FENCED_LEADER_EPOCH to an older one, UNKNOWN_LEADER_EPOCH to a newer one
    (Partition.localLogWithEpochOrThrow), and reads for the same one or none (-1)."""
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], leader_epoch=3)])
        await _produce(broker, 2)

        async def code(current: int) -> int:
            req = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                partitions=[FetchPartition(topic="t", partition=0, fetch_offset=0,
                                           partition_max_bytes=1 << 20,
                                           current_leader_epoch=current)],
            )  # fmt: skip
            reply = await handle_fetch(broker.replica_manager, req, broker.topics)
            [p] = reply.response.partitions
            return p.error_code

        assert await code(2) == ErrorCode.FENCED_LEADER_EPOCH
        assert await code(4) == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert await code(3) == ErrorCode.NONE
        assert await code(-1) == ErrorCode.NONE
