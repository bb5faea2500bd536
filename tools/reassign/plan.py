"""The operator's arithmetic for a throttled move, pure
(docs/throttling.md#the-operators-arithmetic).

KIP-73 asks that an admin who wants a move bounded to X% of the network, finishing in Y
seconds, can "easily determine the appropriate throttle"; no Kafka tool computes it. This module
does, from numbers the caller supplies (bytes to move per broker, e.g. from
`moves.bytes_to_move_per_broker`; BytesInPerSec per broker from the metrics; the network speed):

- `predict_move_time`: how long a move takes at throttle T (KIP-73 Q&A 1);
- `check_throttle`: KIP-73's sanity bounds on T, `IN < T < N - IN/R` per broker (Q&A 4) and
  "first responses must fit the quota window" (Q&A 5);
- `throttle_for_deadline`: the T that finishes within Y seconds, whether it fits within X% of the
  network, and how long the move takes at X%, side by side, with the checks at that T.

Rates are bytes per second, sizes bytes, times seconds; human output uses decimal units
(1 MB = 10**6 B). Results are frozen dataclasses with `lines()` for people and `to_json()` (a
JSON-ready dict) for scripts. Bad input is a `ConfigError` naming the accepted form.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.errors import ConfigError
from minikafka.tools.reassign.units import human_bytes, human_rate

VALUE = dict(frozen=True, slots=True, kw_only=True)

# Kafka's defaults (docs/throttling.md#configs).
DEFAULT_FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
DEFAULT_WINDOW_NUM = 11  # replication.quota.window.num
DEFAULT_WINDOW_SIZE_S = 1.0  # replication.quota.window.size.seconds

RULE_PROGRESS = "IN < T"
RULE_CLIENT_ROOM = "T < N - IN/R"
RULE_WINDOW = "replica.fetch.response.max.bytes < T x window total"
RULE_WINDOW_NETWORK = "replica.fetch.response.max.bytes < window total x N / #brokers"
RULE_SHARE = "T <= X% of N"


def _seconds(s: float | None) -> str:
    return "never" if s is None else f"{s:,.0f} s"


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{name} {value!r}: expected a number > 0")
    if math.isinf(value):
        raise ConfigError(f"{name} {value!r}: expected a finite number > 0")
    return value


def _whole(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} {value!r}: expected an integer >= 1")
    return value


def _failure(rule: str, broker: int | None, message: str) -> CheckFailure:
    return CheckFailure(rule=rule, broker=broker, message=message)


def _per_broker(name: str, values: Mapping[int, float]) -> dict[int, float]:
    for broker, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0 or math.isinf(v):
            raise ConfigError(f"{name} of broker {broker} is {v!r}: expected a number >= 0")
    return dict(sorted(values.items()))


# ---------------------------------------------------------------------------- move time


@dataclass(**VALUE)
class BrokerMoveTime:
    broker: int
    bytes_to_move: int
    seconds: float | None  # None: never finishes


@dataclass(**VALUE)
class MovePrediction:
    """How long a move takes at one throttle, per broker and overall (the slowest broker)."""

    throttle: float
    max_bytes_in: float
    max_bytes_in_broker: int | None
    brokers: tuple[BrokerMoveTime, ...]

    @property
    def catch_up_rate(self) -> float:
        """What the throttle leaves for copying old data: T - max(BytesInPerSec)."""
        return self.throttle - self.max_bytes_in

    def burst_bytes(self, window_size_s: float) -> float:
        """What a replication quota admits at once: its SimpleRate treats the first window as
        full-sized, so an idle sensor lets T x window size through before it reads "exceeded"
        (docs/throttling.md#overshoot). A broker with no more than that to move
        may finish at full speed: B / T is then only an upper bound."""
        return self.throttle * window_size_s

    def within_first_window(self, window_size_s: float) -> list[int]:
        """The brokers whose whole move fits in that first burst."""
        burst = self.burst_bytes(window_size_s)
        return [b.broker for b in self.brokers if 0 < b.bytes_to_move <= burst]

    @property
    def finishes(self) -> bool:
        return all(b.seconds is not None for b in self.brokers)

    @property
    def max_seconds(self) -> float | None:
        """The move's duration (None: never finishes)."""
        if not self.finishes:
            return None
        return max((b.seconds or 0.0 for b in self.brokers), default=0.0)

    @property
    def slowest(self) -> int | None:
        if not self.brokers or not self.finishes:
            return None
        return max(self.brokers, key=lambda b: (b.seconds or 0.0, -b.broker)).broker

    def lines(self) -> list[str]:
        who = "" if self.max_bytes_in_broker is None else f" (broker {self.max_bytes_in_broker})"
        out = [
            "MoveTime = bytes to move / (throttle - max(BytesInPerSec))  [KIP-73]",
            f"throttle {human_rate(self.throttle)}, max bytes in {human_rate(self.max_bytes_in)}{who}: "
            f"{human_rate(max(self.catch_up_rate, 0.0))} left to copy existing data",
        ]
        for b in self.brokers:
            out.append(
                f"  broker {b.broker}: {human_bytes(b.bytes_to_move)} to copy -> {_seconds(b.seconds)}"
            )
        if self.finishes:
            slowest = "" if self.slowest is None else f" (broker {self.slowest} is the slowest)"
            out.append(f"the move takes {_seconds(self.max_seconds)}{slowest}")
        else:
            out.append(
                f"the move never finishes: the throttle {human_rate(self.throttle)} is not above max "
                f"bytes in {human_rate(self.max_bytes_in)}, so keeping up with new data uses all of it; "
                f"set a throttle above {human_rate(self.max_bytes_in)}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "throttle": self.throttle,
            "max_bytes_in": self.max_bytes_in,
            "max_bytes_in_broker": self.max_bytes_in_broker,
            "catch_up_rate": self.catch_up_rate,
            "finishes": self.finishes,
            "max_seconds": self.max_seconds,
            "slowest_broker": self.slowest,
            "brokers": [
                {"broker": b.broker, "bytes_to_move": b.bytes_to_move, "seconds": b.seconds}
                for b in self.brokers
            ],
        }


def predict_move_time(
    *,
    bytes_to_move_per_broker: Mapping[int, int],
    throttle: float,
    bytes_in_per_broker: Mapping[int, float],
) -> MovePrediction:
    """Per broker `bytes / (throttle - max(BytesInPerSec))`, and the max (KIP-73 Q&A 1).

    Why BytesIn is subtracted: the throttle bounds ALL the traffic of the throttled replicas,
    and while a replica is being copied its partition keeps receiving writes. A destination must
    fetch that new data too, and it counts against the same throttle (the follower records every
    throttled byte, the leader every byte of its listed partitions, in-sync or not). So only
    T - IN is left for copying the existing data. KIP-73 takes the max of BytesInPerSec over the
    brokers: leadership and replicas move during the move, so the busiest broker's inbound rate
    is the safe figure, and the same one is subtracted for every broker. The brokers copy in
    parallel, each under its own throttle, so the move takes as long as the slowest broker.

    When T <= max(BytesInPerSec) the formula would give a negative or infinite time: the new
    data alone fills the throttle and the copy never progresses (SumReplicaLag stops falling).
    Such brokers get `seconds=None` and the prediction says "never finishes"; a broker with
    nothing to copy takes 0 s. Brokers missing from `bytes_in_per_broker` count as 0 B/s in.
    """
    _positive("throttle", throttle)
    moving = _per_broker("bytes to move", bytes_to_move_per_broker)
    inbound = _per_broker("bytes in", bytes_in_per_broker)
    max_in = max(inbound.values(), default=0.0)
    max_in_broker = max(inbound, key=lambda b: (inbound[b], -b)) if inbound else None
    rate = throttle - max_in
    brokers = tuple(
        BrokerMoveTime(
            broker=b,
            bytes_to_move=int(n),
            seconds=0.0 if n == 0 else (n / rate if rate > 0 else None),
        )
        for b, n in moving.items()
    )
    return MovePrediction(
        throttle=throttle, max_bytes_in=max_in, max_bytes_in_broker=max_in_broker, brokers=brokers
    )


# ---------------------------------------------------------------------------- checks


@dataclass(**VALUE)
class CheckFailure:
    rule: str  # one of the RULE_* names
    broker: int | None  # None: the rule is cluster-wide
    message: str  # one sentence, with the numbers


@dataclass(**VALUE)
class ThrottleCheck:
    """KIP-73's bounds on a throttle T, with every failure explained."""

    throttle: float
    network_bytes_per_s: float
    replication_factor: int
    window_total_s: float
    fetch_response_max_bytes: int
    failures: tuple[CheckFailure, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        if self.ok:
            return [
                f"throttle {human_rate(self.throttle)} passes IN < T < N - IN/R on every broker and "
                f"{human_bytes(self.fetch_response_max_bytes)} responses fit the "
                f"{self.window_total_s:g} s quota window"
            ]
        return [f"[{f.rule}] {f.message}" for f in self.failures]

    def to_json(self) -> dict[str, Any]:
        return {
            "throttle": self.throttle,
            "network_bytes_per_s": self.network_bytes_per_s,
            "replication_factor": self.replication_factor,
            "window_total_s": self.window_total_s,
            "fetch_response_max_bytes": self.fetch_response_max_bytes,
            "ok": self.ok,
            "failures": [
                {"rule": f.rule, "broker": f.broker, "message": f.message} for f in self.failures
            ],
        }


def check_throttle(
    *,
    throttle: float,
    bytes_in_per_broker: Mapping[int, float],
    network_bytes_per_s: float,
    replication_factor: int,
    fetch_response_max_bytes: int = DEFAULT_FETCH_RESPONSE_MAX_BYTES,
    window_num: int = DEFAULT_WINDOW_NUM,
    window_size_s: float = DEFAULT_WINDOW_SIZE_S,
    num_brokers: int | None = None,
) -> ThrottleCheck:
    """KIP-73's bounds on T, each failure one sentence with its numbers.

    Per broker, `IN < T < N - IN/R` (Q&A 4): T above the broker's inbound rate, or keeping up
    with new data eats the whole throttle and the copy never progresses; T below N - IN/R, or the
    broker cannot take its clients' inbound traffic beside replication once leaders rebalance
    onto it (IN/R is the share of inbound traffic of the partitions it leads). Cluster-wide
    (Q&A 5): `replica.fetch.response.max.bytes < T x window total`, because the quota is
    optimistic (checked before, charged after a response) and a first response larger than what
    the whole window allows overshoots the bound before the throttle can act; and on large
    clusters, where #brokers leaders answer one follower at once, `< window total x N /
    #brokers`. `num_brokers` defaults to the number of brokers in `bytes_in_per_broker`.
    """
    _positive("throttle", throttle)
    _positive("network bytes per second", network_bytes_per_s)
    _whole("replication factor", replication_factor)
    _whole("replication.quota.window.num", window_num)
    _positive("replication.quota.window.size.seconds", window_size_s)
    _positive("replica.fetch.response.max.bytes", fetch_response_max_bytes)
    inbound = _per_broker("bytes in", bytes_in_per_broker)
    t, n, r = throttle, network_bytes_per_s, replication_factor
    failures: list[CheckFailure] = []
    for b, bytes_in in inbound.items():
        if not bytes_in < t:
            why = (
                f"broker {b}: throttle {human_rate(t)} is not above its bytes in {human_rate(bytes_in)}, "
                "so keeping the throttled replicas up with new data uses the whole throttle "
                "and the move never finishes"
            )
            failures.append(_failure(RULE_PROGRESS, b, why))
        room = n - bytes_in / r
        if not t < room:
            why = (
                f"broker {b}: throttle {human_rate(t)} is not below network {human_rate(n)} - bytes in "
                f"{human_rate(bytes_in)} / RF {r} = {human_rate(room)}, so if leaders rebalance onto "
                "it its clients' inbound traffic no longer fits beside replication"
            )
            failures.append(_failure(RULE_CLIENT_ROOM, b, why))
    window = window_num * window_size_s
    f = fetch_response_max_bytes
    if not f < t * window:
        why = (
            f"replica.fetch.response.max.bytes {human_bytes(f)} is not below throttle x window "
            f"total = {human_rate(t)} x {window:g} s = {human_bytes(t * window)}, so a follower's first "
            "response exceeds what the whole quota window allows and overshoots the "
            "throttle; lower it or raise the throttle"
        )
        failures.append(_failure(RULE_WINDOW, None, why))
    brokers = num_brokers if num_brokers is not None else len(inbound)
    if brokers >= 1 and not f < window * n / brokers:
        why = (
            f"replica.fetch.response.max.bytes {human_bytes(f)} is not below window total x "
            f"network / #brokers = {window:g} s x {human_rate(n)} / {brokers} = "
            f"{human_bytes(window * n / brokers)}, so the first responses of all leaders cannot "
            "reach a follower within the window"
        )
        failures.append(_failure(RULE_WINDOW_NETWORK, None, why))
    return ThrottleCheck(
        throttle=t,
        network_bytes_per_s=n,
        replication_factor=r,
        window_total_s=window,
        fetch_response_max_bytes=int(f),
        failures=tuple(failures),
    )


# ---------------------------------------------------------------------------- deadline


@dataclass(**VALUE)
class ThrottlePlan:
    """The throttle for a deadline next to the share of the network the operator allows."""

    deadline_s: float
    required_throttle: int  # B/s: finishes within the deadline
    max_fraction: float
    allowed_throttle: float  # B/s: max_fraction x network
    at_required: MovePrediction
    at_allowed: MovePrediction
    check: ThrottleCheck  # KIP-73's bounds at the required throttle

    @property
    def fits(self) -> bool:
        """The required throttle is within the allowed share of the network."""
        return self.required_throttle <= self.allowed_throttle

    @property
    def ok(self) -> bool:
        return self.fits and self.check.ok

    @property
    def failures(self) -> tuple[CheckFailure, ...]:
        """Everything that does not fit: the network share first, then the checks."""
        share = self.share_failure()
        return ((share,) if share is not None else ()) + self.check.failures

    def share_failure(self) -> CheckFailure | None:
        if self.fits:
            return None
        return _failure(
            RULE_SHARE,
            None,
            (
                f"finishing in {_seconds(self.deadline_s)} needs {human_rate(self.required_throttle)}, "
                f"more than {self.max_fraction:.0%} of the network = "
                f"{human_rate(self.allowed_throttle)}, at which the move takes "
                f"{_seconds(self.at_allowed.max_seconds)}"
            ),
        )

    def lines(self) -> list[str]:
        out = [
            f"to finish in {_seconds(self.deadline_s)}: throttle {human_rate(self.required_throttle)} "
            f"({self.required_throttle} B/s)",
            f"{self.max_fraction:.0%} of the network: throttle {human_rate(self.allowed_throttle)}, "
            f"the move takes {_seconds(self.at_allowed.max_seconds)}",
        ]
        share = self.share_failure()
        if share is not None:
            out.append(f"[{share.rule}] {share.message}")
        out.extend(self.check.lines())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "deadline_s": self.deadline_s,
            "required_throttle": self.required_throttle,
            "max_fraction": self.max_fraction,
            "allowed_throttle": self.allowed_throttle,
            "fits": self.fits,
            "ok": self.ok,
            "seconds_at_required": self.at_required.max_seconds,
            "seconds_at_allowed": self.at_allowed.max_seconds,
            "check": self.check.to_json(),
        }


def throttle_for_deadline(
    *,
    bytes_per_broker: Mapping[int, int],
    deadline_s: float,
    bytes_in_per_broker: Mapping[int, float],
    network_bytes_per_s: float,
    max_fraction: float,
    replication_factor: int,
    fetch_response_max_bytes: int = DEFAULT_FETCH_RESPONSE_MAX_BYTES,
    window_num: int = DEFAULT_WINDOW_NUM,
    window_size_s: float = DEFAULT_WINDOW_SIZE_S,
    num_brokers: int | None = None,
) -> ThrottlePlan:
    """The throttle that finishes within `deadline_s`, and whether it fits `max_fraction` of N.

    Inverting the move time: T = max(BytesInPerSec) + max(bytes per broker) / Y, rounded up to a
    whole B/s (the configs are integers). `max_fraction` is X as a fraction (0.3 for 30%); the
    plan also predicts the move at X x N so the operator sees both numbers side by side, and
    runs `check_throttle` at the required T.
    """
    _positive("deadline seconds", deadline_s)
    _positive("network bytes per second", network_bytes_per_s)
    if (
        isinstance(max_fraction, bool)
        or not isinstance(max_fraction, int | float)
        or not 0 < max_fraction <= 1
    ):
        raise ConfigError(
            f"max fraction {max_fraction!r}: expected a fraction in (0, 1], e.g. 0.3 for 30%"
        )
    moving = _per_broker("bytes to move", bytes_per_broker)
    inbound = _per_broker("bytes in", bytes_in_per_broker)
    max_in = max(inbound.values(), default=0.0)
    required = max(1, math.ceil(max_in + max(moving.values(), default=0) / deadline_s))
    allowed = max_fraction * network_bytes_per_s
    check = check_throttle(
        throttle=required,
        bytes_in_per_broker=inbound,
        network_bytes_per_s=network_bytes_per_s,
        replication_factor=replication_factor,
        fetch_response_max_bytes=fetch_response_max_bytes,
        window_num=window_num,
        window_size_s=window_size_s,
        num_brokers=num_brokers,
    )

    def predict(t: float) -> MovePrediction:
        return predict_move_time(
            bytes_to_move_per_broker=moving, throttle=t, bytes_in_per_broker=inbound
        )

    return ThrottlePlan(
        deadline_s=deadline_s,
        required_throttle=required,
        max_fraction=max_fraction,
        allowed_throttle=allowed,
        at_required=predict(required),
        at_allowed=predict(allowed),
        check=check,
    )
