"""The PySpark analysis of system-test and experiment runs: run folders in (`runs`, named by
path, pattern or URI: `sources`; found and listed through Spark: `inputs`), one Spark job
(`spark_job`, its DataFrame rules in `frames`) on any master (`masters`, `session`), pure
figures and verdicts (`summary`), report.json, HTML and PNG plots out (`report`), and what it
needs to run (`environment`).

The package imports without the `[analysis]` extra: `analyze` and `spark_session` (the Spark
job) are imported on first use, and raise `MissingAnalysisExtra` (the pip line) without pyspark.
"""

from typing import TYPE_CHECKING, Any

from minikafka.tools.analysis.environment import (
    AnalysisUnavailable,
    MissingAnalysisExtra,
    check_java,
    java_major,
    require_analysis,
)
from minikafka.tools.analysis.masters import MASTER_FORMS, check_master
from minikafka.tools.analysis.report import render_html, render_table, write_report
from minikafka.tools.analysis.runs import Params, RunCase, default_out_dir, load_run, load_runs
from minikafka.tools.analysis.sources import RunSource, parse_sources
from minikafka.tools.analysis.summary import SCHEMA, Collected, Report, build_report, move_bounds

if TYPE_CHECKING:
    from minikafka.tools.analysis.spark_job import analyze, spark_session

_SPARK_JOB = ("analyze", "spark_session")

__all__ = [
    "MASTER_FORMS",
    "SCHEMA",
    "AnalysisUnavailable",
    "Collected",
    "MissingAnalysisExtra",
    "Params",
    "Report",
    "RunCase",
    "RunSource",
    "analyze",
    "build_report",
    "check_java",
    "check_master",
    "default_out_dir",
    "java_major",
    "load_run",
    "load_runs",
    "move_bounds",
    "parse_sources",
    "render_html",
    "render_table",
    "require_analysis",
    "spark_session",
    "write_report",
]


def __getattr__(name: str) -> Any:  # PEP 562: the Spark job's names, imported when first asked
    if name in _SPARK_JOB:
        from minikafka.tools.analysis import spark_job

        return getattr(spark_job, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
