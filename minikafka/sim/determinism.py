"""What makes a Trio run repeat itself exactly, given the same seed and the same inputs.

Trio (0.35, `trio._core._run`) leaves these choices to chance:

- each batch of runnable tasks runs in its order or reversed, on `_r.random() < 0.5`, where
  `_r` is a module-level `random.Random` seeded by the OS (so that no program comes to depend
  on an order Trio does not promise);
- that order is the one in which the tasks became runnable, which two runs of the same program
  do not always repeat (two simulations of one seed parted there). Trio's deterministic mode
  (`_ALLOW_DETERMINISTIC_SCHEDULING`, which Trio's hypothesis plugin turns on) sorts each batch
  by when its tasks were spawned and shuffles it with `_r` instead. A simulation used to get
  that mode by accident: a node imported hypothesis, through kio, until minikafka/kafka stopped
  it (a node never needs hypothesis);
- deadlines that fall on the same instant expire in the order of `id(cancel_scope)`, a memory
  address. Under a virtual clock that is common: every long poll set at one instant ends at
  one instant.

`pinned_scheduler(seed)` seeds `_r` from the seed, turns the deterministic mode on and breaks
deadline ties by the order in which the deadlines were set, for the length of a with-block; all
three are put back after. It reaches into
Trio's private module, so it checks that what it replaces is there and refuses in one line if
a Trio upgrade moved it (`DeterminismUnavailable`), rather than running unpinned.

The third source is Python's own: the hash of a `str` is salted per process (PYTHONHASHSEED),
so a set of strings iterates in another order in another process. `hash_seed_pinned()` says
whether this process's salt is fixed; `minikafka sim` restarts itself with PYTHONHASHSEED=0
when it is not. Everything else (the wall clock, `secrets`, `uuid4`, object addresses) is the
simulation's edges to route through the seed, not this module's.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from heapq import heappush
from typing import Any

HASH_SEED_ENV = "PYTHONHASHSEED"
_DETERMINISTIC = "_ALLOW_DETERMINISTIC_SCHEDULING"  # trio._core._run's flag (a Final there)


class DeterminismUnavailable(RuntimeError):
    """This Trio does not have the internals `pinned_scheduler` pins."""


def _trio_internals() -> tuple[Any, Any]:
    """Trio's run module and its Deadlines class, or DeterminismUnavailable in one line."""
    import trio

    try:
        from trio._core import _run
    except ImportError as exc:  # pragma: no cover - a Trio without the module
        raise DeterminismUnavailable(f"trio {trio.__version__}: no trio._core._run") from exc
    rng = getattr(_run, "_r", None)
    deadlines = getattr(_run, "Deadlines", None)
    if (
        not isinstance(rng, random.Random)
        or deadlines is None
        or not hasattr(deadlines, "add")
        or not isinstance(getattr(_run, _DETERMINISTIC, None), bool)
    ):
        raise DeterminismUnavailable(
            f"trio {trio.__version__}: the scheduler's random batch order (_run._r), its"
            f" deterministic mode (_run.{_DETERMINISTIC}) or its deadline heap"
            " (_run.Deadlines.add) moved; minikafka's simulation pins those of trio 0.35"
        )
    return _run, deadlines


@contextmanager
def pinned_scheduler(seed: int) -> Iterator[None]:
    """Within the block, Trio's scheduling is a function of `seed` and the program: each batch
    in spawn order shuffled by a generator seeded by `seed`, deadline ties broken
    first-set-first."""
    run_module, deadlines = _trio_internals()
    saved_state = run_module._r.getstate()
    saved_mode = getattr(run_module, _DETERMINISTIC)
    saved_add = deadlines.add
    order = itertools.count()

    def add(self: Any, deadline: float, cancel_scope: Any) -> None:
        # Trio's own add with the tie-breaker changed from id(cancel_scope) to a counter.
        heappush(self._heap, (deadline, next(order), cancel_scope))
        self._active += 1

    run_module._r.seed(f"minikafka-sim/{seed}")
    setattr(run_module, _DETERMINISTIC, True)
    deadlines.add = add
    try:
        yield
    finally:
        deadlines.add = saved_add
        setattr(run_module, _DETERMINISTIC, saved_mode)
        run_module._r.setstate(saved_state)


def hash_seed_pinned(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """True if this process's str hashes are unsalted or salted with a fixed seed."""
    value = (os.environ if environ is None else environ).get(HASH_SEED_ENV)
    return value is not None and value != "random"
