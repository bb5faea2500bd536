"""Client quotas (KIP-13, KIP-219) in the shell: producer_byte_rate and consumer_byte_rate.

Broker 1 (minikafka/testing/memory_node.py) leads t-0 with ISR {1}; clients reach it over memory
streams with their own client ids, so the quota is looked up exactly as on a real node (client id
from the request header, the client's own entry over the default client's). The autojump
MockClock measures the waits; storage calls run inline.

The arithmetic (core/quota/stats.py, docs/throttling.md#client-quotas-kip-13-and-throttle-time-kip-219):
client sensors are Rates over N = 11 windows of W = 1 s. A fresh sensor is measured as if the
N - 1 previous windows had been empty: at elapsed 0 its window is (N - 1) * W = 10 s, so a
client may send 10 s worth of its quota Q at once before the measured rate O = bytes / 10 s
exceeds Q. The throttle time is then X = round((O - Q) / Q * window_ms) (KIP-13's
O * W / (W + X) = Q). Since KIP-219 the answer goes out at once, carrying X; the broker mutes
the connection for X and the client's Connection sends nothing more to that broker for X
either. A throttled produce is appended; a throttled fetch is answered empty and its bytes
un-recorded (KafkaApis.handleFetchRequest), and the consumer fetches the same offset again
after X. Clients that pipeline and do not wait are in test_client_quota_pipelining.py.

Ported from Kafka's ClientQuotaManagerTest / BaseQuotaTest stories: throttled only once over
the quota, throttle time as computed, default and per-client quotas, replication exempt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
import trio

from minikafka.clock import now_ms
from minikafka.core.dynamic_config import CLIENTS, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from minikafka.core.quota.stats import throttle_time_ms
from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    wait_until,
)
from minikafka.wire.messages import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)

Q = 100_000  # B/s
N, W_MS = 11, 1000  # quota.window.num, quota.window.size.seconds * 1000 (Kafka's defaults)
BATCH = make_batch([(1_000, None, b"p" * 9_956)])
SIZE = len(BATCH)  # 10 003 B
FRESH_WINDOW_MS = (N - 1) * W_MS  # a fresh Rate's window at elapsed 0


# LMDB calls run inline (tests/conftest.py).


def node_config(node_id: int) -> NodeConfig:
    return NodeConfig(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replica_fetch_backoff_ms=100,
        replica_fetch_wait_max_ms=100,
    )


@pytest.fixture
async def cluster(tmp_path):
    """Broker 1 leading t-0 (replicas {1, 2}, ISR {1}); broker 2 built but not following."""
    network = MemoryNetwork()
    a = MemoryBroker(node_config(1), tmp_path / "a", network=network)
    b = MemoryBroker(node_config(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        await a.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2])])
        yield a, b


@dataclass(frozen=True, slots=True)
class Exchange:
    sent_s: float  # when request() was called; the Connection may then wait for a throttle
    answered_s: float
    throttle_ms: int
    nbytes: int

    @property
    def delay_ms(self) -> float:
        return (self.answered_s - self.sent_s) * 1000

    @property
    def throttled_until_s(self) -> float:
        return self.answered_s + self.throttle_ms / 1000


def produce_request() -> ProduceRequest:
    return ProduceRequest(
        acks=1,
        timeout_ms=1000,
        partitions=[ProducePartition(topic="t", partition=0, records=BATCH)],
    )


def consumer_fetch(offset: int, *, replica_id: int = -1) -> FetchRequest:
    """One batch per fetch: the partition cap is below two batches (KIP-74)."""
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            FetchPartition(
                topic="t", partition=0, fetch_offset=offset, partition_max_bytes=SIZE + 100
            )
        ],
    )


async def run_client(
    exchange: Callable[[], Awaitable[tuple[int, int]]],
    *,
    until: Callable[[list[Exchange]], bool],
    gap_s: float = 0.0,
) -> list[Exchange]:
    """Call `exchange()` (-> (throttle_time_ms, bytes)) one request at a time, the next one
    `gap_s` after the previous was sent or as soon as it is answered, whichever is later."""
    log: list[Exchange] = []
    while not until(log):
        if log:
            await trio.sleep_until(log[-1].sent_s + gap_s)
        sent = trio.current_time()
        throttle, nbytes = await exchange()
        log.append(Exchange(sent, trio.current_time(), throttle, nbytes))
    return log


async def produce_over(conn) -> tuple[int, int]:  # noqa: ANN001 - client Connection
    resp = await conn.request(produce_request())
    assert isinstance(resp, ProduceResponse) and resp.partitions[0].error_code == ErrorCode.NONE
    return resp.throttle_time_ms, SIZE


def first_throttled(log: list[Exchange]) -> bool:
    return bool(log) and log[-1].throttle_ms > 0


def expected_first_throttle(quota: int) -> tuple[int, int]:
    """(1-based index, throttle ms) of the first throttled request of a burst at t = 0.

    Request k brings the total to k * SIZE; measured O = k * SIZE / 10 s exceeds the quota first
    at k = floor(10 * quota / SIZE) + 1; then X = round((O - quota) / quota * 10 000 ms).
    """
    k = FRESH_WINDOW_MS * quota // (1000 * SIZE) + 1
    return k, throttle_time_ms(k * SIZE * 1000 / FRESH_WINDOW_MS, quota, FRESH_WINDOW_MS)


def cumulative_rates(log: list[Exchange], t0: float, marks_s: list[int]) -> list[float]:
    """Bytes of the requests sent in [t0, t0 + m) divided by m, for each mark m."""
    return [sum(e.nbytes for e in log if e.sent_s < t0 + m) / m for m in marks_s]


def assert_answered_at_once_after_the_previous_throttle(log: list[Exchange], gap_s: float) -> None:
    """KIP-219, one request at a time: the Connection sends no earlier than the previous
    answer's throttle allows, and the broker answers the moment the request arrives.
    run_client calls request() at max(previous sent + gap, previous answered), so each answer
    comes at max(that call, previous answered + previous throttle), to the millisecond (the
    throttle starts at a whole-ms now_ms(), as Kafka's does)."""
    for prev, e in zip(log, log[1:], strict=False):
        assert e.sent_s == pytest.approx(max(prev.sent_s + gap_s, prev.answered_s), abs=1e-9)
        assert e.answered_s == pytest.approx(max(e.sent_s, prev.throttled_until_s), abs=1e-3)


# ---------------------------------------------------------------------------- produce


async def test_produce_over_quota_is_answered_at_once_and_the_client_waits(autojump_clock, cluster):
    a, _b = cluster
    a.set_configs({(CLIENTS, "alice"): {PRODUCER_BYTE_RATE: str(Q)}})
    async with a.network.connect(*a.address, client_id="alice") as conn:
        burst = await run_client(lambda: produce_over(conn), until=first_throttled)
        # 10 s of quota go through at once (1 MB): request 100 is the first over the bound,
        # at O = 100 x 10 003 B / 10 s = 100 030 B/s -> X = 0.0003 x 10 000 ms = 3 ms.
        k, throttle = expected_first_throttle(Q)
        assert (k, throttle) == (100, 3)
        assert len(burst) == k and burst[-1].throttle_ms == throttle
        assert all(e.throttle_ms == 0 for e in burst[:-1])
        assert all(e.delay_ms == 0 for e in burst)  # the throttled answer too (KIP-219)
        assert a.partition("t").log_end_offset == k  # its batch is appended all the same
        assert conn.throttle_delay_ms() == throttle  # the client holds its next request ...

        # ... so the next one leaves 3 ms later, and is answered at once, throttled again: at
        # t = 3 ms, O = 101 x 10 003 B / 10.003 s = 100 999.7 B/s -> X = round(99.97) = 100 ms.
        [nxt] = await run_client(lambda: produce_over(conn), until=bool)
        assert nxt.delay_ms == pytest.approx(throttle)
        assert nxt.throttle_ms == 100
        assert conn.throttle_delay_ms() == 100
    # Kafka's throttle-time sensor per client id: avg and max over the quota window, in the
    # node's metrics snapshot (metrics.jsonl, Prometheus, `minikafka metrics --json`).
    assert a.replica_manager.produce_quotas.throttle_time_avg(now_ms()) == {"alice": (3 + 100) / 2}
    assert a.replica_manager.produce_quotas.throttle_time_max(now_ms()) == {"alice": 100}
    snapshot = a.metrics.snapshot()
    assert snapshot["client_throttle_time_ms_avg"] == {"produce": {"alice": 51.5}, "fetch": {}}
    assert snapshot["client_throttle_time_ms_max"] == {"produce": {"alice": 100}, "fetch": {}}
    # No throttle within the last N x W = 11 s: no value (Kafka's NaN), None in the metrics.
    await trio.sleep(11)
    assert a.replica_manager.produce_quotas.throttle_time_avg(now_ms()) == {"alice": None}
    assert a.replica_manager.produce_quotas.throttle_time_max(now_ms()) == {"alice": None}


async def test_producer_rate_converges_to_its_quota(autojump_clock, cluster):
    """A producer offering 2x its quota (a 10 kB request every 50 ms unless still waiting).

    Every answer comes at once and the Connection waits out its throttle time before the next
    request (KIP-219), and the achieved rate converges to the quota: the fresh window lets 10 s
    worth of quota through before the first throttle (at 2x, in 5 s), so over the first 30 s
    the rate is still ~11% above Q; from 60 s on it is within 10%, and within 2% at 70 s. (Any
    single 30-s window swings between ~0.85 and 1.1 Q: when a sample full of an old burst
    expires after N * W, the client bursts again. That is Kafka's Rate, not a fault of the
    throttle.)
    """
    a, _b = cluster
    a.set_configs({(CLIENTS, "alice"): {PRODUCER_BYTE_RATE: str(Q)}})
    async with a.network.connect(*a.address, client_id="alice") as conn:
        start = trio.current_time()
        log = await run_client(
            lambda: produce_over(conn),
            until=lambda log: bool(log) and log[-1].sent_s - start >= 70,
            gap_s=0.05,
        )
    throttled = [e for e in log if e.throttle_ms > 0]
    assert len(throttled) > len(log) // 4
    assert_answered_at_once_after_the_previous_throttle(log, gap_s=0.05)
    marks = [30, 60, 70]
    rates = cumulative_rates(log, start, marks)
    assert all(abs(r - Q) <= 0.1 * Q for r in rates[1:]), rates
    assert abs(rates[-1] - Q) <= 0.02 * Q
    assert abs(rates[-1] - Q) < abs(rates[0] - Q)  # converging from the first burst
    assert a.partition("t").log_end_offset == len(log)  # every request was appended


async def test_default_client_quota_and_per_client_override(autojump_clock, cluster):
    """The default client's quota applies to every client id without its own entry, each with
    its own sensor; a per-client entry wins over the default; without a default, unknown
    clients are unlimited again."""
    a, _b = cluster
    default, vip = 50_000, 200_000
    a.set_configs(
        {
            (CLIENTS, ""): {PRODUCER_BYTE_RATE: str(default)},
            (CLIENTS, "vip"): {PRODUCER_BYTE_RATE: str(vip)},
        }
    )
    firsts = {}
    for client_id in ("stranger-1", "stranger-2", "vip"):
        async with a.network.connect(*a.address, client_id=client_id) as conn:
            log = await run_client(lambda conn=conn: produce_over(conn), until=first_throttled)
        firsts[client_id] = (len(log), log[-1].throttle_ms)
    # 50 kB/s: 50 x 10 003 B / 10 s = 50 015 B/s -> round(0.0003 x 10 000) = 3 ms;
    # 200 kB/s: 200 x 10 003 B / 10 s = 200 060 B/s -> round(0.0003 x 10 000) = 3 ms.
    assert expected_first_throttle(default) == (50, 3)
    assert expected_first_throttle(vip) == (200, 3)
    assert firsts == {"stranger-1": (50, 3), "stranger-2": (50, 3), "vip": (200, 3)}

    a.set_configs({(CLIENTS, "vip"): {PRODUCER_BYTE_RATE: str(vip)}})  # default removed
    async with a.network.connect(*a.address, client_id="stranger-3") as conn:
        log = await run_client(lambda: produce_over(conn), until=lambda log: len(log) == 150)
    assert all(e.throttle_ms == 0 for e in log)  # 1.5 MB at once, never throttled


# ---------------------------------------------------------------------------- fetch


async def preload(a: MemoryBroker, batches: int) -> None:
    for _ in range(batches):
        reply = await handle_produce(a.replica_manager, produce_request(), a.topics)
        assert reply.response.partitions[0].error_code == ErrorCode.NONE
    await a.writer.barrier()


async def test_consumer_rate_converges_to_its_quota(autojump_clock, cluster):
    """consumer_byte_rate likewise: a consumer fetching one 10 kB batch at a time is throttled
    once 10 s of quota have gone out (a burst at t = 0), each fetch is answered at once and the
    next one waits its throttle time, and fetching on at 2x Q (every 50 ms) its achieved rate
    converges to the quota. A throttled fetch is answered EMPTY and its bytes un-recorded
    (KIP-219, KafkaApis): the consumer's position stays, and the batch comes after the throttle,
    so every offset arrives once, in order."""
    a, _b = cluster
    await preload(a, 900)  # 9 MB: more than 70 s at Q plus the first burst
    a.set_configs({(CLIENTS, "bob"): {CONSUMER_BYTE_RATE: str(Q)}})
    position = 0
    delivered: list[int] = []  # base offsets of the batches received

    async def fetch_one(conn) -> tuple[int, int]:  # noqa: ANN001
        nonlocal position
        resp = await conn.request(consumer_fetch(position))
        assert isinstance(resp, FetchResponse)
        if resp.throttle_time_ms > 0:
            assert resp.partitions == []  # getThrottledResponse: no partition at all
            return resp.throttle_time_ms, 0
        [batch] = iter_batches(resp.partitions[0].records)
        delivered.append(batch.base_offset)
        position = batch.next_offset
        return resp.throttle_time_ms, batch.size

    async with a.network.connect(*a.address, client_id="bob") as conn:
        start = trio.current_time()
        burst = await run_client(lambda: fetch_one(conn), until=first_throttled)
        # The 100th fetch was over the bound: answered empty, its 10 003 B taken back out of
        # the sensor, which holds the 99 batches sent (99 x 10 003 B / 10 s).
        assert [e.nbytes for e in burst] == [SIZE] * 99 + [0]
        assert a.replica_manager.fetch_quotas.rates(now_ms()) == {"bob": 99 * SIZE / 10}
        assert a.metrics.snapshot()["bytes_out"] == 99 * SIZE  # only what was sent
        log = burst + await run_client(
            lambda: fetch_one(conn),
            until=lambda log: bool(log) and log[-1].sent_s - start >= 70,
            gap_s=0.05,
        )
    assert (len(burst), burst[-1].throttle_ms) == expected_first_throttle(Q) == (100, 3)
    assert all(e.throttle_ms == 0 for e in burst[:-1])
    assert all(e.delay_ms == 0 for e in burst)
    # The first fetch after the burst waits out the burst's 3 ms, then the 50 ms pacing starts.
    assert log[len(burst)].answered_s == pytest.approx(burst[-1].throttled_until_s)
    assert_answered_at_once_after_the_previous_throttle(log[len(burst) :], gap_s=0.05)
    assert delivered == list(range(len(delivered)))  # none skipped, none twice
    assert all(e.nbytes == 0 for e in log if e.throttle_ms > 0)
    marks = [30, 60, 70]
    rates = cumulative_rates(log, start, marks)
    assert all(abs(r - Q) <= 0.1 * Q for r in rates[1:]), rates
    assert abs(rates[-1] - Q) <= 0.02 * Q
    assert abs(rates[-1] - Q) < abs(rates[0] - Q)
    # The broker's throttle-time max: the longest throttle in its live samples, those with an
    # event in the last N x W = 11 s (a 1-s sample may hold events up to 12 s old).
    [broker_max] = a.replica_manager.fetch_quotas.throttle_time_max(now_ms()).values()
    end = log[-1].answered_s
    inside = [e.throttle_ms for e in log if e.answered_s > end - 10]
    around = [e.throttle_ms for e in log if e.answered_s > end - 12]
    assert max(inside) <= broker_max <= max(around)


async def test_follower_fetches_are_never_throttled_by_client_quotas(autojump_clock, cluster):
    """Replica fetches (replica_id >= 0) skip client quotas, even when the fetcher's client id
    and the default client both have a tiny consumer quota."""
    a, b = cluster
    await preload(a, 100)  # 1 MB
    fetcher_id = "replica-fetcher-2-0"  # ReplicaFetcher's client id: node 2, fetcher 0
    tiny = {CONSUMER_BYTE_RATE: "1000"}
    a.set_configs({(CLIENTS, ""): tiny, (CLIENTS, fetcher_id): tiny})
    state = partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2])
    await b.apply([state], [a.info, b.info])
    # 1 MB at 1 kB/s would take 1000 s; the follower has it at once (one long poll later).
    with trio.fail_after(1):
        await wait_until(lambda: b.partition("t").log_end_offset == 100, poll_s=0.001)
    assert b.log_bytes("t") == a.log_bytes("t")
    assert a.replica_manager.fetch_quotas.rates(now_ms()) == {}  # no client sensor was even created
    assert a.replica_manager.fetch_quotas.throttle_time_avg(now_ms()) == {}
    # The same client id as a consumer is throttled: 10 003 B / 10 s = 1 000.3 B/s against
    # 1 000 B/s -> round(0.0003 x 10 000) = 3 ms.
    async with a.network.connect(*a.address, client_id=fetcher_id) as conn:
        resp = await conn.request(consumer_fetch(0))
    assert isinstance(resp, FetchResponse) and resp.throttle_time_ms == 3
    assert resp.partitions == []  # and answered empty (KIP-219)
