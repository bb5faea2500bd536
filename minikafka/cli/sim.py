"""`minikafka sim run`: the catalog's experiments (and custom ones) in simulated time.

`sim run NAME` takes `experiment run`'s options and runs the same experiment with the whole
cluster in one process under a virtual clock (minikafka/sim/experiment.py): the same seed writes
the same run folder, byte for byte. With `--test-count N` it is a search: seeds S, S+1, ...,
S+N-1 on `--jobs` processes, keeping the folders of the runs that are not valid (and only
those, without `--keep-passing`), each replayable with `sim run NAME --seed S`.

Python salts its string hashes per process, and a set of strings iterates in the salt's order,
so `sim` restarts itself with PYTHONHASHSEED=0 when it is not set so (sim/determinism.py): a
replay in another process then takes the same paths. Exit codes are `experiment run`'s.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from minikafka.cli.common import json_option
from minikafka.cli.experiment import (
    CRASHED,
    JepsenGroup,
    exit_codes,
    run_all,
    run_options,
    shown,
    specs_from,
    worst,
)
from minikafka.errors import ConfigError
from minikafka.sim.determinism import HASH_SEED_ENV

PINNED_HASH_SEED = "0"


def pin_hash_seed() -> None:
    """Restart this command with PYTHONHASHSEED=0 unless it already runs so (module
    docstring); nothing has run yet, so the restart repeats it whole."""
    if os.environ.get(HASH_SEED_ENV) == PINNED_HASH_SEED:
        return
    env = {**os.environ, HASH_SEED_ENV: PINNED_HASH_SEED}
    argv = [sys.executable, *sys.orig_argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


@click.group("sim", cls=JepsenGroup)
def sim_cmd() -> None:
    """Experiments in simulated time: every run replayable from its seed.

    Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 the harness crashed."""
    pin_hash_seed()


@sim_cmd.command("run")
@click.argument("name", required=False)
@run_options
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes for --test-count runs (default: the machine's cores).",
)
@click.option(
    "--keep-passing",
    is_flag=True,
    help="With --test-count: keep the folders of valid runs too (default: only the others).",
)
@json_option
@exit_codes
def sim_run_cmd(name: str | None, **opts: Any) -> None:
    """Run catalog experiment NAME (or a custom one) in simulated time.

    Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 the harness crashed; with
    several runs, the worst."""
    jobs, keep_passing = opts.pop("jobs"), opts.pop("keep_passing")
    opts = {**opts, "cluster_dir": None, "sim": True}
    if opts["test_count"] == 1:
        if keep_passing or jobs is not None:
            raise ConfigError("--jobs and --keep-passing: for a search (--test-count > 1)")
        run_all(name, opts)
        return
    _search(name, opts, jobs=jobs or os.cpu_count() or 1, keep_passing=keep_passing)


def _search(name: str | None, opts: dict[str, Any], *, jobs: int, keep_passing: bool) -> None:
    from minikafka.cli.tool_runner import run_command
    from minikafka.sim.search import search
    from minikafka.testing.seeds import MAX_SEED, resolve_seed

    seed, count = resolve_seed(opts["seed"]), opts["test_count"]
    if seed + count - 1 > MAX_SEED:
        raise ConfigError(f"--seed {seed} with --test-count {count}: seeds pass 2**63-1")
    specs = [spec for i in range(count) for spec in specs_from(name, {**opts, "seed": seed + i})]
    click.echo(
        f"== {name or 'custom'}: seeds {seed}..{seed + count - 1}, {len(specs)} runs on "
        f"{jobs} processes (simulated)",
        err=True,
    )
    done = 0

    def heard(result: dict[str, Any]) -> None:
        # Progress on stderr, with --json too: stdout carries only the JSON.
        nonlocal done
        done += 1
        line = (result.get("summary") or "").splitlines()[:1] or [""]
        click.echo(
            f"  [{done}/{len(specs)}] {result['experiment']} seed {result['seed']}: {line[0]}",
            err=True,
        )

    results = search(
        specs, opts["out"], jobs=jobs, report=not opts["no_report"],
        keep_passing=keep_passing, on_result=heard, tools=run_command,
    )  # fmt: skip
    codes = [r["exit_code"] for r in results]
    if opts["as_json"]:
        click.echo(json.dumps(results, default=str))
    else:
        bad = [r for r in results if r["exit_code"] != 0]
        tally = {w: sum(r["valid"] == v for r in results) for w, v in
                 (("valid", True), ("invalid", False), ("unknown", "unknown"), ("crashed", "crashed"))}  # fmt: skip
        click.echo(", ".join(f"{n} {w}" for w, n in tally.items()) + f" of {len(results)} runs")
        for r in bad:
            where = r.get("path") or r.get("crash")
            code = "crashed" if r["exit_code"] == CRASHED else f"exit {r['exit_code']}"
            click.echo(
                f"  {r['experiment']} seed {r['seed']} ({code}): {shown(Path(where))}"
                f"  replay: minikafka sim run {name or '...'} --seed {r['seed']}"
            )
    sys.exit(worst(codes))
