"""A KIP-73 case whose load comes from a real Kafka client through the Kafka listener
(docs/kafka-clients.md).

    Given a three node cluster (p=100, r=2)
    When data is moved from two nodes to a single node
    And librdkafka (confluent-kafka) produces through the brokers' Kafka listeners
    Then replicas should move at the quota dictated rate
    And every record the client saw acknowledged is read back.

Broker 3 is added under KIP-542's reassignment throttle while a confluent-kafka producer
(acks=all, idempotence on, its own batching) sends 0.05 x the throttle (a quarter of the native
load: systemtests/harness/profiles.py `Profile.load_rate` says why); the move is judged as
the native-load case 3n-two-to-one-reassign-kip542-load-precise is (its prediction counts the
client's inbound rate in log bytes: systemtests/harness/kafka_load.py).
"""

from __future__ import annotations

import pytest

from systemtests.harness.matrix import KAFKA_CLIENT

pytestmark = pytest.mark.system


@pytest.mark.parametrize("case", KAFKA_CLIENT, ids=[c.name for c in KAFKA_CLIENT])
def test_moves_at_the_quota_rate_under_a_kafka_clients_load(case, case_result):
    assert not case_result["failures"], "\n".join(
        [case_result["run_dir"], *case_result["failures"]]
    )


@pytest.mark.parametrize("case", KAFKA_CLIENT, ids=[c.name for c in KAFKA_CLIENT])
def test_in_sync_followers_are_not_held_back_so_the_kafka_client_does_not_wait(case, case_result):
    """KAFKA-4313 as systemtests/test_kip73_3_nodes.py asserts it for the native load; here a
    record's latency is librdkafka's own (produce() to delivery report)."""
    during = (case_result["analysis"] or {}).get("produce_latency_during_move") or {}
    run_dir = case_result["run_dir"]
    assert during.get("batches"), f"no acknowledged record during the move: {run_dir}"
    cpu = case_result.get("cpu_during_move")  # a shared machine shows here (harness/machine.py)
    bound = case_result["latency_bound_ms"]  # quiet or saturated (harness/verdicts.py)
    assert during["p99_ms"] < bound, (run_dir, during, cpu, case_result["saturated"])
