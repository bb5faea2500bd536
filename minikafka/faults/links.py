"""The fault state of a proxy's directed links: pure, synchronous, time passed in as `now_ms`.

A directed link (src, dst) carries the connections node `src` opens to node `dst`. Bytes flow
both ways on it: "to_dst" is what src sends (requests), "to_src" what dst answers. Each link has:

- `Faults`: `blocked` (a partition: nothing is forwarded either way, bytes wait; the shell stops
  reading once its bounded buffer is full, so senders feel TCP back-pressure), `latency_ms`
  (each chunk is delivered that long after it was read, in order) and `bandwidth_bps` (a byte
  rate cap per direction, None for none);
- one `TokenBucket` per direction, shared by every connection of the link (a link is one
  "cable"), rebuilt whenever the bandwidth changes;
- counters: bytes delivered per direction, connections open and ever accepted, resets.

`FaultTable` holds every link of one proxy and applies `set`, `partition` and `heal`. Requests
are validated before they get here (faults/requests.py), so these never fail half-way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LinkId = tuple[int, int]  # (src node id, dst node id)
DIRECTIONS = ("to_dst", "to_src")
KiB = 1024
# Bounded burst: at most 50 ms worth of the rate, and never more than one 64 KiB read chunk, so
# a capped link never delivers a long burst after an idle spell.
BURST_MS = 50
MAX_BURST_BYTES = 64 * KiB


@dataclass(frozen=True, slots=True, kw_only=True)
class Faults:
    """What is wrong with one directed link; the default is a healthy link."""

    blocked: bool = False
    latency_ms: int = 0
    bandwidth_bps: int | None = None  # None: no cap

    @property
    def healthy(self) -> bool:
        return self == Faults()

    def to_json(self) -> dict[str, Any]:
        return {
            "blocked": self.blocked,
            "latency_ms": self.latency_ms,
            "bandwidth_bps": self.bandwidth_bps,
        }


def burst_bytes(rate_bps: int) -> int:
    """The bucket size for `rate_bps`: BURST_MS worth, at least 1 byte, at most 64 KiB."""
    return max(1, min(MAX_BURST_BYTES, rate_bps * BURST_MS // 1000))


class TokenBucket:
    """A byte-rate cap: `delay_ms(n, now_ms)` takes n bytes and says how long to hold them.

    Tokens are kept in byte-milliseconds (bytes * 1000) so refilling `rate` bytes per second over
    `elapsed` ms is the exact integer `rate * elapsed`. The bucket may go into debt: a chunk larger
    than the tokens on hand is held until the debt is paid, `ceil(debt / rate)` ms; the next chunk
    then starts from that debt, so over any long stretch N bytes take (N - burst) / rate seconds
    and rounding never accumulates. Callers send slices of at most `burst` bytes, so no single
    hold is longer than about BURST_MS plus the previous debt.
    """

    __slots__ = ("rate_bps", "burst", "_tokens_milli", "_last_ms")

    def __init__(self, rate_bps: int, now_ms: int) -> None:
        if rate_bps <= 0:
            raise ValueError(f"rate must be positive, got {rate_bps}")
        self.rate_bps = rate_bps
        self.burst = burst_bytes(rate_bps)
        self._tokens_milli = self.burst * 1000  # a fresh bucket is full
        self._last_ms = now_ms

    def delay_ms(self, n: int, now_ms: int) -> int:
        """Take `n` bytes now; the milliseconds to wait before delivering them (0: at once)."""
        elapsed = max(0, now_ms - self._last_ms)
        self._last_ms = max(self._last_ms, now_ms)
        self._tokens_milli = min(self.burst * 1000, self._tokens_milli + self.rate_bps * elapsed)
        self._tokens_milli -= n * 1000
        if self._tokens_milli >= 0:
            return 0
        return -(self._tokens_milli // self.rate_bps)  # ceil(debt / rate) in ms


@dataclass(slots=True, kw_only=True)
class LinkState:
    """One directed link: its faults, its buckets and its counters (mutated by the shell)."""

    src: int
    dst: int
    faults: Faults = field(default_factory=Faults)
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    bytes_delivered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))
    connections_open: int = 0
    connections_total: int = 0
    resets: int = 0

    @property
    def link(self) -> LinkId:
        return (self.src, self.dst)

    def bucket(self, direction: str, now_ms: int) -> TokenBucket | None:
        """The direction's bucket, None when the link has no bandwidth cap."""
        rate = self.faults.bandwidth_bps
        if rate is None:
            return None
        bucket = self.buckets.get(direction)
        if bucket is None or bucket.rate_bps != rate:
            bucket = self.buckets[direction] = TokenBucket(rate, now_ms)
        return bucket

    def set_faults(self, faults: Faults) -> None:
        if faults.bandwidth_bps != self.faults.bandwidth_bps:
            self.buckets.clear()  # a new rate starts from a full bucket of its own size
        self.faults = faults

    def to_json(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            **self.faults.to_json(),
            "bytes_to_dst": self.bytes_delivered["to_dst"],
            "bytes_to_src": self.bytes_delivered["to_src"],
            "connections_open": self.connections_open,
            "connections_total": self.connections_total,
            "resets": self.resets,
        }


class FaultTable:
    """Every directed link of one proxy, by (src, dst), in a fixed order."""

    def __init__(self, links: Iterable[LinkId]) -> None:
        self.links: dict[LinkId, LinkState] = {}
        for src, dst in links:
            if (src, dst) in self.links:
                raise ValueError(f"link {src}->{dst} listed twice")
            self.links[(src, dst)] = LinkState(src=src, dst=dst)

    @property
    def node_ids(self) -> frozenset[int]:
        return frozenset(n for link in self.links for n in link)

    def state(self, link: LinkId) -> LinkState:
        return self.links[link]

    def set(self, links: Iterable[LinkId], changes: Mapping[str, Any]) -> list[LinkId]:
        """Apply `changes` (Faults field names; None restores the field's default) to `links`."""
        defaults = Faults()
        values = {
            name: getattr(defaults, name) if value is None else value
            for name, value in changes.items()
        }
        changed = []
        for link in links:
            st = self.links[link]
            st.set_faults(dataclasses.replace(st.faults, **values))
            changed.append(link)
        return changed

    def partition(self, groups: Iterable[Iterable[int]]) -> list[LinkId]:
        """Block every link between nodes of different groups (both ways); the blocked links.

        Additive: links already blocked stay blocked, nodes in no group are untouched; `heal`
        undoes it. Pairs that have no link (they never talk) are skipped.
        """
        group_of = {node: i for i, group in enumerate(groups) for node in group}
        cross = [
            link
            for link in self.links
            if link[0] in group_of
            and link[1] in group_of
            and group_of[link[0]] != group_of[link[1]]
        ]
        return self.set(cross, {"blocked": True})

    def heal(self) -> list[LinkId]:
        """Clear every fault on every link; the links that had one."""
        faulty = [link for link, st in self.links.items() if not st.faults.healthy]
        for link in faulty:
            self.links[link].set_faults(Faults())
        return faulty

    def snapshot(self) -> list[dict[str, Any]]:
        return [st.to_json() for st in self.links.values()]
