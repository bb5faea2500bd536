"""The machine to itself, for the cases that need it, while `make test` runs two workers.

`make test` runs the system tests on two pytest-xdist workers, so two clusters share the two
cores. The verdicts of minikafka's own load hold so: on 2026-11-28 the acks=all p99 of in-sync
partitions was 95-253 ms beside the other worker's experiments, against 500 ms allowed. The
librdkafka case's did not: librdkafka through the Kafka listener alone keeps some 80 % of the
cores busy, and beside another cluster its p99 went to 3,163 ms with nothing held back by a
throttle (harness/machine.py). So every real run and Spark job of the session holds the
machine shared, and a case that needs it alone (`CaseSpec.alone`) holds it exclusively: it
waits for the run in progress on the other worker, which then waits for it.

Two `fcntl.flock` files in the session folder: `machine.lock`, shared or exclusive, and
`machine.turn`, taken exclusively while waiting for the first, so that a waiting exclusive
holder is not passed by the other worker's next shared one (Linux's flock grants a shared lock
beside others however long an exclusive one has waited). In one process nothing ever waits.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def machine(session_dir: Path, *, alone: bool = False) -> Iterator[None]:
    """Hold the session's machine: shared, or exclusively if `alone`."""
    session_dir.mkdir(parents=True, exist_ok=True)
    with (
        open(session_dir / "machine.turn", "a") as turn,
        open(session_dir / "machine.lock", "a") as lock,
    ):
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
