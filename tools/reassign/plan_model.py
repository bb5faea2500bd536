"""`reassign plan`'s move model, pure: the model's figures (tools/reassign/model.py, the one
model the plan and the system tests share) beside KIP-73's MoveTime, as lines and JSON. Its
input, the plan's cluster facts as `MovingPartition`s, is tools/reassign/plan_input.py's.

The output:
- `compare`: the traffic model (`model.traffic_prediction`: per throttled sensor, catch-up bytes
  C over the throttle T less its keep-up rate K) next to KIP-73's MoveTime, which sensor binds,
  and, when the two figures differ by more than 2 %, one line saying why: the binding sensor's
  K against the largest BytesInPerSec that KIP-73 subtracts from every throttle, taken apart;
- `simulate`: Kafka's own algorithm (`kafka_algorithm.kafka_prediction`), for clusters that run it
  (`replication.quota.precise=false`, minikafka's default), with settings from the node configs
  (`kafka_algorithm.settings_from_configs`, as the system tests build theirs), and what the move
  may take instead when it sits on a step of the algorithm (`kafka_algorithm.step_alternatives`:
  a time more than `STEP` away with the charges a few per cent off);
- `required_throttle`: the model inverted, the T that finishes within Y seconds:
  max over sensors of K + C / Y.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from minikafka.tools.reassign.kafka_algorithm import (
    CHARGE_ERROR,
    KafkaSettings,
    aged_sensors,
    kafka_prediction,
    step_alternatives,
)
from minikafka.tools.reassign.model import (
    MovingPartition,
    SensorLoad,
    TrafficPrediction,
    sensor_loads,
    traffic_prediction,
)
from minikafka.tools.reassign.moves import MODE_REASSIGNMENT, MODE_REPLICATION
from minikafka.tools.reassign.plan_input import INBOUND_RULE
from minikafka.tools.reassign.units import human_bytes, human_rate, human_seconds

VALUE = dict(frozen=True, slots=True, kw_only=True)

# `reassign --throttle-mode` -> the model's mode: KIP-73's replica lists, or KIP-542's rates.
MODEL_MODES = {MODE_REPLICATION: "lists", MODE_REASSIGNMENT: "kip542"}
TOLERANCE = 0.02  # figures within 2 % are the same figure (timer and size estimates are coarser)
# The simulation is not run when the model already says the move lasts beyond twice its limit:
# it would spend seconds of CPU (~4 ms per simulated second under load) only to say "not done".
SIMULATE_UP_TO = 2.0
# Across a step of Kafka's algorithm: a time this far from the simulated one (a fraction of it).
STEP = 0.1
# The four more simulations that look for a step run only for a simulated move this short (at
# ~4 ms per simulated second, at most ~5 s of CPU); a step is one round of responses or one wait
# for a round to leave the quota's window (12 s at Kafka's defaults), so on a longer move it is
# a small part of the time.
STEPS_UP_TO_S = 300.0


def _seconds(s: float | None) -> str:
    return "never" if s is None else human_seconds(s)


def _differs(reference: float | None, other: float | None) -> bool:
    """More than TOLERANCE apart, relative to `reference`; "never" differs from any time."""
    if reference is None or other is None:
        return (reference is None) != (other is None)
    return abs(other - reference) > TOLERANCE * reference


# ---------------------------------------------------------------------------- the traffic model


def sensor_name(s: SensorLoad) -> str:
    return f"broker {s.broker}'s {s.side} throttle"


def _verb(s: SensorLoad) -> str:
    return "send" if s.side == "leader" else "copy"


@dataclass(**VALUE)
class ModelFigure:
    """The traffic model's figure at one throttle, beside KIP-73's."""

    throttle_mode: str  # "replication" | "reassignment"
    throttle: float
    traffic: TrafficPrediction
    kip73_s: float | None
    why: str | None  # why the model differs from KIP-73 (None: within TOLERANCE)
    inbound_source: str = INBOUND_RULE  # where the partitions' inbound rates came from

    @property
    def seconds(self) -> float | None:
        return self.traffic.seconds

    def also_binding(self) -> list[SensorLoad]:
        """Other sensors within TOLERANCE of the binding one."""
        close = self.traffic.binding_sides(TOLERANCE)
        b = self.traffic.binding
        return [s for s in self.traffic.sensors if (s.broker, s.side) in close and s is not b]

    def rows(self) -> list[dict[str, str]]:
        """One row per throttled sensor, for a table; `binds` marks the binding ones."""
        close = self.traffic.binding_sides(TOLERANCE)
        return [
            {
                "throttle": f"{s.broker} {s.side}",
                "catch_up": human_bytes(s.catch_up_bytes),
                "keep_up/s": human_rate(s.keep_up_bytes_per_s),
                "seconds": _seconds(s.seconds),
                "binds": "*" if (s.broker, s.side) in close or s.seconds is None else "",
            }
            for s in self.traffic.sensors
        ]

    def binding_line(self) -> str:
        head = f"The model ({self.throttle_mode} mode)"
        t = self.traffic
        if t.seconds is None:
            stuck = [s for s in t.sensors if s.seconds is None]
            return (
                f"{head}: the move never finishes: {sensor_name(stuck[0])} carries "
                f"{human_rate(stuck[0].keep_up_bytes_per_s)} of new data, not below the "
                f"throttle {human_rate(self.throttle)}"
                + (f" (so do {len(stuck) - 1} more)" if len(stuck) > 1 else "")
            )
        s = t.binding
        if s is None or not t.seconds:
            return f"{head}: nothing to copy"
        less = (
            f" less the {human_rate(s.keep_up_bytes_per_s)} of new data it carries"
            if s.keep_up_bytes_per_s > 0
            else ""
        )
        also = self.also_binding()
        within = f" (within 2 %: {', '.join(sensor_name(o) for o in also)})" if also else ""
        return (
            f"{head}: the move takes {_seconds(t.seconds)}; {sensor_name(s)} binds: "
            f"{human_bytes(s.catch_up_bytes)} to {_verb(s)} at {human_rate(self.throttle)}"
            f"{less}{within}"
        )

    def lines(self) -> list[str]:
        return [self.binding_line(), *([self.why] if self.why else [])]

    def to_json(self) -> dict[str, Any]:
        t = self.traffic
        return {
            "throttle_mode": self.throttle_mode,
            "mode": MODEL_MODES[self.throttle_mode],
            "throttle": self.throttle,
            "seconds": None if t.seconds is None else round(t.seconds, 3),
            "binding": None if t.binding is None else t.binding.to_json(),
            "binding_sensors": [
                {"broker": b, "side": side} for b, side in sorted(t.binding_sides(TOLERANCE))
            ],
            "sensors": [s.to_json() for s in t.sensors],
            "kip73_seconds": self.kip73_s,
            "differs_from_kip73": self.why is not None,
            "why": self.why,
            "inbound": self.inbound_source,
        }


def _keep_up_reasons(
    s: SensorLoad, partitions: Sequence[MovingPartition], subtracted: float, inbound_source: str
) -> list[str]:
    """What makes up sensor `s`'s keep-up rate, where it is not KIP-73's subtracted rate."""
    out = []
    if s.side == "leader":
        led = [m for m in partitions if m.leader == s.broker and m.destinations]
        written = sum(m.inbound_bytes_per_s for m in led)
        to_destinations = sum(m.inbound_bytes_per_s * len(m.destinations) for m in led)
        in_sync = s.keep_up_bytes_per_s - to_destinations
        if in_sync > TOLERANCE * s.keep_up_bytes_per_s:
            out.append(
                f"it also carries its in-sync followers' {human_rate(in_sync)} (replica lists "
                "count in-sync followers, KAFKA-4313 exempts them from throttling, not from "
                "counting)"
            )
        if to_destinations > (1 + TOLERANCE) * written:
            out.append(
                f"it sends new data once per destination ({human_rate(to_destinations)} for "
                f"{human_rate(written)} written)"
            )
    else:
        copied = [m for m in partitions if s.broker in m.destinations]
        written = sum(m.inbound_bytes_per_s for m in copied)
        sources = {m.leader for m in copied}
        if len(sources) > 1 and written > (1 + TOLERANCE) * subtracted:
            out.append(
                f"it fetches the new data of the partitions it copies from {len(sources)} "
                "leaders, more than any one broker's BytesInPerSec"
            )
    if written < (1 - TOLERANCE) * subtracted:
        moved = "sends" if s.side == "leader" else "copies"
        out.append(
            f"only the writes to the partitions it {moved} count, {human_rate(written)} "
            f"(inbound: {inbound_source})"
        )
    return out


def _why(
    fig_traffic: TrafficPrediction,
    partitions: Sequence[MovingPartition],
    *,
    kip73_s: float | None,
    kip73_slowest: int | None,
    subtracted: float,
    kip73_bytes: Mapping[int, int],
    inbound_source: str,
) -> str:
    model_s = fig_traffic.seconds
    slowest = "" if kip73_slowest is None or kip73_s is None else f" (broker {kip73_slowest})"
    head = f"KIP-73's MoveTime {_seconds(kip73_s)}{slowest}; the model {_seconds(model_s)}"
    stuck = [s for s in fig_traffic.sensors if s.seconds is None]
    s = stuck[0] if stuck else fig_traffic.binding
    if s is None:
        return f"{head}: the model finds nothing to copy"
    parts = []
    k = s.keep_up_bytes_per_s
    if abs(k - subtracted) > TOLERANCE * max(k, subtracted):
        part = (
            f"{sensor_name(s)} carries {human_rate(k)} of new data, not the "
            f"{human_rate(subtracted)} KIP-73 subtracts (the largest BytesInPerSec)"
        )
        reasons = _keep_up_reasons(s, partitions, subtracted, inbound_source)
        parts.append(part + (": " + "; ".join(reasons) if reasons else ""))
    counted = kip73_bytes.get(s.broker, 0)
    if s.catch_up_bytes != counted:
        parts.append(
            f"{sensor_name(s)} has {human_bytes(s.catch_up_bytes)} to {_verb(s)}, KIP-73 "
            f"counts {human_bytes(counted)} for broker {s.broker} (the larger of what it copies "
            "in and sends out)"
        )
    if not parts:  # the binding sensor agrees with KIP-73: KIP-73's slowest broker does not
        parts.append(
            f"{sensor_name(s)} binds; KIP-73's slowest broker carries less new data than the "
            "largest BytesInPerSec it subtracts"
        )
    return f"{head}: " + "; ".join(parts)


def compare(
    partitions: Sequence[MovingPartition],
    *,
    throttle: float,
    throttle_mode: str,
    kip73_s: float | None,
    kip73_subtracted: float,
    kip73_bytes: Mapping[int, int],
    kip73_slowest: int | None = None,
    inbound_source: str = INBOUND_RULE,
) -> ModelFigure:
    """The traffic model at `throttle`, and why it differs from KIP-73's MoveTime `kip73_s`
    (which subtracted `kip73_subtracted` from every throttle and counted `kip73_bytes` per
    broker) when it does by more than TOLERANCE. `inbound_source` says where the partitions'
    inbound rates came from, for the reasons and the JSON."""
    traffic = traffic_prediction(partitions, throttle=throttle, mode=MODEL_MODES[throttle_mode])
    if not traffic.sensors:  # the model reads "no sensor" as "none finishes": nothing to copy
        traffic = TrafficPrediction(seconds=0.0, binding=None, sensors=())
    why = None
    if _differs(kip73_s, traffic.seconds):
        why = _why(
            traffic,
            partitions,
            kip73_s=kip73_s,
            kip73_slowest=kip73_slowest,
            subtracted=kip73_subtracted,
            kip73_bytes=kip73_bytes,
            inbound_source=inbound_source,
        )
    return ModelFigure(
        throttle_mode=throttle_mode,
        throttle=throttle,
        traffic=traffic,
        kip73_s=kip73_s,
        why=why,
        inbound_source=inbound_source,
    )


def required_throttle(
    partitions: Sequence[MovingPartition], *, deadline_s: float, throttle_mode: str
) -> tuple[int, SensorLoad | None]:
    """The throttle at which every sensor finishes within `deadline_s`: C / (T - K) <= Y, so
    T >= K + C / Y, the largest over the sensors (rounded up to a whole B/s, at least 1), and
    the sensor that sets it."""
    loads = sensor_loads(partitions, MODEL_MODES[throttle_mode])
    need = {s: s.keep_up_bytes_per_s + s.catch_up_bytes / deadline_s for s in loads}
    worst = max(need, key=lambda s: need[s], default=None)
    return (1 if worst is None else max(1, math.ceil(need[worst]))), worst


# ---------------------------------------------------------------------------- Kafka's algorithm


@dataclass(**VALUE)
class SimulationFigure:
    """Kafka's algorithm simulated at one throttle (or why it was not run)."""

    seconds: float | None  # None: not run, or not done within the time limit
    responses: int
    ran: bool
    model_s: float | None
    settings: KafkaSettings
    # What the move may take instead, across a step (`step_alternatives`); None: not looked for
    # (not run, not done, or longer than STEPS_UP_TO_S).
    alternatives_s: tuple[float, ...] | None = None

    def lines(self) -> list[str]:
        head = "Kafka's algorithm (simulated)"
        limit = human_seconds(self.settings.time_limit_s)
        if not self.ran:
            if self.model_s is None:
                return [f"{head}: not run, the model says the move never finishes"]
            return [
                f"{head}: not run, the model's {_seconds(self.model_s)} is beyond the "
                f"simulation's limit of {limit}"
            ]
        if self.seconds is None:
            return [f"{head}: not done within the simulation's limit of {limit}"]
        lines = [f"{head}: {_seconds(self.seconds)}", f"  {self.why()}"]
        if self.alternatives_s:
            others = " or ".join(_seconds(a) for a in self.alternatives_s)
            lines.append(
                f"  or {others}: the move sits on a step of the algorithm (with every charge "
                f"{CHARGE_ERROR * 50:g}-{CHARGE_ERROR * 100:g} % lighter or heavier, one more "
                "or one fewer whole response passes a check in time), so either may happen"
            )
        return lines

    def why(self) -> str:
        s = self.settings
        if self.model_s is not None and self.seconds is not None:
            if self.seconds < (1 - TOLERANCE) * self.model_s:
                return (
                    "sooner than the model: Kafka checks the quota before a response and "
                    "charges it after, so whole responses (up to replica.fetch.response.max."
                    f"bytes = {human_bytes(s.response_max_bytes)}) go out while the measured "
                    "rate is at or under the throttle, and a fresh quota counts its first "
                    "window as full: the first responses are free"
                )
            if self.seconds > (1 + TOLERANCE) * self.model_s:
                return (
                    "later than the model: a throttled follower backs off replica.fetch."
                    f"backoff.ms ({s.backoff_s * 1000:g} ms) and a throttled leader holds a "
                    f"fetch up to replica.fetch.wait.max.ms ({s.wait_max_s * 1000:g} ms), so "
                    "part of the allowance goes unused"
                )
        return "as the model (within 2 %): whole responses and the free first window even out"

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        return {
            "ran": self.ran,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "responses": self.responses,
            "time_limit_s": s.time_limit_s,
            "why": self.why() if self.ran and self.seconds is not None else None,
            "alternatives_s": None if self.alternatives_s is None else list(self.alternatives_s),
            "settings": {
                "replica.fetch.response.max.bytes": s.response_max_bytes,
                "replica.fetch.max.bytes": s.partition_max_bytes,
                "replica.fetch.wait.max.ms": round(s.wait_max_s * 1000),
                "replica.fetch.backoff.ms": round(s.backoff_s * 1000),
                "replication.quota.window.num": s.window_num,
                "replication.quota.window.size.seconds": s.window_s,
            },
        }


def simulate(
    partitions: Sequence[MovingPartition],
    *,
    throttle: float,
    throttle_mode: str,
    settings: KafkaSettings,
    model_s: float | None,
) -> SimulationFigure:
    """Kafka's algorithm at `throttle`; not run when the traffic model (`model_s`) says never
    or beyond SIMULATE_UP_TO x the simulation's time limit."""
    if model_s is None or model_s > SIMULATE_UP_TO * settings.time_limit_s:
        return SimulationFigure(
            seconds=None, responses=0, ran=False, model_s=model_s, settings=settings
        )
    mode = MODEL_MODES[throttle_mode]
    # Brokers up for longer than the quota's span: a lists-mode leader sensor holds a full span
    # of (nearly empty) samples and admits a burst of up to T x span at the start.
    ages = aged_sensors(partitions, mode, settings.span_s)
    sim = kafka_prediction(
        partitions, throttle=throttle, mode=mode, settings=settings, sensor_age_s=ages
    )
    alternatives = None
    if sim.seconds is not None and sim.seconds <= STEPS_UP_TO_S:
        alternatives = step_alternatives(
            partitions,
            throttle=throttle,
            mode=mode,
            settings=settings,
            sensor_age_s=ages,
            nominal=sim.seconds,
            accepted=(1 - STEP, 1 + STEP),
        )
    return SimulationFigure(
        seconds=sim.seconds,
        responses=sim.responses,
        ran=True,
        model_s=model_s,
        settings=settings,
        alternatives_s=alternatives,
    )
