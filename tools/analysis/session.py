"""The SparkSession the analysis runs in, for every master form (tools/analysis/masters.py).

A classic session (local, spark://, yarn, k8s://) starts a driver JVM here; a Spark Connect one
(sc://) is a gRPC client of a server that holds the JVM. The job uses only the DataFrame API
both share: no `sparkContext` (Connect has none), no RDDs, no Python UDFs, so the executors
never start a Python worker.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from minikafka.errors import MiniKafkaError
from minikafka.tools.analysis.environment import (
    ANALYSIS_EXTRA_HINT,
    MissingAnalysisExtra,
    require_analysis,
)
from minikafka.tools.analysis.masters import check_master, is_connect, is_local

try:
    from pyspark.sql import SparkSession
except ImportError as exc:  # the Spark side of the analysis: without pyspark, the pip line
    raise MissingAnalysisExtra(
        f"the analysis needs pyspark: {ANALYSIS_EXTRA_HINT}", name="pyspark"
    ) from exc

CONNECT_DEFAULT_PORT = 15002  # Spark Connect's, when the URL names none
CONNECT_TIMEOUT_S = 10.0

# Small inputs, short jobs: 4 shuffle partitions (spark_job sets the job's own), no whole-stage
# codegen nor adaptive re-planning, whose start-up costs outweigh what they save here (some 1.4x
# faster). SQL settings: a Spark Connect session may set them too.
SQL_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
}

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def spark_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """The active session, or a new one on `master` with `conf` (spark-submit's --conf pairs)
    on top of ours: UI off, errors only in the log, tuned for small data. An active session is
    reused as it is (its master and settings too).

    Before starting one, what it needs, as one line (AnalysisUnavailable): Java 17+ and the
    `[analysis]` extra for a JVM of our own (`require_analysis`, the check `minikafka analyze`
    makes first); the extra and the Connect client for sc://. The driver binds to 127.0.0.1
    for local masters only (masters.py says why); the executors run this interpreter
    (PYSPARK_PYTHON) unless the environment names another for a cluster."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_master(master)
    if is_connect(master):
        return _connect_session(master, conf or {})
    require_analysis()
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    else:  # the workers' Python is the cluster's: the same path where they share this machine
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = Path(tempfile.gettempdir()) / "minikafka-analysis-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(_LOG4J, encoding="utf-8")
    builder = (
        SparkSession.builder.master(master)
        .appName("minikafka-analysis")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile={log4j.as_uri()} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        )  # the C2 compiler's start-up costs more than it saves on jobs this short
    )
    for key, value in {**SQL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _connect_session(url: str, conf: Mapping[str, str]) -> SparkSession:
    require_analysis(connect=True)
    check_connect_server(url)
    session = SparkSession.builder.remote(url).getOrCreate()
    for key, value in {**SQL_CONF, **conf}.items():  # a session's settings, on the server
        session.conf.set(key, value)
    return session


def check_connect_server(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """MiniKafkaError (one line) unless the Spark Connect server of `url` accepts a TCP
    connection: the client would otherwise retry for minutes (its default policy) and end with
    a gRPC dump."""
    where = urlsplit("http" + url[2:])  # sc://h:p/;k=v, parsed as the client parses it
    host, port = where.hostname or "localhost", where.port or CONNECT_DEFAULT_PORT
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise MiniKafkaError(
            f"the Spark Connect server {host}:{port} ({url}) does not answer: {exc}"
        ) from None
