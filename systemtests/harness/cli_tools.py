"""The admin tools as an operator runs them (minikafka/testing/cli_tools.py), failing the case
with a HarnessError when a tool fails."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from minikafka.testing.cli_tools import TOOL_TIMEOUT_S, ToolError
from minikafka.testing.cli_tools import run_tool as _run_tool
from minikafka.testing.run_folder import RunFolder
from systemtests.harness.clients import HarnessError


async def run_tool(
    folder: RunFolder,
    name: str,
    args: Sequence[str],
    *,
    cluster_dir: Path,
    timeout_s: float = TOOL_TIMEOUT_S,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    try:
        return await _run_tool(
            folder, name, args, cluster_dir=cluster_dir, timeout_s=timeout_s, check=check
        )
    except ToolError as exc:
        raise HarnessError(str(exc)) from exc
