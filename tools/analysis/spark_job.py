"""The PySpark job: run folders' JSON-lines logs in, per-second rates and per-case figures out.

Every log is read with `spark.read.json` and an explicit schema (a half-written last line, or a
field of an unexpected type, becomes nulls instead of failing the job); `input_file_name()`
names the run folder each line came from. The transformations and their rules are in `frames`;
only small results reach the driver (one row per broker-second, per case, per phase, per judged
window), in three actions: the per-second series, the move bounds, and everything else in one
union. Each case's throttle is judged as its case.json says (`RunCase.throttle_check`): the
move bounds collected in the second action give the judged interval of each case.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any

from minikafka.errors import MiniKafkaError
from minikafka.tools.analysis.environment import (
    ANALYSIS_EXTRA_HINT,
    MissingAnalysisExtra,
    require_analysis,
)

try:
    from pyspark.sql import Column, DataFrame, SparkSession
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
from minikafka.tools.analysis.report import write_report
from minikafka.tools.analysis.runs import Params, RunCase, ThrottleCheck, default_out_dir, load_runs
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
    ]
)
PRODUCED_SCHEMA = T.StructType(
    [
        T.StructField("ts", T.DoubleType()),
        T.StructField("count", T.LongType()),
        T.StructField("latency_ms", T.DoubleType()),
    ]
)
TIMELINE_SCHEMA = T.StructType(
    [T.StructField("ts", T.DoubleType()), T.StructField("event", T.StringType())]
)

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def spark_session(master: str = "local[2]") -> SparkSession:
    """The active session, or a new one: workers run this interpreter, UI off, 4 shuffle
    partitions, errors only in the log, tuned for small data. An active session is reused as
    it is (its master and settings too). Before starting one: `require_analysis()`, the check
    `minikafka analyze` makes first (Java 17+, matplotlib), so a missing Java is one line,
    AnalysisUnavailable, instead of Spark's launcher failing some seconds later."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    require_analysis()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = Path(tempfile.gettempdir()) / "minikafka-analysis-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(_LOG4J, encoding="utf-8")
    return (
        SparkSession.builder.master(master)
        .appName("minikafka-analysis")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.log.level", "ERROR")
        # Small inputs, short jobs: skip the C2 compiler, whole-stage codegen and adaptive
        # re-planning, whose start-up costs outweigh what they save here (some 1.4x faster).
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile={log4j.as_uri()} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        )
        .getOrCreate()
    )


# ------------------------------------------------------------------------------------ input


def run_key(file_name: Column) -> Column:
    """The run folder of a log line: the path before nodes/..., clients/... or timeline.jsonl,
    as `RunCase.key` spells it (input_file_name() is a URI: scheme cut, %-escapes decoded)."""
    path = F.regexp_replace(file_name, r"^file:(//)?", "")
    path = F.url_decode(F.regexp_replace(path, r"\+", "%2B"))
    return F.regexp_extract(path, r"^(.*)/(nodes/[^/]+/[^/]+|clients/[^/]+|timeline\.jsonl)$", 1)


def read_lines(spark: SparkSession, files: Sequence[str], schema: T.StructType) -> DataFrame:
    if not files:
        empty = T.StructType([*schema.fields, T.StructField("run_key", T.StringType())])
        return spark.createDataFrame([], empty)
    df = spark.read.schema(schema).json(list(files))
    return df.withColumn("run_key", run_key(F.input_file_name())).where(F.col("ts").isNotNull())


def cases_frame(spark: SparkSession, runs: Sequence[RunCase]) -> DataFrame:
    rows = [(r.key, r.throttle_mode, r.throttle_bytes_per_s) for r in runs]
    return spark.createDataFrame(rows, "run_key string, mode string, throttle long")


def roles_frame(spark: SparkSession, runs: Sequence[RunCase]) -> DataFrame:
    """(run, node, side): follower side on receiving brokers, leader side on sending ones."""
    rows = [(r.key, n, "follower", "receiving") for r in runs for n in r.receiving_brokers]
    rows += [(r.key, n, "leader", "sending") for r in runs for n in r.sending_brokers]
    return spark.createDataFrame(rows, "run_key string, node long, side string, role string")


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
    out_dir: str | os.PathLike[str] | None = None,
    spark: SparkSession | None = None,
    params: Params | None = None,
    write: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Analyse run folders together in Spark; write report.json, report.html, the plots and the
    per-second series to `out_dir` (default: RUN_DIR/analysis, or the folders' common parent's
    analysis/ for many) unless `write` is false. Bad folders raise ConfigError before Spark
    starts. The session (`spark`, else the active one, else a new one on `master`) is left
    running for the next call; `spark_session(...).stop()` ends it."""
    say = progress or (lambda _line: None)
    params = params or Params()
    runs = load_runs(run_dirs)
    if spark is None:
        if SparkSession.getActiveSession() is None:
            say(f"starting Spark on {master} ...")
        spark = spark_session(master)
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
    instead of 1 make the analysis of one run about 1.6x slower on 2 cores)."""
    files = [f for r in runs for f in (*r.metrics_files, *r.events_files, r.produced_file) if f]
    size = sum(os.path.getsize(f) for f in files)
    return max(1, min(2 * spark.sparkContext.defaultParallelism, -(-size // (16 << 20))))


def collect(
    spark: SparkSession, runs: Sequence[RunCase], params: Params, say: Callable[[str], None]
) -> Collected:
    keys, roles = cases_frame(spark, runs), roles_frame(spark, runs)
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
        checks = {r.key: r.throttle_check(params) for r in runs}
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
        small = rows_of_many(
            {
                "windows": broker_windows(windows),
                "window_series": window_series(windows),
                "isr_counts": isr_counts(events, moves_df),
                "last_isr": last_isr(events),
                "latency": latency_phases(phased),
                "latency_seconds": latency_per_second(phased),
            }
        )
        return Collected(moves=move_rows, seconds=seconds, **small)
    finally:
        secs.unpersist()
