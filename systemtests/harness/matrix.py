"""The KIP-73 test plan as a matrix of cases (the seed of a case is its index here).

- 2 nodes, p=100, r=2: all data moves from one node to the other (broker 2 wiped and
  re-replicating), the throttle set through the CONFIGS tool; without and with produce load.
- 3 nodes, p=100, r=2: data moves from one node to the other two, and from two nodes to one,
  through the REASSIGN tool, in KIP-73's replica-lists mode and KIP-542's reassignment mode;
  each without and with produce load.

Each case in both quota modes (systemtests/harness/quota_modes.py): Kafka's algorithm and the
precise quota; `--quota-mode` selects them (systemtests/conftest.py). One more case takes its
load from librdkafka through the Kafka listener (KAFKA_CLIENT).
"""

from __future__ import annotations

from systemtests.harness.case import CaseSpec
from systemtests.harness.quota_modes import QUOTA_MODES

TWO_NODES = [
    CaseSpec(layout="wipe", load=load, mode="lists", tool="configs", quota=quota)
    for quota in QUOTA_MODES
    for load in (False, True)
]
THREE_NODES = [
    CaseSpec(layout=layout, load=load, mode=mode, tool="reassign", quota=quota)
    for quota in QUOTA_MODES
    for layout in ("one-to-two", "two-to-one")
    for mode in ("lists", "kip542")
    for load in (False, True)
]
# One case whose load comes from a real Kafka client: librdkafka producing through
# the Kafka listeners while broker 3 is added under KIP-542's reassignment throttle.
KAFKA_CLIENT = [
    CaseSpec(
        layout="two-to-one",
        load=True,
        mode="kip542",
        tool="reassign",
        quota="precise",
        load_client="librdkafka",
    )
]
# Precise cases first: their seeds (73 + index) are the ones they were calibrated with; cases
# added later go at the end, so the others keep theirs.
MATRIX = [
    *sorted([*TWO_NODES, *THREE_NODES], key=lambda c: QUOTA_MODES.index(c.quota)),
    *KAFKA_CLIENT,
]


# The seed base the cases' figures were calibrated with (minikafka/testing/seeds.py: a run
# takes $MINIKAFKA_SEED instead when it is set); a case's seed is this plus `seed_offset`.
CALIBRATED_SEED = 73


def seed_offset(case: CaseSpec) -> int:
    return MATRIX.index(case)
