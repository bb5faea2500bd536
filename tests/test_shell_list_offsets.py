"""ListOffsets LATEST: a consumer sees the high watermark, Kafka's DEBUGGING_REPLICA_ID (what
`topics describe` sends for its LEO column) the leader's log end offset; EARLIEST the log start.
On broker 1 in process (minikafka/testing/memory_node.py) under the autojump MockClock."""

from __future__ import annotations

from minikafka.core.records import make_batch
from minikafka.server.config import NodeConfig
from minikafka.server.fetch_serve import handle_list_offsets
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MemoryBroker, partition_state
from minikafka.wire.messages import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ProducePartition,
    ProduceRequest,
)


def _offset(broker: MemoryBroker, timestamp: int, replica_id: int) -> int:
    req = ListOffsetsRequest(
        partitions=[ListOffsetsPartition(topic="t", partition=0, timestamp=timestamp)],
        replica_id=replica_id,
    )
    [answer] = handle_list_offsets(broker.replica_manager, req, broker.topics).partitions
    assert answer.error_code == 0
    return answer.offset


async def test_latest_is_the_hw_for_consumers_and_the_leo_for_debugging(autojump_clock, tmp_path):
    broker = MemoryBroker(NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1")
    async with broker.running():
        # ISR {1, 2}: follower 2 never fetches, so the HW stays at 0 while the LEO moves.
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        batch = make_batch([(1000 + i, None, b"v") for i in range(4)])
        req = ProduceRequest(
            acks=1, timeout_ms=1000,
            partitions=[ProducePartition(topic="t", partition=0, records=batch)],
        )  # fmt: skip
        await handle_produce(broker.replica_manager, req, broker.topics)
        p = broker.partition("t")
        assert (p.high_watermark, p.log_end_offset) == (0, 4)
        assert _offset(broker, LATEST_TIMESTAMP, CONSUMER_REPLICA_ID) == 0
        assert _offset(broker, LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == 4
        assert _offset(broker, EARLIEST_TIMESTAMP, DEBUGGING_REPLICA_ID) == 0
