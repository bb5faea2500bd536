"""Precise mode (`replication.quota.precise`) never stalls on a batch larger than its allowance.

Found as a new user: 6 leaders, one throttled partition each, 1 MB batches, leader throttle
1 MB/s, precise mode: nothing moved in 120 s. The allowance of an idle sensor is one window's
worth (T * W = 1 MB) and the leader refused any batch above a partition's share, so a batch of
1 MB plus its header never fitted. Now the one batch KIP-74 returns whole goes out once the
share is positive, and is charged (core/quota/planner.py `LeaderFetchPlan` states the bound):

    admitted(t) <= T * max(t, W) + B                 (B: the largest batch, B <= (N-1) * T * W)

so a move of D bytes in batches of B takes about (D - B) / T: the last batch goes out on
credit, and its cost is paid by the silence after the move. Asserted here for batches of 0.5,
1, 2 and 10 times the per-second throttle, on either side (the follower side's share becomes
the fetch's `partition_max_bytes`, and the leader returns an oversized first batch whole):

    (D - B) / T - W  <=  elapsed  <=  (D - B) / T + 1 s   (checks every 50-100 ms, W = 1 s)

Two in-process brokers under the autojump MockClock (minikafka/testing/memory_node.py).
"""

from __future__ import annotations

import pytest
import trio

from minikafka.core.dynamic_config import (
    BROKERS,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPICS,
)
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.produce import handle_produce
from minikafka.storage import StoreConfig
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest

TOPIC = "t"
RATE = 100_000  # B/s, on one side
DATA = 2_000_000  # bytes to move: 20 s at the rate
W_S = 1
STORE = StoreConfig(map_size_bytes=1 << 27, sync=False)


# LMDB calls run inline (tests/conftest.py).


def config(node_id: int) -> NodeConfig:
    return NodeConfig(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replication_quota_precise=True,
        replica_fetch_wait_max_ms=100,
        replica_fetch_backoff_ms=100,
    )


@pytest.mark.parametrize("side", ["leader", "follower"])
@pytest.mark.parametrize("ratio", [0.5, 1, 2, 10])
async def test_batches_of_any_size_move_within_the_bound(autojump_clock, tmp_path, side, ratio):
    # Batches of ten records, as the new user's (10 x 100 kB at 1 MB/s is ratio 1).
    value = b"v" * int(ratio * RATE / 10)
    batch = make_batch([(1_000, None, value)] * 10)
    count = DATA // len(batch) + 1
    total = count * len(batch)
    network = MemoryNetwork()
    a = MemoryBroker(config(1), tmp_path / "a", network=network, store_config=STORE)
    b = MemoryBroker(config(2), tmp_path / "b", network=network, store_config=STORE)
    states = [partition_state(TOPIC, 0, leader=1, isr=[1], replicas=[1, 2])]
    async with a.running(), b.running():
        await a.apply(states, [a.info, b.info])
        for _ in range(count):
            resp = await handle_produce(
                a.replica_manager,
                ProduceRequest(
                    acks=1,
                    timeout_ms=1000,
                    partitions=[ProducePartition(topic=TOPIC, partition=0, records=batch)],
                ),
                a.topics,
            )
            assert resp.response.partitions[0].error_code == ErrorCode.NONE
        await a.writer.barrier()
        if side == "leader":
            a.set_configs(
                {(BROKERS, "1"): {LEADER_RATE: str(RATE)}, (TOPICS, TOPIC): {LEADER_REPLICAS: "*"}}
            )
        else:
            b.set_configs(
                {
                    (BROKERS, "2"): {FOLLOWER_RATE: str(RATE)},
                    (TOPICS, TOPIC): {FOLLOWER_REPLICAS: "*"},
                }
            )
        await b.apply(states, [a.info, b.info])
        t0 = trio.current_time()
        admitted: list[tuple[float, int]] = []
        with trio.move_on_after(120):
            while not admitted or admitted[-1][1] < total:
                await trio.sleep(0.05)
                got = b.metrics.counters.get("replication_bytes_in", 0)
                admitted.append((trio.current_time() - t0, got))
    elapsed, moved = admitted[-1]
    assert moved == total, f"stalled: {moved} of {total} bytes in {elapsed:.1f} s"
    ideal = (total - len(batch)) / RATE
    assert ideal - W_S <= elapsed <= ideal + 1.0, (elapsed, ideal)
    for t, got in admitted:
        assert got <= RATE * max(t, W_S) + len(batch), (t, got)
