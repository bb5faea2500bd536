"""Partition reassignment in the controller state machine (KIP-455): a seeded random walk of
moves, cancels, ISR changes, fences and returns, and the per-broker partition cap.

Seeded and deterministic. Brokers 1..4 register at t=0; topic "t" is placed by hand:
t-0 = [1, 2], t-1 = [2, 3], so the leaders are 1 and 2 with leader epoch 0. Fencing uses the
default 9000 ms session timeout: a broker silent since t=0 is fenced at 10 000 when the others
heartbeat at 10 000. The `Cluster` is in minikafka/testing/controller_state.py.
"""

from __future__ import annotations

import random

import pytest

from minikafka.core.controller import ControllerConfig
from minikafka.core.controller.records import doc_from_records
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import LR, Cluster
from minikafka.wire.messages import ConfigEntity

# ---------------------------------------------------------------------------- a random walk


@pytest.mark.parametrize("seed", range(20))
def test_random_walk_invariants(seed):
    """Random moves, cancels, ISR changes, fences and returns; after every step the records
    and the listing agree with each other and with KIP-455's shapes, and the changes saved so
    far (`take_changes`) rebuild the whole document."""
    rng = random.Random(seed)
    k = Cluster(assignments=((1, 2), (2, 3), (3, 4), (4, 1)), seed=seed)
    throttle = [ConfigEntity(entity_type="brokers", entity_name="1", configs={LR: "1000"})]
    saved: dict = {}  # the metadata store's records, saved after every step, as records
    for _ in range(120):
        action = rng.random()
        live = [b for b in (1, 2, 3, 4) if not k.c.is_fenced(b)]
        p = rng.randrange(4)
        s = k.state(p)
        if action < 0.3 and live:
            target = rng.sample(live, rng.randint(1, min(3, len(live))))
            recorded = rng.random() < 0.3
            if recorded:
                k.set_configs("brokers", "1", {LR: "1000"})
            k.move({p: target}, throttle if recorded else ())
        elif action < 0.4:
            k.move({p: None})
        elif action < 0.7 and s.leader != -1:
            grow = [r for r in s.replicas if r in live and r not in s.isr]
            isr = s.isr + grow[:1] if grow else [s.leader]
            k.isr(p, isr)
        elif action < 0.85 and len(live) > 1:
            k.fence(rng.choice(live))
        else:
            fenced = [b for b in (1, 2, 3, 4) if k.c.is_fenced(b)]
            if fenced:
                k.register(rng.choice(fenced), incarnation=str(rng.random()))
        listing = {r.partition: r for r in k.c.list_partition_reassignments()}
        for st in k.c.partition_states():
            assert set(st.isr) <= set(st.replicas) and st.isr
            assert st.leader == -1 or st.leader in st.isr
            assert len(set(st.replicas)) == len(st.replicas)
            assert set(st.adding_replicas) <= set(st.replicas)
            assert set(st.removing_replicas) <= set(st.replicas)
            assert not set(st.adding_replicas) & set(st.removing_replicas)
            moving = st.partition in listing
            if moving:
                assert listing[st.partition].replicas == st.replicas
                kept = len(st.replicas) - len(st.removing_replicas)
                assert st.removing_replicas == st.replicas[kept:]  # target first, then leaving
            else:
                assert st.adding_replicas == st.removing_replicas == []
        changes = k.c.take_changes()
        for key in changes.deletes:
            saved.pop(key, None)
        saved.update(changes.puts)
        assert doc_from_records(saved) == k.c.to_doc()  # saved changes add up to the state
        claims = k.c.to_doc()["reassignments"]["throttles"]["claims"]
        if not listing:  # no move left: nothing claims the throttle, and it is gone
            assert claims == []
            assert k.c.config_snapshot().configs("brokers", "1") == {}


def test_a_move_past_the_per_broker_cap_is_refused_partition_by_partition():
    """max.broker.partitions holds for moves as for creation (KIP-578): broker 4 hosts nothing
    and may host 1; the first move onto it is accepted, the second refused, the state kept."""
    cl = Cluster()
    cl.c.config = ControllerConfig(max_partitions_per_broker=1)
    before = cl.state(1)
    responses, _ = cl.move({0: [1, 4], 1: [2, 4]})
    assert responses[0] == (ErrorCode.NONE, None)
    code, message = responses[1]
    assert code == ErrorCode.POLICY_VIOLATION
    assert "broker 4" in message and "max.broker.partitions" in message
    assert cl.state(1) == before
    assert [(r.topic, r.partition) for r in cl.c.list_partition_reassignments()] == [("t", 0)]
    # A move among brokers already hosting the partition adds nothing: allowed at the cap.
    responses, _ = cl.move({1: [3, 2]})
    assert responses == [(ErrorCode.NONE, None)]
