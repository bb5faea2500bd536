"""KIP-73 test plan, three nodes (p=100, r=2), through the REASSIGN tool.

    Given a three node cluster (p=100, r=2)
    When data is moved from one node to the other two nodes
    Then replicas should move at the quota dictated rate.
    [repeat with produce requests]

    Given a three node cluster (p=100, r=2)
    When data is moved from two nodes to a single node
    Then replicas should move at the quota dictated rate.
    [repeat with produce requests]

One to two: broker 1 is decommissioned (every partition [1,2] -> [2,3], [1,3] -> [3,2]); it
sends everything, so its leader throttle binds. Two to one: broker 3 is added (one replica of
every partition, from brokers 1 and 2); it receives everything, so its follower throttle binds.
Each without and with a steady acks=all produce load of 0.2 x the throttle, with the throttle
set by `minikafka reassign --execute --throttle T` in both modes: KIP-73's replica lists
(`--throttle-mode replication`, the default) and KIP-542's reassignment rates
(`--throttle-mode reassignment`); `reassign --verify` after. Predicted move times, per mode,
in systemtests/harness/layout.py: under load, the lists mode's leader also counts the in-sync
follower's traffic, so decommissioning under load takes bytes / (T - 2 x inbound), not KIP-73's
bytes / (T - inbound).
"""

from __future__ import annotations

import pytest

from systemtests.harness.matrix import THREE_NODES

pytestmark = pytest.mark.system


@pytest.mark.parametrize("case", THREE_NODES, ids=[c.name for c in THREE_NODES])
def test_moves_at_the_quota_rate(case, case_result):
    assert not case_result["failures"], "\n".join(
        [case_result["run_dir"], *case_result["failures"]]
    )


# KAFKA-4313: replicas in the ISR are exempt from the throttle (they are counted, not held
# back), so acks=all producers, who wait for them, should not feel the move. Without a throttle
# the p99 batch latency here is 50-150 ms; a throttled in-sync follower shows as ~1 s.
#
# Asserted in the precise mode only. In Kafka's mode producers do wait, by Kafka's design, and
# the run shows it (produce_latency_during_move in results.json): partitions catch up one by
# one there, and a partition whose move completes changes leader; its new follower starts
# with an unknown lag, which ReplicaFetcherThread.shouldFollowerThrottle counts as not in sync,
# so in lists mode (the follower is still in the follower list) it stays throttled until its
# follower quota falls below T while acks=all waits for it (measured: p99 3.8-4.1 s when
# decommissioning under load; 0.5-0.8 s in KIP-542 mode, where the completed partition is no
# longer throttled).
LOADED = [c for c in THREE_NODES if c.load and c.quota == "precise"]


@pytest.mark.parametrize("case", LOADED, ids=[c.name for c in LOADED])
def test_in_sync_followers_are_not_held_back_so_producers_do_not_wait(case, case_result):
    during = (case_result["analysis"] or {}).get("produce_latency_during_move") or {}
    assert during.get("batches"), f"no acknowledged batch during the move: {case_result['run_dir']}"
    cpu = case_result.get("cpu_during_move")  # a shared machine shows here (harness/machine.py)
    # 500 ms on a quiet machine, more on a saturated one (harness/verdicts.py latency_bound_ms)
    bound = case_result["latency_bound_ms"]
    assert during["p99_ms"] < bound, (case_result["run_dir"], during, cpu, case_result["saturated"])
