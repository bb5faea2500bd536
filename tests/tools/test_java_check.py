"""The analysis' Java check (tools/analysis/environment.py): `java -version` parsed across the
version schemes, the java Spark would run found as its launcher finds it (JAVA_HOME, else PATH),
and `minikafka analyze` refusing an old or missing Java in one line, exit 2, before anything.
Every java here is a fake: a shell script in tmp_path printing what a real one prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka.cli import main
from minikafka.tools.analysis.environment import AnalysisUnavailable, check_java, java_major

RUNS = Path(__file__).parents[1] / "fixtures" / "runs"

JAVA_8 = """\
openjdk version "1.8.0_392"
OpenJDK Runtime Environment (Temurin)(build 1.8.0_392-b08)
OpenJDK 64-Bit Server VM (Temurin)(build 25.392-b08, mixed mode)
"""
ORACLE_8 = """\
java version "1.8.0_202"
Java(TM) SE Runtime Environment (build 1.8.0_202-b08)
"""
JAVA_11 = """\
openjdk version "11.0.21" 2023-10-17
OpenJDK Runtime Environment (build 11.0.21+9-post-Debian-1deb11u1)
"""
JAVA_17 = """\
openjdk version "17.0.15" 2025-04-15
OpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)
OpenJDK 64-Bit Server VM (build 17.0.15+6-Debian-1deb12u1, mixed mode, sharing)
"""
JAVA_21 = """\
openjdk version "21.0.1" 2023-10-17 LTS
OpenJDK Runtime Environment Temurin-21.0.1+12 (build 21.0.1+12-LTS)
"""


@pytest.mark.parametrize(
    ("output", "major"),
    [
        (JAVA_8, 8),
        (ORACLE_8, 8),
        ('java version "1.7.0_80"\n', 7),
        ('java version "9"\n', 9),
        (JAVA_11, 11),
        (JAVA_17, 17),
        ('openjdk version "17" 2021-09-14\n', 17),  # a .0 release prints no minor
        (JAVA_21, 21),
        ('openjdk version "22-ea" 2024-03-19\n', 22),  # early access
        # JAVA_TOOL_OPTIONS makes the JVM print a line before the version
        ("Picked up JAVA_TOOL_OPTIONS: -Xmx1g\n" + JAVA_11, 11),
        ("", None),
        ("sh: 1: java: not found\n", None),
        ('openjdk version "" 2024\n', None),
    ],
)
def test_java_major(output: str, major: int | None) -> None:
    assert java_major(output) == major


def fake_java(folder: Path, output: str) -> Path:
    """folder/bin/java printing `output` on stderr, as `java -version` does (shell builtins
    only: the tests' PATH may hold nothing else)."""
    (folder / "bin").mkdir(parents=True)
    java = folder / "bin" / "java"
    java.write_text(
        "#!/bin/sh\nwhile IFS= read -r line; do printf '%s\\n' \"$line\" >&2; done <<'EOF'\n"
        f"{output}EOF\n"
    )
    java.chmod(0o755)
    return java


@pytest.mark.parametrize(("output", "major"), [(JAVA_17, 17), (JAVA_21, 21)])
def test_java_17_or_newer_passes(tmp_path: Path, output: str, major: int) -> None:
    fake_java(tmp_path, output)
    assert check_java(env={"PATH": str(tmp_path / "bin")}) == major


@pytest.mark.parametrize(("output", "major"), [(JAVA_8, 8), (JAVA_11, 11)])
def test_older_java_is_refused_naming_its_version(tmp_path: Path, output: str, major: int) -> None:
    java = fake_java(tmp_path, output)
    with pytest.raises(AnalysisUnavailable) as caught:
        check_java(env={"PATH": str(tmp_path / "bin")})
    message = str(caught.value)
    assert f"{java} (PATH) is Java {major}" in message and "17+" in message
    assert "\n" not in message


def test_java_home_wins_over_path(tmp_path: Path) -> None:
    fake_java(tmp_path / "path", JAVA_8)
    fake_java(tmp_path / "jdk21", JAVA_21)
    env = {"PATH": str(tmp_path / "path" / "bin"), "JAVA_HOME": str(tmp_path / "jdk21")}
    assert check_java(env=env) == 21
    fake_java(tmp_path / "jdk11", JAVA_11)  # and an old one there is refused, PATH or not
    with pytest.raises(AnalysisUnavailable, match=r"JAVA_HOME=.*jdk11\) is Java 11"):
        check_java(env={**env, "JAVA_HOME": str(tmp_path / "jdk11")})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PATH": "{tmp}"}, "no java on PATH and JAVA_HOME is not set"),
        ({"PATH": "{tmp}", "JAVA_HOME": ""}, "no java on PATH and JAVA_HOME is not set"),
        ({"PATH": "{tmp}", "JAVA_HOME": "{tmp}"}, "JAVA_HOME={tmp} has no bin/java"),
    ],
)
def test_no_java_is_refused(tmp_path: Path, env: dict[str, str], message: str) -> None:
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    with pytest.raises(AnalysisUnavailable) as caught:
        check_java(env=env)
    assert message.format(tmp=tmp_path) in str(caught.value)


def test_a_java_that_names_no_version_is_refused(tmp_path: Path) -> None:
    fake_java(tmp_path, "Error: could not open `jvm.cfg'\n")
    with pytest.raises(AnalysisUnavailable, match="names no version .*could not open"):
        check_java(env={"PATH": str(tmp_path / "bin")})


def test_analyze_refuses_an_old_java_in_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_java(tmp_path / "jdk", JAVA_11)
    monkeypatch.setenv("PATH", f"{tmp_path / 'jdk' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["analyze", str(RUNS / "clean_move"), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert "needs Java 17+" in result.stderr and "is Java 11" in result.stderr
    assert not out.exists() and not (RUNS / "clean_move" / "analysis").exists()


def test_analyze_honours_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JAVA_HOME names an old JDK: refused, though a good java may be on PATH."""
    fake_java(tmp_path / "jdk8", JAVA_8)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk8"))
    result = CliRunner().invoke(main, ["analyze", str(RUNS / "clean_move")])
    assert result.exit_code == 2, result.output
    assert f"JAVA_HOME={tmp_path / 'jdk8'}" in result.stderr and "is Java 8" in result.stderr


def test_the_library_path_makes_the_same_check_before_starting_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """analyze() (the experiment runner's report) and spark_session() (the system tests') start
    Spark through spark_session, which runs require_analysis first: no JVM is started. In a
    process of its own: the other Spark tests share one session for the whole run."""
    pytest.importorskip("pyspark")
    fake_java(tmp_path / "jdk11", JAVA_11)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk11"))
    script = f"""
from pyspark.sql import SparkSession
from minikafka.tools.analysis import analyze
from minikafka.tools.analysis.environment import AnalysisUnavailable
try:
    analyze([{str(RUNS / "clean_move")!r}], out_dir={str(tmp_path / "out")!r})
except AnalysisUnavailable as exc:
    print("refused:", exc)
print("session:", SparkSession.getActiveSession())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "is Java 11" in done.stdout, done.stdout
    assert "session: None" in done.stdout and not (tmp_path / "out").exists()
