"""The KIP-73 verdicts proven by the bugs they catch (systemtests/harness/mutation.py).

    make mutants        # = .venv/bin/pytest systemtests -m mutants

Not part of `make test` (its nine bugs and the control run 13 cases, about 14 minutes): run
it after changing a verdict, the quota code or the analysis. The first test runs every selected
mutant's cases and the control's, analyses them in one Spark job, and writes the table to
`<session>/mutants.md` and `mutants.json`; the terminal summary prints it. Each test asserts on
its own mutant: the control passes every verdict and fast test, every other mutant fails at
least one of each (the fast tests are the decisions' own, run under the mutant in-process).
"""

from __future__ import annotations

import pytest

from minikafka.testing.mutants import CONTROL, MUTANTS
from systemtests.harness.mutation import SYSTEM_BLIND

pytestmark = pytest.mark.mutants

BUGS = [m for m in MUTANTS if m != CONTROL]


def test_the_real_code_passes_every_verdict(mutation_results):
    row = mutation_results(CONTROL)
    assert row.fast_failed is None, row.fast_failed
    assert not row.caught, "\n".join(
        f"{case}: {'; '.join(row.failures[case])}" for case in row.failed if row.failed[case]
    )


@pytest.mark.parametrize("mutant", BUGS)
def test_a_verdict_catches_the_bug(mutant, mutation_results):
    """A system verdict fails; and a fast test too (the decisions' own tests). A bug the
    system level cannot see (SYSTEM_BLIND, with the reason) must still fail a fast test."""
    row = mutation_results(mutant)
    assert row.fast_failed is not None, f"no fast test caught {mutant} ({row.breaks})"
    if mutant in SYSTEM_BLIND:
        return
    assert row.caught, (
        f"no verdict caught {mutant} ({row.breaks}) in {', '.join(row.failed)}: "
        + ", ".join(row.run_dirs.values())
    )
