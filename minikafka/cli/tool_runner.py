"""`run_command`: `minikafka configs|reassign ARGS` inside a Trio run that is already going,
as the simulation's operator runs them (cli/in_process.py says how a command splits so that
this works). Kept apart from the commands' own plumbing, and given to a simulation by whoever
composes the run (`minikafka sim`, the system tests), since the CLI sits above the simulation
that it also drives.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from minikafka.cli.in_process import ENV, echo, exit_code
from minikafka.errors import MiniKafkaError
from minikafka.testing.cli_tools import Completed, Env


def admin_tools() -> click.Group:
    """The commands an operator runs against a simulated cluster, as `minikafka` names them."""
    from minikafka.cli.configs import configs_cmd
    from minikafka.cli.reassign import reassign_cmd

    return click.Group("minikafka", commands={"configs": configs_cmd, "reassign": reassign_cmd})


async def run_command(args: Sequence[str], env: Env) -> Completed:
    """`minikafka ARGS` in this task: the command's exit code and output, as from a process.
    Parsing, bad input and refusals give the codes and one-line errors the CLI gives."""
    token = ENV.set(env)
    try:
        code = 0
        try:
            rest = admin_tools().main(list(args), prog_name="minikafka", standalone_mode=False)
            if callable(rest):
                await rest()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except click.ClickException as exc:
            exc.show(file=env.stderr)
            code = exc.exit_code
        except MiniKafkaError as exc:
            echo(f"error: {exc}", err=True)
            code = exit_code(exc)
    finally:
        ENV.reset(token)
    return Completed(code, env.stdout.getvalue(), env.stderr.getvalue())
