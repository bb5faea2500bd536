"""A consumer fetch over its client quota, as Kafka's KafkaApis.handleFetchRequest serves it since
KIP-219 (docs/throttling.md#client-quotas-kip-13-and-throttle-time-kip-219):

- the response's bytes are recorded into the client's fetch sensor; if that gives a throttle
  time, they are un-recorded (ClientQuotaManager.unrecordQuotaSensor: a record of minus the
  value) and the answer is EMPTY (`fetchContext.getThrottledResponse`: no partitions) with the
  throttle time, and the connection is muted for it;
- the fetch's max bytes are capped by what the quota window admits (KAFKA-9677,
  getMaxValueInQuotaWindow = quota x (N - 1) x W), and its min bytes by that cap.

Pure tables on core/quota/stats.py's Sensor and core/quota/sensors.py's ClientQuotas (no Trio), then the
shell on an in-memory broker with the autojump MockClock: the native listener and the Kafka
listener (server/kafka_apis.py, kio requests). The consumer side is in
test_client_quota.py (the position stays, every offset arrives once).
"""

from __future__ import annotations

import datetime

import pytest
import trio
from kio.schema.fetch.v11.request import FetchPartition as KFetchPartition
from kio.schema.fetch.v11.request import FetchRequest as KFetchRequest
from kio.schema.fetch.v11.request import FetchTopic
from kio.static.primitive import i32, i32Timedelta, i64

from minikafka.clock import now_ms
from minikafka.core.dynamic_config import CLIENTS, CONSUMER_BYTE_RATE
from minikafka.core.quota.sensors import ClientQuotas
from minikafka.core.quota.stats import MetricConfig, Rate, Sensor
from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.kafka.codec import KafkaRequest
from minikafka.server.config import NodeConfig
from minikafka.server.kafka_apis import KafkaApis
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import MemoryBroker, MemoryNetwork, partition_state
from minikafka.wire.messages import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
)

N, W_MS = 11, 1000  # quota.window.num, quota.window.size.seconds (Kafka's defaults)
BATCH = make_batch([(1_000, None, b"p" * 9_956)])
SIZE = len(BATCH)  # 10 003 B
# 20 batches are exactly what a fresh window admits: 20 x 10 003 B / 10 s = 20 006 B/s.
Q = 20 * SIZE * 1000 // ((N - 1) * W_MS)


# ---------------------------------------------------------------------------- pure


def test_unrecord_takes_a_record_back():
    """Sensor.unrecord (a record of minus the value, at the same now_ms) leaves the rate as if
    the record had never been made, while its sample lives; as in Kafka, that sample's last
    event time has moved, so it is purged later (N x W after the unrecord, not after its last
    real record)."""
    cfg = MetricConfig(samples=N, window_ms=W_MS, quota=1000.0)
    kept, twin = Sensor("a", Rate(cfg), cfg), Sensor("b", Rate(cfg), cfg)
    for s in (kept, twin):
        s.record(5000, 0)
        s.record(3000, 1500)
    twin.record(7000, 2300)
    twin.unrecord(7000, 2300)
    for t in (2300, 2999, 5000, 11_000, 12_499):
        assert twin.measure(t) == kept.measure(t), t
    # At 13 s the sample begun at 1.5 s is past N x W since 1.5 s but not since 2.3 s.
    assert (kept.measure(13_000), twin.measure(13_000)) == (0.0, 3000 * 1000 / 11_500)


@pytest.mark.parametrize(
    ("before", "response", "throttle", "kept"),
    [
        (0, 0, 0, 0),
        (9_000, 1_000, 0, 10_000),  # O = 10 000 B / 10 s = the bound: acceptable, kept
        (9_000, 1_001, 1, 9_000),  # O = 1 000.1 B/s -> round(0.0001 x 10 s) = 1 ms, taken back
        (10_000, 5_000, 5000, 10_000),  # O = 1 500 B/s -> 0.5 x 10 s
        (20_000, 0, 10_000, 20_000),  # already over: an empty response is throttled too
    ],
)
def test_a_throttled_fetch_keeps_only_its_throttle(before, response, throttle, kept):
    """ClientQuotas.record_and_throttle_fetch against a 1 000 B/s bound at t = 0 (a fresh
    window of 10 s): the throttle time is KIP-13's, computed WITH the response's bytes; when it
    is > 0 those bytes leave the sensor again, while a produce's (record_and_throttle) stay.
    The throttle time itself is recorded either way (ClientQuotaManager.throttle)."""
    fetch = ClientQuotas("fetch", samples=N, window_ms=W_MS)
    produce = ClientQuotas("produce", samples=N, window_ms=W_MS)
    for quotas in (fetch, produce):
        quotas.record_and_throttle("c", before, 1000.0, 0)
    assert fetch.record_and_throttle_fetch("c", response, 1000.0, 0) == throttle
    assert produce.record_and_throttle("c", response, 1000.0, 0) == throttle
    assert fetch.rates(0) == {"c": kept / 10}
    assert produce.rates(0) == {"c": (before + response) / 10}
    if throttle:
        assert fetch.throttle_time_max(0)["c"] == throttle


def test_unbounded_fetch_is_kept():
    quotas = ClientQuotas("fetch", samples=N, window_ms=W_MS)
    assert quotas.record_and_throttle_fetch("c", 10**9, None, 0) == 0
    assert quotas.rates(0) == {"c": 10**9 / 10}


@pytest.mark.parametrize(
    ("samples", "bound", "cap"),
    [
        (11, None, None),
        (11, 1000, 10_000),  # 1 000 B/s x 10 x 1 s
        (2, 100_000, 100_000),
        (1, 100_000, 0),  # no previous window: Kafka's (N - 1) is 0
        (11, 10**12, 2**31 - 1),  # Kafka's Double.toInt saturates
    ],
)
def test_max_value_in_quota_window(samples, bound, cap):
    quotas = ClientQuotas("fetch", samples=samples, window_ms=W_MS)
    assert quotas.max_value_in_quota_window(bound) == cap


# ---------------------------------------------------------------------------- shell


@pytest.fixture
async def broker(tmp_path):
    """Broker 1 leading t-0, 30 batches (300 090 B) in its log, consumer quota Q for "c"."""
    config = NodeConfig(node_id=1, host="b1", port=9001)
    b = MemoryBroker(config, tmp_path / "b1", network=MemoryNetwork())
    async with b.running():
        await b.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        request = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            partitions=[ProducePartition(topic="t", partition=0, records=BATCH)],
        )
        for _ in range(30):
            reply = await handle_produce(b.replica_manager, request, b.topics)
            assert reply.response.partitions[0].error_code == ErrorCode.NONE
        await b.writer.barrier()
        b.set_configs({(CLIENTS, "c"): {CONSUMER_BYTE_RATE: str(Q)}})
        yield b


def native_fetch(offset: int, min_bytes: int = 1) -> FetchRequest:
    """Everything from `offset`, waiting up to 5 s for `min_bytes` of it."""
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=5000,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        partitions=[
            FetchPartition(topic="t", partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        ],
    )


async def test_native_fetch_is_capped_by_the_quota_window_then_answered_empty(
    autojump_clock, broker
):
    """The first fetch carries what the window admits (20 batches, not the 30 there), at once
    (min bytes capped too, not after the 5 s wait); the second is over the bound: empty, its
    bytes un-recorded, the connection muted for the throttle; the data comes once it fits."""
    async with broker.network.connect(*broker.address, client_id="c") as conn:
        first = await conn.request(native_fetch(0, min_bytes=1 << 20))
        assert isinstance(first, FetchResponse) and first.throttle_time_ms == 0
        assert trio.current_time() == 0
        assert [b.base_offset for b in iter_batches(first.partitions[0].records)] == list(range(20))
        second = await conn.request(native_fetch(20))
        # The 10 batches left: O = 30 x 10 003 B / 10 s = 1.5 Q -> X = 0.5 x 10 s.
        assert isinstance(second, FetchResponse)
        assert (second.partitions, second.throttle_time_ms) == ([], 5_000)
        assert broker.replica_manager.fetch_quotas.rates(now_ms()) == {"c": Q}  # 20 batches
        assert broker.metrics.snapshot()["bytes_out"] == 20 * SIZE
        # The Connection waits each throttle out and asks again from offset 20. A fresh Rate's
        # window stays 10 s up to 10 s (padded to N - 1 whole windows: core/quota/stats.py), so at 5 s
        # and 10 s the same 10 batches are over the bound again; at 15 s they fit (30 batches
        # over 15 s = Q), and come.
        throttles = []
        while (again := await conn.request(native_fetch(20))).throttle_time_ms:
            assert isinstance(again, FetchResponse) and again.partitions == []
            throttles.append((trio.current_time(), again.throttle_time_ms))
        assert throttles == [(5, 5_000), (10, 5_000)]
        assert trio.current_time() == 15
        assert [b.base_offset for b in iter_batches(again.partitions[0].records)] == list(
            range(20, 30)
        )


def kafka_fetch(offset: int, min_bytes: int = 1) -> KFetchRequest:
    part = KFetchPartition(
        partition=i32(0),
        current_leader_epoch=i32(-1),
        fetch_offset=i64(offset),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(1 << 20),
    )
    return KFetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        min_bytes=i32(min_bytes),
        topics=(FetchTopic(topic="t", partitions=(part,)),),
        forgotten_topics_data=(),
    )


async def test_kafka_listener_fetch_over_the_quota_is_answered_empty(autojump_clock, broker):
    """The same on the Kafka listener: the quota-window cap (20 of 30 batches, at once), then a
    Fetch v11 over the bound (the 10 batches left, O = 1.5 Q) answered with no topic at all and
    throttle_time 5 s, the Reply muting the connection that long."""
    apis = KafkaApis(
        cache=broker.broker.cache,
        cluster_id="c",
        broker=broker.broker.dispatch,
        run_sync=trio.to_thread.run_sync,
    )

    def header(correlation_id: int) -> KafkaRequest:
        return KafkaRequest(
            api_key=1, api_version=11, correlation_id=correlation_id, client_id="c", body=None
        )

    first = await apis.dispatch(header(1), kafka_fetch(0, min_bytes=1 << 20))
    assert trio.current_time() == 0 and first.throttle_ms == 0
    [topic] = first.response.responses
    [part] = topic.partitions
    assert [b.base_offset for b in iter_batches(part.records)] == list(range(20))
    second = await apis.dispatch(header(2), kafka_fetch(20))
    assert second.throttle_ms == 5_000
    assert second.response.responses == ()
    assert second.response.throttle_time == datetime.timedelta(seconds=5)
    assert int(second.response.error_code) == ErrorCode.NONE
    assert broker.replica_manager.fetch_quotas.rates(now_ms()) == {"c": Q}
