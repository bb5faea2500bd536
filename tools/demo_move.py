"""The demo's move, pure: where the topic starts, which replicas move onto the broker that holds
none of them, how much data makes that move last about `MOVE_TARGET_S` under the throttle, the
line printed once a second, the mean rate over the move, and the figures' JSON.

The story is KIP-73's own: a broker has joined the cluster (broker 3, holding nothing of the
topic), and a broker's worth of replicas is moved onto it while producers keep writing, under a
replication throttle (`leader.replication.throttled.rate` / `follower.replication.throttled.rate`
with the topic's `*.replication.throttled.replicas` lists, as `minikafka reassign --execute
--throttle` sets them) so that the copy does not starve the clients.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig
from minikafka.tools.reassign.units import human_bytes

TOPIC = "demo"
PARTITIONS = 6
REPLICATION_FACTOR = 2
BROKERS = (1, 2, 3)
HOME_BROKERS = (1, 2)  # where the topic starts: broker 3 holds none of it
RECORD_BYTES = 1000  # each value padded to this: a move of tens of MB in a few 10,000 records
# The steady producer (acks=all) during the move: 200 kB/s, a tenth of the default throttle,
# so that KIP-73's MoveTime (bytes / (throttle - BytesInPerSec)) is mostly the copy.
PRODUCE_RECORDS_PER_S = 200
MOVE_TARGET_S = 20.0  # what the default sizing aims at (the whole demo: about a minute)
DEFAULT_THROTTLE = 2_000_000  # B/s: "a few MB/s", well above Kafka's advice of 1 MB/s
# The throttles the demo sizes its data for. Below 1 MB/s the first fetch responses of the move,
# which KIP-73's quota lets through whole (checked before a fetch, charged after it:
# docs/throttling.md#overshoot), are a large part of a 20 s move (4 partitions x
# replica.fetch.max.bytes, 1 MiB, at once); Kafka's documentation advises throttles well above
# 1 MB/s for the same reason. Above 5 MB/s the data a 20 s move needs (150 MB) takes longer to
# write and read back than the demo's minute allows.
THROTTLE_MIN = 1_000_000
THROTTLE_MAX = 5_000_000
THROTTLE_FORM = (
    f"a rate in bytes per second, an integer from {THROTTLE_MIN} to {THROTTLE_MAX} "
    "(the demo sizes its data for a 20 s move at it)"
)
# The sensor the once-a-second line reads: KIP-73's FollowerReplicationThrottledRate, Kafka's
# `FollowerReplication` byte-rate (ReplicationQuotaManager, a SimpleRate over
# replication.quota.window.num x replication.quota.window.size.seconds), the very measure the
# follower's quota compares with `follower.replication.throttled.rate` before each fetch.
SENSOR = "FollowerReplicationThrottledRate"
# What the destination copied: every byte it replicated. It follows the moved partitions only
# (it leads none, and holds nothing else), so this counts the move and the new data of its
# partitions, whether the throttle applied to them or not: a move the throttle missed shows
# as a rate far above the limit, not as nothing copied (which its throttled-bytes counter,
# `follower_replication_throttled_bytes`, would show).
COPIED_COUNTER = "replication_bytes_in"
# The brokers' defaults the demo keeps (Kafka's): what one follower fetch may carry per
# partition, and the span of the replication quota's sensor (window.num x window.size.seconds).
_DEFAULTS = NodeConfig(node_id=0)
REPLICA_FETCH_MAX_BYTES = _DEFAULTS.replica_fetch_max_bytes
QUOTA_WINDOW_S = (
    _DEFAULTS.replication_quota_window_num * _DEFAULTS.replication_quota_window_size_seconds
)
# The integration test's and the figures' bound on the mean rate: KIP-73's quota is checked
# before a fetch and charged after it, so the response that starts under the limit goes out
# whole (docs/throttling.md#overshoot); a tenth over the limit is what that may cost here.
MEAN_BOUND = 1.1


def parse_throttle(text: str) -> int:
    """`--throttle`: B/s, digits only, within the sized range; ConfigError naming the form."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or not (
        THROTTLE_MIN <= int(value) <= THROTTLE_MAX
    ):
        raise ConfigError(f"--throttle {text!r}: expected {THROTTLE_FORM}, e.g. {DEFAULT_THROTTLE}")
    return int(value)


# ---------------------------------------------------------------------------- the move


def initial_assignment(partitions: int, brokers: Sequence[int]) -> dict[int, list[int]]:
    """Partition p on two of `brokers`, leaders taking turns: [b[p % n], b[(p + 1) % n]]."""
    n = len(brokers)
    if n < REPLICATION_FACTOR or partitions < 1:
        raise ValueError(f"{partitions} partitions on brokers {list(brokers)}: need 1+ and 2+")
    return {p: [brokers[p % n], brokers[(p + 1) % n]] for p in range(partitions)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """The replicas moved onto `destination`: partition -> its target replicas."""

    destination: int
    targets: Mapping[int, list[int]]
    removed: Mapping[int, int]  # partition -> the follower whose place the destination takes

    @property
    def partitions(self) -> list[int]:
        return sorted(self.targets)

    def sources(self, assignment: Mapping[int, Sequence[int]]) -> list[int]:
        """The brokers the copies come from (the moved partitions' current replicas)."""
        return sorted({b for p in self.targets for b in assignment[p]})


def choose_move(assignment: Mapping[int, Sequence[int]], brokers: Sequence[int]) -> Move:
    """A broker's worth of replicas onto the broker that holds the fewest (ties: the highest
    id): its fair share is all replicas / brokers. Each moved partition keeps its leader (the
    first replica; producers are not disturbed) and the destination takes the place of the
    follower on the busiest broker, partitions taken in order, so the brokers end even.
    ValueError when every partition already has a replica on it."""
    count = {b: 0 for b in brokers}
    for replicas in assignment.values():
        for b in replicas:
            count[b] = count.get(b, 0) + 1
    destination = min(count, key=lambda b: (count[b], -b))
    share = sum(count.values()) // len(count)
    wanted = max(1, share - count[destination])
    targets: dict[int, list[int]] = {}
    removed: dict[int, int] = {}
    while len(targets) < wanted:
        candidates = [
            (-count[f], p, f)
            for p, replicas in sorted(assignment.items())
            if p not in targets and destination not in replicas
            for f in replicas[1:]
        ]
        if not candidates:
            break
        _, p, follower = min(candidates)
        targets[p] = [destination if b == follower else b for b in assignment[p]]
        removed[p] = follower
        count[follower] -= 1
        count[destination] += 1
    if not targets:
        raise ValueError(f"every partition already has a replica on broker {destination}")
    return Move(destination=destination, targets=targets, removed=removed)


def burst_bytes(partitions: int, fetch_max_bytes: int = REPLICA_FETCH_MAX_BYTES) -> int:
    """The most the destination's follower quota may let through at one moment: KIP-73's quota
    is checked before a fetch and charged after it, so fetches that start while the measured
    rate is at or under the limit go out whole, up to `replica.fetch.max.bytes` for each moved
    partition (docs/throttling.md#overshoot). Over any span of D seconds the copy is then at most
    throttle x D plus this."""
    return partitions * fetch_max_bytes


def window_bound(throttle: int, partitions: int) -> float:
    """The rate no window of the quota's own span (QUOTA_WINDOW_S) should exceed: the limit,
    plus one `burst_bytes` spread over the window."""
    return throttle + burst_bytes(partitions) / QUOTA_WINDOW_S


def records_for_move(
    throttle: int,
    *,
    moved_fraction: float,
    move_s: float = MOVE_TARGET_S,
    record_bytes: int = RECORD_BYTES,
    produce_bytes_per_s: float = PRODUCE_RECORDS_PER_S * RECORD_BYTES,
) -> int:
    """The records to write before the move so that it takes about `move_s` at `throttle`
    (rounded up to a thousand): KIP-73's MoveTime = bytes to move / (throttle -
    BytesInPerSec), the moved partitions' share of the topic being `moved_fraction` (their new
    data counts against the throttle too)."""
    room = throttle - produce_bytes_per_s * moved_fraction
    return max(1000, 1000 * math.ceil(room * move_s / moved_fraction / record_bytes / 1000))


# ---------------------------------------------------------------------------- the figures


def mean_rate(
    samples: Sequence[tuple[float, int]], start: float, end: float
) -> tuple[int, float | None]:
    """(bytes, B/s) a counter grew by over [start, end], from its samples (wall ts, value):
    from the last sample at or before `start` to the first at or after `end` (the bytes of the
    whole move, and a little around it: never less), divided by end - start. A counter that
    went back (a restarted node) counts from 0 again. (0, None) without such samples."""
    before = [v for ts, v in samples if ts <= start]
    after = [v for ts, v in samples if ts >= end]
    if not before or not after or end <= start:
        return 0, None
    inside = [before[-1]] + [v for ts, v in samples if start < ts < end] + [after[0]]
    grown = sum(b - a if b >= a else b for a, b in zip(inside, inside[1:], strict=False))
    return grown, grown / (end - start)


def rate_line(
    elapsed_s: float,
    *,
    sensor: float | None,
    limit: int,
    copied: int | None,
    planned: int,
    moving: int,
    partitions: int,
    produced_per_s: float,
) -> str:
    """The line printed once a second during the move."""
    if sensor is None:
        rate = "    -    "
        share = "    "
    else:
        rate = f"{sensor / 1e6:5.2f} MB/s"
        share = f"{sensor / limit:4.0%}"
    done = "?" if copied is None else f"{copied / 1e6:5.1f}"
    return (
        f"{elapsed_s:4.0f} s  throttled {rate} of {limit / 1e6:.2f} MB/s ({share})  "
        f"copied {done} of ~{planned / 1e6:.1f} MB  moving {moving}/{partitions}  "
        f"producer {produced_per_s:4.0f} rec/s"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveFigures:
    """What the move did, from the destination's own counters and the controller's events."""

    throttle: int
    destination: int
    partitions: Sequence[int]
    planned_bytes: int  # the moved partitions' estimated size when the move started
    predicted_s: float | None  # KIP-73's MoveTime
    duration_s: float | None  # the controller's first start to last completion
    copied_bytes: int
    max_sensor: float | None  # the highest reading of SENSOR during the move

    @property
    def mean_bytes_per_s(self) -> float | None:
        if not self.duration_s:
            return None
        return self.copied_bytes / self.duration_s

    @property
    def ratio(self) -> float | None:
        mean = self.mean_bytes_per_s
        return None if mean is None else mean / self.throttle

    @property
    def within_limit(self) -> bool | None:
        return None if self.ratio is None else self.ratio <= MEAN_BOUND

    def to_json(self) -> dict[str, Any]:
        mean = self.mean_bytes_per_s
        return {
            "destination_broker": self.destination,
            "partitions": list(self.partitions),
            "planned_bytes": self.planned_bytes,
            "predicted_s": _round(self.predicted_s, 1),
            "duration_s": _round(self.duration_s, 2),
            "copied_bytes": self.copied_bytes,
            "mean_bytes_per_s": _round(mean, 0),
            "mean_to_limit": _round(self.ratio, 3),
            "within_limit": self.within_limit,
            "max_sensor_bytes_per_s": _round(self.max_sensor, 0),
        }

    def summary(self) -> str:
        if self.duration_s is None or self.mean_bytes_per_s is None:
            return "the move did not complete"
        predicted = (
            "" if self.predicted_s is None else f" (KIP-73 predicted {self.predicted_s:.0f} s)"
        )
        return (
            f"moved {human_bytes(self.copied_bytes)} onto broker {self.destination} in "
            f"{self.duration_s:.1f} s{predicted}: {self.mean_bytes_per_s / 1e6:.2f} MB/s on "
            f"average ({COPIED_COUNTER} over the move), {self.ratio:.0%} of the "
            f"{self.throttle / 1e6:.2f} MB/s limit"
        )


def _round(value: float | None, digits: int) -> float | None:
    if value is None:
        return None
    return round(value, digits) if digits else float(round(value))


def demo_json(
    *,
    ok: bool,
    move: MoveFigures,
    verdict: Mapping[str, int],
    produce: Mapping[str, Any],
    throttle_configs: Sequence[str],
    throttle_removed: bool,
    run_dir: str,
    plot: str | None,
    csv: str,
    wall_s: float,
    records: int,
) -> dict[str, Any]:
    """The final JSON object of `minikafka demo --json` (and the run folder's demo.json)."""
    return {
        "ok": ok,
        "topic": {
            "name": TOPIC,
            "partitions": PARTITIONS,
            "replication_factor": REPLICATION_FACTOR,
            "records_before_move": records,
            "record_bytes": RECORD_BYTES,
        },
        "throttle": {
            "bytes_per_s": move.throttle,
            "mode": "replication (KIP-73: rates and replica lists)",
            "sensor": SENSOR,
            "sensor_broker": move.destination,
            "configs": list(throttle_configs),
            "removed": throttle_removed,
        },
        "move": move.to_json(),
        "produce": dict(produce),
        "verify": dict(verdict),
        "run_dir": run_dir,
        "plot": plot,
        "csv": csv,
        "wall_s": round(wall_s, 1),
    }
