"""The PySpark analysis of system-test and experiment runs: run folders in (`runs`), one Spark
job (`spark_job`, its DataFrame rules in `frames`), pure figures and verdicts (`summary`),
report.json, HTML and PNG plots out (`report`)."""

from tools.analysis.report import render_html, render_table, write_report
from tools.analysis.runs import Params, RunCase, default_out_dir, load_run, load_runs
from tools.analysis.spark_job import analyze, spark_session
from tools.analysis.summary import SCHEMA, Collected, Report, build_report, move_bounds

__all__ = [
    "SCHEMA",
    "Collected",
    "Params",
    "Report",
    "RunCase",
    "analyze",
    "build_report",
    "default_out_dir",
    "load_run",
    "load_runs",
    "move_bounds",
    "render_html",
    "render_table",
    "spark_session",
    "write_report",
]
