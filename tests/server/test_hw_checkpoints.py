"""The HW checkpoints (server/replica_manager.py `run_hw_checkpoints`) look only at partitions
whose machine reported a change; the full-disk retry is in test_jsonl_failures."""

from __future__ import annotations

import trio

from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.server.config import NodeConfig
from minikafka.storage import AppendWrite
from minikafka.testing.memory_node import MemoryBroker, partition_state


async def test_a_followers_hw_moved_by_a_fetch_answer_alone_is_checkpointed(
    autojump_clock, tmp_path
):
    """The checkpoints look only at partitions whose machine reported a change. A
    follower's last HW step comes in a fetch answer without records (the leader's HW moved after
    our append), outside the log writer's commits: the machine's notice must cover it."""
    config = NodeConfig(node_id=1, host="broker-1", port=9001)
    broker = MemoryBroker(config, tmp_path / "b1")
    tp = TopicPartition("t", 0)
    async with broker.running(), trio.open_nursery() as nursery:
        await broker.apply([partition_state("t", 0, leader=2, isr=[1, 2], replicas=[1, 2])])
        writer = broker.replica_manager.writer
        batch = make_batch([(0, None, b"v")] * 3, leader_epoch=1)
        await writer.append_each([AppendWrite(tp=tp, batches=[batch], high_watermark=0)])
        nursery.start_soon(lambda: broker.replica_manager.run_hw_checkpoints(interval_s=1.0))
        await trio.sleep(1.5)  # the append's round: the HW is still 0
        broker.partition("t").replica.on_leader_high_watermark(3)  # an empty answer, HW 3
        await trio.sleep(1.0)
        assert broker.store.load_partition(tp).high_watermark == 3
        nursery.cancel_scope.cancel()
