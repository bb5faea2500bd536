"""What the analysis needs beyond minikafka itself, checked before anything starts: Java 17+
for Spark, and the `[analysis]` extra (pyspark, matplotlib).

`require_analysis()` is the one check, used by `minikafka analyze` (first thing, exit 2 with
its message) and by the library path (`spark_session`, which `analyze` and the system tests
start Spark with, and the experiment runner's report). It raises `AnalysisUnavailable` with
one line saying what is missing and what to do; it changes nothing. A Spark Connect client
(`--master sc://...`) starts no JVM: it needs no Java, but pyspark's `connect` extra.

Java is found as Spark's launcher finds it (bin/spark-class): `$JAVA_HOME/bin/java` when
JAVA_HOME is set, else `java` on PATH. Its major comes from the first line of
`java -version` (stderr): `1.8.0_392` is Java 8 (the old `1.N` scheme), `11.0.21`, `17`,
`21.0.1` are 11, 17, 21 (JEP 223). Spark 4 needs 17 (its release notes; pyproject caps
pyspark below 5 for that reason).

This module imports neither pyspark nor matplotlib: it is what runs when they are missing.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from minikafka.errors import MiniKafkaError

JAVA_MIN_MAJOR = 17
ANALYSIS_EXTRA_HINT = "pip install 'minikafka[analysis]'"
CONNECT_HINT = "pip install 'pyspark[connect]'"
ANALYSIS_MODULES = ("pyspark", "matplotlib")
JAVA_VERSION_TIMEOUT_S = 30.0

# `openjdk version "17.0.15" 2025-04-15`, `java version "1.8.0_392"`, `openjdk version "21"`,
# `openjdk version "22-ea"`: the quoted version on the line naming it.
_VERSION = re.compile(r'version\s+"(?P<v>[^"]+)"')
_LEADING = re.compile(r"(?P<first>\d+)(?:\.(?P<second>\d+))?")


class AnalysisUnavailable(MiniKafkaError):
    """The analysis cannot run here; the message is one line naming what is missing."""


class MissingAnalysisExtra(AnalysisUnavailable, ImportError):
    """pyspark or matplotlib is not installed (the `[analysis]` extra). An ImportError too, so
    `except ImportError` around an import of the analysis still catches it."""


def java_major(version_output: str) -> int | None:
    """The Java major version that `java -version` printed, or None if it names none."""
    match = _VERSION.search(version_output)
    if match is None:
        return None
    leading = _LEADING.match(match["v"])
    if leading is None:
        return None
    first = int(leading["first"])
    if first == 1 and leading["second"] is not None:  # 1.8.0_392: Java 8 (before JEP 223)
        return int(leading["second"])
    return first


def java_command(env: Mapping[str, str] | None = None) -> str | None:
    """The java Spark would run: $JAVA_HOME/bin/java if JAVA_HOME is set, else java on PATH."""
    env = os.environ if env is None else env
    java_home = env.get("JAVA_HOME")
    if java_home:
        return os.path.join(java_home, "bin", "java")
    return shutil.which("java", path=env.get("PATH"))


def check_java(minimum: int = JAVA_MIN_MAJOR, env: Mapping[str, str] | None = None) -> int:
    """The Java major version, if it is `minimum` or newer; else AnalysisUnavailable."""
    env = os.environ if env is None else env
    need = f"the analysis needs Java {minimum}+ (Spark 4)"
    fix = f"install a JDK {minimum}+ or point JAVA_HOME at one"
    java = java_command(env)
    if java is None:
        raise AnalysisUnavailable(f"{need}: no java on PATH and JAVA_HOME is not set; {fix}")
    where = f"JAVA_HOME={env['JAVA_HOME']}" if env.get("JAVA_HOME") else "PATH"
    if not os.path.isfile(java):
        raise AnalysisUnavailable(f"{need}: {where} has no bin/java; {fix}")
    try:
        out = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=JAVA_VERSION_TIMEOUT_S,
            env=dict(env),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AnalysisUnavailable(f"{need}: {java} ({where}) does not run ({exc}); {fix}") from None
    major = java_major(out.stderr + "\n" + out.stdout)
    if major is None:
        said = (out.stderr or out.stdout).strip().splitlines()[:1] or ["nothing"]
        raise AnalysisUnavailable(
            f"{need}: `{java} -version` ({where}) names no version (it said: {said[0]}); {fix}"
        )
    if major < minimum:
        raise AnalysisUnavailable(f"{need}: {java} ({where}) is Java {major}; {fix}")
    return major


def check_extra() -> None:
    """MissingAnalysisExtra, with the pip line, unless pyspark and matplotlib import."""
    for name in ANALYSIS_MODULES:
        try:
            __import__(name)
        except ImportError:
            raise MissingAnalysisExtra(
                f"the analysis needs {name}, not installed here: {ANALYSIS_EXTRA_HINT}",
                name=name,
            ) from None


def connect_client_missing() -> str | None:
    """What the Spark Connect client (pyspark's `connect` extra: pandas, pyarrow, grpcio ...)
    lacks here, in pyspark's words, or None when it imports.

    pyspark's own list of what it needs is asked first, without importing the client: where
    `__main__` has neither __spec__ nor __file__ (a pytest-xdist worker, an embedded
    interpreter), importing an incomplete client makes pyspark (connect/utils.py
    check_dependencies) print a line and call sys.exit(0)."""
    from pyspark.testing.utils import connect_requirement_message

    if connect_requirement_message:
        return connect_requirement_message
    try:
        importlib.import_module("pyspark.sql.connect.session")
    except ImportError as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return None


def check_connect_client() -> None:
    """AnalysisUnavailable, with the pip line, unless the Spark Connect client imports, which
    `--master sc://...` needs."""
    missing = connect_client_missing()
    if missing:
        raise AnalysisUnavailable(
            f"--master sc://... needs the Spark Connect client, not installed here ({missing}): "
            f"{CONNECT_HINT}"
        )


def require_analysis(env: Mapping[str, str] | None = None, *, connect: bool = False) -> int | None:
    """What the analysis needs, checked in this order: Java 17+ (the driver's JVM; not for a
    Spark Connect client, `connect`, whose server holds the JVM), the `[analysis]` extra, and
    for `connect` the Connect client. The Java major, None for `connect`."""
    major = None if connect else check_java(env=env)
    check_extra()
    if connect:
        check_connect_client()
    return major
