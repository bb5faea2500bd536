"""The admin commands run inside a Trio run that is already going: the simulation's operator.

`minikafka configs` and `minikafka reassign` are click commands of three parts: parse the
arguments, one async function that talks to the cluster, and printing what it returned. From a
shell, `finish` runs the async part with trio.run and prints. In a simulation the whole
cluster is tasks of one Trio run under a virtual clock, where trio.run cannot be entered again:
`run_command` (cli/tool_runner.py) parses the same argv with the same click command, gets the
rest of the work back from `finish` as an async function, and awaits it in its own task. So
the simulation runs the tool's own code, on the simulated network, with its output kept as a
process's would be.

What a command reaches outside itself goes through `Env` (testing/cli_tools.py), held in a
ContextVar so that only the command's task and the tasks it starts see it: where the brokers
are and how to connect to them, the cluster's spec (its nodes' files, as `--dir` gives them
from a shell), and where `echo` writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import TypeVar

import click
import trio

from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.client.connection import sole_exception
from minikafka.cluster.spec import ClusterSpec
from minikafka.errors import BrokerError, ConfigError
from minikafka.testing.cli_tools import Env

T = TypeVar("T")
R = TypeVar("R")


ENV: ContextVar[Env | None] = ContextVar("minikafka_cli_env", default=None)


def echo(message: str = "", *, err: bool = False) -> None:
    """click.echo, into the in-process command's own buffers when there is one."""
    env = ENV.get()
    if env is None:
        click.echo(message, err=err)
    else:
        click.echo(message, err=err, file=env.stderr if err else env.stdout)


def in_process_spec() -> ClusterSpec | None:
    """The cluster an in-process command talks to (None from a shell: `--dir` says)."""
    env = ENV.get()
    return None if env is None else env.spec


def cli_client(address: str, client_id: str) -> AbstractAsyncContextManager[ClusterClient]:
    """A client on `address`, over the in-process command's network when there is one."""
    env = ENV.get()
    return open_client(address, client_id=client_id, connect=None if env is None else env.connect)


def finish(
    go: Callable[[], Awaitable[T]],
    render: Callable[[T], R],
    *,
    bad_input: frozenset[int] = frozenset(),
) -> R | Callable[[], Awaitable[R]]:
    """The rest of a command once its arguments are parsed: `render(await go())`. From a shell
    it runs now under trio.run; in-process it is returned, for `run_command` to await (click
    hands a command's return value back to `main(standalone_mode=False)`).

    A broker's refusal whose code is in `bad_input` is the user's input refused: a ConfigError
    (exit 2, as a refusal before sending would be)."""

    async def rest() -> R:
        try:
            result = await go()
        except BaseExceptionGroup as group:  # a nursery of the command's own, around one error
            exc = sole_exception(group)
            if exc is group:
                raise
            raise _refusal(exc, bad_input) from None
        except BrokerError as exc:
            raise _refusal(exc, bad_input) from None
        return render(result)

    if ENV.get() is not None:
        return rest
    return trio.run(rest)


def _refusal(exc: BaseException, bad_input: frozenset[int]) -> BaseException:
    if isinstance(exc, BrokerError) and exc.code in bad_input:
        return ConfigError(str(exc))
    return exc


def exit_code(exc: BaseException) -> int:
    """The CLI's exit code for one of our errors: 2 for bad input, 130 interrupted, else 1."""
    if isinstance(exc, ConfigError):
        return 2
    if isinstance(exc, KeyboardInterrupt):
        return 130
    return 1
