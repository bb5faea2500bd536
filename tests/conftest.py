"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local SparkSession for the module's `spark` tests (one JVM per module), stopped after."""
    from tools.analysis import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
