"""The controller state machine: one seed gives the same effects, and a seeded random walk of
registrations, heartbeats, fences and ISR changes keeps the invariants.

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random

import pytest

from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import (
    TIMEOUT,
    alter,
    create,
    item,
    keep_alive,
    make,
    register,
    states,
)

# ---------------------------------------------------------------------------- determinism


def run_script(seed: int) -> list:
    c = make(seed=seed)
    out = []
    epochs = register(c)
    out += create(c, num_partitions=20, replication_factor=2)
    keep_alive(c, epochs, [1, 3], 4000)
    out += c.on_deadline(TIMEOUT + 1)
    out += c.heartbeat(broker_id=2, broker_epoch=epochs[2], now_ms=TIMEOUT + 2)[2]
    return out


def test_same_seed_same_effects():
    assert run_script(3) == run_script(3)
    assert len(run_script(3)) > 5


@pytest.mark.parametrize("seed", range(25))
def test_random_walk_invariants(seed):
    rng = random.Random(seed)
    c = make(seed=seed, unclean_leader_election=rng.random() < 0.5)
    ids = [1, 2, 3, 4]
    epochs = register(c, ids)
    create(c, num_partitions=8, replication_factor=3)
    now = 0
    last: dict = {}
    for _ in range(150):
        now += rng.randrange(0, 4000)
        action = rng.random()
        b = rng.choice(ids)
        if action < 0.4:
            code, _, _ = c.heartbeat(broker_id=b, broker_epoch=epochs[b], now_ms=now)
            assert code == ErrorCode.NONE
        elif action < 0.5:
            _, epochs[b], _ = c.register_broker(
                broker_id=b, incarnation_id=f"{b}-{now}", host="h", port=b, now_ms=now
            )
        elif action < 0.8:
            s = rng.choice(c.partition_states())
            isr = [s.leader] + [r for r in s.replicas if r != s.leader and rng.random() < 0.6]
            _, resps, _ = alter(c, s.leader, epochs.get(s.leader, -1), item(s, isr))
            if resps and resps[0].error_code == ErrorCode.NONE:
                assert states(c, s.topic)[s.partition].isr == isr
        else:
            c.on_deadline(now)
        live = {x.node_id for x in c.live_brokers()}
        for s in c.partition_states():
            assert s.isr and set(s.isr) <= set(s.replicas)
            assert s.leader == -1 or (s.leader in live and s.leader in s.isr)
            if not set(s.isr) <= live:  # a fenced member only as the last, leaderless one
                assert len(s.isr) == 1 and s.leader == -1
            key = (s.topic, s.partition)
            if key in last:
                assert s.leader_epoch >= last[key][0] and s.partition_epoch >= last[key][1]
            last[key] = (s.leader_epoch, s.partition_epoch)
        deadline = c.next_deadline_ms()
        assert deadline is None or deadline > now or c.on_deadline(now) != []
