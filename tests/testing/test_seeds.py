"""The one seed policy (minikafka/testing/seeds.py): explicit, else $MINIKAFKA_SEED, else the
site's pinned seed, else a fresh one; child RNGs by name."""

from __future__ import annotations

import pytest

from minikafka.errors import ConfigError
from minikafka.testing.seeds import FRESH_BELOW, derive_rng, resolve_seed, seed_line


def test_explicit_then_environment_then_pinned_then_fresh():
    env = {"MINIKAFKA_SEED": "7"}
    assert resolve_seed(3, pinned=0, environ=env) == 3
    assert resolve_seed("4", environ=env) == 4
    assert resolve_seed(None, pinned=73, environ=env) == 7  # the environment overrides a pin
    assert resolve_seed(None, pinned=73, environ={}) == 73
    fresh = {resolve_seed(environ={}) for _ in range(20)}
    assert all(0 <= s < FRESH_BELOW for s in fresh) and len(fresh) > 1


@pytest.mark.parametrize("bad", ["-3", "x", "1.5", "", 2**63, -1, True])
def test_a_bad_seed_is_refused_in_one_line(bad):
    with pytest.raises(ConfigError, match="expected an integer"):
        resolve_seed(bad, environ={})
    if isinstance(bad, str):
        with pytest.raises(ConfigError, match=r"\$MINIKAFKA_SEED"):
            resolve_seed(environ={"MINIKAFKA_SEED": bad})


def test_child_rngs_replay_and_differ_by_name():
    assert derive_rng(5, "nemesis").random() == derive_rng(5, "nemesis").random()
    assert derive_rng(5, "nemesis").random() != derive_rng(5, "targets").random()
    assert derive_rng(5, "nemesis").random() != derive_rng(6, "nemesis").random()


def test_the_printed_line_says_how_to_replay():
    assert seed_line(42) == "seed 42 (replay with MINIKAFKA_SEED=42)"
