"""Every test of tests/integration/ starts real processes or serves real sockets on 127.0.0.1:
each gets the `integration` marker here, so that `-m "not integration"` (make test-fast) leaves
the folder out without a marker line in every file.

A test that carries an opt-in marker of its own keeps that one alone: the long fuzz run
(`fuzz`, test_fuzz_node.py) skips unless `-m fuzz` selects it, as it did beside the
integration tests it shares a node fixture with."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
OPT_IN = ("fuzz",)  # markers whose tests run only when asked for by name


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and not any(
            item.get_closest_marker(name) for name in OPT_IN
        ):
            item.add_marker(pytest.mark.integration)
