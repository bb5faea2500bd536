"""The analysis' input through Spark: the run folders behind the RUN_DIR arguments, their log
files, and the logs' lines, each line named by its run folder.

Spark finds everything (tools/analysis/sources.py says why and how the arguments are read):
a pattern's or a remote folder's case.json files are read with `spark.read.text` (the pattern
globbed by Spark's Hadoop file system, on any scheme it has), and every run's log files are
listed with the `binaryFile` source without reading their bytes (its `content` column is never
asked for). Python on the driver only sorts that listing (`sources.classify`). The lines are
read with `spark.read.json` and an explicit schema; `input_file_name()` gives each line's file,
and `run_key` its run folder, spelled as `file_key` spells every path here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from pathlib import Path

from minikafka.errors import ConfigError
from minikafka.tools.analysis.environment import ANALYSIS_EXTRA_HINT, MissingAnalysisExtra
from minikafka.tools.analysis.runs import (
    LAYOUT,
    NO_RUN_DIR,
    RunCase,
    case_from_text,
    with_logs,
)
from minikafka.tools.analysis.sources import (
    LAYOUT_PATTERN,
    Listed,
    LogFiles,
    RunSource,
    classify,
    glob_escape,
)

try:
    from pyspark.errors import AnalysisException
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as exc:  # the Spark side of the analysis: without pyspark, the pip line
    raise MissingAnalysisExtra(
        f"the analysis needs pyspark: {ANALYSIS_EXTRA_HINT}", name="pyspark"
    ) from exc

LOG_FILES = "*.jsonl*"  # the listing's name filter: node logs and their rotated parts, clients/


def file_key(file_name: Column) -> Column:
    """A file's path as the analysis names it: input_file_name()'s URI with %-escapes decoded
    and, for file:, the scheme cut (`file:///a%20b/x` is `/a b/x`; `hdfs://nn/x` stays)."""
    path = F.regexp_replace(file_name, r"^file:(//)?", "")
    return F.url_decode(F.regexp_replace(path, r"\+", "%2B"))  # a literal + is not a space


def run_key(file_name: Column) -> Column:
    """The run folder of a log line: the path before nodes/..., clients/... or timeline.jsonl,
    as `RunCase.key` spells it."""
    return F.regexp_extract(file_key(file_name), LAYOUT_PATTERN, 1)


def read_lines(spark: SparkSession, files: Sequence[str], schema: T.StructType) -> DataFrame:
    if not files:
        empty = T.StructType([*schema.fields, T.StructField("run_key", T.StringType())])
        return spark.createDataFrame([], empty)
    df = spark.read.schema(schema).json(list(files))
    return df.withColumn("run_key", run_key(F.input_file_name())).where(F.col("ts").isNotNull())


def find_runs(
    spark: SparkSession, sources: Sequence[RunSource], checked: Mapping[str, RunCase]
) -> list[RunCase]:
    """The runs of the arguments, in the order given (a folder named twice counts once; a
    pattern's in path order), each with the log files Spark listed in it. `checked`: the local
    folders' runs, by argument (runs.precheck); the case.json files of patterns and remote
    folders are read through Spark in one job, and checked by the same rules. Bad input:
    ConfigError."""
    if not sources:
        raise ConfigError(NO_RUN_DIR)
    found = _cases_through_spark(spark, [s for s in sources if not s.checked_here])
    runs: dict[str, RunCase] = {}
    for s in sources:
        for run in [checked[s.arg]] if s.checked_here else found[s.arg]:
            runs.setdefault(run.key, run)
    logs = list_logs(spark, list(runs.values()))
    return [with_logs(r, logs[r.key]) for r in runs.values()]


def _cases_through_spark(
    spark: SparkSession, sources: Sequence[RunSource]
) -> dict[str, list[RunCase]]:
    """The runs of patterns and remote folders: their case.json files read by Spark (in one
    job), each checked as runs.case_from_text checks a local one."""
    if not sources:
        return {}
    frames = []
    for s in sources:
        try:  # .schema resolves the path now (Spark Connect reads lazily): a miss names its source
            df = spark.read.text(s.case_json_path(), wholetext=True)
            df.schema  # noqa: B018
        except AnalysisException as exc:
            if _condition(exc) != "PATH_NOT_FOUND":
                raise
            what = "no folder it matches holds a case.json" if s.pattern else "no case.json"
            raise ConfigError(f"{s.arg}: {what} (a run folder holds {LAYOUT})") from None
        file = file_key(F.input_file_name())
        frames.append(df.select(F.lit(s.arg).alias("arg"), file.alias("file"), "value"))
    out: dict[str, list[RunCase]] = {s.arg: [] for s in sources}
    local = {s.arg: s.local is not None for s in sources}
    for r in sorted(reduce(DataFrame.unionByName, frames).collect(), key=lambda r: r["file"]):
        key = r["file"].removesuffix("/case.json")
        here = local[r["arg"]]
        run = case_from_text(
            r["value"],
            key=key,
            uri=f"file:{key}" if here else key,
            run_dir=Path(key) if here else None,
        )
        out[r["arg"]].append(run)
    return out


def list_logs(spark: SparkSession, runs: Sequence[RunCase]) -> dict[str, LogFiles]:
    """Every run's log files, listed by Spark under each run folder (one job that reads no
    file's bytes) and sorted into the layout by `sources.classify`."""
    if not runs:
        return {}
    listing = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", LOG_FILES)
        .load([glob_escape(r.uri) for r in runs])
        .select(file_key(F.input_file_name()).alias("key"), "path", "length")
    )
    files = [Listed(key=r["key"], path=r["path"], size=r["length"]) for r in listing.collect()]
    return classify(files, [r.key for r in runs])


def _condition(exc: AnalysisException) -> str | None:
    """The error's condition (PATH_NOT_FOUND ...): getCondition since Spark 4, else the old name."""
    get = getattr(exc, "getCondition", None) or exc.getErrorClass
    return get()
