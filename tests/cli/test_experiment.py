"""`minikafka experiment` without a cluster: Jepsen's flag names beside the earlier ones,
--test-count, the exit codes (0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 a crash of
the harness), `experiment check` on a stored run, and the runner's own crash and start-failure
handling (minikafka/experiment/runner.py). Runs go through a fake `run_experiment` that writes a
real run folder, so the layout and links are the real ones."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result

from minikafka.cli.experiment import worst
from minikafka.cli.main import main
from minikafka.errors import ClusterError
from minikafka.experiment import runner
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.store import create_run_dir
from tests.cli.reassign_support import refused as refused_with


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["experiment", *args], prog_name="minikafka")


def refused(result: Result, *words: str) -> str:
    """One line on stderr, exit 254 (Jepsen's invalid arguments), nothing on stdout."""
    return refused_with(result, *words, exit_code=254)


class FakeRuns:
    """run_experiment's stand-in: records each spec, writes a real (empty) run folder, and
    answers with the next scripted exit code, or raises what is scripted."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.specs: list[ExperimentSpec] = []

    def __call__(self, spec: ExperimentSpec, out: Path, **_kw: Any) -> runner.Outcome:
        self.specs.append(spec)
        path = create_run_dir(out, spec.name)
        step = self.script.pop(0) if self.script else 0
        if isinstance(step, BaseException):
            raise step
        valid = {0: True, 1: False}.get(step, "unknown")
        results = {"experiment": spec.name, "valid": valid, "exit_code": step,
                   "summary": f"verdict {step}"}  # fmt: skip
        (path / "results.json").write_text(json.dumps(results))
        return runner.Outcome(path=path, results=results, exit_code=step)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # noqa: ANN201
    monkeypatch.chdir(tmp_path)

    def install(*script: Any) -> FakeRuns:
        runs = FakeRuns(list(script))
        monkeypatch.setattr(runner, "run_experiment", runs)
        return runs

    return install


# ---------------------------------------------------------------------------- flags


def test_jepsens_flag_names_and_the_earlier_ones_give_the_same_run(fake) -> None:  # noqa: ANN001
    new = fake()
    assert invoke("run", "--time-limit", "7", "--nemesis", "pause", "--nemesis-interval", "2",
                  "--seed", "3").exit_code == 0  # fmt: skip
    old = fake()
    assert invoke("run", "--duration", "7", "--faults", "pause", "--interval", "2",
                  "--seed", "3").exit_code == 0  # fmt: skip
    (a,), (b,) = new.specs, old.specs
    assert a.to_json() == b.to_json()
    assert a.duration_s == 7.0 and [(f.kind, f.start_s, f.end_s) for f in a.faults] == [
        ("pause", 2.0, 4.0)  # quiet 2 s, fault 2 s, quiet 2 s: the next would pass 7 s
    ]


def test_help_shows_both_names() -> None:
    text = invoke("run", "--help").output
    for both in ("--time-limit, --duration", "--nemesis, --faults",
                 "--nemesis-interval, --interval", "--test-count"):  # fmt: skip
        assert both in text, both
    assert "254 bad arguments" in invoke("--help").output


def test_test_count_runs_each_variant_n_times_with_successive_seeds(fake) -> None:  # noqa: ANN001
    runs = fake()
    result = invoke("run", "isr-thrash", "--test-count", "3", "--seed", "10", "--time-limit", "5")
    assert result.exit_code == 0, result.output
    names = [(s.name, s.seed) for s in runs.specs]
    assert names == [(f"isr-thrash-exempt-{e}", seed) for seed in (10, 11, 12)
                     for e in ("off", "on")]  # fmt: skip
    assert "run 3 of 3" in result.stderr
    assert (
        result.stdout.strip().splitlines()[-1]
        == "6 valid, 0 invalid, 0 unknown, 0 crashed of 6 runs"
    )
    # each its own folder, the links at the newest
    folders = sorted(p.name for p in Path("runs/experiments/isr-thrash-exempt-on").iterdir())
    assert len(folders) == 4 and folders[-1] == "latest"
    latest = os.readlink("runs/experiments/latest")
    assert latest == f"isr-thrash-exempt-on/{folders[-2]}"


@pytest.mark.parametrize(
    ("script", "code"),
    [((0, 2, 0), 2), ((0, 2, 1), 1), ((1, 0, 2), 1), ((0, 0, 0), 0)],
    ids=["unknown", "invalid-over-unknown", "invalid-first", "all-valid"],
)
def test_the_exit_code_of_several_runs_is_the_worst(fake, script, code) -> None:  # noqa: ANN001
    runs = fake(*script)
    result = invoke("run", "--test-count", "3", "--time-limit", "5")
    assert result.exit_code == code and len(runs.specs) == 3, result.output


def test_worst_ranks_a_crash_first() -> None:
    assert worst([0, 1, 255, 2]) == 255 and worst([2, 1]) == 1 and worst([0]) == 0


# ---------------------------------------------------------------------------- exit codes


REFUSALS = [
    (["run", "--bogus"], ["No such option '--bogus'", "(see minikafka experiment run --help)"]),
    (["run", "--test-count", "0"], ["--test-count", "range x>=1"]),
    (["run", "--time-limit", "-3"], ["--time-limit"]),
    (["run", "--acks", "2"], ["--acks"]),
    (["nonsense"], ["No such command 'nonsense'"]),
    (["check"], ["Missing argument 'FOLDER'"]),
    (["run", "no-such-experiment"], ["no experiment 'no-such-experiment'; known:"]),
    (["run", "leader-kill", "--nemesis", "pause"], ["--nemesis: for custom runs only"]),
    (["run", "leader-kill", "--interval", "3"], ["--nemesis-interval: for custom runs only"]),
    (["run", "--nemesis", "explode"], ["nemesis (faults) 'explode': expected a comma list"]),
    (["run", "--targets", "broker:9"], ["--targets broker:9: no such broker"]),
    (["run", "--seed", "x"], ["seed 'x'"]),
    (["list", "--wide"], ["No such option '--wide'"]),
]


@pytest.mark.parametrize(("args", "words"), REFUSALS, ids=[" ".join(a) for a, _ in REFUSALS])
def test_bad_arguments_exit_254_in_one_line_before_anything_runs(fake, args, words) -> None:  # noqa: ANN001
    runs = fake()
    refused(invoke(*args), *words)
    assert runs.specs == [] and not Path("runs").exists()


def test_no_subcommand_prints_the_help_and_exits_254() -> None:
    result = invoke()
    assert result.exit_code == 254 and "Commands:" in result.output


def test_a_crash_in_one_run_is_255_and_the_others_still_run(fake, tmp_path: Path) -> None:  # noqa: ANN001
    crash = tmp_path / "crash.txt"
    runs = fake(0, runner.HarnessCrash("KeyError: 'leader'", crash), 1)
    result = invoke("run", "--test-count", "3", "--time-limit", "5")
    assert result.exit_code == 255 and len(runs.specs) == 3, result.output
    assert f"error: custom: the harness crashed: KeyError: 'leader' (traceback in {crash})" in (
        result.stderr
    )


def test_an_unexpected_error_is_a_crash_of_the_harness(fake) -> None:  # noqa: ANN001
    fake(RuntimeError("boom"))
    result = invoke("run", "--time-limit", "5")
    assert result.exit_code == 255
    assert (
        result.stderr.strip().splitlines()[-1] == "error: the harness crashed: RuntimeError: boom"
    )
    assert "Traceback" in result.stderr  # no run folder to keep it in


def test_an_interrupt_is_130_not_a_verdict(fake) -> None:  # noqa: ANN001
    fake(KeyboardInterrupt())
    result = invoke("run", "--time-limit", "5")
    assert result.exit_code == 130 and "error: interrupted" in result.stderr


# ---------------------------------------------------------------------------- check


def test_check_prints_the_verdict_and_exits_by_it(tmp_path: Path) -> None:
    from tests.experiment.test_store import edit_lines, stored_run  # noqa: PLC0415

    out = tmp_path / "runs"
    run = stored_run(out)
    result = invoke("check", str(out / "latest"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "tiny: VALID (exit 0)"
    assert lines[-2:] == [f"  folder: {run}", "  stored verdict: VALID (exit 0), the same"]

    def drop(op: dict) -> dict:
        if op["f"] == "final-read" and op["type"] == "ok" and op["partition"] == 1:
            op["records"] = op["records"][:-1]  # value 109, acknowledged, no longer read back
        return op

    edit_lines(run / "history.jsonl", drop)
    result = invoke("check", str(run), "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and doc["valid"] is False and doc["stored_valid"] is True
    assert doc["checker"]["anomalies"]["lost"]["examples"][0]["value"] == 109
    assert json.loads((run / "results.json").read_text())["valid"] is True  # untouched
    result = invoke("check", str(run), "--write")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1].endswith("DIFFERENT; results.json rewritten")
    assert json.loads((run / "results.json").read_text())["valid"] is False


def test_check_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    refused(invoke("check", str(tmp_path)), "not an experiment run folder: no experiment.json")
    refused(invoke("check", str(tmp_path / "gone")), "no such folder")


# ---------------------------------------------------------------------------- the runner


def test_a_crash_of_the_harness_keeps_its_traceback_in_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_kw: Any) -> None:
        raise TypeError("plan_cluster() got an unexpected keyword argument")

    monkeypatch.setattr(runner, "plan_cluster", broken)
    with pytest.raises(runner.HarnessCrash) as info:
        runner.run_experiment(ExperimentSpec(name="leader-kill"), tmp_path)
    crash = info.value.crash_file
    assert crash.parent == (tmp_path / "latest").resolve()
    assert "Traceback" in crash.read_text() and "TypeError: plan_cluster()" in crash.read_text()
    assert str(info.value).endswith(f"(traceback in {crash})")


def test_a_cluster_that_does_not_start_is_an_unknown_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = SimpleNamespace(node_id=1, data_dir=tmp_path / "no-such-node")
    monkeypatch.setattr(runner, "plan_cluster", lambda **_kw: SimpleNamespace(
        nodes=[node], brokers=[node]))  # fmt: skip

    def up(*_a: Any, **_kw: Any) -> None:
        raise ClusterError("node 1 did not become ready within 30 s")

    monkeypatch.setattr(runner.LocalCluster, "up", up)
    outcome = runner.run_experiment(ExperimentSpec(name="leader-kill"), tmp_path)
    assert outcome.exit_code == 2 and outcome.crash is None
    stored = json.loads((outcome.path / "results.json").read_text())
    assert stored["problems"] == [
        "the cluster did not start: ClusterError: node 1 did not become ready within 30 s"
    ]


def test_only_our_own_errors_are_the_clusters_fault() -> None:
    import trio

    assert not runner._is_crash(ClusterError("x"))
    assert not runner._is_crash(ExceptionGroup("g", [trio.TooSlowError(), ConnectionResetError()]))
    assert runner._is_crash(ExceptionGroup("g", [ClusterError("x"), KeyError("leader")]))


# ---------------------------------------------------------------------------- --sim, sim run


@pytest.fixture
def fake_sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # noqa: ANN201
    """run_sim_experiment's stand-in (the real one: tests/sim/test_experiment.py), and the hash
    seed already pinned, so `minikafka sim` does not restart the test process."""
    import minikafka.sim.experiment as sim_experiment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    real, sim = FakeRuns([]), FakeRuns([])
    monkeypatch.setattr(runner, "run_experiment", real)
    monkeypatch.setattr(sim_experiment, "run_sim_experiment", sim)
    return real, sim


def test_sim_runs_the_same_specs_in_simulated_time(fake_sim) -> None:  # noqa: ANN001
    real, sim = fake_sim
    args = ("leader-kill", "--seed", "4", "--time-limit", "9")
    assert invoke("run", *args, "--sim").exit_code == 0
    result = CliRunner().invoke(main, ["sim", "run", *args], prog_name="minikafka")
    assert result.exit_code == 0, result.output
    assert real.specs == []
    a, b = sim.specs
    assert a.to_json() == b.to_json() and a.seed == 4 and a.duration_s == 9.0


def test_sim_refuses_a_running_cluster_and_search_flags_on_one_run(fake_sim) -> None:  # noqa: ANN001
    refused(invoke("run", "--sim", "--dir", "x"), "--dir", "--sim")
    one = CliRunner().invoke(
        main, ["sim", "run", "leader-kill", "--jobs", "2"], prog_name="minikafka"
    )
    refused(one, "--jobs", "--test-count")
