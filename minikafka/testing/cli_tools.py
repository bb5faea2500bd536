"""The admin tools as an operator runs them: `python -m minikafka configs|reassign ...` in a
subprocess, against the cluster's directory (`--dir`, where `cluster.json` names the nodes);
or, inside a simulation, in-process (`InProcessTool`: minikafka/cli/tool_runner.py
`run_command`, given to the simulation by whoever composes the run, since the CLI sits above
the simulation that it also runs).

Used by the system tests and the experiments. Every run is saved in the run folder
(tool/NN-<name>.txt: command, exit code, stdout, stderr) whether it succeeds or not; a non-zero
exit, or a run over its time limit (the process is killed), raises `ToolError` with the path of
that output.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from minikafka.cluster.spec import ClusterSpec
from minikafka.errors import MiniKafkaError
from minikafka.testing.run_folder import RunFolder

TOOL_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Env:
    """What an in-process command reaches outside itself (cli/in_process.py): the cluster's
    spec (its brokers and files), how to connect, and its own output buffers."""

    spec: ClusterSpec
    connect: Callable[..., AbstractAsyncContextManager[Any]]
    stdout: io.StringIO = field(default_factory=io.StringIO)
    stderr: io.StringIO = field(default_factory=io.StringIO)


@dataclass(frozen=True, slots=True)
class Completed:
    """What an in-process command left, as a process would: exit code, stdout, stderr."""

    returncode: int
    stdout: str
    stderr: str


# `minikafka ARGS` run in the caller's task (cli/tool_runner.py `run_command`).
InProcessTool = Callable[[Sequence[str], Env], Awaitable[Completed]]


class ToolError(MiniKafkaError):
    """A CLI tool exited non-zero or ran past its time limit."""


async def run_tool(
    folder: RunFolder,
    name: str,
    args: Sequence[str],
    *,
    cluster_dir: Path,
    timeout_s: float = TOOL_TIMEOUT_S,
    check: bool = True,
) -> int:
    argv = [sys.executable, "-m", "minikafka", *args, "--dir", str(cluster_dir)]
    shown = ["minikafka", *args, "--dir", str(cluster_dir)]
    with trio.move_on_after(timeout_s) as scope:
        proc = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    if scope.cancelled_caught:
        path = folder.tool_output(
            name, argv=shown, returncode=-9, stdout="", stderr=f"killed after {timeout_s} s"
        )
        raise ToolError(f"`{' '.join(shown[:3])} ...` took over {timeout_s} s ({path})")
    return record_tool(
        folder,
        name,
        shown,
        returncode=proc.returncode,
        stdout=proc.stdout.decode(errors="replace"),
        stderr=proc.stderr.decode(errors="replace"),
        check=check,
    )


def record_tool(
    folder: RunFolder,
    name: str,
    shown: Sequence[str],
    *,
    returncode: int,
    stdout: str,
    stderr: str,
    check: bool = True,
) -> int:
    """Keep one tool run in the run folder; its exit code, or ToolError if `check` and it is
    not 0 (with the last line of stderr). Also for a tool run in-process (sim/experiment.py)."""
    path = folder.tool_output(
        name, argv=list(shown), returncode=returncode, stdout=stdout, stderr=stderr
    )
    if check and returncode != 0:
        last = stderr.strip().splitlines()[-1:] or [""]
        raise ToolError(f"`{' '.join(shown[:3])} ...` exited {returncode}: {last[0]} ({path})")
    return returncode
