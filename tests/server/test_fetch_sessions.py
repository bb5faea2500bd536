"""KIP-227 fetch sessions in the shell (server/fetch_sessions.py, server/fetcher.py), under the
autojump MockClock: in-process brokers whose real replica fetchers reach the leader over memory
streams, every fetch the leader answers recorded, or a follower played by hand through
`handle_fetch` with replica_id 2."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from minikafka.clock import now_ms
from minikafka.core.dynamic_config import BROKERS, FOLLOWER_RATE, FOLLOWER_REPLICAS, TOPICS
from minikafka.core.fetch_session import FINAL_EPOCH, INITIAL_EPOCH
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.fetch_serve import handle_fetch
from minikafka.server.listener import Reply
from minikafka.server.produce import handle_produce
from minikafka.storage import StoreConfig
from minikafka.testing.memory_node import MemoryBroker, MemoryNetwork, partition_state, wait_until
from minikafka.wire.messages import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
)

TOPIC = "t"
STORE = StoreConfig(map_size_bytes=1 << 28, sync=False)
LAG_MAX_MS = 10_000


# LMDB calls run inline (tests/conftest.py).


def node_config(node_id: int, **overrides: object) -> NodeConfig:
    settings: dict[str, object] = dict(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replica_fetch_wait_max_ms=500,
        replica_fetch_backoff_ms=100,
        replica_lag_time_max_ms=LAG_MAX_MS,
    )
    settings.update(overrides)
    return NodeConfig(**settings)  # type: ignore[arg-type]


Exchange = tuple[FetchRequest, FetchResponse]


@asynccontextmanager
async def pair(
    tmp_path,  # noqa: ANN001
    partitions: int,
    **b_settings: object,
) -> AsyncIterator[tuple[MemoryBroker, MemoryBroker, list[Exchange]]]:
    """A leads `partitions` empty partitions (ISR {A, B}), B follows; yields (A, B, every fetch
    of B's that A answered, in order)."""
    network = MemoryNetwork()
    a = MemoryBroker(node_config(1), tmp_path / "a", network=network, store_config=STORE)
    b = MemoryBroker(
        node_config(2, **b_settings), tmp_path / "b", network=network, store_config=STORE
    )
    seen: list[Exchange] = []

    async def recording(header, body):  # noqa: ANN001, ANN202 - Dispatcher
        reply = await a.dispatch(header, body)
        response = reply.response if isinstance(reply, Reply) else reply
        if isinstance(body, FetchRequest) and body.replica_id == 2:
            assert isinstance(response, FetchResponse)
            seen.append((body, response))
        return reply

    network.add(a.address, recording)
    states = [
        partition_state(TOPIC, p, leader=1, isr=[1, 2], replicas=[1, 2]) for p in range(partitions)
    ]
    async with a.running(), b.running():
        await a.apply(states, [a.info, b.info])
        await b.apply(states, [a.info, b.info])
        await wait_until(lambda: len(seen) >= 2)
        yield a, b, seen


async def produce(a: MemoryBroker, partition: int, values: int = 1) -> None:
    batch = make_batch([(1000 + i, None, b"v%d" % i) for i in range(values)])
    resp = await handle_produce(
        a.replica_manager,
        ProduceRequest(
            acks=1,
            timeout_ms=1000,
            partitions=[ProducePartition(topic=TOPIC, partition=partition, records=batch)],
        ),
        a.topics,
    )
    assert resp.response.partitions[0].error_code == ErrorCode.NONE


async def test_an_idle_session_long_polls_with_nothing_sent_and_nothing_answered(
    autojump_clock, tmp_path
):
    """100 idle partitions: the first fetch is full, then every fetch names no partition, waits
    out its 500 ms and is answered with none."""
    async with pair(tmp_path, 100) as (_a, _b, seen):
        await trio.sleep(10)
    first, *rest = seen
    assert (first[0].session_epoch, len(first[0].partitions)) == (INITIAL_EPOCH, 100)
    assert len(first[1].partitions) == 100 and first[1].session_id != 0
    assert 18 <= len(rest) <= 21  # one long poll per 500 ms
    assert all(req.partitions == [] and req.forgotten == [] for req, _ in rest)
    assert all(resp.partitions == [] and resp.error_code == 0 for _, resp in rest)
    assert [req.session_epoch for req, _ in rest] == list(range(1, len(rest) + 1))


async def test_a_produce_to_one_of_a_thousand_partitions_is_answered_with_it_alone(
    autojump_clock, tmp_path
):
    async with pair(tmp_path, 1000) as (a, b, seen):
        await trio.sleep(1)
        before = len(seen)
        await produce(a, 417, values=3)
        await wait_until(lambda: b.partition(TOPIC, 417).log_end_offset == 3)
        await trio.sleep(2)
        after = seen[before:]
    answered = [[r.partition for r in resp.partitions] for _, resp in after]
    assert [417] in answered and all(parts in ([], [417]) for parts in answered)
    data = [resp for _, resp in after if resp.partitions and resp.partitions[0].records]
    assert len(data) == 1
    sent = [[fp.partition for fp in req.partitions] for req, _ in after]
    assert all(parts in ([], [417]) for parts in sent)  # only the partition that moved on
    # The HW: B's next fetch (offset 3) lets A advance it; the response after tells B.
    assert b.partition(TOPIC, 417).high_watermark == a.partition(TOPIC, 417).high_watermark == 3


async def test_a_lost_session_is_recovered_by_a_full_fetch(autojump_clock, tmp_path):
    async with pair(tmp_path, 10) as (a, b, seen):
        await trio.sleep(1)
        session_id = seen[-1][1].session_id
        assert a.replica_manager.fetch_sessions.cache.remove(session_id) is not None
        before = len(seen)  # the long poll in flight still holds the session: answered
        await wait_until(lambda: len(seen) >= before + 4)
        k = next(i for i in range(before, len(seen)) if seen[i][1].error_code)
        assert k <= before + 1
        errored, full = seen[k], seen[k + 1]
        await produce(a, 4)
        await wait_until(lambda: b.partition(TOPIC, 4).log_end_offset == 1)
    assert errored[1].error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert errored[1].partitions == []
    assert (full[0].session_id, full[0].session_epoch, len(full[0].partitions)) == (0, 0, 10)
    assert full[1].session_id not in (0, session_id)
    assert b.metrics.counters["fetch_session_errors"] == 1


async def test_a_new_leader_gets_a_new_session(autojump_clock, tmp_path):
    """Leadership moves from A to B: A's fetcher opens a session on B with a full fetch, and
    what B is produced then reaches A."""
    async with pair(tmp_path, 5) as (a, b, _seen):
        await produce(a, 0, values=2)
        await wait_until(lambda: b.partition(TOPIC, 0).high_watermark == 2)
        seen_by_b: list[FetchRequest] = []
        dispatch = b.dispatch

        async def recording(header, body):  # noqa: ANN001, ANN202 - Dispatcher
            if isinstance(body, FetchRequest) and body.replica_id == 1:
                seen_by_b.append(body)
            return await dispatch(header, body)

        b.network.add(b.address, recording)
        states = [
            partition_state(TOPIC, p, leader=2, isr=[1, 2], replicas=[1, 2], leader_epoch=2)
            for p in range(5)
        ]
        await b.apply(states, [a.info, b.info])
        await a.apply(states, [a.info, b.info])
        await produce(b, 3, values=4)
        await wait_until(lambda: a.partition(TOPIC, 3).log_end_offset == 4)
        await trio.sleep(1)
    assert seen_by_b[0].session_epoch == INITIAL_EPOCH and len(seen_by_b[0].partitions) == 5
    assert all(req.session_epoch > 0 for req in seen_by_b[1:])
    assert a.partition(TOPIC, 0).log_end_offset == 2


async def test_sessions_off_fetches_every_partition_every_time(autojump_clock, tmp_path):
    async with pair(tmp_path, 20, replica_fetch_session_enable=False) as (_a, _b, seen):
        await trio.sleep(3)
    assert all(req.session_epoch == FINAL_EPOCH and len(req.partitions) == 20 for req, _ in seen)
    assert all(len(resp.partitions) == 20 and resp.session_id == 0 for _, resp in seen)


def follower_fetch(partitions: list[FetchPartition], session_id: int, epoch: int) -> FetchRequest:
    return FetchRequest(
        replica_id=2,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=partitions,
        session_id=session_id,
        session_epoch=epoch,
    )


async def test_an_idle_follower_stays_caught_up_until_the_leader_appends(autojump_clock, tmp_path):
    """A follower idle in a session for longer than replica.lag.time.max.ms, then the leader
    appends: the follower was caught up at its latest fetch (before_leader_append records it,
    as a sessionless fetch would have been recorded), so it has lag.time.max from then, not
    from its last fetch that named the partition, before it may leave the ISR."""
    a = MemoryBroker(node_config(1), tmp_path / "a", store_config=STORE)
    async with a.running():
        await a.apply([partition_state(TOPIC, 0, leader=1, isr=[1, 2], replicas=[1, 2])], [a.info])
        fp = FetchPartition(topic=TOPIC, partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        reply = await handle_fetch(a.replica_manager, follower_fetch([fp], 0, 0), a.topics)
        session_id = reply.response.session_id
        assert session_id != 0
        for epoch in range(1, 7):  # an idle fetch every 10 s for a minute
            await trio.sleep(10)
            reply = await handle_fetch(
                a.replica_manager, follower_fetch([], session_id, epoch), a.topics
            )
            assert reply.response.partitions == [] and reply.response.error_code == 0
        last_fetch = now_ms()
        await trio.sleep(1)
        await produce(a, 0)
        due = a.partition(TOPIC, 0).replica.next_deadline_ms()
    assert due == last_fetch + LAG_MAX_MS + 1


async def test_follower_throttled_partitions_are_forgotten_and_come_back(autojump_clock, tmp_path):
    """The follower-side throttle (KIP-73) leaves partitions out of a fetch: in a session they
    are forgotten (Kafka's toForget) while the others go on, and sent again once the quota lets
    them through; B still catches up in full."""
    network = MemoryNetwork()
    a = MemoryBroker(node_config(1), tmp_path / "a", network=network, store_config=STORE)
    b = MemoryBroker(  # 8 kB a partition per fetch: a catch-up of many fetches
        node_config(2, replica_fetch_max_bytes=8192),
        tmp_path / "b",
        network=network,
        store_config=STORE,
    )
    requests: list[FetchRequest] = []

    async def recording(header, body):  # noqa: ANN001, ANN202 - Dispatcher
        if isinstance(body, FetchRequest) and body.replica_id == 2:
            requests.append(body)
        return await a.dispatch(header, body)

    network.add(a.address, recording)
    states = [partition_state(TOPIC, p, leader=1, isr=[1], replicas=[1, 2]) for p in range(4)]
    async with a.running(), b.running():
        await a.apply(states, [a.info, b.info])
        for _ in range(20):
            for p in range(4):
                await produce(a, p, values=300)
        await a.writer.barrier()
        b.set_configs(
            {
                (BROKERS, "2"): {FOLLOWER_RATE: "20000"},
                (TOPICS, TOPIC): {FOLLOWER_REPLICAS: "0:2,1:2"},  # 2 and 3 go unthrottled
            }
        )
        await b.apply(states, [a.info, b.info])
        total = a.partition(TOPIC, 0).log_end_offset
        await wait_until(
            lambda: all(b.partition(TOPIC, p).log_end_offset == total for p in range(4)),
            timeout_s=600,
        )
    forgot = [r for r in requests if r.forgotten]
    assert forgot, "the throttle never held a partition back"
    after = requests[requests.index(forgot[0]) + 1 :]
    back = {fp.partition for r in after for fp in r.partitions}
    assert {f.partition for f in forgot[0].forgotten} <= {0, 1} & back  # throttled, re-added
    assert all(r.session_epoch > 0 for r in after)  # in the same session throughout
