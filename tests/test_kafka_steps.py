"""Which side of a step of Kafka's algorithm a run took (tools/reassign/kafka_steps.py): the
charge curves of the candidates, and the match of an observed curve to one of them.
MB = 10**6 B."""

from __future__ import annotations

from random import Random

import pytest

from minikafka.tools.reassign.kafka_algorithm import (
    KafkaPrediction,
    aged_sensors,
    settings_from_configs,
)
from minikafka.tools.reassign.kafka_steps import (
    charge_curve,
    closest_curve,
    curve_gaps,
    step_candidates,
)
from minikafka.tools.reassign.model import MovingPartition

MB = 1_000_000
# The Kafka-mode system tests' node configs (systemtests/harness/quota_modes.py NODE_CONFIGS):
# Kafka's defaults, written out.
KAFKA = settings_from_configs(
    {
        "replica.fetch.max.bytes": str(1 << 20),
        "replica.fetch.response.max.bytes": str(10 << 20),
        "replica.fetch.wait.max.ms": "500",
        "replica.fetch.backoff.ms": "1000",
        "replication.quota.window.num": "11",
        "replication.quota.window.size.seconds": "1",
    }
)


def one_to_two(size: int, inbound: float) -> list[MovingPartition]:
    """3n-one-to-two as systemtests/harness/layout.py builds it (`make_layout`,
    `moving_partitions`): 100 partitions, even ones [1,2] -> [2,3], odd ones [1,3] -> [3,2];
    broker 1 leads all of them and the target's first replica leads each once moved."""
    out = []
    for p in range(100):
        initial, target = ((1, 2), (2, 3)) if p % 2 == 0 else ((1, 3), (3, 2))
        out.append(
            MovingPartition(
                partition=p,
                leader=1,
                replicas=tuple(dict.fromkeys((*target, *initial))),
                destinations=tuple(b for b in target if b not in initial),
                size_bytes=size,
                inbound_bytes_per_s=inbound,
                final_leader=target[0],
            )
        )
    return out


def lists_load_candidates() -> list[KafkaPrediction]:
    """3n-one-to-two-reassign-lists-load-kafka with the quick profile's inputs: 1,649,434 B per
    partition when the move starts (the fill of 160 MB and the load until then, as measured by
    the harness; systemtests/test_prediction.py), 0.2 x 8 MB/s of load over 100 partitions,
    T = 8 MB/s, the leader's sensor as old as the brokers (15.5 s)."""
    moving = one_to_two(1_649_434, 1_600_000 / 100)
    ages = aged_sensors(moving, "lists", 15.5)
    return step_candidates(moving, throttle=8 * MB, mode="lists", settings=KAFKA, sensor_age_s=ages)


def test_charge_curve_is_cumulative_at_each_whole_second():
    sim = KafkaPrediction(
        seconds=2.2,
        responses=4,
        charged={(1, "leader"): [(0.0, 10), (0.5, 5), (1.0, 7), (2.2, 3)]},
    )
    assert charge_curve(sim, (1, "leader")) == [10, 22, 22, 25]
    assert charge_curve(sim, (1, "leader"), step_s=0.5) == [10, 15, 22, 22, 22, 25]
    assert charge_curve(sim, (2, "follower")) == [0, 0, 0, 0]
    never = KafkaPrediction(
        seconds=None, responses=2, charged={(1, "leader"): [(0.4, 1), (3.5, 2)]}
    )
    assert charge_curve(never, (1, "leader")) == [0, 1, 1, 1, 3]
    with pytest.raises(ValueError, match="step_s must be > 0"):
        charge_curve(sim, (1, "leader"), step_s=0)


def test_closest_curve_compares_where_the_candidates_differ():
    a = [0, 10, 20, 30, 40]
    b = [0, 10, 30, 40, 40]  # a round of 10 ahead from second 2; the same at the end
    # They differ at seconds 2 and 3 (by 10 of 40 moved); observed gaps there, per candidate:
    assert curve_gaps([0, 11, 21, 31, 40], [a, b]) == [1 / 40, 9 / 40]
    assert closest_curve([0, 10, 21, 31, 40], [a, b]) == 0
    assert closest_curve([0, 10, 29, 39, 40], [a, b]) == 1
    assert closest_curve([0, 99, 25, 35, 40], [a, b]) == 0  # a tie goes to the nominal
    assert closest_curve([0, 10, 29, 39], [b, a]) == 0
    assert closest_curve([0, 5, 9], [a, list(a)]) == 0  # candidates that never differ
    assert closest_curve([0, 10, 30, 40, 40, 40], [a, b]) == 1  # longer: extended flat
    with pytest.raises(ValueError, match="no candidate"):
        closest_curve([0, 1], [])
    with pytest.raises(ValueError, match="at least one point"):
        closest_curve([], [a])


def noisy_curve(sim: KafkaPrediction, sensor: tuple[int, str], rng: Random) -> list[int]:
    """What a run that followed `sim` shows: each charge up to 0.3 s earlier or later (a
    response's round trip and the metrics' 200 ms lines) and up to 3 % lighter or heavier."""
    events = sorted(
        (max(0.0, t + rng.uniform(-0.3, 0.3)), round(n * (1 + rng.uniform(-0.03, 0.03))))
        for t, n in sim.charged[sensor]
    )
    run = KafkaPrediction(seconds=sim.seconds, responses=sim.responses, charged={sensor: events})
    return charge_curve(run, sensor)


def test_a_step_case_has_two_candidates_whose_curves_tell_apart():
    """3n-one-to-two-reassign-lists-load-kafka: four rounds of two 10 MiB responses leave the
    leader's rate within 1 % of T at ~5.5 s: the nominal simulation sends one more round then
    (17.2 s), charges 2.5 % heavier do not and wait for the first round to leave the 12 s
    window (23.2 s). The leader's curves (the binding sensor) part at second 6 by a round of
    responses, ~21 MB of ~200 MB charged: a mean gap of 5.6 % of it over the seconds where they
    differ, 10.3 % at most. Runs jittered by 0.3 s and 3 % are each matched to their own."""
    candidates = lists_load_candidates()
    assert [round(c.seconds or 0, 1) for c in candidates] == [17.2, 23.2]
    assert [c.charge_factor for c in candidates] == [1.0, 1.025]
    sensor = (1, "leader")
    curves = [charge_curve(c, sensor) for c in candidates]
    assert curves[0][:6] == pytest.approx(curves[1][:6], rel=0.03)  # the same until the step
    assert curve_gaps(curves[0], curves)[1] == pytest.approx(0.056, abs=0.005)
    rng = Random(26)
    for k, sim in enumerate(candidates):
        for _ in range(40):
            assert closest_curve(noisy_curve(sim, sensor, rng), curves) == k


def test_an_off_step_case_has_only_the_nominal_candidate():
    """3n-two-to-one-reassign-lists-idle-kafka (1,597,563 B per partition, no load): charges
    2.5-5 % lighter or heavier move the end by 2.5-5 %, the smooth effect of the charge error,
    not a step: one candidate."""
    moving = [
        MovingPartition(
            partition=p,
            leader=1 + p % 2,
            replicas=(1 + p % 2, 3, 2 - p % 2),
            destinations=(3,),
            size_bytes=1_597_563,
        )
        for p in range(100)
    ]
    ages = aged_sensors(moving, "lists", 15.0)
    candidates = step_candidates(
        moving, throttle=8 * MB, mode="lists", settings=KAFKA, sensor_age_s=ages
    )
    assert len(candidates) == 1 and candidates[0].charge_factor == 1.0
    assert candidates[0].seconds == pytest.approx(20.24, abs=0.05)
