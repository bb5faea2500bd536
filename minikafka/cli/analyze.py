"""`minikafka analyze RUN_DIR...`: the PySpark analysis of system-test and experiment runs.

    minikafka analyze RUN_DIR... [--master URL] [--out DIR] [--json]

Runs one Spark job over the run folders (tools/analysis), writes report.json, report.html, the
PNG plots and the per-second series to --out (default RUN_DIR/analysis, or the folders' common
parent's analysis/ for many), and prints a table (or report.json with --json). Exit code 0 when
every case passes, 1 when a verdict fails (throttle violated, or the move took outside
0.9-1.2 x its prediction), 2 for bad input (a folder without case.json, an empty folder, a bad
--master): one line on stderr, checked before Spark starts. Progress goes to stderr.

First of all it checks what the analysis needs (tools/analysis/environment.py
`require_analysis`, the check the library makes before starting Spark too): Java 17+ (JAVA_HOME,
else java on PATH), then the `[analysis]` extra (pyspark, matplotlib). Either missing: one line
saying so (for the extra, `pip install 'minikafka[analysis]'`), exit 2, nothing written.
pyspark is imported only past that check, so the rest of the CLI runs without it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from minikafka.cli.common import fail, friendly_errors, json_option
from minikafka.errors import ConfigError

MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn, k8s://URL"
_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\d+)?\])?|spark://\S+|yarn|k8s://\S+)$")


class _Command(click.Command):
    """click's usage errors as one line, exit 2 (DESIGN.md rule 6)."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise ConfigUsageError(exc.format_message()) from None


class ConfigUsageError(click.ClickException):
    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message} (see minikafka analyze --help)", err=True)


@click.command("analyze", cls=_Command)
@click.argument(
    "run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path)
)
@click.option(
    "--master", default="local[2]", show_default=True, help=f"Spark master ({MASTER_FORMS})."
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Report folder (default: RUN_DIR/analysis, or the common parent's analysis/).",
)
@json_option
@friendly_errors
def analyze_cmd(
    run_dirs: tuple[Path, ...], master: str, out_dir: Path | None, as_json: bool
) -> None:
    """Analyse run folders with PySpark: throttled rates against the throttle, move duration
    against its prediction, produce latency per phase, ISR changes; exit 1 if a case fails.
    Needs Java 17+ and the analysis extra (pip install 'minikafka[analysis]')."""
    from minikafka.tools.analysis.environment import AnalysisUnavailable, require_analysis

    try:
        require_analysis()
    except AnalysisUnavailable as exc:
        fail(str(exc), 2)
        return
    if not _MASTER.match(master):
        raise ConfigError(
            f"--master {master!r} is not a Spark master URL; accepted: {MASTER_FORMS}"
        )
    from minikafka.tools.analysis.runs import load_runs

    runs = load_runs(run_dirs)  # bad folders: exit 2 before Spark starts

    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from minikafka.tools.analysis import analyze, render_table

    def progress(line: str) -> None:
        click.echo(line, err=True)

    ours = SparkSession.getActiveSession() is None  # else a caller's session: leave it running
    try:
        report = analyze(
            [r.run_dir for r in runs], master=master, out_dir=out_dir, progress=progress
        )
    except (PySparkException, Py4JError) as exc:  # no Java, a master that does not answer ...
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        fail(f"Spark failed: {lines[0]}", 1)
        return
    finally:
        active = SparkSession.getActiveSession()
        if ours and active is not None:
            active.stop()
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        click.echo(render_table(report))
        click.echo(f"report: {report.out_dir / 'report.html' if report.out_dir else '-'}")
    sys.exit(0 if report.ok else 1)
