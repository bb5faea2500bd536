"""The run's seed, and the RNGs derived from it (randomness is an explicit `random.Random`).

One policy for every test, experiment, benchmark and tool that draws anything random:

- the seed is the one given explicitly (a `--seed` option, a fixture's `seed=`), else
  `$MINIKAFKA_SEED`, else a FRESH random seed, which the caller prints (`seed_line`) so the
  run can be replayed with `MINIKAFKA_SEED=<seed>`;
- a site that must stay deterministic without being told (the unit-test fixtures of `tests/`,
  the system tests whose figures were calibrated with a seed) says so by passing `pinned=`: the
  pinned seed takes the fresh seed's place, and `$MINIKAFKA_SEED` still overrides it;
- every RNG of a run is `derive_rng(seed, name)`: one stream per named purpose, so adding a
  draw to one purpose does not shift what another draws.

A bad seed (not an integer from 0 to 2**63-1) is refused with one line naming where it came
from and what is accepted (`ConfigError`), before anything runs.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping

from minikafka.errors import ConfigError

ENV = "MINIKAFKA_SEED"
MAX_SEED = 2**63 - 1  # cluster specs hand the seed to every node; LMDB/JSON keep it exact
FRESH_BELOW = 1 << 31  # fresh seeds are short enough to retype


def parse_seed(text: int | str, *, source: str = f"--seed or ${ENV}") -> int:
    """An explicit seed (an int, or the text of an option or of the environment)."""
    if isinstance(text, bool):
        raise ConfigError(f"seed {text!r} ({source}): expected an integer from 0 to 2**63-1")
    if isinstance(text, int):
        value = text
    elif text.isascii() and text.isdigit():
        value = int(text)
    else:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise ConfigError(f"seed {text!r} ({source}): expected an integer >= 0 (at most 2**63-1)")
    return value


def resolve_seed(
    given: int | str | None = None,
    *,
    pinned: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`given`, else $MINIKAFKA_SEED, else `pinned`, else a fresh random seed (module
    docstring). The caller prints the result (`seed_line`)."""
    if given is not None:
        return parse_seed(given)
    env = (os.environ if environ is None else environ).get(ENV)
    if env is not None:
        return parse_seed(env)
    if pinned is not None:
        return parse_seed(pinned, source="pinned")
    return random.SystemRandom().randrange(FRESH_BELOW)


def seed_line(seed: int) -> str:
    """What a run prints about its seed: enough to replay it."""
    return f"seed {seed} (replay with {ENV}={seed})"


def derive_rng(seed: int, name: str) -> random.Random:
    """The RNG of one named purpose of a run seeded `seed` (string seeding is stable across
    Python versions and processes, unlike hash())."""
    return random.Random(f"{name}/{seed}")
