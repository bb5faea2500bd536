"""The experiments' throttle bound (minikafka/experiment/verdict.py, analysis.case_info): the run's
case.json tells the PySpark analysis how to judge it, and the verdict reads its figures back.

The fixture run tests/fixtures/runs/experiment_burst (window_runs.py gives its known answers) has
a burst straddling a 12 s tumbling boundary: only sliding windows catch it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from minikafka.experiment.analysis import case_info
from minikafka.experiment.catalog import variants
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.verdict import judge, throttle_check

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
T0 = 1_795_000_000.0
MB = 1_000_000
JUDGING = ("throttle_window_s", "throttle_bound_bytes_per_s", "throttle_window_past_end",
           "throttle_judged", "throttle_exempt_counted", "receiving_brokers", "sending_brokers",
           "throttle_mode")  # fmt: skip


def spec(throttle: int | None = MB) -> ExperimentSpec:
    return ExperimentSpec(name="experiment_burst", topic="exp", throttle_bytes_per_s=throttle)


def test_an_experiment_tells_the_analysis_how_to_judge_its_throttle() -> None:
    doc = case_info(spec(), nodes=[0, 1, 2], brokers=[1, 2]).to_json()
    # exactly what the fixture run says, so the tests below judge the runner's own settings
    fixture = json.loads((RUNS / "experiment_burst" / "case.json").read_text())
    assert {k: doc.get(k) for k in JUDGING} == {k: fixture.get(k) for k in JUDGING}
    assert doc["throttle_window_s"] == 12 and doc["throttle_bound_bytes_per_s"] == 1.15 * MB
    (wiped,) = variants("wiped-broker-kip1009", seed=1)
    doc = case_info(wiped, nodes=[0, 1, 2, 3], brokers=[1, 2, 3]).to_json()
    assert (doc["throttle_bytes_per_s"], doc["throttle_mode"]) == (400_000, None)  # KIP-1009
    assert doc["receiving_brokers"] == doc["sending_brokers"] == [1, 2, 3]
    lists = variants("reassign-leader-fails", seed=1)[0]
    assert case_info(lists, nodes=[0, 1], brokers=[1]).to_json()["throttle_mode"] == "lists"
    unthrottled = case_info(spec(None), nodes=[0, 1], brokers=[1]).to_json()
    assert unthrottled["throttle_bytes_per_s"] is None and unthrottled["receiving_brokers"] == []


def _judge(run_dir: Path, s: ExperimentSpec, analysis: Any, error: str | None = None) -> dict:
    return judge(s, run_dir, t0=T0, dumps=None, driver_errors=[], settled=True,
                 analysis=analysis, analysis_error=error)  # fmt: skip


def test_without_the_analysis_a_throttled_run_is_unknown(
    tmp_path: Path, clean_history: Callable[[Path], None]
) -> None:
    clean_history(tmp_path)
    results = _judge(tmp_path, spec(), None, "skipped (--no-report)")
    assert (results["valid"], results["exit_code"], results["throttle"]) == ("unknown", 2, {})
    assert results["problems"] == ["the throttle bound was not judged: skipped (--no-report)"]
    assert _judge(tmp_path, spec(None), None)["valid"] is True  # no throttle: nothing to judge


# ------------------------------------------------------------------------------ with Spark


@pytest.fixture(scope="module")
def burst_case(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    from minikafka.tools.analysis import analyze

    run_dir = tmp_path_factory.mktemp("exp") / "experiment_burst"
    shutil.copytree(RUNS / "experiment_burst", run_dir)
    (case,) = analyze([run_dir], spark=spark, write=False).cases
    return run_dir, case


@pytest.mark.spark
def test_the_experiment_verdict_catches_a_burst_straddling_a_tumbling_boundary(
    burst_case: tuple[Path, dict[str, Any]],
    clean_history: Callable[[Path], None],
) -> None:
    run_dir, case = burst_case
    clean_history(run_dir)
    results = _judge(run_dir, spec(), case)
    assert (results["valid"], results["exit_code"]) == (False, 1), results["summary"]
    assert results["checker"]["valid"] is True  # the history alone is clean
    t = results["throttle"]
    for side, node in (("follower", 2), ("leader", 1)):
        assert (t[side]["window_s"], t[side]["bound_bytes_per_s"]) == (12, 1.15 * MB)
        assert t[side]["windows_over"] == 11
        assert t[side]["worst_ratio"][str(node)] == pytest.approx(1.2333, abs=1e-4)
        (ex,) = t[side]["examples"]
        # [14, 26) after the run's start: a window starting on a whole second, 12 s long
        assert (ex["node"], ex["start"], ex["end"], ex["violating_windows"]) == (node, 14, 26, 11)
        assert ex["ratio"] == pytest.approx(1.2333, abs=1e-4)
    assert "worst 12 s window 1.23x, 11 of" in results["summary"]
    assert throttle_check(case, T0) == t
