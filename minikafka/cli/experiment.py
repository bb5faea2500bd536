"""`minikafka experiment list|run|check`: Jepsen-style fault-injection experiments.

`run NAME` runs a catalog experiment (every variant of it); `run` without a name runs a custom
one built from the options (faults drawn from --seed). `--test-count N` runs each variant N
times, run i (from 0) with seed + i, each in its own folder. Flags take Jepsen's names where
Jepsen has one (`--time-limit`, `--nemesis`, `--nemesis-interval`, `--test-count`); the earlier
names (`--duration`, `--faults`, `--interval`) stay as aliases. Each run gets a folder
`OUT/NAME/TIMESTAMP/` with `OUT/NAME/latest` and `OUT/latest` pointing at the newest
(minikafka/experiment/store.py). `check FOLDER` judges a stored run again, without a cluster
(minikafka/experiment/recheck.py).

Exit codes are Jepsen's:

    0    valid
    1    invalid: an anomaly, or an expectation that did not hold
    2    unknown: something could not be checked (or the cluster would not start)
    254  bad arguments: one line saying what is wrong and what is accepted; nothing started
    255  the harness crashed (a bug, not the cluster): one line; the traceback is in the run
         folder's crash.txt (on stderr if there is no folder)
    130  interrupted (Ctrl-C)

With several runs (variants, --test-count), the worst of them: 255, then 1, then 2, then 0.
Jepsen's test-all ranks unknown above invalid; here an anomaly found is the stronger news, and
a run that could not be checked does not hide it.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from minikafka.cli.common import emit as emit_rows
from minikafka.cli.common import json_option
from minikafka.errors import ConfigError, MiniKafkaError

DEFAULT_OUT = Path("runs/experiments")
BAD_ARGUMENTS = 254
CRASHED = 255
INTERRUPTED = 130
# Options that shape a custom run only; a catalog experiment fixes these itself.
CUSTOM_ONLY = {"brokers": "--brokers", "partitions": "--partitions",
               "replication_factor": "--replication-factor", "faults": "--nemesis",
               "targets": "--targets", "interval": "--nemesis-interval",
               "latency_ms": "--latency-ms", "bandwidth": "--bandwidth"}  # fmt: skip
F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------- exit codes


class _UsageError(click.ClickException):
    """click's usage errors as one line, exit 254 (Jepsen's invalid arguments)."""

    exit_code = BAD_ARGUMENTS

    def __init__(self, message: str, command_path: str) -> None:
        super().__init__(message)
        self.command_path = command_path

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message} (see {self.command_path} --help)", err=True)


_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


class _Exit254:
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)  # type: ignore[misc]
        except _NO_ARGS as exc:  # `minikafka experiment`: the help, as Jepsen's usage, 254
            exc.exit_code = BAD_ARGUMENTS
            raise
        except click.UsageError as exc:
            raise _usage(exc) from None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)  # type: ignore[misc]
        except click.UsageError as exc:
            raise _usage(exc) from None


def _usage(exc: click.UsageError) -> _UsageError:
    path = exc.ctx.command_path if exc.ctx is not None else "minikafka experiment"
    return _UsageError(exc.format_message(), path)


class _Command(_Exit254, click.Command):
    pass


class JepsenGroup(_Exit254, click.Group):
    command_class = _Command


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def exit_codes(fn: F) -> F:
    """Our errors as one line: bad input 254; anything unexpected is a crash of the harness,
    255, with its traceback on stderr (a run's own crash is kept in its folder, see `run`)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MiniKafkaError as exc:  # bad options, FOLDER, --dir: before anything ran
            _fail(str(exc), BAD_ARGUMENTS)
        except KeyboardInterrupt:
            _fail("interrupted", INTERRUPTED)
        except Exception as exc:  # noqa: BLE001 - Jepsen's "Oh jeez, I'm sorry, Jepsen broke"
            traceback.print_exc(file=sys.stderr)
            _fail(f"the harness crashed: {type(exc).__name__}: {exc}", CRASHED)

    return wrapper  # type: ignore[return-value]


def worst(codes: list[int]) -> int:
    """The exit code of several runs (module docstring)."""
    for code in (CRASHED, 1, 2):
        if code in codes:
            return code
    return 0


# ---------------------------------------------------------------------------- commands


@click.group("experiment", cls=JepsenGroup)
def experiment_cmd() -> None:
    """Fault-injection experiments: a workload, a fault schedule, and a checker.

    Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 the harness crashed."""


@experiment_cmd.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """The catalog: each experiment, its variants and the question it answers."""
    from minikafka.experiment.catalog import CATALOG, variants

    rows = [
        {
            "name": e.name,
            "variants": ",".join(s.name for s in variants(e.name, seed=1)),
            "question": e.question,
        }
        for e in CATALOG.values()
    ]
    emit_rows(rows, ["name", "variants", "question"], as_json)


def run_options(fn: F) -> F:
    """The options `experiment run` and `sim run` share (everything but --dir and --sim)."""
    for option in reversed(_RUN_OPTIONS):
        fn = option(fn)
    return fn


_RUN_OPTIONS = [
    click.option(
        "--time-limit",
        "--duration",
        "duration",
        type=click.FloatRange(min=0, min_open=True),
        help="Seconds of workload and faults (default 30).",
    ),
    click.option(
        "--test-count",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Run each variant this many times, run i with seed + i, each its own folder.",
    ),
    click.option("--brokers", type=click.IntRange(1, 64), help="Custom runs: brokers (default 3)."),
    click.option(
        "--partitions", type=int, help="Custom runs: partitions of the topic (default 6)."
    ),
    click.option(
        "--replication-factor", type=int, help="Custom runs: replicas per partition (default 3)."
    ),
    click.option(
        "--rate", type=float, help="Records per second over all producers (default 2000)."
    ),
    click.option("--producers", type=int, help="Concurrent producers (default 4)."),
    click.option("--consumers", type=int, help="Concurrent consumers (default 2)."),
    click.option("--batch", type=int, help="Records per send (default 10)."),
    click.option("--record-bytes", type=int, help="Bytes per record (default 100)."),
    click.option(
        "--acks", type=click.Choice(["all", "1", "0"]), help="Producer acks (default all)."
    ),
    click.option(
        "--retries/--no-retries",
        default=None,
        help="Producers retry each send until acknowledged, as applications do (default: one attempt).",
    ),
    click.option(
        "--idempotence/--no-idempotence",
        default=None,
        help="With --retries: the idempotent producer, KIP-98 (default on; needs acks all).",
    ),
    click.option(
        "--nemesis",
        "--faults",
        "faults",
        help="Custom runs: comma list of kill,pause,restart,wipe,partition,latency,bandwidth or all, and power-loss, disk-full, failed-write (simulated time only, not in all) (default kill).",
    ),
    click.option(
        "--targets",
        help="Custom runs: comma list of broker:N, controller, leader:P, follower:P, random (default random).",
    ),
    click.option(
        "--nemesis-interval",
        "--interval",
        "interval",
        type=float,
        help="Custom runs: seconds of quiet, then of fault, alternately (default 5).",
    ),
    click.option(
        "--latency-ms", type=int, help="Custom runs, latency faults: added ms (default 200)."
    ),
    click.option(
        "--bandwidth",
        type=int,
        help="Custom runs, bandwidth faults: bytes per second per direction (default 262144).",
    ),
    click.option(
        "--seed",
        help="Seeds the schedule and targets (default $MINIKAFKA_SEED, else random; printed).",
    ),
    click.option(
        "--set", "sets", multiple=True, metavar="NAME=VALUE", help="Extra node config (repeatable)."
    ),
    click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_OUT,
        show_default=True,
        help="Where run folders are created (OUT/NAME/TIMESTAMP/).",
    ),
    click.option(
        "--keep-data", is_flag=True, help="Keep the cluster's data dirs in the run folder."
    ),
    click.option(
        "--no-report",
        is_flag=True,
        help="Skip the PySpark report (a throttle bound, which it judges, is then not "
        "judged: such a run is at best unknown).",
    ),
]


@experiment_cmd.command("run")
@click.argument("name", required=False)
@run_options
@click.option("--dir", "cluster_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Use the running cluster in this directory instead of starting one (custom runs; "
                   "its own node configs apply, and replica logs are not read from disk).")  # fmt: skip
@click.option("--sim", is_flag=True,
              help="Run in simulated time, from the seed (as `minikafka sim run`).")  # fmt: skip
@json_option
@exit_codes
def run_cmd(name: str | None, **opts: Any) -> None:
    """Run catalog experiment NAME (see `experiment list`), or a custom one from the options.

    Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 the harness crashed; with
    several runs, the worst."""
    run_all(name, opts)


def run_all(name: str | None, opts: dict[str, Any]) -> None:
    """`experiment run`'s body: every run of NAME (or the custom one), in order, and the exit
    code of the worst; `opts["sim"]`: in simulated time (minikafka/sim/experiment.py)."""
    from minikafka.cli.tool_runner import run_command
    from minikafka.experiment.runner import HarnessCrash, run_experiment
    from minikafka.sim.experiment import run_sim_experiment
    from minikafka.testing.seeds import MAX_SEED, resolve_seed, seed_line

    if opts["sim"] and opts["cluster_dir"] is not None:
        raise ConfigError("--dir (a running cluster) and --sim (a simulated one): choose one")
    if name is not None:
        if opts["cluster_dir"] is not None:
            raise ConfigError(
                "--dir (a running cluster) is for custom runs; catalog runs start their own"
            )
        given = [flag for key, flag in CUSTOM_ONLY.items() if opts[key] is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: for custom runs only; {name} sets its own")
    seed = resolve_seed(opts["seed"])
    count = opts["test_count"]
    if seed + count - 1 > MAX_SEED:
        raise ConfigError(f"--seed {seed} with --test-count {count}: seeds pass 2**63-1")
    # Every run's spec first: a bad option stops everything before a cluster starts.
    runs = [
        (i, spec) for i in range(count) for spec in specs_from(name, {**opts, "seed": seed + i})
    ]
    outcomes: list[dict[str, Any]] = []
    codes = []
    for i, spec in runs:
        what = spec.description or "custom experiment"
        nth = f", run {i + 1} of {count}" if count > 1 else ""
        click.echo(f"== {spec.name} ({seed_line(spec.seed)}{nth}): {what}", err=True)
        say = lambda m: click.echo(f"  {m}", err=True)  # noqa: E731
        try:
            if opts["sim"]:
                outcome = run_sim_experiment(
                    spec, opts["out"], keep_data=opts["keep_data"],
                    report=not opts["no_report"], progress=say, tools=run_command,
                )  # fmt: skip
            else:
                outcome = run_experiment(
                    spec, opts["out"], cluster_dir=opts["cluster_dir"],
                    keep_data=opts["keep_data"], report=not opts["no_report"], progress=say,
                )  # fmt: skip
        except HarnessCrash as exc:  # kept in its folder; the other runs go on, as Jepsen's
            click.echo(f"error: {spec.name}: the harness crashed: {exc}", err=True)
            codes.append(CRASHED)
            outcomes.append({"experiment": spec.name, "seed": spec.seed, "valid": "crashed",
                             "exit_code": CRASHED, "crash": str(exc.crash_file)})  # fmt: skip
            continue
        code = CRASHED if outcome.crash is not None else outcome.exit_code
        codes.append(code)
        outcomes.append({"path": str(outcome.path), **outcome.results, "exit_code": code})
        if not opts["as_json"]:
            _print_outcome(spec.name, outcome.results, outcome.path)
            if outcome.crash is not None:
                click.echo(f"  the harness crashed (exit 255): {shown(outcome.crash)}")
    if opts["as_json"]:
        click.echo(json.dumps(outcomes, default=str))
    elif len(runs) > 1:
        tally = {w: sum(o["valid"] == v for o in outcomes) for w, v in
                 (("valid", True), ("invalid", False), ("unknown", "unknown"), ("crashed", "crashed"))}  # fmt: skip
        click.echo(", ".join(f"{n} {w}" for w, n in tally.items()) + f" of {len(runs)} runs")
    sys.exit(worst(codes))


@experiment_cmd.command("check")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--write", is_flag=True, help="Replace the folder's results.json by this verdict.")
@json_option
@exit_codes
def check_cmd(folder: Path, write: bool, as_json: bool) -> None:
    """Judge the run in FOLDER again from what it stores, without a cluster: its spec, history,
    node logs, replica dumps and report. FOLDER may be a `latest` link. Changes nothing unless
    --write.

    Exit codes: 0 valid, 1 invalid, 2 unknown, 254 FOLDER is not a run, 255 a crash."""
    from minikafka.experiment.recheck import recheck
    from minikafka.experiment.recheck import write as write_results

    check = recheck(folder)
    if write:
        write_results(check)
    results = check.results
    if as_json:
        doc = {"path": str(check.path), **results, "notes": check.notes, "written": write,
               "stored_valid": None if check.stored is None else check.stored.get("valid")}  # fmt: skip
        click.echo(json.dumps(doc, default=str))
        sys.exit(check.exit_code)
    _print_outcome(results["experiment"], results, check.path, report=False)
    for note in check.notes:
        click.echo(f"  note: {note}")
    if check.stored is None:
        click.echo("  stored verdict: none (no results.json)")
    else:
        word = {True: "VALID", False: "INVALID"}.get(check.stored.get("valid"), "UNKNOWN")
        then = f"{word} (exit {check.stored.get('exit_code')})"
        same = "the same" if check.same_verdict else "DIFFERENT"
        click.echo(
            f"  stored verdict: {then}, {same}" + ("; results.json rewritten" if write else "")
        )
    sys.exit(check.exit_code)


def _print_outcome(name: str, results: dict[str, Any], path: Path, *, report: bool = True) -> None:
    click.echo(f"{name}: {results['summary']}")
    doc = results.get("report") or {}
    if report and "produce_latency" in doc:
        lat = doc["produce_latency"]
        click.echo(f"  acks latency p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, "
                   f"max {lat['max_ms']} ms")  # fmt: skip
    if report and doc:
        click.echo(f"  report: {shown(Path(doc['path'])) if doc.get('path') else doc.get('error')}")
    click.echo(f"  folder: {shown(path)}")


def shown(path: Path) -> str:
    """`path` relative to the working directory where it lies below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _parse_sets(items: tuple[str, ...]) -> dict[str, str]:
    from minikafka.cluster import parse_node_configs

    return parse_node_configs(items)


def specs_from(name: str | None, opts: dict[str, Any]) -> list:
    from minikafka.experiment.catalog import variants, with_overrides
    from minikafka.experiment.schedule import parse_kinds, parse_target, plan_schedule
    from minikafka.experiment.spec import ExperimentSpec

    acks = {"all": -1, "1": 1, "0": 0}.get(opts["acks"]) if opts["acks"] else None
    common = {
        "producers": opts["producers"], "consumers": opts["consumers"],
        "records_per_s": opts["rate"], "batch_records": opts["batch"],
        "record_bytes": opts["record_bytes"], "acks": acks,
        "producer_retries": opts["retries"], "idempotence": opts["idempotence"],
    }  # fmt: skip
    if name is not None:
        specs = variants(name, seed=opts["seed"], duration_s=opts["duration"])
        extra = _parse_sets(opts["sets"])
        return [
            with_overrides(s, **common, node_configs={**s.node_configs, **extra} if extra else None)
            for s in specs
        ]
    broker_ids = tuple(range(1, (opts["brokers"] or 3) + 1))
    if opts["cluster_dir"] is not None:  # the running cluster's brokers are the targets
        from minikafka.cluster import LocalCluster

        broker_ids = tuple(n.node_id for n in LocalCluster.load(opts["cluster_dir"]).spec.brokers)
    brokers = len(broker_ids)
    duration = opts["duration"] or 30.0
    kinds = parse_kinds(opts["faults"] or "kill")
    targets = [parse_target(t) for t in (opts["targets"] or "random").split(",") if t.strip()]
    for t in targets:
        if t.role == "broker" and t.number not in broker_ids:
            raise ConfigError(f"--targets {t}: no such broker (brokers: {list(broker_ids)})")
    if not targets:
        raise ConfigError(
            "--targets: expected a comma list of broker:N, controller, leader:P, follower:P, random"
        )
    faults = plan_schedule(
        kinds=kinds, targets=targets, duration_s=duration,
        interval_s=5.0 if opts["interval"] is None else opts["interval"],
        seed=opts["seed"], brokers=broker_ids,
        latency_ms=opts["latency_ms"] or 200, bandwidth_bps=opts["bandwidth"] or 256 * 1024,
    )  # fmt: skip
    spec = ExperimentSpec(
        name="custom", brokers=brokers, duration_s=duration, seed=opts["seed"],
        faults=tuple(faults), node_configs=_parse_sets(opts["sets"]),
        **{k: v for k, v in {
            "partitions": opts["partitions"],
            "replication_factor": opts["replication_factor"] or min(3, brokers),
            **common,
        }.items() if v is not None},
    )  # fmt: skip
    return [spec]
