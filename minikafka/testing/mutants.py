"""Deliberate bugs in the broker's throttling, to prove that the KIP-73 verdicts catch them.

A test that would pass the wrong code proves nothing, so each verdict of the system tests is
proven by the bugs it catches (systemtests/test_mutants.py, `make mutants`): the cluster of a
case is started with every node running under one mutant, and at least one verdict of the case
must fail. The catalog holds the bugs a reviewer would expect a throttle to have: each side's
throttle gone, KAFKA-4313's in-sync exemption gone or inverted, KIP-73's random partition
order replaced by a fixed one, the response cap (KIP-74) ignored, a leader that forgets to
charge some partitions or charges only record bytes, and SimpleRate purging its samples by the
window's start instead of its last event.

A mutant exists only under test: it is a patch applied inside a node process by this module's
entry point, which the harness gives as the node command,

    python -m minikafka.testing.mutants NAME node --node-id 1 ...

and which then runs `minikafka` with the remaining arguments (here `minikafka node ...`). Nothing in the broker knows about
mutants, and the harness' own process (the prediction, the tools, the analysis) never runs one.
The patches replace functions where the broker looks them up (a module global or a class
attribute), so each breaks exactly one decision and leaves the rest of the code as it is.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

CONTROL = "none"  # the real code: every verdict must pass it in the same session


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutant:
    name: str
    breaks: str  # what the bug gets wrong, one sentence
    apply: Callable[[], None]


def _wrap(owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
    """Replace `owner.attr` by `make(original)`."""
    setattr(owner, attr, make(getattr(owner, attr)))


def _decisions(make: Callable[[Any], Any]) -> None:
    """Wrap the throttle decision both sides' plans make (core/quota/planner.py looks
    `decide_fetch_throttles` up as a module global at each call)."""
    from minikafka.core.quota import planner

    _wrap(planner, "decide_fetch_throttles", make)


def _unthrottled(side: str) -> Callable[[], None]:
    """One side's plan decides nothing: every partition unlimited, its charges untouched."""

    def apply() -> None:
        from minikafka.core.quota import planner

        owner = planner.LeaderFetchPlan if side == "leader" else planner.FollowerFetchPlan

        def make(original):
            def decisions(self, quotas, now_ms):
                return [
                    planner.FetchThrottle(limit=None, exempt=d.exempt)
                    for d in original(self, quotas, now_ms)
                ]

            return decisions

        _wrap(owner, "decisions", make)

    return apply


def _no_exemption() -> None:
    def make(original):
        def decide(parts, **kw):
            return original(parts, **{**kw, "exempt_in_sync": False})

        return decide

    _decisions(make)


def _inverted_exemption() -> None:
    def make(original):
        def decide(parts, **kw):
            return original([(cls, not in_sync) for cls, in_sync in parts], **kw)

        return decide

    _decisions(make)


class _Sorting:
    """A random.Random whose shuffle sorts: KIP-73's random order replaced by partition order."""

    def __init__(self, rng: Any) -> None:
        self._rng = rng

    def shuffle(self, items: list) -> None:
        items.sort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rng, name)


def _fixed_order() -> None:
    from minikafka.core import fetcher
    from minikafka.server import fetch_sessions

    def make_init(original):
        def init(self, settings, rng):
            original(self, settings, _Sorting(rng))

        return init

    def make_order(original):
        def order(session, tps, rng):
            return original(session, tps, None if rng is None else _Sorting(rng))

        return order

    _wrap(fetcher.FetchPlanner, "__init__", make_init)
    _wrap(fetch_sessions, "order_partitions", make_order)


def _no_response_cap() -> None:
    from minikafka.server import fetch_serve, fetch_sessions

    def make(original):
        async def read(rm, readable, limits, *, is_follower, max_bytes):
            if is_follower:
                max_bytes = 2**31 - 1
            return await original(
                rm, readable, limits, is_follower=is_follower, max_bytes=max_bytes
            )

        return read

    _wrap(fetch_serve, "read_once", make)
    _wrap(fetch_sessions, "read_once", make)


def _skip_tenth_charge() -> None:
    from minikafka.core.quota.planner import LeaderFetchPlan

    def make(original):
        def charges(self, sent):
            kept = [None if p is not None and p.partition % 10 == 0 else p for p in sent]
            return original(self, kept)

        return charges

    _wrap(LeaderFetchPlan, "charges", make)


def _purge_by_start() -> None:
    from minikafka.core.quota.stats import SampledStat

    def purge(self, now_ms: int) -> None:
        expire_age_ms = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age_ms:  # the bug: start, not last event
                sample.reset(now_ms)

    SampledStat._purge = purge


def _records_only_charge() -> None:
    from minikafka.core.quota import planner

    def size(partitions):
        return sum(p.records_bytes for p in partitions)

    planner.kafka_fetch_response_size = size


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(name=CONTROL, breaks="nothing: the real code", apply=lambda: None),
        Mutant(
            name="leader-throttle-off",
            breaks="the leader never holds a partition back (its quota is charged, not applied)",
            apply=_unthrottled("leader"),
        ),
        Mutant(
            name="follower-throttle-off",
            breaks="the follower never leaves a partition out (its quota is charged, not applied)",
            apply=_unthrottled("follower"),
        ),
        Mutant(
            name="kafka-4313-off",
            breaks="in-sync replicas are throttled like the others (KAFKA-4313 removed)",
            apply=_no_exemption,
        ),
        Mutant(
            name="kafka-4313-inverted",
            breaks="in-sync replicas are throttled and the ones catching up are exempt",
            apply=_inverted_exemption,
        ),
        Mutant(
            name="fixed-partition-order",
            breaks="fetches and session reads list partitions in index order, never shuffled",
            apply=_fixed_order,
        ),
        Mutant(
            name="response-cap-ignored",
            breaks="the leader ignores replica.fetch.response.max.bytes (KIP-74's cap)",
            apply=_no_response_cap,
        ),
        Mutant(
            name="uncharged-tenth-partition",
            breaks="the leader sends partitions 0, 10, 20, ... but never charges them",
            apply=_skip_tenth_charge,
        ),
        Mutant(
            name="simplerate-purge-by-start",
            breaks="samples expire N windows after they started, not after their last event",
            apply=_purge_by_start,
        ),
        Mutant(
            name="records-only-charge",
            breaks="the leader charges record bytes only, not the Kafka response's headers",
            apply=_records_only_charge,
        ),
    )
}


def node_command(name: str) -> tuple[str, ...]:
    """The node command that runs `minikafka ...` under mutant `name` (LocalCluster's
    `node_command`)."""
    if name not in MUTANTS:
        raise KeyError(f"no mutant {name!r}; known: {', '.join(MUTANTS)}")
    return (sys.executable, "-m", "minikafka.testing.mutants", name, "node")


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in MUTANTS:
        sys.exit(f"usage: python -m minikafka.testing.mutants {{{','.join(MUTANTS)}}} ARGS...")
    MUTANTS[args[0]].apply()
    # The program itself, as `python -m minikafka` runs it (runpy is what -m uses): the
    # launcher runs the CLI, it does not build on it.
    sys.argv = ["minikafka", *args[1:]]
    runpy.run_module("minikafka", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
