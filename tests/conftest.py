"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio

from minikafka.testing.memory_node import run_sync_inline


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local SparkSession for the module's `spark` tests (one JVM per module), stopped after."""
    from tools.analysis import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture
def inline_storage_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """LMDB calls run inline: with worker threads the autojump clock would leap while they run.
    Shell test modules on the in-memory node ask for it with `pytestmark`."""
    monkeypatch.setattr(trio.to_thread, "run_sync", run_sync_inline)
