"""A catching-up follower fetches ahead (server/fetcher.py `_process`): its next fetch goes out
while the previous response's batches commit, from their end, but only below the leader's HW
and never for a throttled partition, so the leader never counts uncommitted batches towards its
HW or the ISR.

Two in-process brokers under the autojump MockClock: A leads 4 partitions, ISR {A}, each holding
6 one-record batches (its HW is its LEO); B starts empty and follows it. B's storage calls take
50 ms of simulated time (a slow disk), so a fetch that goes out before the commit is seen at A
with an offset past B's committed log end. A records, for every fetch of B, per partition: the
offset asked, B's committed LEO then, and A's HW.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from minikafka.core.dynamic_config import BROKERS, FOLLOWER_RATE, FOLLOWER_REPLICAS, TOPICS
from minikafka.core.records import make_batch, peek_header
from minikafka.core.types import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.produce import handle_produce
from minikafka.storage import ReadSpec, StorageError, StoreConfig
from minikafka.testing.memory_node import MemoryBroker, MemoryNetwork, partition_state, wait_until
from minikafka.wire.messages import FetchRequest, ProducePartition, ProduceRequest

TOPIC = "t"
PARTITIONS = 4
BATCHES = 6
BATCH = make_batch([(1_000, None, b"x" * 8_000)])
STORE = StoreConfig(map_size_bytes=1 << 26, sync=False)
DISK_S = 0.05


def node_config(node_id: int) -> NodeConfig:
    return NodeConfig(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replica_fetch_max_bytes=16_384,  # two batches per partition per response
        replica_fetch_backoff_ms=100,
        replica_fetch_wait_max_ms=100,
    )


async def slow_disk(fn, *args):  # noqa: ANN001, ANN201 - RunSync
    await trio.sleep(DISK_S)
    return fn(*args)


@asynccontextmanager
async def following(tmp_path, b_configs: dict | None = None) -> AsyncIterator[tuple]:  # noqa: ANN001
    """A loaded, B following it; yields (A, B, asks): (offset asked, B's LEO, A's HW) per
    partition of every fetch B sent, as A received it."""
    network = MemoryNetwork()
    a = MemoryBroker(node_config(1), tmp_path / "a", network=network, store_config=STORE)
    b = MemoryBroker(
        node_config(2), tmp_path / "b", network=network, store_config=STORE, run_sync=slow_disk
    )
    asks: list[tuple[int, int, int]] = []

    async def recording(header, body):  # noqa: ANN001, ANN202 - Dispatcher
        if isinstance(body, FetchRequest) and body.replica_id == 2:
            for fp in body.partitions:
                leo = b.partition(fp.topic, fp.partition).log_end_offset
                hw = a.partition(fp.topic, fp.partition).high_watermark
                asks.append((fp.fetch_offset, leo, hw))
        return await a.dispatch(header, body)

    network.add(a.address, recording)
    states = [
        partition_state(TOPIC, p, leader=1, isr=[1], replicas=[1, 2]) for p in range(PARTITIONS)
    ]
    async with a.running(), b.running():
        await a.apply(states, [a.info, b.info])
        for _ in range(BATCHES):
            entries = [
                ProducePartition(topic=TOPIC, partition=p, records=BATCH) for p in range(PARTITIONS)
            ]
            reply = await handle_produce(
                a.replica_manager,
                ProduceRequest(acks=1, timeout_ms=1000, partitions=entries),
                a.topics,
            )
            assert {p.error_code for p in reply.response.partitions} == {ErrorCode.NONE}
        await a.writer.barrier()
        if b_configs:
            b.set_configs(b_configs)
        await b.apply(states, [a.info, b.info])
        yield a, b, asks


def caught_up(b: MemoryBroker) -> bool:
    return all(b.partition(TOPIC, p).log_end_offset == BATCHES for p in range(PARTITIONS))


async def test_a_catching_up_follower_fetches_ahead_of_its_commits_below_the_hw(
    autojump_clock, tmp_path
):
    async with following(tmp_path) as (a, b, asks):
        await wait_until(lambda: caught_up(b))
        await trio.sleep(1)  # a few more (empty) fetches at the end
        specs = [
            ReadSpec(
                tp=TopicPartition(TOPIC, p),
                fetch_offset=0,
                max_offset=BATCHES,
                partition_max_bytes=1 << 20,
            )
            for p in range(PARTITIONS)
        ]
        theirs, ours = a.store.read(specs, 1 << 24), b.store.read(specs, 1 << 24)
        assert all(theirs) and ours == theirs  # the same logs, byte for byte
    ahead = [(asked, leo, hw) for asked, leo, hw in asks if asked > leo]
    assert ahead, "no fetch went out before the previous batches committed"
    # Every early offset is below the leader's HW: it cannot advance the HW or join the ISR.
    assert all(asked < hw for asked, _leo, hw in ahead)
    # At the HW the follower waits for its commit: its fetches from BATCHES come after it.
    assert all(leo == BATCHES for asked, leo, _hw in asks if asked == BATCHES)
    assert b.metrics.counters["replica_fetches_ahead"] > 0


async def test_a_throttled_follower_never_fetches_ahead(autojump_clock, tmp_path):
    """The replication quota decides per fetch, as before: a throttled partition's batches
    commit before the next fetch (the rate is high enough never to hold anything back)."""
    throttle = {
        (BROKERS, "2"): {FOLLOWER_RATE: "100000000"},
        (TOPICS, TOPIC): {FOLLOWER_REPLICAS: "*"},
    }
    async with following(tmp_path, b_configs=throttle) as (_a, b, asks):
        await wait_until(lambda: caught_up(b))
    assert asks and all(asked <= leo for asked, leo, _hw in asks)
    assert "replica_fetches_ahead" not in b.metrics.counters


async def test_an_append_that_fails_after_fetching_ahead_is_fetched_again_from_the_log_end(
    autojump_clock, tmp_path
):
    """The fetch that went ahead asked from the end of batches that then failed to commit: the
    partition is rewound to its log end (and backs off), so it is fetched again from there and
    catches up, batch for batch, instead of being asked from an offset its log never reached."""
    failed: list[TopicPartition] = []
    async with following(tmp_path) as (_a, b, asks):
        real = b.store.append

        def append(writes):  # noqa: ANN001, ANN202 - LogStore.append
            # The second response's batches of one partition fail twice: in the group commit,
            # then alone when the writer retries partition by partition (server/log_writer.py).
            for w in writes:
                if len(failed) < 2 and w.batches and peek_header(w.batches[0])[0] == 2:
                    if not failed or failed[0] == w.tp:
                        failed.append(w.tp)
                        raise StorageError("MDB_MAP_FULL: Environment mapsize limit reached")
            return real(writes)

        b.store.append = append  # type: ignore[method-assign]
        await wait_until(lambda: caught_up(b))
    assert b.metrics.counters["append_failures"] == 1
    tp = failed[0]
    assert b.metrics.counters["replica_fetches_ahead"] > 0
    assert b.partition(tp.topic, tp.partition).log_end_offset == BATCHES
