"""Which side of a step of Kafka's quota algorithm a run took, from the bytes its binding sensor
was charged second by second, pure.

Kafka's algorithm has steps (tools/reassign/kafka_algorithm.py, `step_alternatives`): whether
one more whole response passes a check can turn on a per cent of the bytes charged before it,
and the move then ends a round of responses earlier or later. The simulation matches a run's
charges to a few per cent, so near a step it predicts both sides. Accepting a run whose
duration fits EITHER side would accept almost anything between them; instead, the run's own
charges say which side it took, and its duration is judged against that one:

- `step_candidates`: the nominal simulation and the distinct alternatives (the move simulated
  with every charge 2.5 % and 5 % lighter and heavier, `CHARGE_ERROR`), each a
  `KafkaPrediction` whose charges are those of the run it stands for (`charge_factor` x the
  simulated bytes, so its curve compares with a run's metrics); an alternative is distinct
  when its move time differs from every earlier candidate's by more than `APART` (twice
  `CHARGE_ERROR`) of the nominal time. Closer ones are the smooth effect of the charge error
  itself, which the accepted 0.9-1.2 x covers: charges c x as heavy are a throttle T / c, and
  a sensor carrying catch-up C and keep-up K then takes C / (T / c - K), c T / (T - c K) x as
  long: 5 % idle, 8.4 % at the cases' K = 0.4 T and c = 1.05. A step moves the end by a round
  of responses or a wait for one to leave the window. Measured on the ten quick Kafka-mode
  cases' inputs: alternatives at 0.95-1.05 x where nothing steps, and 0.85-0.89, 1.10 and
  1.35 x where something does (one at 1.099 x, an idle wipe at c = 1.05, stays inside the
  band and is left out: a run on either side of it passes 0.9-1.2 x the nominal).
- `charge_curve`: a candidate's cumulative charge to one sensor at each whole second.
- `closest_curve`: which candidate an observed curve (the same sensor's cumulative charge per
  second, from the broker's metrics) followed.

The measure of `closest_curve`, derived from what separates the candidates. Two sides of a step
charge the same bytes in the same order until the step, then one is a round of responses
(one or two 10 MiB responses against 160 MB: 6-13 % of the bytes) ahead of the other until it
ends; elsewhere they agree. So only the seconds where the candidates differ by more than
`DIFFER` of the bytes moved say anything (the region D), and there the observed curve is
compared with each candidate by the mean of |observed - candidate| / bytes moved over D. The
mean, not the largest gap: a run's single response landing a fraction of a second earlier or
later than simulated moves one point of its curve by a whole response, as much as the step
itself, while a step moves every point of D. The bytes moved (the largest final charge of the
candidates) only scale the figure, so it reads as a fraction of the move. Ties go to the
earlier candidate, so to the nominal one; without any region D, the nominal one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from minikafka.tools.reassign.kafka_algorithm import (
    CHARGE_ERROR,
    KafkaPrediction,
    KafkaSettings,
    kafka_prediction,
)
from minikafka.tools.reassign.model import MovingPartition

APART = 2 * CHARGE_ERROR  # a distinct alternative's move time, off the nominal's (module doc)
DIFFER = 0.02  # candidates differ at a second when their curves are 2 % of the move apart
CHARGE_FACTORS = (1 - CHARGE_ERROR, 1 - CHARGE_ERROR / 2, 1 + CHARGE_ERROR / 2, 1 + CHARGE_ERROR)


def charge_curve(
    prediction: KafkaPrediction, sensor: tuple[int, str], *, step_s: float = 1.0
) -> list[int]:
    """Cumulative bytes charged to `sensor` (broker, side) at 0, step_s, 2 step_s, ... up to
    the first point at or after the move's end (the last charge when it never ended): point i
    holds every charge made at or before i x step_s. Empty sensor: all zeros."""
    if not step_s > 0:
        raise ValueError(f"step_s must be > 0, got {step_s!r}")
    events = prediction.charged.get(sensor, [])
    end = prediction.seconds
    if end is None:
        end = events[-1][0] if events else 0.0
    points = math.ceil(end / step_s - 1e-9) + 1
    curve, total, j = [], 0, 0
    for i in range(points):
        while j < len(events) and events[j][0] <= i * step_s + 1e-9:
            total += events[j][1]
            j += 1
        curve.append(total)
    return curve


def curve_gaps(observed: Sequence[float], candidates: Sequence[Sequence[int]]) -> list[float]:
    """Each candidate's mean |observed - candidate| over the seconds where the candidates
    differ, as a fraction of the bytes moved (module docstring); all 0.0 when they never
    differ. Curves of unequal length are extended with their last point (a move that ended
    charges nothing more of it)."""
    if not candidates:
        raise ValueError("no candidate curve to compare with")
    if not observed or any(not c for c in candidates):
        raise ValueError("a curve needs at least one point (second 0)")
    length = max(len(observed), *(len(c) for c in candidates))

    def padded(curve: Sequence[float]) -> list[float]:
        return [float(x) for x in curve] + [float(curve[-1])] * (length - len(curve))

    cands = [padded(c) for c in candidates]
    obs = padded(observed)
    moved = max(c[-1] for c in cands)
    if moved <= 0:
        return [0.0] * len(cands)
    region = [
        i
        for i in range(length)
        if max(c[i] for c in cands) - min(c[i] for c in cands) > DIFFER * moved
    ]
    if not region:
        return [0.0] * len(cands)
    return [sum(abs(obs[i] - c[i]) for i in region) / len(region) / moved for c in cands]


def closest_curve(observed: Sequence[float], candidates: Sequence[Sequence[int]]) -> int:
    """The index of the candidate curve `observed` followed (module docstring); ties, and
    candidates that never differ, go to the earlier one, so to the nominal (index 0)."""
    gaps = curve_gaps(observed, candidates)
    best = 0
    for k, gap in enumerate(gaps):
        if gap < gaps[best]:
            best = k
    return best


def step_candidates(
    partitions: Sequence[MovingPartition],
    *,
    throttle: float,
    mode: str,
    settings: KafkaSettings,
    sensor_age_s: Mapping[tuple[int, str], float] | None = None,
) -> list[KafkaPrediction]:
    """The nominal simulation first, then the distinct alternatives across a step, by move
    time (module docstring). Only the nominal one when the move never ends in the simulation."""
    nominal = kafka_prediction(
        partitions, throttle=throttle, mode=mode, settings=settings, sensor_age_s=sensor_age_s
    )
    if nominal.seconds is None:
        return [nominal]
    apart = APART * nominal.seconds
    kept = [nominal]
    others = []
    for c in CHARGE_FACTORS:  # charges c x as heavy against T are the same against T / c
        sim = kafka_prediction(
            partitions,
            throttle=throttle / c,
            mode=mode,
            settings=settings,
            sensor_age_s=sensor_age_s,
        )
        if sim.seconds is not None:  # as the run it stands for: charges c x as heavy
            charged = {k: [(t, round(n * c)) for t, n in v] for k, v in sim.charged.items()}
            others.append(
                KafkaPrediction(
                    seconds=sim.seconds, responses=sim.responses, charged=charged, charge_factor=c
                )
            )
    for sim in sorted(others, key=lambda s: s.seconds or 0.0):
        assert sim.seconds is not None
        if all(abs(sim.seconds - (k.seconds or 0.0)) > apart for k in kept):
            kept.append(sim)
    return kept
