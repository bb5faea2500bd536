"""Where the analysis reads from and which Spark it runs on (tools/analysis/sources.py,
masters.py, runs.precheck): RUN_DIR arguments as Spark paths (local folders, patterns, URIs),
the run layout of what Spark lists, the --master forms and --conf pairs, and what is refused
before Spark starts. Pure: no Spark here (test_analysis.py reads patterns and URIs through a
local session; tests/integration/test_spark_cluster.py runs a real standalone cluster).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka.cli import main
from minikafka.errors import ConfigError
from minikafka.tools.analysis.environment import (
    AnalysisUnavailable,
    connect_client_missing,
    require_analysis,
)
from minikafka.tools.analysis.masters import (
    check_master,
    is_connect,
    is_local,
    local_cores,
    parse_conf,
)
from minikafka.tools.analysis.runs import default_out_dir, load_run, precheck
from minikafka.tools.analysis.sources import (
    Listed,
    LogFiles,
    classify,
    glob_escape,
    is_pattern,
    parse_source,
    parse_sources,
    run_key_of,
)

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


# ------------------------------------------------------------------------------- RUN_DIRs


def test_a_plain_path_is_a_local_folder_as_a_file_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative to where the command runs
    s = parse_source("runs/case-1", exists=True)
    assert (s.local, s.uri, s.pattern) == (
        tmp_path / "runs/case-1",
        f"file:{tmp_path}/runs/case-1",
        False,
    )
    assert s.checked_here and s.case_json_path() == f"file:{tmp_path}/runs/case-1/case.json"


@pytest.mark.parametrize(
    ("arg", "local"),
    [("file:///srv/runs/x", "/srv/runs/x"), ("file:/srv/runs/x", "/srv/runs/x"),
     ("file://localhost/srv/runs/x", "/srv/runs/x"), ("file:///srv/a%20b", "/srv/a%20b")],
)  # fmt: skip
def test_file_uris_are_local_folders_taken_literally(arg: str, local: str) -> None:
    # no %-decoding: Hadoop's Path takes the rest as it is, and so does the driver's check
    s = parse_source(arg, exists=True)
    assert s.local == Path(local) and s.uri == f"file:{local}" and s.checked_here


@pytest.mark.parametrize(
    ("arg", "uri", "pattern"),
    [
        ("hdfs://nn:8020/runs/kip73/case-1/", "hdfs://nn:8020/runs/kip73/case-1", False),
        ("s3a://bucket/runs/kip73/*", "s3a://bucket/runs/kip73/*", True),
        ("hdfs:///runs/{a,b}", "hdfs:///runs/{a,b}", True),
    ],
)
def test_other_uris_are_remote_and_spark_reads_them_as_given(
    arg: str, uri: str, pattern: bool
) -> None:
    s = parse_source(arg)
    assert (s.uri, s.local, s.pattern, s.checked_here) == (uri, None, pattern, False)


def test_a_pattern_is_spark_s_to_expand_unless_the_folder_exists(tmp_path: Path) -> None:
    odd = tmp_path / "odd [1] name"
    odd.mkdir()
    literal = parse_source(str(odd))  # an existing folder is taken literally, [1] and all
    assert not literal.pattern and literal.checked_here
    assert literal.case_json_path() == f"file:{tmp_path}/odd \\[1\\] name/case.json"
    pattern = parse_source(str(tmp_path / "runs" / "*"))
    assert pattern.pattern and not pattern.checked_here and pattern.local is not None
    assert pattern.case_json_path() == f"file:{tmp_path}/runs/*/case.json"  # Spark globs it
    assert [s.pattern for s in parse_sources([tmp_path / "a?", tmp_path])] == [True, False]


def test_glob_characters_and_their_escapes() -> None:
    assert [is_pattern(t) for t in ("a/b", "a/*", "a/b?", "a/[12]", "a/{x,y}")] == [
        False, True, True, True, True,
    ]  # fmt: skip
    assert not is_pattern(r"a/\*") and is_pattern(r"a/\\*")  # \* is a star; \\* a \ then *
    assert glob_escape("a[1]/{x}*?\\") == "a\\[1\\]/\\{x\\}\\*\\?\\\\"
    assert not is_pattern(glob_escape("weird[*]{?}\\"))


# ------------------------------------------------------------------------- the layout


def _listed(key: str, size: int = 10) -> Listed:
    return Listed(key=key, path=f"file:{key}", size=size)


def test_the_listing_is_sorted_into_each_run_s_logs() -> None:
    run, other = "/r/odd [1]/case", "/r/other"
    files = [
        _listed(f"{run}/nodes/node-2/metrics.jsonl"),
        _listed(f"{run}/nodes/node-1/metrics.jsonl.1"),
        _listed(f"{run}/nodes/node-1/metrics.jsonl"),
        _listed(f"{run}/nodes/node-1/metrics.jsonl.10"),
        _listed(f"{run}/nodes/node-1/metrics.jsonl.2"),
        _listed(f"{run}/nodes/node-1/metrics.jsonl.01"),  # not a rotated part (jsonl_parts)
        _listed(f"{run}/nodes/node-1/events.jsonl"),
        _listed(f"{run}/nodes/node-1/replicas.jsonl"),  # not read
        _listed(f"{run}/clients/produced.jsonl", 100),
        _listed(f"{run}/clients/consumed.jsonl", 1000),  # not read
        _listed(f"{run}/timeline.jsonl", 5),
        _listed(f"{run}/analysis/per_second.jsonl"),  # a report's, beside the logs
        _listed(f"{other}/nodes/node-1/metrics.jsonl"),
        _listed("/elsewhere/nodes/node-1/metrics.jsonl"),  # a run not asked for
    ]
    logs = classify(files, [run, other, "/empty"])
    esc = f"file:{glob_escape(run)}"  # Hadoop paths, escaped for Spark's reader
    assert logs[run].metrics == tuple(
        f"{esc}/nodes/{n}" for n in ("node-1/metrics.jsonl.10", "node-1/metrics.jsonl.2",
        "node-1/metrics.jsonl.1", "node-1/metrics.jsonl", "node-2/metrics.jsonl")
    )  # fmt: skip
    assert logs[run].events == (f"{esc}/nodes/node-1/events.jsonl",)
    assert logs[run].produced == f"{esc}/clients/produced.jsonl"
    assert logs[run].timeline == f"{esc}/timeline.jsonl"
    assert logs[run].size == 6 * 10 + 100  # metrics, events and produced: what is shuffled
    assert logs[other].metrics == ("file:/r/other/nodes/node-1/metrics.jsonl",)
    assert logs["/empty"] == LogFiles()


def test_a_line_s_run_folder_is_what_precedes_the_layout() -> None:
    assert run_key_of("hdfs://nn:8020/runs/a b/nodes/node-1/metrics.jsonl.3") == (
        "hdfs://nn:8020/runs/a b"
    )
    assert run_key_of("/runs/x/clients/produced.jsonl") == "/runs/x"
    assert run_key_of("/runs/x/timeline.jsonl") == "/runs/x"
    assert run_key_of("/runs/x/metrics.jsonl") is None


# ------------------------------------------------------------- before Spark starts


def test_precheck_checks_local_folders_and_wants_out_for_remote_ones(tmp_path: Path) -> None:
    clean = str(RUNS / "clean_move")
    checked = precheck(parse_sources([clean, str(RUNS / "*_move")]), out_given=False)
    assert list(checked) == [clean] and checked[clean].case == "clean_move"
    assert checked[clean].metrics_files == ()  # the files are Spark's to list
    with pytest.raises(ConfigError, match="empty folder"):
        precheck(parse_sources([tmp_path]), out_given=True)
    remote = parse_sources(["hdfs://nn/runs/x"])
    with pytest.raises(ConfigError, match=r"^hdfs://nn/runs/x is not a local folder: .*--out"):
        precheck(remote, out_given=False)
    assert precheck(remote, out_given=True) == {}
    with pytest.raises(ConfigError, match="no run folder given"):
        precheck([], out_given=True)


def test_a_remote_run_has_no_default_report_folder() -> None:
    from dataclasses import replace

    run = load_run(RUNS / "clean_move")
    assert default_out_dir([run]) == RUNS / "clean_move" / "analysis"
    remote = replace(run, run_dir=None, uri="hdfs://nn/r", key="hdfs://nn/r")
    with pytest.raises(ConfigError, match="hdfs://nn/r is not a local folder"):
        default_out_dir([run, remote])


# -------------------------------------------------------------------- --master, --conf


@pytest.mark.parametrize(
    "master",
    ["local", "local[2]", "local[*]", "local[4,3]", "local[*,2]", "spark://127.0.0.1:7077",
     "spark://h1:7077,h2:7077", "yarn", "k8s://https://10.0.0.1:6443", "sc://localhost",
     "sc://spark.example:15002", "sc://h:15002/;token=abc;user_id=me", "sc://h/"],
)  # fmt: skip
def test_every_master_form_is_accepted(master: str) -> None:
    assert check_master(master) == master


@pytest.mark.parametrize(
    "master",
    ["nowhere", "local[]", "local[two]", "spark://", "sc://", "sc://h:15002/path",
     "sc://h;token=x", "mesos://h:5050", " local[2]"],
)  # fmt: skip
def test_other_masters_are_refused_in_one_line(master: str) -> None:
    with pytest.raises(ConfigError, match="is not a Spark master URL; accepted: local, ") as e:
        check_master(master)
    assert "sc://HOST[:PORT]" in str(e.value) and "\n" not in str(e.value)


def test_what_a_master_implies() -> None:
    assert [is_local(m) for m in ("local", "local[2]", "spark://h:1", "sc://h")] == [
        True, True, False, False,
    ]  # fmt: skip
    assert is_connect("sc://h") and not is_connect("spark://h:1")
    assert [local_cores(m) for m in ("local", "local[3]", "local[2,4]", "yarn")] == [1, 3, 2, None]
    assert local_cores("local[*]") == (os.cpu_count() or 1)


def test_conf_pairs() -> None:
    assert parse_conf(["spark.driver.host=10.0.0.5", "a.b=x=y", "e="]) == {
        "spark.driver.host": "10.0.0.5", "a.b": "x=y", "e": "",
    }  # fmt: skip
    for bad in ("spark.driver.host", "=x", " a=b"):
        with pytest.raises(ConfigError, match="expected KEY=VALUE"):
            parse_conf([bad])


# ------------------------------------------------------------------------------ the CLI


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--master", "sc://", "{clean}"], "not a Spark master URL"),
        (["--conf", "nonsense", "{clean}"], "--conf 'nonsense': expected KEY=VALUE"),
        (["hdfs://nn/runs/x"], "hdfs://nn/runs/x is not a local folder"),
        (["{empty}/*", "{empty}"], "empty folder"),
    ],
)
@pytest.mark.usefixtures("analysis_ready")
def test_cli_refuses_in_one_line_before_spark(
    tmp_path: Path, args: list[str], message: str
) -> None:
    paths = {"empty": tmp_path, "clean": RUNS / "clean_move"}
    result = CliRunner().invoke(main, ["analyze", *(a.format(**paths) for a in args)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_spark_connect_needs_its_client_and_not_java(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyspark")
    if connect_client_missing() is None:
        pytest.skip("the Spark Connect client is installed here")
    monkeypatch.setenv("PATH", str(tmp_path))  # no java anywhere
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(AnalysisUnavailable, match="Java"):
        require_analysis()
    with pytest.raises(
        AnalysisUnavailable, match=r"needs the Spark Connect client.*pyspark\[connect\]"
    ):
        require_analysis(connect=True)
    result = CliRunner().invoke(main, ["analyze", "--master", "sc://127.0.0.1:1", str(RUNS)])
    assert result.exit_code == 2, result.output
    assert "pip install 'pyspark[connect]'" in result.stderr and result.stderr.count("\n") == 1


def test_a_missing_connect_client_is_an_error_even_where_pyspark_would_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where `__main__` has no __spec__ and no __file__ (a pytest-xdist worker, an embedded
    interpreter), pyspark's connect package calls sys.exit(0) when its client is missing: the
    check must say so in its one line, not end the process."""
    pytest.importorskip("pyspark")
    if connect_client_missing() is None:
        pytest.skip("the Spark Connect client is installed here")
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    for name in [m for m in sys.modules if m.startswith("pyspark.sql.connect")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(AnalysisUnavailable, match=r"needs the Spark Connect client"):
        require_analysis(connect=True)


def test_a_spark_connect_server_that_does_not_answer_is_one_line_at_once() -> None:
    """Not minutes of the client's retries ending in a gRPC dump (the check before connecting)."""
    pytest.importorskip("pyspark")
    import socket

    from minikafka.errors import MiniKafkaError
    from minikafka.tools.analysis.session import check_connect_server

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_connect_server(f"sc://127.0.0.1:{port}/;token=x")  # answers: nothing raised
    with pytest.raises(MiniKafkaError, match=rf"server 127.0.0.1:{port} .* does not answer"):
        check_connect_server(f"sc://127.0.0.1:{port}", timeout_s=5)
