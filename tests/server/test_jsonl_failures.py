"""A node's JSON-lines logs and its HW checkpoints survive a full disk.

`/dev/full` is a real file whose every write fails with ENOSPC, as a full disk's would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.server.config import NodeConfig
from minikafka.server.eventlog import EventLog
from minikafka.server.metrics import Metrics, run_metrics_log
from minikafka.server.partition_changes import PartitionChanges
from minikafka.server.produce import handle_produce
from minikafka.server.replica_state_log import run_replica_state_log
from minikafka.storage import StorageError
from minikafka.testing.memory_node import MemoryBroker, partition_state
from minikafka.wire.messages import ProducePartition, ProduceRequest

FULL = Path("/dev/full")
pytestmark = pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")


def full(tmp_path: Path, name: str) -> Path:
    """A node's log file on a full disk: the name a node gives it, the writes of /dev/full."""
    path = tmp_path / name
    path.symlink_to(FULL)
    return path


def test_events_that_cannot_be_written_are_counted_and_reported_once(tmp_path, capsys):
    metrics = Metrics()
    events = EventLog(full(tmp_path, "events.jsonl"), node_id=1, metrics=metrics)
    for i in range(3):
        events.emit("something", i=i)  # raises nothing
    assert events.counts == {"something": 3}
    assert metrics.counters["log_write_errors_events"] == 3
    err = capsys.readouterr().err
    assert err.count("cannot write") == 1 and "log_write_errors_events" in err
    events.close()


async def test_the_metrics_log_goes_on_when_its_file_cannot_be_written(autojump_clock, tmp_path):
    metrics = Metrics()
    with trio.move_on_after(5.5):
        await run_metrics_log(metrics, full(tmp_path, "metrics.jsonl"), node_id=1, interval_ms=1000)
    assert metrics.counters["log_write_errors_metrics"] == 5  # five snapshots, lost and counted


async def test_the_replica_state_log_goes_on_when_its_file_cannot_be_written(
    autojump_clock, tmp_path
):
    metrics = Metrics()
    path = full(tmp_path, "replicas.jsonl")
    with trio.move_on_after(3.5):
        await run_replica_state_log(
            {}, path, node_id=1, interval_ms=1000, changes=PartitionChanges(), metrics=metrics
        )
    assert metrics.counters["log_write_errors_replicas"] == 3


async def test_a_failed_hw_checkpoint_is_retried_and_logged(autojump_clock, tmp_path):
    config = NodeConfig(node_id=1, host="broker-1", port=9001)
    broker = MemoryBroker(config, tmp_path / "b1")
    tp = TopicPartition("t", 0)
    async with broker.running(), trio.open_nursery() as nursery:
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        real = broker.store.checkpoint
        calls: list[dict] = []

        def checkpoint(hws: dict) -> None:
            calls.append(dict(hws))
            if len(calls) == 1:
                raise StorageError("LMDB: [Errno 28] No space left on device")
            real(hws)

        broker.store.checkpoint = checkpoint  # type: ignore[method-assign]
        nursery.start_soon(lambda: broker.replica_manager.run_hw_checkpoints(interval_s=1.0))
        req = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            partitions=[
                ProducePartition(topic="t", partition=0, records=make_batch([(0, None, b"v")] * 3))
            ],
        )
        await handle_produce(broker.replica_manager, req, broker.topics)
        assert broker.partition("t").high_watermark == 3
        await trio.sleep(1.5)
        assert calls == [{tp: 3}] and broker.store.load_partition(tp).high_watermark == 0
        assert broker.events.counts["hw_checkpoint_failed"] == 1
        assert broker.metrics.counters["hw_checkpoint_failures"] == 1
        await trio.sleep(1.0)  # retried at the next interval
        assert calls == [{tp: 3}, {tp: 3}] and broker.store.load_partition(tp).high_watermark == 3
        nursery.cancel_scope.cancel()
