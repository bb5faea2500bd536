"""`open_client`: what its block raises comes out as itself, not in the pool's ExceptionGroup,
so the CLI's one-line errors (friendly_errors catches ConfigError) work inside it."""

from __future__ import annotations

import pytest

from minikafka.client.cluster_client import open_client
from minikafka.errors import ConfigError


async def test_the_blocks_own_error_comes_out_unwrapped() -> None:
    with pytest.raises(ConfigError, match="unknown topic"):
        async with open_client("127.0.0.1:9", client_id="t"):  # connects lazily: nothing opens
            raise ConfigError("unknown topic 'x'")
