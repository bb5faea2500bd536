"""`minikafka reassign`: move partitions between brokers under a throttle, in the style of
`kafka-reassign-partitions` (docs/throttling.md#the-reassignment-tool), with the operator's
arithmetic of KIP-73 (docs/throttling.md#the-operators-arithmetic) as `reassign plan`.

    minikafka reassign --generate --topics-to-move-json-file topics.json --broker-list 1,2,3
    minikafka reassign --execute --reassignment-json-file moves.json --throttle 2000000 \\
        [--throttle-mode replication|reassignment] [--additional]
    minikafka reassign --verify --reassignment-json-file moves.json [--preserve-throttles] \\
        [--watch [--timeout S] [--interval S]]
    minikafka reassign --cancel --reassignment-json-file moves.json [--preserve-throttles]
    minikafka reassign --list
    minikafka reassign plan --reassignment-json-file moves.json (--throttle B/s
        [--network-bytes-per-s N] | --deadline-s Y --network-bytes-per-s N --max-fraction X)
        [--throttle-mode replication|reassignment]

Every command takes `--bootstrap`/`--dir` and `--json`. Everything the user gives is checked
before anything is sent: bad input is one line on stderr naming the accepted form, exit code 2,
and nothing changes (click's own usage errors are made one line too). Beyond Kafka: the throttles
`--execute` sets are recorded with the reassignment and removed by the controller when it ends,
`--verify --watch` shows the progress per destination broker, and `plan` computes move times and
throttles. The work is in tools/reassign (moves, plan: arithmetic; runner, progress: the cluster).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from minikafka.cli.common import (
    bootstrap_option,
    friendly_errors,
    json_option,
    resolve_bootstrap,
    table,
)
from minikafka.cli.in_process import cli_client, echo, finish
from minikafka.cli.reassign_inputs import (
    CLIENT_ID,
    DEFAULT_INTERVAL_S,
    DEFAULT_TIMEOUT_S,
    parse_mode,
    parse_throttle,
    print_json,
    read_file,
    read_reassignment,
    tp_list,
)
from minikafka.client.admin import Admin
from minikafka.errors import ConfigError
from minikafka.testing.seeds import derive_rng, resolve_seed
from minikafka.tools.reassign import assignment_files, move_size, moves, runner
from minikafka.tools.reassign.units import human_bytes

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# The options each action takes (besides --bootstrap, --dir and --json), and those it needs.
TAKES: dict[str, tuple[str, ...]] = {
    "generate": ("topics_to_move_json_file", "broker_list", "seed"),
    "execute": ("reassignment_json_file", "throttle", "throttle_mode", "additional"),
    "verify": ("reassignment_json_file", "preserve_throttles", "watch", "timeout", "interval"),
    "cancel": ("reassignment_json_file", "preserve_throttles"),
    "list": (),
}
NEEDS: dict[str, tuple[str, ...]] = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
METAVARS = {
    "topics_to_move_json_file": "FILE",
    "broker_list": "1,2,3",
    "reassignment_json_file": "FILE",
}
ONE_OF = (
    "expected exactly one of --generate, --execute, --verify, --cancel or --list, or the plan "
    "subcommand (see minikafka reassign --help)"
)
# --execute's and plan's --throttle-mode (parse_mode reads it).
THROTTLE_MODE_HELP = (
    "replication (KIP-73: replica lists + rates, default) or reassignment (KIP-542 rates)."
)


# ---------------------------------------------------------------------------- one-line usage


class _UsageError(click.ClickException):
    """click's usage errors as one line, exit 2 (bad user input: one line saying what is
    accepted, nothing changed)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        echo(f"error: {self.message} (see minikafka reassign --help)", err=True)


class _OneLine:
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)  # type: ignore[misc]
        except click.UsageError as exc:
            raise _UsageError(exc.format_message()) from None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)  # type: ignore[misc]
        except click.UsageError as exc:
            raise _UsageError(exc.format_message()) from None


class _Group(_OneLine, click.Group):
    pass


class _Command(_OneLine, click.Command):
    pass


# ---------------------------------------------------------------------------- input checks


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_action(options: Mapping[str, Any]) -> str:
    """The one action asked for; ConfigError if none, several, or options that do not fit."""
    chosen = [a for a in ACTIONS if options.get(a)]
    if len(chosen) != 1:
        given = " and ".join(_flag(a) for a in chosen)
        raise ConfigError(f"{given} cannot be combined: {ONE_OF}" if chosen else ONE_OF)
    action = chosen[0]
    for name in (n for names in TAKES.values() for n in names):
        if options.get(name) in (None, False) or name in TAKES[action]:
            continue
        owners = " or ".join(_flag(a) for a, names in TAKES.items() if name in names)
        raise ConfigError(f"{_flag(name)} does not go with --{action}: expected it with {owners}")
    for name in NEEDS[action]:
        if options.get(name) is None:
            raise ConfigError(f"--{action} needs {_flag(name)} {METAVARS[name]}")
    if not options.get("watch"):
        for name in ("timeout", "interval"):
            if options.get(name) is not None:
                raise ConfigError(f"{_flag(name)} goes with --watch: expected --verify --watch")
    if options.get("throttle_mode") is not None and options.get("throttle") is None:
        raise ConfigError("--throttle-mode needs --throttle B/s: expected both")
    return action


# ---------------------------------------------------------------------------- the command


@click.group("reassign", cls=_Group, invoke_without_command=True)
@click.option("--generate", is_flag=True, help="Propose an assignment of topics over brokers.")
@click.option("--execute", is_flag=True, help="Start the moves of a reassignment file.")
@click.option("--verify", is_flag=True, help="Status of each move; clear throttles when done.")
@click.option("--cancel", is_flag=True, help="Cancel the moves of a reassignment file.")
@click.option("--list", "list_", is_flag=True, help="List the moves in progress.")
@click.option("--topics-to-move-json-file", metavar="FILE", help='{"topics":[{"topic":"t"}]}')
@click.option("--broker-list", metavar="1,2,3", help="Brokers to place the topics on.")
@click.option("--seed", metavar="N", help="Seed of --generate's placement ($MINIKAFKA_SEED).")
@click.option(
    "--reassignment-json-file",
    metavar="FILE",
    help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}',
)
@click.option("--throttle", metavar="B/S", help="Replication throttle in bytes/s (--execute).")
@click.option("--throttle-mode", metavar="MODE", help=THROTTLE_MODE_HELP)
@click.option("--additional", is_flag=True, help="Add to (or re-throttle) a move in progress.")
@click.option("--preserve-throttles", is_flag=True, help="Leave the throttle configs in place.")
@click.option("--watch", is_flag=True, help="Show progress every second until done.")
@click.option("--timeout", metavar="S", help=f"--watch gives up after S s ({DEFAULT_TIMEOUT_S:g}).")
@click.option("--interval", metavar="S", help=f"--watch refresh period ({DEFAULT_INTERVAL_S:g} s).")
@bootstrap_option
@json_option
@click.pass_context
@friendly_errors
def reassign_cmd(ctx: click.Context, **options: Any) -> object:
    """Move partitions between brokers under a throttle (kafka-reassign-partitions).

    \b
    --generate --topics-to-move-json-file F --broker-list 1,2,3 [--seed N]
    --execute  --reassignment-json-file F [--throttle B/s] [--throttle-mode M] [--additional]
    --verify   --reassignment-json-file F [--preserve-throttles] [--watch [--timeout S]]
    --cancel   --reassignment-json-file F [--preserve-throttles]
    --list
    plan       --reassignment-json-file F (--throttle B/s | --deadline-s Y ...) [--throttle-mode M]

    The throttles --execute sets are recorded with the reassignment: the controller removes
    them when it completes or is cancelled. Log sizes are estimates (high watermark x bytes per
    record of the first batch).
    """
    if ctx.invoked_subcommand is not None:
        given = [k for k, v in options.items() if v not in (None, False) and k != "cluster_dir"]
        if given:
            raise ConfigError(
                f"{_flag(given[0].rstrip('_').replace('as_json', 'json'))} goes after the "
                f"subcommand: expected minikafka reassign {ctx.invoked_subcommand} [options]"
            )
        return None
    opts = {k.rstrip("_"): v for k, v in options.items()}
    action = check_action(opts)
    if action in ("verify", "cancel"):
        from minikafka.cli import reassign_verify

        return getattr(reassign_verify, action)(opts)
    return {"generate": _generate, "execute": _execute, "list": _list}[action](opts)


# ---------------------------------------------------------------------------- --generate


def _generate(o: Mapping[str, Any]) -> object:
    text = read_file(
        o["topics_to_move_json_file"], "topics-to-move file", assignment_files.TOPICS_FORM
    )
    topics = assignment_files.parse_topics_json(text)
    brokers = assignment_files.parse_broker_list(o["broker_list"])
    seed = resolve_seed(o["seed"])
    address = resolve_bootstrap(o["bootstrap"], o["cluster_dir"])

    async def go() -> tuple[runner.ClusterView, dict, dict]:
        async with cli_client(address, CLIENT_ID) as client:
            view = await runner.read_cluster(Admin(client))
            proposed = assignment_files.propose_assignment(
                view.assignment,
                topics,
                brokers,
                derive_rng(seed, "reassign-generate"),
                live_brokers=view.live_brokers,
            )
            moved = [tp for tp in proposed if set(proposed[tp]) != set(view.assignment[tp])]
            sizes = move_size.sizes_in_bytes(await move_size.estimate_log_sizes(client, moved))
            return view, proposed, sizes

    def render(got: tuple[runner.ClusterView, dict, dict]) -> None:
        view, proposed, sizes = got
        wanted = set(topics)
        current = {tp: r for tp, r in view.assignment.items() if tp.topic in wanted}
        ratio = moves.move_ratio(view.assignment, proposed)
        moved = sum(set(proposed[tp]) != set(view.assignment[tp]) for tp in proposed)
        total = moves.bytes_to_move(view.assignment, proposed, sizes)
        per_broker = moves.bytes_to_move_per_broker(
            moves.move_map(view.assignment, proposed), sizes
        )
        if o["as_json"]:
            print_json(
                {
                    "current": json.loads(assignment_files.format_reassignment_json(current)),
                    "proposed": json.loads(assignment_files.format_reassignment_json(proposed)),
                    "move_ratio": ratio,
                    "moved_partitions": moved,
                    "cluster_partitions": len(view.assignment),
                    "bytes_to_move": total,
                    "bytes_to_move_per_broker": per_broker,
                    "bytes_estimated": True,
                    "seed": seed,
                },
            )
            return
        echo("Current partition replica assignment")
        echo(assignment_files.format_reassignment_json(current))
        echo("")
        echo("Proposed partition reassignment configuration")
        echo(assignment_files.format_reassignment_json(proposed))
        echo("")
        echo(
            f"MoveRatio: {ratio:.2f} ({moved} of the {len(view.assignment)} partitions in the "
            "cluster change replicas)"
        )
        copies = ", ".join(f"broker {b} {human_bytes(n)}" for b, n in per_broker.items()) or "none"
        echo(f"Bytes to move: {human_bytes(total)} ({total} B), copied to {copies}")
        echo(f"  ({move_size.SIZE_NOTE})")
        echo(f"Proposal seed: {seed} (--seed {seed} proposes the same again)")

    return finish(go, render, bad_input=runner.BAD_INPUT_CODES)


# ---------------------------------------------------------------------------- --execute


def _execute(o: Mapping[str, Any]) -> object:
    proposed = read_reassignment(o["reassignment_json_file"])
    throttle = None if o["throttle"] is None else parse_throttle(o["throttle"])
    mode = parse_mode(o["throttle_mode"])
    additional, as_json = o["additional"], o["as_json"]
    address = resolve_bootstrap(o["bootstrap"], o["cluster_dir"])

    async def go() -> tuple[runner.ExecutePlan, runner.StartResult]:
        async with cli_client(address, CLIENT_ID) as client:
            admin = Admin(client)
            view = await runner.read_cluster(admin)
            todo = runner.plan_execute(
                view, proposed, throttle=throttle, mode=mode, additional=additional
            )
            await runner.check_throttles(admin, todo)  # refused: nothing printed, nothing set
            if not as_json:
                echo("Current partition replica assignment\n")
                echo(todo.rollback_json)
                echo("\nSave this to use as the --reassignment-json-file option during rollback")
            return todo, await runner.execute(admin, todo)

    def render(got: tuple[runner.ExecutePlan, runner.StartResult]) -> None:
        todo, result = got
        if as_json:
            print_json(
                {
                    "current": json.loads(todo.rollback_json),
                    "throttle": todo.throttle,
                    "throttle_mode": todo.mode if todo.throttle is not None else None,
                    "throttle_configs": [
                        {
                            "entity_type": c.entity_type,
                            "entity": c.entity_name,
                            "name": c.name,
                            "value": c.value,
                        }
                        for c in todo.changes
                    ],
                    "started": [str(tp) for tp in result.started],
                    "errors": {str(tp): m for tp, m in result.errors.items()},
                },
            )
        else:
            _print_throttles(todo)
            if result.started:
                echo(f"Successfully started partition reassignments for {tp_list(result.started)}")
        for tp, message in result.errors.items():
            echo(f"error: reassignment of {tp} refused: {message}", err=True)
        if result.errors:
            sys.exit(1)

    return finish(go, render, bad_input=runner.BAD_INPUT_CODES)


def _print_throttles(todo: runner.ExecutePlan) -> None:
    if todo.throttle is None:
        echo("No throttle: the moves run at full speed (--throttle B/s limits them).")
        return
    brokers = sorted({int(c.entity_name) for c in todo.changes if c.entity_type == "brokers"})
    how = (
        "replica lists on the topics, rates on the brokers"
        if todo.mode == moves.MODE_REPLICATION
        else "KIP-542 reassignment rates on the brokers, no replica lists"
    )
    echo(
        f"The inter-broker throttle limit was set to {todo.throttle} B/s "
        f"({todo.mode} mode: {how}; brokers {','.join(map(str, brokers)) or 'none'}):"
    )
    for c in todo.changes:
        echo(f"  {c}")
    echo(
        "These throttles are recorded with the reassignment: the controller removes them itself "
        "when its last partition completes or is cancelled, no --verify needed (--verify "
        "--watch shows the progress)."
    )


# ---------------------------------------------------------------------------- --list


def _list(o: Mapping[str, Any]) -> object:
    address = resolve_bootstrap(o["bootstrap"], o["cluster_dir"])

    async def go() -> runner.ClusterView:
        async with cli_client(address, CLIENT_ID) as client:
            return await runner.read_cluster(Admin(client))

    def render(got: runner.ClusterView) -> None:
        view = got
        rows = [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(m.replicas),
                "adding": list(m.adding),
                "removing": list(m.removing),
            }
            for tp, m in view.ongoing.items()
        ]
        if o["as_json"]:
            print_json(rows)
        elif not rows:
            echo("No partition reassignments in progress.")
        else:
            echo(table(rows, ["topic", "partition", "replicas", "adding", "removing"]))

    return finish(go, render, bad_input=runner.BAD_INPUT_CODES)


# ---------------------------------------------------------------------------- plan


@reassign_cmd.command("plan", cls=_Command)
@click.option("--reassignment-json-file", metavar="FILE", help="The moves to plan.")
@click.option("--throttle", metavar="B/S", help="Predict the move time at this throttle.")
@click.option("--deadline-s", metavar="Y", help="Find the throttle that finishes in Y s.")
@click.option("--network-bytes-per-s", metavar="N", help="A broker's network bandwidth, B/s.")
@click.option("--max-fraction", metavar="X", help="Share of N the move may use, e.g. 0.3.")
@click.option("--throttle-mode", metavar="MODE", help=THROTTLE_MODE_HELP)
@bootstrap_option
@json_option
@friendly_errors
def plan_cmd(
    reassignment_json_file: str | None,
    throttle: str | None,
    deadline_s: str | None,
    network_bytes_per_s: str | None,
    max_fraction: str | None,
    throttle_mode: str | None,
    bootstrap: str | None,
    cluster_dir: Path,
    as_json: bool,
) -> object:
    """Predict a move's time at a throttle, or the throttle for a deadline (KIP-73's arithmetic
    and the move model, from the live cluster; stores nothing)."""
    from minikafka.cli.reassign_plan import run_plan

    return run_plan(
        reassignment_json_file,
        throttle,
        deadline_s,
        network_bytes_per_s,
        max_fraction,
        throttle_mode_text=throttle_mode,
        bootstrap=bootstrap,
        cluster_dir=cluster_dir,
        as_json=as_json,
    )
