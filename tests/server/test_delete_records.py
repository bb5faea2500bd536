"""DeleteRecords on the leader (server/delete_records.py, KIP-107), two brokers in process on
real LogStores under the autojump MockClock: broker 1 leads t-0 with replicas {1, 2}, broker 2
follows with its replica fetcher over memory streams. Batches of 3 records sit at 0, 3 and 6."""

from __future__ import annotations

import trio

from minikafka.core.log_config import LogConfig
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.delete_records import handle_delete_records
from minikafka.server.list_offsets import handle_list_offsets
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MemoryBroker, partition_state, wait_until
from minikafka.wire.messages import (
    EARLIEST_TIMESTAMP,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ProducePartition,
    ProduceRequest,
)

ALIVE = {1, 2}
DELETE = LogConfig()  # cleanup.policy=delete


async def filled(a: MemoryBroker, b: MemoryBroker, *, topic: str = "t") -> None:
    state = partition_state(topic, 0, leader=1, isr=[1, 2], replicas=[1, 2])
    await a.apply([state], [a.info, b.info])
    await b.apply([state], [a.info, b.info])
    for i in range(3):
        blob = make_batch([(1000, None, f"v{i}-{k}".encode()) for k in range(3)])
        req = ProduceRequest(acks=-1, timeout_ms=5000, partitions=[
            ProducePartition(topic=topic, partition=0, records=blob)])  # fmt: skip
        resp = (await handle_produce(a.replica_manager, req, a.topics)).response
        assert resp.partitions[0].error_code == ErrorCode.NONE
    await wait_until(lambda: b.partition(topic).high_watermark == 9)


async def delete(
    a: MemoryBroker, offset: int, *, topic: str = "t", timeout_ms: int = 5000, alive=ALIVE,
    config: LogConfig = DELETE,
) -> DeleteRecordsResponse:  # fmt: skip
    req = DeleteRecordsRequest(
        partitions=[DeleteRecordsPartition(topic=topic, partition=0, offset=offset)],
        timeout_ms=timeout_ms,
    )
    return await handle_delete_records(
        a.replica_manager, req, a.topics, alive=lambda: alive, log_config=lambda _t: config
    )


async def earliest(a: MemoryBroker) -> int:
    req = ListOffsetsRequest(
        partitions=[ListOffsetsPartition(topic="t", partition=0, timestamp=EARLIEST_TIMESTAMP)]
    )
    (answer,) = (await handle_list_offsets(a.replica_manager, req, a.topics)).partitions
    return answer.offset


async def test_the_log_start_moves_on_every_replica_before_the_answer(autojump_clock, pair):
    a, b = pair
    await filled(a, b)
    (answer,) = (await delete(a, 3)).partitions
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.NONE, 3)
    assert a.partition("t").log_start_offset == b.partition("t").log_start_offset == 3
    assert await earliest(a) == 3
    # persisted on both: a restart would load it there
    for broker in (a, b):
        assert broker.store.load_partition(a.partition("t").tp).log_start_offset == 3
    # -1 is the high watermark: everything goes
    (answer,) = (await delete(a, -1)).partitions
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.NONE, 9)
    assert a.log_bytes("t") == b.log_bytes("t") == b""


async def test_an_offset_past_the_high_watermark_is_out_of_range_and_changes_nothing(
    autojump_clock, pair
):
    a, b = pair
    await filled(a, b)
    (answer,) = (await delete(a, 10)).partitions
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert a.partition("t").log_start_offset == 0


async def test_a_live_follower_that_does_not_follow_makes_it_time_out(autojump_clock, pair):
    """Broker 2 stops fetching but is still alive in the metadata: the low watermark waits for
    it until the request's timeout (DelayedDeleteRecords), then REQUEST_TIMED_OUT."""
    a, b = pair
    await filled(a, b)
    b.replica_manager.fetchers.remove([b.partition("t").tp])
    before = trio.current_time()
    (answer,) = (await delete(a, 3, timeout_ms=2000)).partitions
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, 0)
    assert trio.current_time() - before >= 2.0 - 1e-9
    assert a.partition("t").log_start_offset == 3  # the leader's moved all the same
    # a follower on a broker that is not alive is not waited for
    (answer,) = (await delete(a, 3, alive={1})).partitions
    assert (answer.error_code, answer.low_watermark) == (ErrorCode.NONE, 3)


async def test_refusals_as_kafka_answers_them(autojump_clock, pair):
    a, b = pair
    await filled(a, b)
    (answer,) = (await delete(a, 3, config=LogConfig(cleanup_policy="compact"))).partitions
    assert answer.error_code == ErrorCode.POLICY_VIOLATION
    (answer,) = (await delete(b, 3)).partitions  # not the leader
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    (answer,) = (await delete(a, 3, topic="nope")).partitions
    assert answer.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
