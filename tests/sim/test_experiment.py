"""Experiments in simulated time (minikafka/sim/experiment.py): every catalog experiment runs
under the virtual clock, and its run folder is a function of its seed, byte for byte; the CLI
pins the hash seed, so a replay in another process writes the same folder; a search keeps the
folders of the runs that are not valid.

The runs are the catalog's own specs, shortened (`SHORT`: a quarter of the load for 8 s of
workload, the faults as the catalog plans them for that span) so the whole file stays within
a minute or two of this machine's time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from minikafka.cli.tool_runner import run_command
from minikafka.errors import ConfigError
from minikafka.experiment.catalog import CATALOG, variants
from minikafka.experiment.runner import run_experiment
from minikafka.experiment.schedule import Fault, Target
from minikafka.experiment.spec import Expectation, ExperimentSpec
from minikafka.sim import experiment as sim_experiment
from minikafka.sim.digest import differing_files, folder_digest
from minikafka.sim.experiment import run_sim_experiment
from minikafka.sim.search import search

SHORT_S = 8.0


def short(spec: ExperimentSpec) -> ExperimentSpec:
    return replace(spec, records_per_s=spec.records_per_s / 4)


def shortened(name: str, seed: int) -> list[ExperimentSpec]:
    return [short(s) for s in variants(name, seed=seed, duration_s=SHORT_S)]


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_a_catalog_experiment_replays_byte_for_byte(name: str, tmp_path: Path) -> None:
    for spec in shortened(name, seed=7):
        first = run_sim_experiment(spec, tmp_path / "a", report=False, tools=run_command)
        again = run_sim_experiment(spec, tmp_path / "b", report=False, tools=run_command)
        assert first.crash is None, (first.path / "crash.txt").read_text()
        assert first.results["simulated"] is True
        case = json.loads((first.path / "case.json").read_text())
        assert case["simulated"] is True and case["seed"] == 7
        assert folder_digest(first.path) == folder_digest(again.path), differing_files(
            first.path, again.path
        )


def test_another_seed_writes_another_folder(tmp_path: Path) -> None:
    (spec,) = shortened("leader-kill", seed=7)
    a = run_sim_experiment(spec, tmp_path / "a", report=False, tools=run_command)
    b = run_sim_experiment(replace(spec, seed=8), tmp_path / "b", report=False, tools=run_command)
    assert folder_digest(a.path) != folder_digest(b.path)


def _cli_run(out: Path, hash_seed: str) -> Path:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    argv = [sys.executable, "-m", "minikafka", "sim", "run", "leader-kill", "--seed", "3",
            "--time-limit", str(SHORT_S), "--rate", "500", "--no-report", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return (out / "leader-kill" / "latest").resolve()


def test_the_cli_pins_the_hash_seed_so_another_process_replays_the_run(tmp_path: Path) -> None:
    """Two processes started with different PYTHONHASHSEED (so sets of strings iterate in
    different orders) write the same folder: `minikafka sim` restarted itself with 0."""
    a = _cli_run(tmp_path / "a", "1")
    b = _cli_run(tmp_path / "b", "2")
    assert folder_digest(a) == folder_digest(b), differing_files(a, b)


_UNPINNED = """
import sys
from pathlib import Path
from minikafka.cli.tool_runner import run_command
from minikafka.experiment.catalog import variants
from minikafka.sim.experiment import run_sim_experiment
name, seed, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
for spec in variants(name, seed=seed):
    print(run_sim_experiment(spec, out, report=False, tools=run_command).path)
"""


def test_the_simulation_does_not_follow_the_string_hash(tmp_path: Path) -> None:
    """Without the CLI's pin, processes with different PYTHONHASHSEED still write the same
    folder: nothing the brokers decide in one instant follows a set's order (these two runs
    differed when the leader recorded a follower's fetch, and so proposed ISR changes, in the
    order of a set of partitions, and when the ISR sender batched proposals in a set; the
    shortened runs never decided two such changes in one instant, this one decides several)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _UNPINNED, "mixed-faults", "1", str(tmp_path / salt)],
            env={**os.environ, "PYTHONHASHSEED": salt},
            stdout=subprocess.PIPE,
            text=True,
        )
        for salt in ("1", "2")
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    paths = [[Path(line) for line in out.split()] for out in outs]
    for a, b in zip(*paths, strict=True):
        assert folder_digest(a) == folder_digest(b), differing_files(a, b)


def test_a_search_keeps_only_the_folders_of_runs_that_are_not_valid(tmp_path: Path) -> None:
    """A run that cannot be valid (an expectation no run meets) keeps its folder; a valid
    one's is removed."""
    (good,) = shortened("leader-kill", seed=1)
    bad = replace(good, seed=2, expect=(*good.expect, Expectation.parse("isr_shrinks >= 100000")))
    results = search([good, bad], tmp_path, jobs=1, tools=run_command)
    assert [r["exit_code"] for r in results] == [0, 1]
    assert results[0]["path"] is None
    assert Path(results[1]["path"]).is_dir()
    assert [p.name for p in (tmp_path / "leader-kill").iterdir() if not p.is_symlink()] == [
        Path(results[1]["path"]).name
    ]


def test_a_run_that_waits_forever_is_cut_short_in_simulated_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the virtual clock a wait on nothing would hang in wall time; the run's deadline
    (duration + settle timeout + SLACK_S simulated seconds) ends it, judged as far as it got."""
    import trio

    from minikafka.experiment.runner import Drive

    async def never(self, client) -> bool:  # noqa: ANN001
        await trio.sleep_forever()
        return True

    monkeypatch.setattr(Drive, "_settle", never)
    monkeypatch.setattr(sim_experiment, "SLACK_S", 30.0)  # 600 s in the CLI
    (spec,) = shortened("leader-kill", seed=1)
    outcome = run_sim_experiment(spec, tmp_path, report=False, tools=run_command)
    assert outcome.exit_code == 2
    assert any("stopped early" in e for e in outcome.results["harness_problems"])
    limit = spec.duration_s + spec.settle_timeout_s + 30.0
    assert limit <= outcome.results["simulated_s"] < limit + 120


def _blackout(sync: str) -> ExperimentSpec:
    """Every broker's machine loses power at once, 6 s into 8 s of load, back after 1 s."""
    faults = tuple(
        Fault(kind="power-loss", target=Target("broker", b), start_s=6.0, end_s=7.0)
        for b in (1, 2, 3)
    )
    return ExperimentSpec(
        name=f"blackout-sync-{sync}", seed=4, duration_s=SHORT_S, records_per_s=500,
        faults=faults, node_configs={"log.sync": sync}, producer_retries=True,
    )  # fmt: skip


def test_a_power_loss_of_every_broker_loses_what_was_not_synced(tmp_path: Path) -> None:
    """The fault is real and the checker sees it: without fsync, writes acknowledged after the
    last writeback are gone when every replica's machine fails at once (an invalid run, with
    lost values); with fsync on every commit the same blackout loses nothing."""
    unsynced = run_sim_experiment(_blackout("false"), tmp_path, report=False, tools=run_command)
    assert unsynced.results["valid"] is False
    assert unsynced.results["checker"]["anomalies"]["lost"]["count"] > 0  # 500 of 3,470
    synced = run_sim_experiment(_blackout("true"), tmp_path, report=False, tools=run_command)
    assert synced.results["valid"] is True, synced.results["summary"]


def test_a_real_run_refuses_power_loss_faults(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="power-loss faults need simulated time"):
        run_experiment(_blackout("false"), tmp_path)
