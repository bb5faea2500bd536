"""`minikafka analyze RUN_DIR...`: the PySpark analysis of system-test and experiment runs.

    minikafka analyze RUN_DIR... [--master URL] [--conf KEY=VALUE]... [--out DIR] [--json]

Runs one Spark job over the run folders (tools/analysis), writes report.json, report.html, the
PNG plots and the per-second series to --out (default RUN_DIR/analysis, or the folders' common
parent's analysis/ for many), and prints a table (or report.json with --json). Exit code 0 when
every case passes, 1 when a verdict fails (throttle violated, or the move took outside
0.9-1.2 x its prediction) or Spark fails, 2 for bad input: one line on stderr.

RUN_DIRs are local folders, patterns or URIs (tools/analysis/sources.py): a local folder is
checked before Spark starts (no case.json, an empty folder, no metrics log: exit 2, no JVM); a
pattern (quoted, so that the shell leaves it: 'runs/kip73/*') is expanded by Spark, as are
hdfs://, s3a:// and file:// folders, whose case.json Spark reads. The report is written by
this process, on this machine: a remote run needs --out.

--master takes every form Spark does (tools/analysis/masters.py): local[...], spark://,
yarn, k8s://, and sc:// for Spark Connect; --conf sets Spark properties (spark-submit's
spelling), e.g. spark.driver.host for a cluster whose executors must reach this machine.

First of all it checks what the analysis needs (tools/analysis/environment.py
`require_analysis`, the check the library makes before starting Spark too): Java 17+ (JAVA_HOME,
else java on PATH; not for sc://, whose server runs the JVM), then the `[analysis]` extra
(pyspark, matplotlib), and for sc:// the Spark Connect client. Any missing: one line saying so
(with its pip line), exit 2, nothing written. pyspark is imported only past that check, so the
rest of the CLI runs without it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from minikafka.cli.common import fail, friendly_errors, json_option

# tools/analysis/masters.py MASTER_FORMS, which checks them (not imported here: the analysis
# package is imported when analyze runs, not by every command of the CLI)
MASTER_HELP = "local[N], local[*], spark://HOST:PORT, yarn, k8s://URL, sc://HOST[:PORT]"


class _Command(click.Command):
    """click's usage errors as one line, exit 2 (bad user input: one line saying what is
    accepted, nothing changed)."""

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
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True)
@click.option(
    "--master",
    default="local[2]",
    show_default=True,
    help=f"Spark master: {MASTER_HELP} (forms above).",
)
@click.option(
    "--conf",
    "conf_pairs",
    metavar="KEY=VALUE",
    multiple=True,
    help="A Spark property for the session, as spark-submit's --conf (repeatable).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Report folder on this machine (default: RUN_DIR/analysis, or the common parent's "
    "analysis/; needed for remote runs).",
)
@json_option
@friendly_errors
def analyze_cmd(
    run_dirs: tuple[str, ...],
    master: str,
    conf_pairs: tuple[str, ...],
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """Analyse run folders with PySpark: throttled rates against the throttle, move duration
    against its prediction, produce latency per phase, ISR changes; exit 1 if a case fails.

    \b
    RUN_DIR is a run folder, or what Spark reads:
      runs/kip73/case-1             a folder here (checked before Spark starts)
      'runs/kip73/*'                a pattern, quoted: Spark expands it; the folders
                                    holding a case.json are the runs
      file:///srv/runs/x            a URI: file:, hdfs://, s3a:// (with the connector)
    On a cluster the executors read the files: file: folders must be at the same path on
    every worker. The report is written by this process, on this machine (--out; needed
    when a run is not local).

    \b
    --master (every form Spark takes):
      local[N], local[*]            Spark in this process (binds to 127.0.0.1)
      spark://HOST:PORT             a standalone cluster
      yarn, k8s://https://HOST:PORT a YARN or Kubernetes cluster
      sc://HOST[:PORT][/;k=v...]    a Spark Connect server (no Java needed here)
    Executors must reach this driver: if the address this host's name resolves to is not
    routable from them, give one (--conf spark.driver.host=ADDR, or SPARK_LOCAL_IP).

    Needs Java 17+ and the analysis extra (pip install 'minikafka[analysis]'); sc:// needs
    the Spark Connect client instead of Java (pip install 'pyspark[connect]')."""
    from minikafka.tools.analysis.environment import AnalysisUnavailable, require_analysis
    from minikafka.tools.analysis.masters import check_master, is_connect, parse_conf
    from minikafka.tools.analysis.runs import precheck
    from minikafka.tools.analysis.sources import parse_sources

    check_master(master)
    conf = parse_conf(conf_pairs)
    try:
        require_analysis(connect=is_connect(master))
    except AnalysisUnavailable as exc:
        fail(str(exc), 2)
        return
    precheck(parse_sources(run_dirs), out_given=out_dir is not None)  # exit 2 before Spark starts

    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    from minikafka.tools.analysis import analyze, render_table

    def progress(line: str) -> None:
        click.echo(line, err=True)

    ours = SparkSession.getActiveSession() is None  # else a caller's session: leave it running
    try:
        report = analyze(run_dirs, master=master, conf=conf, out_dir=out_dir, progress=progress)
    except (PySparkException, Py4JError) as exc:  # a master that does not answer, no s3a ...
        if isinstance(exc, Py4JJavaError):  # the Java exception, not py4j's "calling o42.text"
            said = str(exc.java_exception.toString())
        else:
            said = str(exc)
        lines = said.strip().splitlines() or [type(exc).__name__]
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
