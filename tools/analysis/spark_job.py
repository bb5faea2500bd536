"""The PySpark job: run folders' JSON-lines logs in, per-second rates and per-case figures out.

Every log is read with `spark.read.json` and an explicit schema (a half-written last line, or a
field of an unexpected type, becomes nulls instead of failing the job); `input_file_name()`
names the run folder each line came from. The transformations and their rules are in `frames`;
only small results reach the driver (one row per broker-second, per case, per phase, per judged
window, per caught-up partition), in three actions: the per-second series, the move bounds,
and everything else in one union. Each case's throttle is judged as its case.json says
(`RunCase.throttle_check`, each judged sensor against its own bound where case.json gives one):
the move bounds collected in the second action give the judged interval of each case.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any

from minikafka.errors import MiniKafkaError
from minikafka.tools.analysis.environment import ANALYSIS_EXTRA_HINT, MissingAnalysisExtra

try:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as exc:  # this module is the Spark job: without pyspark, the pip line
    raise MissingAnalysisExtra(
        f"the analysis needs pyspark: {ANALYSIS_EXTRA_HINT}", name="pyspark"
    ) from exc
from minikafka.tools.analysis.frames import (
    COUNTERS,
    RATES,
    broker_windows,
    catch_up_order,
    catch_ups,
    isr_counts,
    judged_windows,
    last_isr,
    latency_per_second,
    latency_phases,
    moves,
    per_second,
    window_series,
    with_phase,
)
from minikafka.tools.analysis.inputs import find_runs, read_lines, run_key
from minikafka.tools.analysis.masters import local_cores
from minikafka.tools.analysis.report import write_report
from minikafka.tools.analysis.runs import (
    Params,
    RunCase,
    ThrottleCheck,
    default_out_dir,
    precheck,
)
from minikafka.tools.analysis.session import spark_session
from minikafka.tools.analysis.sources import parse_sources
from minikafka.tools.analysis.summary import (
    Collected,
    Report,
    build_report,
    case_move,
    judged_bounds,
)

METRICS_SCHEMA = T.StructType(
    [
        T.StructField("ts", T.DoubleType()),
        T.StructField("node", T.LongType()),
        *(T.StructField(c, T.LongType()) for c in COUNTERS),
        T.StructField("SumReplicaLag", T.DoubleType()),
        T.StructField(
            "throttle_configs",
            T.StructType([T.StructField(r, T.LongType()) for r in RATES]),
        ),
    ]
)
EVENTS_SCHEMA = T.StructType(
    [
        T.StructField("ts", T.DoubleType()),
        T.StructField("node", T.LongType()),
        T.StructField("event", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.LongType()),
        T.StructField("isr", T.ArrayType(T.LongType())),
        T.StructField("old_isr", T.ArrayType(T.LongType())),
    ]
)
PRODUCED_SCHEMA = T.StructType(
    [
        T.StructField("ts", T.DoubleType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.LongType()),
        T.StructField("count", T.LongType()),
        T.StructField("latency_ms", T.DoubleType()),
    ]
)
TIMELINE_SCHEMA = T.StructType(
    [T.StructField("ts", T.DoubleType()), T.StructField("event", T.StringType())]
)

__all__ = ["analyze", "collect", "run_key", "shuffle_partitions", "spark_session"]


# ------------------------------------------------------------------------------ small frames


def cases_frame(spark: SparkSession, runs: Sequence[RunCase]) -> DataFrame:
    rows = [(r.key, r.throttle_mode, r.throttle_bytes_per_s) for r in runs]
    return spark.createDataFrame(rows, "run_key string, mode string, throttle long")


def roles_frame(
    spark: SparkSession, runs: Sequence[RunCase], checks: Mapping[str, ThrottleCheck]
) -> DataFrame:
    """(run, node, side, role, sensor_bound): follower side on receiving brokers, leader side on
    sending ones; the sensor's own bound where case.json gives one, else null."""
    sides = [("follower", "receiving", "receiving_brokers"), ("leader", "sending", "sending_brokers")]
    rows = [
        (r.key, n, side, role, checks[r.key].sensor_bound(n, side))
        for side, role, field in sides
        for r in runs
        for n in getattr(r, field)
    ]
    return spark.createDataFrame(
        rows, "run_key string, node long, side string, role string, sensor_bound double"
    )


def checks_frame(
    spark: SparkSession, checks: Mapping[str, ThrottleCheck], move_rows: Sequence[Mapping[str, Any]]
) -> DataFrame:
    """One row per case: the move's bounds, the judged interval, and how windows are judged."""
    out = []
    for m in move_rows:
        c = checks[m["run_key"]]
        start, end, _ = case_move(c, m)
        out.append((m["run_key"], start, end, *judged_bounds(c, m), c.window_s,
                    c.bound_bytes_per_s, c.past_end, c.judged, c.exempt_counted))  # fmt: skip
    return spark.createDataFrame(
        out,
        "run_key string, start double, end double, jstart double, jend double, window_s int, "
        "bound double, past_end boolean, judged string, exempt_counted boolean",
    )


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def rows_of_many(frames: Mapping[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Several small results in one action (one Spark job instead of one each): every row as
    JSON, nulls kept, tagged with its frame's name."""
    tagged = [
        df.select(
            F.lit(name).alias("kind"),
            F.to_json(F.struct(*df.columns), {"ignoreNullFields": "false"}).alias("row"),
        )
        for name, df in frames.items()
    ]
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    for r in reduce(DataFrame.unionAll, tagged).collect():
        out[r["kind"]].append(json.loads(r["row"]))
    return out


# ---------------------------------------------------------------------------------- the job


def analyze(
    run_dirs: Sequence[str | os.PathLike[str]],
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    spark: SparkSession | None = None,
    params: Params | None = None,
    write: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Analyse run folders together in Spark; write report.json, report.html, the plots and the
    per-second series to `out_dir` on this machine (default: RUN_DIR/analysis, or the folders'
    common parent's analysis/ for many; a remote run has none) unless `write` is false.

    `run_dirs`: local folders, patterns and URIs (tools/analysis/sources.py); Spark expands the
    patterns and lists every run's files. Bad local folders (and a remote run without
    `out_dir`) raise ConfigError before Spark starts; a pattern matching no run folder, or a
    remote folder without case.json, once Spark has looked. The session (`spark`, else the
    active one, else a new one on `master` with `conf`) is left running for the next call;
    `spark_session(...).stop()` ends it."""
    say = progress or (lambda _line: None)
    params = params or Params()
    sources = parse_sources(run_dirs)
    checked = precheck(sources, out_given=out_dir is not None or not write)
    if spark is None:
        if SparkSession.getActiveSession() is None:
            say(f"starting Spark on {master} ...")
        spark = spark_session(master, conf)
    runs = find_runs(spark, sources, checked)
    say(f"reading {len(runs)} run folder(s) ...")
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    spark.conf.set(key, str(shuffle_partitions(spark, runs)))
    try:
        data = collect(spark, runs, params, say)
    finally:
        spark.conf.set(key, before)
    report = build_report(runs, data, params)
    if not write:
        return report
    out = Path(out_dir) if out_dir is not None else default_out_dir(runs)
    say(f"writing the report to {out} ...")
    return write_report(report, out)


def shuffle_partitions(spark: SparkSession, runs: Sequence[RunCase]) -> int:
    """One shuffle partition per 16 MiB of logs, at most 2 per core: every task of every stage
    costs some 10 ms however little it holds, and a run's logs are a few MB (4 partitions
    instead of 1 make the analysis of one run about 1.6x slower on 2 cores). The cores: the
    session's `spark.default.parallelism` if set, a local master's own; on a cluster, whose
    cores the session does not say (not without `sparkContext`, which Spark Connect lacks),
    at most the session's `spark.sql.shuffle.partitions`."""
    size = sum(r.log_bytes for r in runs)
    cores = spark.conf.get("spark.default.parallelism", None) or local_cores(
        spark.conf.get("spark.master", None) or ""
    )
    cap = 2 * int(cores) if cores else int(spark.conf.get("spark.sql.shuffle.partitions"))
    return max(1, min(cap, -(-size // (16 << 20))))


def collect(
    spark: SparkSession, runs: Sequence[RunCase], params: Params, say: Callable[[str], None]
) -> Collected:
    checks = {r.key: r.throttle_check(params) for r in runs}
    keys, roles = cases_frame(spark, runs), roles_frame(spark, runs, checks)
    metrics = read_lines(spark, [f for r in runs for f in r.metrics_files], METRICS_SCHEMA)
    secs = per_second(metrics, keys).cache()
    try:
        say("per-second rates and the move interval ...")
        seconds = rows(secs)
        strays = {r["run_key"] for r in seconds} - {r.key for r in runs}
        if strays:  # a path input_file_name() spells differently from ours: nothing would join
            raise MiniKafkaError(f"metrics lines of an unknown run folder: {sorted(strays)[0]!r}")
        timeline = read_lines(
            spark, [r.timeline_file for r in runs if r.timeline_file], TIMELINE_SCHEMA
        )
        move_rows = rows(moves(timeline, secs, roles, keys))
        bounds = [
            (m["run_key"], *case_move(checks[m["run_key"]], m)[:2], m["load_start"])
            for m in move_rows
        ]
        moves_df = spark.createDataFrame(
            bounds, "run_key string, start double, end double, load_start double"
        )
        windows = judged_windows(
            secs, roles, checks_frame(spark, checks, move_rows),
            [c.window_s for c in checks.values()], params.window_skip_s,
        )  # fmt: skip
        say("windows against the throttle, latency, ISR ...")
        events = read_lines(spark, [f for r in runs for f in r.events_files], EVENTS_SCHEMA)
        produced = read_lines(
            spark, [r.produced_file for r in runs if r.produced_file], PRODUCED_SCHEMA
        )
        phased = with_phase(produced, moves_df)
        caught = catch_ups(events, moves_df, roles)
        small = rows_of_many(
            {
                "windows": broker_windows(windows),
                "window_series": window_series(windows),
                "isr_counts": isr_counts(events, moves_df),
                "last_isr": last_isr(events),
                "catch_up": catch_up_order(caught, moves_df),
                "latency": latency_phases(phased, caught),
                "latency_seconds": latency_per_second(phased),
            }
        )
        return Collected(moves=move_rows, seconds=seconds, **small)
    finally:
        secs.unpersist()
