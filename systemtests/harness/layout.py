"""The cases' layouts (who holds what before and after), and the move-time prediction.

Layouts, with P partitions (even and odd partitions differ; the first replica leads):

- `wipe` (2 brokers, KIP-73 Q&A 2, "throttle a bootstrapping broker"): every partition on
  brokers 1 and 2; broker 2 is killed, wiped and restarted, and re-replicates everything from
  broker 1, which leads every partition after the kill.
- `one-to-two` (3 brokers, decommissioning broker 1): even partitions on [1,2], odd on [1,3],
  broker 1 leads all; the moves [1,2] -> [2,3] and [1,3] -> [3,2] take broker 1 out, so its
  data goes to the other two (broker 3 copies the even partitions, broker 2 the odd ones).
  Broker 1 sends every byte: the LEADER throttle is the binding one.
- `two-to-one` (3 brokers, adding broker 3): even partitions on [1,2], odd on [2,1]; the moves
  [1,2] -> [1,3] and [2,1] -> [2,3] copy one replica of every partition to broker 3, from
  brokers 1 and 2 (the leaders, which stay). Broker 3 receives every byte: the FOLLOWER
  throttle is the binding one.

The prediction (`predict`) is the move model of tools/reassign/model.py, shared with
`reassign plan`: per throttled sensor, catch-up bytes over the throttle less the keep-up rate
it carries, which depends on the throttle mode (KIP-73's lists charge a leader with its in-sync
followers' bytes too); KIP-73's own formula is returned for comparison. Modelling limits: the
partitions are taken to finish together. Across fetchers that does not quite hold: a leader
copying to two destination brokers gives its allowance to whichever fetch comes first, and in
`one-to-two` one destination's half finished 15-25 % before the other's, after which the leader
sheds that half's keep-up traffic. Under load in the lists mode that made the move 0.91-0.99 x
the prediction at 0.3 x T of load, 0.97-1.00 at 0.2 x T (systemtests/harness/profiles.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.tools.reassign.model import (
    MovingPartition,
    SensorLoad,
    kip73_formula,
    traffic_prediction,
)

LAYOUTS = ("wipe", "one-to-two", "two-to-one")


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMove:
    """One partition during the move: its leader, its replicas, and who copies it."""

    leader: int
    replicas: tuple[int, ...]  # during the move (original + adding)
    destinations: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    name: str
    brokers: tuple[int, ...]
    initial: Mapping[int, tuple[int, ...]]  # partition -> replicas at creation (first leads)
    target: Mapping[int, tuple[int, ...]] | None  # the reassignment; None: wipe
    wiped: int | None
    sending: tuple[int, ...]
    receiving: tuple[int, ...]

    @property
    def partitions(self) -> int:
        return len(self.initial)

    @property
    def replication_factor(self) -> int:
        return len(self.initial[0])

    def moves(self) -> dict[int, PartitionMove]:
        out = {}
        for p, replicas in self.initial.items():
            if self.target is None:  # wipe: the survivor leads, the wiped broker copies
                assert self.wiped is not None
                leader = next(b for b in replicas if b != self.wiped)
                out[p] = PartitionMove(
                    leader=leader, replicas=tuple(replicas), destinations=(self.wiped,)
                )
            else:
                target = self.target[p]
                adding = tuple(b for b in target if b not in replicas)
                out[p] = PartitionMove(
                    leader=replicas[0],
                    replicas=tuple(dict.fromkeys((*target, *replicas))),
                    destinations=adding,
                )
        return out


def make_layout(name: str, partitions: int) -> Layout:
    even = range(0, partitions, 2)
    if name == "wipe":
        initial = {p: (1, 2) if p in even else (2, 1) for p in range(partitions)}
        return Layout(
            name=name,
            brokers=(1, 2),
            initial=initial,
            target=None,
            wiped=2,
            sending=(1,),
            receiving=(2,),
        )
    if name == "one-to-two":
        initial = {p: (1, 2) if p in even else (1, 3) for p in range(partitions)}
        target = {p: (2, 3) if p in even else (3, 2) for p in range(partitions)}
        return Layout(
            name=name,
            brokers=(1, 2, 3),
            initial=initial,
            target=target,
            wiped=None,
            sending=(1,),
            receiving=(2, 3),
        )
    if name == "two-to-one":
        initial = {p: (1, 2) if p in even else (2, 1) for p in range(partitions)}
        target = {p: (1, 3) if p in even else (2, 3) for p in range(partitions)}
        return Layout(
            name=name,
            brokers=(1, 2, 3),
            initial=initial,
            target=target,
            wiped=None,
            sending=(1, 2),
            receiving=(3,),
        )
    raise ValueError(f"layout {name!r}: expected one of {', '.join(LAYOUTS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    seconds: float | None  # the slowest sensor
    binding: SensorLoad | None
    sensors: tuple[SensorLoad, ...]
    kip73_formula_s: float | None  # KIP-73's MoveTime, for comparison

    def to_json(self) -> dict[str, object]:
        return {
            "predicted_move_s": None if self.seconds is None else round(self.seconds, 3),
            "binding_sensor": None if self.binding is None else self.binding.to_json(),
            "sensors": [s.to_json() for s in self.sensors],
            "kip73_formula_move_s": None
            if self.kip73_formula_s is None
            else round(self.kip73_formula_s, 3),
        }


def moving_partitions(
    layout: Layout, *, sizes: Mapping[int, int], inbound: Mapping[int, float]
) -> list[MovingPartition]:
    """The layout's moves as the model takes them."""
    return [
        MovingPartition(
            partition=p,
            leader=m.leader,
            replicas=m.replicas,
            destinations=m.destinations,
            size_bytes=sizes.get(p, 0),
            inbound_bytes_per_s=inbound.get(p, 0.0),
            final_leader=None if layout.target is None else layout.target[p][0],
        )
        for p, m in sorted(layout.moves().items())
    ]


def predict(
    layout: Layout,
    *,
    sizes: Mapping[int, int],
    inbound: Mapping[int, float],
    throttle: float,
    mode: str,
) -> Prediction:
    """The move time of `layout` at `throttle` (tools/reassign/model.py's traffic model).
    `sizes`: bytes per partition when the move starts; `inbound`: produce bytes/s per partition
    during the move."""
    moving = moving_partitions(layout, sizes=sizes, inbound=inbound)
    traffic = traffic_prediction(moving, throttle=throttle, mode=mode)
    return Prediction(
        seconds=traffic.seconds,
        binding=traffic.binding,
        sensors=traffic.sensors,
        kip73_formula_s=kip73_formula(moving, throttle=throttle),
    )
