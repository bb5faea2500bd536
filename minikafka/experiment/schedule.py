"""The nemesis schedule: which fault hits which target when, drawn from a seed (pure).

Jepsen's rhythm: quiet for one interval, a fault for one interval, quiet again, ... until the
workload ends; then everything is healed. A fault is a kind and a target:

- kinds: `kill` (SIGKILL, restarted at the fault's end), `pause` (SIGSTOP, SIGCONT at the end),
  `restart` (a clean SIGTERM restart at the start; the end is when it is ready again), `wipe`
  (SIGKILL, its logs deleted, restarted empty at the end: a broker bootstrapping from scratch),
  `power-loss` (simulated time only: the node's machine loses power, so what its disk had not
  made durable is lost too, sim/cluster.py; restarted at the end), `disk-full` (simulated time
  only: every write to the node's log store fails with ENOSPC, so the replicas it writes go
  offline; at the end the space is freed and the node restarted, as Kafka's failed log dirs
  come back only with a restart), `failed-write` (simulated time only: the node's next write
  fails with EIO, taking that replica offline; restarted at the end),
  `partition` (the target cut off from every other node, controller included), `latency`
  (added to every link to and from the target) and `bandwidth` (a byte-rate cap on them);
- targets: `broker:N`, `controller`, `leader:P` (whoever leads partition P of the experiment's
  topic when the fault starts), `follower:P` (a replica of P that is not its leader) and
  `random` (a broker drawn from the seed when the schedule is made).

The same (seed, options) always gives the same schedule; targets that name a role are resolved
when the fault starts, from the cluster's metadata then, and the resolved node is logged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from minikafka.errors import ConfigError
from minikafka.testing.seeds import derive_rng

PROCESS_KINDS = ("kill", "pause", "restart", "wipe")
NETWORK_KINDS = ("partition", "latency", "bandwidth")
# Faults only a simulation can inflict (a real run refuses them); not in `all`.
SIM_KINDS = ("power-loss", "disk-full", "failed-write")
KINDS = PROCESS_KINDS + NETWORK_KINDS + SIM_KINDS
ALL_KINDS = PROCESS_KINDS + NETWORK_KINDS  # what `all` means
TARGET_FORM = "broker:N, controller, leader:P, follower:P or random"
_TARGET = re.compile(r"(broker|leader|follower):(\d+)|controller|random")


@dataclass(frozen=True, slots=True)
class Target:
    """Who a fault hits: `role` is broker | controller | leader | follower; `number` is the
    broker id (broker) or the partition (leader, follower)."""

    role: str
    number: int | None = None

    def __str__(self) -> str:
        return self.role if self.number is None else f"{self.role}:{self.number}"


def parse_target(text: str) -> Target:
    m = _TARGET.fullmatch(text.strip())
    if m is None:
        raise ConfigError(f"fault target {text!r}: expected {TARGET_FORM}")
    if m.group(1):
        return Target(m.group(1), int(m.group(2)))
    return Target(m.group(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One fault: `start_s` and `end_s` are seconds after the workload started."""

    kind: str
    target: Target
    start_s: float
    end_s: float
    params: dict[str, Any] = field(default_factory=dict)  # latency_ms, bandwidth_bps

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"fault kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if not 0 <= self.start_s <= self.end_s:
            raise ConfigError(
                f"fault {self.kind}: need 0 <= start {self.start_s} <= end {self.end_s}"
            )
        if self.kind == "latency" and int(self.params.get("latency_ms", 0)) <= 0:
            raise ConfigError("a latency fault needs params latency_ms > 0")
        if self.kind == "bandwidth" and int(self.params.get("bandwidth_bps", 0)) <= 0:
            raise ConfigError("a bandwidth fault needs params bandwidth_bps > 0")

    @property
    def needs_proxy(self) -> bool:
        return self.kind in NETWORK_KINDS

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": str(self.target),
            "start_s": round(self.start_s, 3),
            "end_s": round(self.end_s, 3),
            **self.params,
        }


def parse_kinds(text: str) -> tuple[str, ...]:
    """`kill,pause` -> ("kill", "pause"); `all` -> every kind a real run can inflict."""
    if text.strip() == "all":
        return ALL_KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ConfigError(
            f"nemesis (faults) {text!r}: expected a comma list of {', '.join(KINDS)} or all"
        )
    return kinds


def plan_schedule(
    *,
    kinds: Sequence[str],
    targets: Sequence[Target],
    duration_s: float,
    interval_s: float,
    seed: int,
    brokers: Sequence[int],
    latency_ms: int = 200,
    bandwidth_bps: int = 256 * 1024,
) -> list[Fault]:
    """Alternate quiet and faulty intervals over `duration_s`: fault i covers
    [(2i+1)·interval, (2i+2)·interval); kind and target are drawn from `seed`."""
    if interval_s <= 0 or duration_s <= 0:
        raise ConfigError("duration and fault interval must be positive")
    if not kinds or not targets:
        return []
    rng = derive_rng(seed, "nemesis")
    faults = []
    start = interval_s
    while start + interval_s <= duration_s + 1e-9:
        kind = rng.choice(list(kinds))
        target = rng.choice(list(targets))
        if target.role == "random":
            target = Target("broker", rng.choice(list(brokers)))
        params: dict[str, Any] = {}
        if kind == "latency":
            params["latency_ms"] = latency_ms
        elif kind == "bandwidth":
            params["bandwidth_bps"] = bandwidth_bps
        faults.append(
            Fault(kind=kind, target=target, start_s=start, end_s=start + interval_s, params=params)
        )
        start += 2 * interval_s
    return faults
