"""How long a throttled move takes: one model for `reassign plan` and the system tests, pure.

A move is described partition by partition (`MovingPartition`: its leader, its replicas during
the move, the destinations copying it, its size when the move starts and its inbound rate).
Three predictions are made from it: the two below, and Kafka's own algorithm
(tools/reassign/kafka_algorithm.py, `kafka_prediction`).

1. **KIP-73's formula** (`kip73_formula`): MoveTime = bytes per broker / (T - max(BytesInPerSec)),
   the admin's arithmetic of KIP-73's Q&A, with the bytes a broker copies in or sends out.

2. **The traffic model** (`traffic_prediction`): KIP-73's formula applied to the traffic each
   throttle really carries. The formula subtracts the inbound rate because the partitions being
   copied keep receiving writes; it does not say WHICH traffic a broker's throttle carries, and
   that depends on the throttle mode. Per throttled sensor (a broker's leader or follower side)
   what it must carry is catch-up bytes C (the data present when the move starts) plus a
   keep-up rate K (new data on the partitions it counts), so it needs C / (T - K) seconds, and
   the move takes as long as the slowest sensor (the binding throttle):
   - follower side of a destination: C = the sizes of the partitions it copies, K = their
     inbound rate (the follower records every throttled partition's bytes, caught up or not);
   - leader side, KIP-73 lists (`lists`): the leader records the bytes of every partition in its
     leader list for EVERY follower, in-sync ones included
     (docs/throttling.md#in-sync-replicas-are-exempt-kafka-4313: KAFKA-4313 exempts them from
     throttling, not from counting), so K = inbound x (replicas during the
     move - 1); with r=2 plus one destination that is twice the inbound rate;
   - leader side, KIP-542 (`kip542`): only the bytes sent to adding replicas are reassignment
     traffic, so K = inbound x destinations.
   This is what the precise quota mode achieves (it holds each sensor at its bound). Modelling
   limits: partitions are taken to finish together; a partition that completes early stops
   counting, which can only shorten the move.

Rates are bytes per second, sizes bytes, times seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MODES = ("lists", "kip542")
VALUE = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**VALUE)
class MovingPartition:
    """One partition during the move."""

    partition: int
    leader: int
    replicas: tuple[int, ...]  # during the move: original + adding
    destinations: tuple[int, ...]  # the adding replicas, which copy it
    size_bytes: int = 0  # when the move starts
    inbound_bytes_per_s: float = 0.0
    topic: str = "t"
    # Who leads it once its move completes (Kafka elects the target's first replica); None:
    # its leader stays.
    final_leader: int | None = None

    @property
    def sources(self) -> tuple[int, ...]:
        """The replicas that hold it already: `reassign --execute` lists them all in the leader
        list (any of them may lead during the move)."""
        return tuple(b for b in self.replicas if b not in self.destinations)


@dataclass(**VALUE)
class SensorLoad:
    broker: int
    side: str  # "leader" | "follower"
    catch_up_bytes: int
    keep_up_bytes_per_s: float
    seconds: float | None = None  # None: never finishes (K >= T)

    def to_json(self) -> dict[str, object]:
        return {
            "broker": self.broker,
            "side": self.side,
            "catch_up_bytes": self.catch_up_bytes,
            "keep_up_bytes_per_s": round(self.keep_up_bytes_per_s, 1),
            "seconds": None if self.seconds is None else round(self.seconds, 3),
        }


@dataclass(**VALUE)
class TrafficPrediction:
    seconds: float | None  # the slowest sensor; None: some sensor never finishes
    binding: SensorLoad | None
    sensors: tuple[SensorLoad, ...]

    def binding_sides(self, tolerance: float = 0.02) -> set[tuple[int, str]]:
        """The sensors that limit the move (all of them within `tolerance` of the slowest)."""
        if self.seconds is None:
            return set()
        floor = (1 - tolerance) * self.seconds
        return {(s.broker, s.side) for s in self.sensors if (s.seconds or 0.0) >= floor}


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")


def sensor_loads(partitions: Iterable[MovingPartition], mode: str) -> list[SensorLoad]:
    """Catch-up bytes and keep-up rate of every throttled sensor (module docstring, point 2)."""
    check_mode(mode)
    catch: dict[tuple[int, str], int] = {}
    keep: dict[tuple[int, str], float] = {}
    for m in partitions:
        if not m.destinations:
            continue
        counted = len(m.replicas) - 1 if mode == "lists" else len(m.destinations)
        key = (m.leader, "leader")
        catch[key] = catch.get(key, 0) + m.size_bytes * len(m.destinations)
        keep[key] = keep.get(key, 0.0) + m.inbound_bytes_per_s * counted
        for d in m.destinations:
            catch[(d, "follower")] = catch.get((d, "follower"), 0) + m.size_bytes
            keep[(d, "follower")] = keep.get((d, "follower"), 0.0) + m.inbound_bytes_per_s
    return [
        SensorLoad(broker=b, side=side, catch_up_bytes=c, keep_up_bytes_per_s=keep[(b, side)])
        for (b, side), c in sorted(catch.items())
    ]


def traffic_prediction(
    partitions: Sequence[MovingPartition], *, throttle: float, mode: str
) -> TrafficPrediction:
    """Each sensor's C / (T - K); the move takes the slowest (module docstring, point 2)."""
    sensors = []
    for s in sensor_loads(partitions, mode):
        room = throttle - s.keep_up_bytes_per_s
        seconds = 0.0 if s.catch_up_bytes == 0 else (s.catch_up_bytes / room if room > 0 else None)
        sensors.append(
            SensorLoad(
                broker=s.broker,
                side=s.side,
                catch_up_bytes=s.catch_up_bytes,
                keep_up_bytes_per_s=s.keep_up_bytes_per_s,
                seconds=seconds,
            )
        )
    if any(s.seconds is None for s in sensors):
        return TrafficPrediction(seconds=None, binding=None, sensors=tuple(sensors))
    binding = max(sensors, key=lambda s: s.seconds or 0.0, default=None)
    return TrafficPrediction(
        seconds=None if binding is None else binding.seconds,
        binding=binding,
        sensors=tuple(sensors),
    )


def kip73_formula(partitions: Sequence[MovingPartition], *, throttle: float) -> float | None:
    """KIP-73's MoveTime: max over brokers of max(bytes copied in, bytes sent out) /
    (T - max(client BytesInPerSec)); None when T <= max BytesIn (module docstring, point 1)."""
    sends: dict[int, int] = {}
    copies: dict[int, int] = {}
    client_in: dict[int, float] = {}
    for m in partitions:
        client_in[m.leader] = client_in.get(m.leader, 0.0) + m.inbound_bytes_per_s
        sends[m.leader] = sends.get(m.leader, 0) + m.size_bytes * len(m.destinations)
        for d in m.destinations:
            copies[d] = copies.get(d, 0) + m.size_bytes
    room = throttle - max(client_in.values(), default=0.0)
    worst = max((max(sends.get(b, 0), copies.get(b, 0)) for b in {*sends, *copies}), default=0)
    if worst == 0:
        return 0.0
    return worst / room if room > 0 else None
