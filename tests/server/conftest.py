"""Fixtures of the shell tests: brokers in process (minikafka/testing/memory_node.py) on real
LogStores in tmp_path, under Trio's MockClock when a test asks for `autojump_clock`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from minikafka.testing.memory_node import MemoryBroker, MemoryNetwork, replicating_config


@pytest.fixture
async def pair(tmp_path) -> AsyncIterator[tuple[MemoryBroker, MemoryBroker]]:
    """Brokers 1 and 2 (`replicating_config`) running on one MemoryNetwork, no partition yet."""
    network = MemoryNetwork()
    a = MemoryBroker(replicating_config(1), tmp_path / "a", network=network)
    b = MemoryBroker(replicating_config(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        yield a, b
