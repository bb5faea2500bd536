"""The PySpark analysis (tools/analysis, `minikafka analyze`) against fixture runs with known
answers (tests/fixtures/make_runs.py says how each was built and what it should give).

The tests marked `spark` share one local SparkSession (tests/conftest.py) and one analysis of all
four fixture runs in one job (module-scoped fixtures), so the JVM starts once; the rest are pure
and fast. The runs whose answers are about windows are analysed in test_analysis_windows.py.
T0 below is the fixtures' clock origin: times in the fixtures are T0 + seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from minikafka.cli import main
from minikafka.errors import ConfigError
from minikafka.tools.analysis import (
    Params,
    Report,
    default_out_dir,
    load_run,
    load_runs,
    move_bounds,
)
from minikafka.tools.analysis.runs import slugs
from minikafka.tools.analysis.summary import (
    accepted_ranges,
    broker_figures,
    format_ranges,
    judged_prediction,
    verdict_failures,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = FIXTURES / "runs"
NAMES = ("clean_move", "burst_move", "produce_move", "inferred_move")  # window_runs: elsewhere
T0 = 1_795_000_000.0
MB = 1_000_000

CASE_KEYS = {
    "id", "case", "run_dir", "seed", "nodes", "partitions", "replication_factor",
    "throttle_bytes_per_s", "throttle_mode", "receiving_brokers", "sending_brokers",
    "bytes_to_move", "produce_bytes_per_s", "predicted_move_s", "predicted_move_alternatives_s",
    "move_judged_against_s", "throttle_window_s",
    "throttle_bound_bytes_per_s", "throttle_window_past_end", "throttle_judged",
    "throttle_exempt_counted", "throttle_bounds_bytes_per_s", "throttle_wire_judged",
    "wire_violated", "catch_up", "move_source", "move_start_ts",
    "move_end_ts", "move_duration_s", "move_duration_ratio", "moved_bytes",
    "max_window_bytes_per_s", "max_window_throttle_ratio", "max_window_node", "max_window_side",
    "throttle_violated", "brokers", "produce_latency", "isr", "plots", "verdict", "failures",
}  # fmt: skip
BROKER_KEYS = {
    "node", "side", "role", "throttled_bytes_during_move",
    "mean_throttled_bytes_per_s_during_move", "max_window_bytes_per_s",
    "max_window_throttle_ratio", "max_window_start_ts", "max_window_start_s", "windows",
    "windows_over", "configured_throttle_bytes_per_s", "throttle_violated", "bound_bytes_per_s",
    "wire_bytes_during_move", "charged_record_bytes_during_move", "max_wire_window_bytes_per_s",
    "max_wire_window_start_s", "wire_windows_over", "wire_violated",
}  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, Spark's `percentile`)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# ------------------------------------------------------------------------ pure, no Spark


def test_fixtures_are_what_the_script_makes(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(FIXTURES / "make_runs.py"), str(tmp_path)], check=True)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(RUNS) for p in RUNS.rglob("*") if p.is_file())
    assert made == committed
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (RUNS / rel).read_bytes(), rel


def test_percentile_helper_matches_the_phase_answers() -> None:
    # The answers make_runs.py documents: 1..100 -> 50.5 / 99.01; 201..410 -> 305.5 / 407.91.
    assert percentile(list(range(1, 101)), 0.5) == 50.5
    assert percentile(list(range(1, 101)), 0.99) == pytest.approx(99.01)
    assert percentile(list(range(201, 411)), 0.99) == pytest.approx(407.91)


def _run(tmp_path: Path, case: Any = None, metrics: bool = True) -> Path:
    run = tmp_path / "run"
    (run / "nodes/node-1").mkdir(parents=True)
    if metrics:
        (run / "nodes/node-1/metrics.jsonl").write_text('{"ts": 1.0, "node": 1}\n')
    if case is not None:
        text = case if isinstance(case, str) else json.dumps(case)
        (run / "case.json").write_text(text)
    return run


@pytest.mark.parametrize(
    ("case", "metrics", "message"),
    [
        (None, True, "no case.json"),
        ("{not json", True, "not valid JSON"),
        ([1, 2], True, "expected a JSON object"),
        ({"nodes": [1]}, True, "'case' is None"),
        ({"case": "x", "throttle_mode": "fast"}, True, "expected lists, kip542 or null"),
        ({"case": "x", "receiving_brokers": "2"}, True, "expected a list of node ids"),
        ({"case": "x", "predicted_move_s": "20"}, True, "expected seconds"),
        ({"case": "x", "predicted_move_alternatives_s": [-2]}, True, "expected a list of sec"),
        ({"case": "x", "throttle_window_s": 0}, True, "'throttle_window_s' is 0; expected an"),
        ({"case": "x", "throttle_window_s": 2.5}, True, "expected whole seconds"),
        ({"case": "x", "throttle_bound_bytes_per_s": -1}, True, "expected > 0"),
        ({"case": "x", "throttle_window_past_end": 1}, True, "expected true, false or null"),
        ({"case": "x", "throttle_judged": "all"}, True, "expected move or run"),
        ({"case": "x"}, False, "no nodes/node-<id>/metrics.jsonl"),
    ],
)
def test_bad_run_folders_are_refused_in_one_line(
    tmp_path: Path, case: Any, metrics: bool, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_run(_run(tmp_path, case, metrics))
    assert "\n" not in str(info.value)


def test_empty_missing_and_parent_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="empty folder"):
        load_run(tmp_path)
    with pytest.raises(ConfigError, match="not a folder"):
        load_run(tmp_path / "nope")
    with pytest.raises(ConfigError, match="holds run folders .*clean_move.*pass those"):
        load_run(RUNS)
    with pytest.raises(ConfigError, match="no run folder given"):
        load_runs([])


def test_a_good_folder_loads_with_defaults(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path, {"case": "x y", "throttle_bytes_per_s": 1e6}))
    assert (run.case, run.throttle_bytes_per_s, run.predicted_move_s) == ("x y", MB, None)
    assert run.timeline_file is None and run.produced_file is None
    assert run.metrics_files == () and run.run_dir is not None  # Spark lists the files
    assert load_runs([run.run_dir, run.run_dir]) == [run]  # a folder named twice counts once


def test_default_out_dir_and_file_names() -> None:
    runs = load_runs([RUNS / "clean_move", RUNS / "burst_move"])
    assert default_out_dir(runs[:1]) == RUNS / "clean_move" / "analysis"
    assert default_out_dir(runs) == RUNS / "analysis"
    twice = [runs[0], runs[0]]
    assert list(slugs(twice).values()) == ["clean_move"]  # same key: one entry
    a, b = replace(runs[0], case="a/b"), replace(runs[1], case="a/b")
    assert list(slugs([a, b]).values()) == ["a_b", "a_b-2"]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            {"tl_start": 10.0, "tl_end": 30.0, "inf_start": 9.0, "inf_end": 31.0},
            (10, 30, "timeline"),
        ),
        (
            {"tl_start": None, "tl_end": None, "inf_start": 9.0, "inf_end": 31.0},
            (9, 31, "inferred"),
        ),
        ({"tl_start": 10.0, "tl_end": None, "inf_start": 9.0, "inf_end": 31.0}, (10, 31, "mixed")),
        (
            {"tl_start": 10.0, "tl_end": 5.0, "inf_start": None, "inf_end": None},
            (10, None, "mixed"),
        ),
        ({}, (None, None, None)),
    ],
)
def test_move_bounds_prefer_the_timeline(row: dict[str, Any], expected: tuple[Any, ...]) -> None:
    assert move_bounds(row) == expected


def test_violation_is_strictly_above_the_factor() -> None:
    run = load_run(RUNS / "clean_move")  # throttle 1 MB/s, case.json sets no bound: 1.15 x T
    bound = run.throttle_check(Params()).bound_bytes_per_s
    assert bound == 1.15 * MB
    row = {"node": 2, "side": "follower", "role": "receiving", "bytes_during_move": 2e7,
           "max_window_sec": 1015, "judged_from": 1000.0, "windows": 3, "cfg": MB}  # fmt: skip
    at = broker_figures({**row, "max_window": 1.15 * MB}, MB, bound, 20.0)
    above = broker_figures({**row, "max_window": 1.151 * MB}, MB, bound, 20.0)
    none = broker_figures({**row, "max_window": 5 * MB}, None, None, 20.0)
    assert not at["throttle_violated"] and above["throttle_violated"]
    assert none["max_window_throttle_ratio"] is None and not none["throttle_violated"]
    assert at["mean_throttled_bytes_per_s_during_move"] == MB
    assert at["max_window_start_s"] == 15.0


@pytest.mark.parametrize(
    ("ratio", "duration", "ok"),
    [
        (0.9, 18.0, True),
        (1.2, 24.0, True),
        (0.89, 17.8, False),
        (1.21, 24.2, False),
        (None, None, False),
    ],
)
def test_duration_verdict(ratio: float | None, duration: float | None, ok: bool) -> None:
    case = {"brokers": [], "predicted_move_s": 20.0, "move_duration_ratio": ratio,
            "move_duration_s": duration, "throttle_bytes_per_s": MB}  # fmt: skip
    assert (verdict_failures(case, Params()) == []) is ok
    assert verdict_failures({**case, "predicted_move_s": None}, Params()) == []


def test_a_move_across_a_step_is_judged_against_the_prediction_it_matches() -> None:
    # case.json's 17.2 s, or 23.2 s across a step of Kafka's algorithm (quota_modes.py)
    predictions = (17.2, 23.2)
    assert judged_prediction(18.3, predictions, Params()) == 17.2  # the first that holds it
    assert judged_prediction(20.6, predictions, Params()) == 17.2  # both do: the first
    assert judged_prediction(23.4, predictions, Params()) == 23.2
    assert judged_prediction(28.0, predictions, Params()) == 17.2  # none: case.json's own
    assert judged_prediction(None, predictions, Params()) == 17.2
    assert judged_prediction(23.4, (17.2,), Params()) == 17.2
    case = {"brokers": [], "predicted_move_s": 17.2, "predicted_move_alternatives_s": [23.2],
            "move_duration_s": 28.0, "move_duration_ratio": 28.0 / 17.2,
            "throttle_bytes_per_s": MB}  # fmt: skip
    (failure,) = verdict_failures(case, Params())
    assert failure == (
        "move took 28.0 s, 1.63x the predicted 17.2 s (accepted 0.9-1.2x of it or of 23.2 s "
        "across a step: 15.5-20.6, 20.9-27.8 s)"
    )


def test_accepted_ranges_merge_where_they_overlap() -> None:
    assert accepted_ranges((17.2, 23.2), 0.9, 1.2) == [
        pytest.approx((15.48, 20.64)),
        pytest.approx((20.88, 27.84)),
    ]
    assert accepted_ranges((23.2, 23.7, 17.2), 0.9, 1.2) == [
        pytest.approx((15.48, 20.64)),
        pytest.approx((20.88, 28.44)),
    ]
    assert accepted_ranges((10.0, 11.0), 0.9, 1.2) == [pytest.approx((9.0, 13.2))]
    assert accepted_ranges((None,), 0.9, 1.2) == []
    assert format_ranges(accepted_ranges((17.2, 23.2), 0.9, 1.2)) == "15.5-20.6, 20.9-27.8"
    assert format_ranges([]) == "-"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Missing argument"),
        (["{empty}"], "empty folder"),
        (["{runs}"], "holds run folders"),
        (["--master", "nowhere", "{clean}"], "not a Spark master URL"),
    ],
)
# analyze checks Java 17+ and the extra before its input: without them, that is its one line
@pytest.mark.usefixtures("analysis_ready")
def test_cli_bad_input_exits_2_before_spark(tmp_path: Path, args: list[str], message: str) -> None:
    paths = {"empty": tmp_path, "runs": RUNS, "clean": RUNS / "clean_move"}
    result = CliRunner().invoke(main, ["analyze", *(a.format(**paths) for a in args)])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stderr.count("\n") == 1


# ------------------------------------------------------------------------------ with Spark


@pytest.fixture(scope="module")
def report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Report:
    from minikafka.tools.analysis import analyze

    out = tmp_path_factory.mktemp("analysis")
    return analyze([RUNS / n for n in NAMES], out_dir=out, spark=spark)


@pytest.mark.spark
def test_report_json_is_the_report_with_every_field(report: Report) -> None:
    assert report.out_dir is not None
    on_disk = json.loads((report.out_dir / "report.json").read_text())
    assert on_disk == json.loads(json.dumps(report.to_json()))
    assert set(on_disk) == {"schema", "params", "files", "cases", "summary"}
    assert on_disk["schema"] == "minikafka-analysis/1"
    assert on_disk["params"] == {"window_s": 5, "window_skip_s": 2, "violation_factor": 1.15,
                                 "duration_ratio_min": 0.9, "duration_ratio_max": 1.2}  # fmt: skip
    for case in on_disk["cases"]:
        assert set(case) == CASE_KEYS
        assert set(case["produce_latency"]) == {
            "all", "before", "during", "after", "in_sync_during_move"
        }  # fmt: skip
        for b in case["brokers"]:
            assert set(b) == BROKER_KEYS


@pytest.mark.spark
def test_clean_move(report: Report) -> None:
    c = report.case("clean_move")
    assert c["move_source"] == "timeline"
    assert (c["move_start_ts"], c["move_end_ts"]) == (T0 + 10, T0 + 30)
    assert c["move_duration_s"] == pytest.approx(20.0, abs=1)
    assert c["move_duration_ratio"] == 1.0
    # 1 MB/s exactly in the interior: every 5 s window from t=12 to t=25 is the throttle.
    assert c["max_window_throttle_ratio"] == pytest.approx(1.0, abs=0.001)
    assert not c["throttle_violated"] and c["verdict"] == "pass" and c["failures"] == []
    assert [(b["node"], b["side"], b["role"]) for b in c["brokers"]] == [
        (1, "leader", "sending"),
        (2, "follower", "receiving"),
    ]
    for b in c["brokers"]:
        assert b["windows"] == 14  # starts t=12..25: at least 2 s in, ending by t=30
        assert b["configured_throttle_bytes_per_s"] == MB
        assert b["mean_throttled_bytes_per_s_during_move"] == pytest.approx(MB, rel=0.03)
    assert c["moved_bytes"] == pytest.approx(20 * MB, rel=0.03)  # edges smeared over a line
    assert c["isr"] == {
        "shrinks": 0, "expands": 4, "shrinks_during_move": 0, "expands_during_move": 4,
        "by_node": {"1": {"shrinks": 0, "expands": 4, "shrinks_during_move": 0,
                          "expands_during_move": 4}},
        "last_isr": {f"big-{p}": [2] for p in range(4)},
    }  # fmt: skip
    assert c["produce_latency"]["all"] == {
        "batches": 0,
        "records": 0,
        "p50_ms": None,
        "p99_ms": None,
        "max_ms": None,
    }
    assert c["plots"] == {"rates": "clean_move-rates.png", "latency": None}


@pytest.mark.spark
def test_per_second_rates_are_the_counters_deltas(report: Report) -> None:
    rows = {(r["node"], r["t_s"]): r for r in report.per_second if r["case_id"] == "clean_move"}
    mid = rows[(2, 5.0)]  # second [T0+15, T0+16)
    assert mid["follower_throttled_bytes_per_s"] == pytest.approx(MB, abs=1)
    assert mid["replication_bytes_in_per_s"] == pytest.approx(MB, abs=1)
    assert mid["follower_throttle_bytes_per_s"] == MB and mid["ts"] == T0 + 15
    assert rows[(1, 5.0)]["leader_throttled_bytes_per_s"] == pytest.approx(MB, abs=1)
    assert rows[(2, -5.0)]["follower_throttled_bytes_per_s"] == 0  # before the move
    assert rows[(2, -5.0)]["follower_throttle_bytes_per_s"] is None  # throttle set at t=8
    assert rows[(0, 5.0)]["replication_bytes_in_per_s"] == 0  # the controller logs no counters


@pytest.mark.spark
def test_burst_over_one_window_is_flagged(report: Report) -> None:
    c = report.case("burst_move")
    # 1.5 MB/s over t=20..25 exactly; interpolating onto whole seconds between lines 1 s apart
    # rounds the corners, leaving about 1.45-1.47 x in the window starting at t=20.
    assert 1.4 < c["max_window_throttle_ratio"] < 1.5
    assert c["throttle_violated"] and c["verdict"] == "fail"
    assert c["move_duration_ratio"] == 1.0  # the duration alone would pass
    assert {(b["node"], b["side"]) for b in c["brokers"] if b["throttle_violated"]} == {
        (1, "leader"),
        (2, "follower"),
    }
    assert all(b["max_window_start_s"] == 10.0 for b in c["brokers"])
    assert len(c["failures"]) == 2 and all("throttle violated" in f for f in c["failures"])


@pytest.mark.spark
def test_produce_latency_per_phase(report: Report) -> None:
    c = report.case("produce_move")
    lat = c["produce_latency"]
    everything = list(range(1, 101)) + list(range(201, 411)) + list(range(11, 111))
    expected = {
        "before": (100, 50.5, 99.01, 100.0),
        "during": (210, 305.5, 407.91, 410.0),
        "after": (100, 60.5, 109.01, 110.0),
        "all": (410, percentile(everything, 0.5), percentile(everything, 0.99), 410.0),
    }
    for phase, (batches, p50, p99, top) in expected.items():
        assert lat[phase] == {
            "batches": batches, "records": batches * 100, "p50_ms": pytest.approx(p50),
            "p99_ms": pytest.approx(p99), "max_ms": top,
        }, phase  # fmt: skip
    assert (c["move_duration_s"], c["move_duration_ratio"], c["verdict"]) == (21.0, 1.05, "pass")
    assert (c["max_window_node"], c["max_window_side"]) == (1, "leader")
    ratios = {(b["node"], b["side"]): b["max_window_throttle_ratio"] for b in c["brokers"]}
    assert ratios == {
        (1, "leader"): pytest.approx(1.05, abs=0.001),
        (2, "follower"): pytest.approx(0.5, abs=0.001),
        (3, "follower"): pytest.approx(0.55, abs=0.001),
    }
    isr = c["isr"]
    assert (isr["shrinks"], isr["shrinks_during_move"], isr["expands"]) == (2, 1, 5)
    assert isr["last_isr"]["load-1"] == [1, 2] and isr["last_isr"]["load-3"] == [1]
    assert isr["last_isr"]["big-1"] == [3]


@pytest.mark.spark
def test_move_inferred_without_timeline_across_a_restart(report: Report) -> None:
    c = report.case("inferred_move")
    assert c["move_source"] == "inferred" and c["throttle_mode"] == "kip542"
    # From the follower reassignment-throttled bytes (not the 10 kB/s of other replication
    # node 2 has all along): exact to one metrics interval at each end.
    assert T0 + 9 <= c["move_start_ts"] <= T0 + 10
    assert T0 + 30 <= c["move_end_ts"] <= T0 + 31
    assert c["move_duration_ratio"] is None and c["verdict"] == "pass"
    # Node 2 restarts at t=20.5, its counters from 0 again: no negative or doubled second.
    node2 = [r for r in report.per_second if r["case_id"] == "inferred_move" and r["node"] == 2]
    assert min(r["follower_throttled_bytes_per_s"] for r in node2) >= 0
    assert c["max_window_throttle_ratio"] == pytest.approx(1.0, abs=0.001)
    assert {b["configured_throttle_bytes_per_s"] for b in c["brokers"]} == {MB}


@pytest.mark.spark
def test_four_cases_in_one_job_and_the_files(report: Report) -> None:
    assert [c["id"] for c in report.cases] == list(NAMES)
    assert report.summary == {
        "cases": 4, "passed": 3, "failed": 1, "failed_cases": ["burst_move"],
        "throttle_violated_cases": ["burst_move"],
        "max_window_throttle_ratio": report.case("burst_move")["max_window_throttle_ratio"],
        "verdict": "fail",
    }  # fmt: skip
    assert not report.ok
    out = report.out_dir
    assert out is not None
    html = (out / "report.html").read_text()
    for c in report.cases:
        for png in filter(None, c["plots"].values()):
            assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"src='{png}'" in html
    assert (out / "produce_move-latency.png").exists()
    lines = (out / "per_second.jsonl").read_text().splitlines()
    assert len(lines) == len(report.per_second) > 0


@pytest.mark.spark
def test_cli_exit_codes_and_default_out_dir(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    clean = tmp_path / "odd name+50%" / "clean_move"  # input_file_name() escapes " " and "%"
    shutil.copytree(RUNS / "clean_move", clean)
    ok = CliRunner().invoke(main, ["analyze", str(clean), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["summary"]["verdict"] == "pass"
    assert (clean / "analysis" / "report.html").exists()  # RUN_DIR/analysis by default
    assert "reading 1 run folder(s)" in ok.stderr
    bad = CliRunner().invoke(
        main, ["analyze", str(RUNS / "burst_move"), "--out", str(tmp_path / "o")]
    )
    assert bad.exit_code == 1, bad.output
    assert bad.stdout.splitlines()[0].split() == [
        "CASE", "VERDICT", "MOVE_S", "PREDICTED_S", "RATIO", "WINDOW_S", "MAX_WINDOW_B/S",
        "BOUND_B/S", "THROTTLE_B/S", "X_THROTTLE", "P99_BEFORE_MS", "P99_DURING_MS",
        "P99_AFTER_MS", "ISR_SHRINKS",
    ]  # fmt: skip
    assert "burst_move  fail" in bad.stdout and "throttle violated" in bad.stdout
    assert SparkSession.getActiveSession() is spark  # the CLI left the test's session running
    assert spark.range(3).count() == 3


def split_into_parts(path: Path, parts: int) -> None:
    """Cut a node log into `parts` files as the node's writer rolls them (`name.N` ... `name`)."""
    lines = path.read_text().splitlines(keepends=True)
    size = -(-len(lines) // parts)
    chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
    for back, chunk in enumerate(reversed(chunks)):
        part = path if back == 0 else path.with_name(f"{path.name}.{back}")
        part.write_text("".join(chunk))


@pytest.mark.spark
def test_logs_that_rolled_over_give_the_same_report(
    spark: Any, report: Report, tmp_path: Path
) -> None:
    from minikafka.tools.analysis import analyze

    rolled = tmp_path / "clean_move"
    shutil.copytree(RUNS / "clean_move", rolled)
    for log in [*rolled.glob("nodes/*/metrics.jsonl"), *rolled.glob("nodes/*/events.jsonl")]:
        split_into_parts(log, 3)
    from minikafka.tools.analysis.inputs import list_logs

    logs = list_logs(spark, [load_run(rolled)])[str(rolled)]
    assert len(logs.metrics) == 9 and logs.metrics[:3] == tuple(
        f"file:{rolled}/nodes/node-0/metrics.jsonl{end}" for end in (".2", ".1", "")
    )  # Spark listed them; oldest first
    again = analyze([rolled], out_dir=tmp_path / "out", spark=spark)
    (case,) = again.cases
    whole = report.case("clean_move")
    assert {k: v for k, v in case.items() if k != "run_dir"} == {
        k: v for k, v in whole.items() if k != "run_dir"
    }
    assert len(again.per_second) == len(
        [r for r in report.per_second if r["case_id"] == "clean_move"]
    )


def _same_case(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "run_dir"} == {
        k: v for k, v in b.items() if k != "run_dir"
    }


@pytest.mark.spark
def test_patterns_and_uris_are_read_by_spark(spark: Any, report: Report, tmp_path: Path) -> None:
    """A pattern (expanded by Spark: the folders holding a case.json are the runs, a report's
    analysis/ beside them is not) and a file: URI of a folder whose name Hadoop's glob would
    read as a pattern: the same cases as the fixture folders named one by one."""
    from minikafka.tools.analysis import analyze

    runs = tmp_path / "runs"
    for name in ("clean_move", "burst_move"):
        shutil.copytree(RUNS / name, runs / name)
    (runs / "analysis").mkdir()
    (runs / "analysis" / "per_second.jsonl").write_text("{}\n")
    odd = tmp_path / "odd [1] {x}" / "produce_move"
    shutil.copytree(RUNS / "produce_move", odd)
    got = analyze([f"{runs}/*", f"file://{odd}", runs / "clean_move"], spark=spark, write=False)
    assert [c["run_dir"] for c in got.cases] == [
        str(runs / "burst_move"), str(runs / "clean_move"), str(odd),
    ]  # fmt: skip  # path order in a pattern; a folder named twice counts once
    for case in got.cases:
        assert _same_case(case, report.case(case["case"])), case["case"]


@pytest.mark.spark
def test_a_pattern_without_runs_is_refused_once_spark_looked(spark: Any, tmp_path: Path) -> None:
    from minikafka.tools.analysis import analyze

    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "report.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"/\*: no folder it matches holds a case.json"):
        analyze([f"{tmp_path}/*"], spark=spark, write=False)
    with pytest.raises(ConfigError, match=r"/nope/c\?se: no folder it matches"):
        analyze([RUNS / "clean_move", f"file:{tmp_path}/nope/c?se"], spark=spark, write=False)
