"""KIP-73 test plan, two nodes (p=100, r=2): all data moves from one node to the other.

    Given a static two node cluster (p=100, r=2)
    When data is moved from one node to the other
    Then replicas should move at the quota dictated rate.

    Given a two node cluster with incoming produce requests (p=100, r=2)
    When data is moved from one node to the other
    Then replicas should move at the quota dictated rate - the inbound rate.

Broker 2 is wiped and re-replicates everything from broker 1 (KIP-73 Q&A 2, "throttle a
bootstrapping broker"), under a throttle set live through the CONFIGS tool (`minikafka configs`:
both rates on both brokers, the leader list p:1 and the follower list p:2 for every partition),
without and with a steady acks=all produce load of 0.2 x the throttle. Predicted move time:
bytes / T, and bytes / (T - inbound) under load (systemtests/harness/layout.py). The figures
asserted on come from the Spark analysis of the run folder (systemtests/harness/verdicts.py).
"""

from __future__ import annotations

import pytest

from systemtests.harness.matrix import TWO_NODES

pytestmark = pytest.mark.system


@pytest.mark.parametrize("case", TWO_NODES, ids=[c.name for c in TWO_NODES])
def test_one_node_to_the_other_at_the_quota_rate(case, case_result):
    assert not case_result["failures"], "\n".join(
        [case_result["run_dir"], *case_result["failures"]]
    )
