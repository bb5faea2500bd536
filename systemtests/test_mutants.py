"""The KIP-73 verdicts proven by the bugs they catch (systemtests/harness/mutation.py).

    make mutants        # = .venv/bin/pytest systemtests -m mutants

Not part of `make test` (its ten mutants and the control run 14 cases, about 10 minutes): run
it after changing a verdict, the quota code or the analysis. The first test runs every selected
mutant's cases and the control's, analyses them in one Spark job, and writes the table to
`<session>/mutants.md` and `mutants.json`; the terminal summary prints it. Each test asserts on
its own mutant: the control passes every verdict, every other mutant fails at least one.
"""

from __future__ import annotations

import pytest

from minikafka.testing.mutants import CONTROL, MUTANTS

pytestmark = pytest.mark.mutants

BUGS = [m for m in MUTANTS if m != CONTROL]


def test_the_real_code_passes_every_verdict(mutation_results):
    row = mutation_results(CONTROL)
    assert not row.caught, "\n".join(
        f"{case}: {'; '.join(row.failures[case])}" for case in row.failed if row.failed[case]
    )


@pytest.mark.parametrize("mutant", BUGS)
def test_a_verdict_catches_the_bug(mutant, mutation_results):
    row = mutation_results(mutant)
    assert row.caught, (
        f"no verdict caught {mutant} ({row.breaks}) in {', '.join(row.failed)}: "
        + ", ".join(row.run_dirs.values())
    )
