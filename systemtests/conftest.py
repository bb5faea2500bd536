"""Options, the case runner and the reporting of the system tests.

    .venv/bin/pytest systemtests -m system [--profile quick|full] [--quota-mode kafka|precise|both]
        [--run-dir runs] [--spark-master local[2]] [--sim] [-x] [-k two-to-one]

`--sim` runs every case's whole cluster in this process under a virtual clock, from the case's
seed (minikafka/sim/target.py): the same verdicts, on a run that replays byte for byte
(systemtests/test_sim_replay.py); librdkafka's case is skipped (its own sockets).

`--quota-mode` (default both) selects the cases of Kafka's algorithm, of the precise quota, or
both (systemtests/harness/quota_modes.py); each mode has its own sizes per profile
(systemtests/harness/profiles.py).

`--run-dir` (default `runs/`, git-ignored) is where every case leaves its run folder, under one
folder per session: `runs/<YYYYmmdd-HHMMSS>-<profile>/<case>/` (layout in
minikafka/testing/run_folder.py). Folders are kept whether the case passes or fails; a failing
case prints its folder's path, and the session ends with a table of every case's figures. The
clusters' own data dirs (LMDB) live in pytest's basetemp and are removed when a case passes.

How the cases run: the first test of a module to ask for its result runs every selected case of
that module (its scenario: a fresh cluster each, one after another, never two at once), then
analyses all their folders in ONE Spark job (report in `<session>/analysis/<module>/`), and
writes each case's results.json; each test then asserts on its own case. One job per module
rather than one per case, because a Spark job has a fixed cost of some 7-15 s on a 2-core
machine (JVM start, ~15 small stages), about as long as a quick case's move; ten cases
analysed together take about as long as three analysed one by one. `-k` and node ids select
cases as usual: only selected cases are run.

The seed of a case is `$MINIKAFKA_SEED` (else pinned to 73, the calibration's: see
minikafka/testing/seeds.py) plus its index in the matrix
(systemtests/harness/matrix.py); it is in case.json and in the table.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minikafka.testing.mutants import CONTROL
from minikafka.testing.run_folder import RunFolder
from minikafka.testing.seeds import resolve_seed
from systemtests.harness.case import CaseRun, CaseSpec
from systemtests.harness.machine_lock import machine
from systemtests.harness.matrix import CALIBRATED_SEED, seed_offset
from systemtests.harness.mutation import MutantResult, run_mutants
from systemtests.harness.mutation import table as mutation_table
from systemtests.harness.profiles import PROFILES, get_profile
from systemtests.harness.quota_modes import QUOTA_MODES
from systemtests.harness.runner import run_case
from systemtests.harness.verdicts import STEP_LEGEND, across_step, judge_runs, summary_line

RUN_KEY = pytest.StashKey[Path]()
SUMMARY_KEY = pytest.StashKey[list]()
STEP_KEY = pytest.StashKey[bool]()  # a case was judged across a step (verdicts.STEP_LEGEND)
MUTANTS_KEY = pytest.StashKey[list]()  # the mutation table's lines
STAMP_KEY = pytest.StashKey[str]()  # the session's stamp (session_stamp)
STAMP_INPUT = "minikafka_session_stamp"  # pytest-xdist: the controller's stamp, to its workers
TABLES_OUTPUT = "minikafka_tables"  # pytest-xdist: a worker's table lines, to the controller


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka system tests")
    group.addoption(
        "--profile",
        choices=sorted(PROFILES),
        default="quick",
        help="quick: the matrix in a few minutes (CI); full: more data per partition",
    )
    group.addoption(
        "--quota-mode",
        choices=[*QUOTA_MODES, "both"],
        default="both",
        help="the cases of Kafka's quota algorithm, of the precise quota, or both (default)",
    )
    group.addoption(
        "--run-dir",
        default="runs",
        help="base folder of the run folders (default: runs/, relative to the rootdir)",
    )
    group.addoption(
        "--spark-master", default="local[2]", help="Spark master of the analysis (local[2])"
    )
    group.addoption(
        "--sim",
        action="store_true",
        help="run each case's whole cluster in simulated time, in this process, from its seed "
        "(minikafka/sim/target.py); librdkafka's cases are skipped",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SUMMARY_KEY] = []
    # One session folder for the whole session: under pytest-xdist (`make test` runs the system
    # tests on two workers, a module per worker) the controller names it and tells each worker.
    workerinput = getattr(config, "workerinput", None)
    config.stash[STAMP_KEY] = (
        workerinput[STAMP_INPUT] if workerinput else time.strftime("%Y%m%d-%H%M%S")
    )


def session_stamp(config: pytest.Config) -> str:
    """The session's time stamp, `YYYYmmdd-HHMMSS`: its run folders' parent is named by it."""
    return config.stash[STAMP_KEY]


@pytest.fixture(scope="session")
def run_stamp(pytestconfig: pytest.Config) -> str:
    """session_stamp: the same in every pytest-xdist worker of the session."""
    return session_stamp(pytestconfig)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist's controller, for each worker it starts: the session's stamp."""
    node.workerinput[STAMP_INPUT] = session_stamp(node.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: its lines of the session's tables, for the controller."""
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        stash = session.config.stash
        out[TABLES_OUTPUT] = {
            "summary": stash[SUMMARY_KEY],
            "step": stash.get(STEP_KEY, False),
            "mutants": stash.get(MUTANTS_KEY, []),
        }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller, as each worker ends: its lines join the session's tables."""
    tables = getattr(node, "workeroutput", {}).get(TABLES_OUTPUT)
    if not tables:
        return
    stash = node.config.stash
    stash[SUMMARY_KEY].extend(tables["summary"])
    if tables["step"]:
        stash[STEP_KEY] = True
    if tables["mutants"]:
        stash[MUTANTS_KEY] = tables["mutants"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the soak and the mutants unless `-m` names them, and the cases of the quota mode
    `--quota-mode` leaves out."""
    for marker in ("soak", "mutants"):
        if marker in (config.getoption("-m") or ""):
            continue
        drop = [item for item in items if item.get_closest_marker(marker) is not None]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = [item for item in items if item.get_closest_marker(marker) is None]
    if config.getoption("--sim"):
        real_only = pytest.mark.skip(reason="librdkafka has its own sockets: real processes only")
        for item in items:
            spec = getattr(item, "callspec", None)
            case = spec.params.get("case") if spec is not None else None
            if isinstance(case, CaseSpec) and case.load_client != "native":
                item.add_marker(real_only)
    chosen = config.getoption("--quota-mode")
    if chosen == "both":
        return
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        case = spec.params.get("case") if spec is not None else None
        (drop if isinstance(case, CaseSpec) and case.quota != chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class Matrix:
    """Runs the selected cases module by module and keeps their results (module docstring)."""

    def __init__(self, config: pytest.Config, profile: str, session_dir: Path, tmp: Path):
        self.config = config
        self.profile = profile  # its sizes per quota mode: get_profile(profile, case.quota)
        self.session_dir = session_dir
        self.tmp = tmp
        self.results: dict[str, dict[str, Any]] = {}
        self.simulated = bool(config.getoption("--sim"))
        # Pinned: the cases' figures were calibrated with these seeds (harness/matrix.py).
        self.seed_base = resolve_seed(pinned=CALIBRATED_SEED)

    def result(self, item: pytest.Item, case: CaseSpec) -> dict[str, Any]:
        if case.name not in self.results:
            module = item.module.__name__.rsplit(".", 1)[-1]
            pending = [c for c in self._selected(item) if c.name not in self.results]
            self._run_batch(module, pending or [case])
        return self.results[case.name]

    def _selected(self, item: pytest.Item) -> list[CaseSpec]:
        """The cases of the selected items of `item`'s module, in run order."""
        out = []
        for it in item.session.items:
            spec = getattr(it, "callspec", None)
            case = spec.params.get("case") if spec is not None else None
            if it.module is item.module and isinstance(case, CaseSpec) and case not in out:
                out.append(case)
        return out

    def _say(self, line: str) -> None:
        """A progress line on the terminal now (a batch runs for minutes inside one test)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    def _run_batch(self, module: str, cases: list[CaseSpec]) -> None:
        runs: list[tuple[CaseRun, int, Path]] = []
        for n, case in enumerate(cases, 1):
            seed = self.seed_base + seed_offset(case)
            self._say(f"\n[{module} {n}/{len(cases)}] {case.name} (seed {seed}) ...")
            cluster_dir = self.tmp / case.name
            with machine(self.session_dir, alone=case.alone and not self.simulated):
                run = run_case(
                    case,
                    get_profile(self.profile, case.quota),
                    runs_dir=self.session_dir,
                    cluster_dir=cluster_dir,
                    seed=seed,
                    simulated=self.simulated,
                )
            self._say(f"  {run.error or 'ran'} in {run.wall_s:.1f} s: {run.path}")
            runs.append((run, seed, cluster_dir))
        with machine(self.session_dir):
            judged = judge_runs(
                [r for r, _s, _c in runs],
                master=self.config.getoption("--spark-master"),
                out_dir=self.session_dir / "analysis" / module,
                label=module,
                say=self._say,
            )
        for (run, seed, cluster_dir), res in zip(runs, judged, strict=True):
            res["seed"] = seed
            RunFolder(run.path).write_results(res)
            self.config.stash[SUMMARY_KEY].append(summary_line(res) + f"  seed {seed}")
            if across_step(res):
                self.config.stash[STEP_KEY] = True
            if res["verdict"] == "pass":
                shutil.rmtree(cluster_dir, ignore_errors=True)
            self.results[run.spec.name] = res


@pytest.fixture(scope="session")
def system_matrix(pytestconfig: pytest.Config, tmp_path_factory) -> Matrix:
    profile = pytestconfig.getoption("--profile")
    base = Path(pytestconfig.getoption("--run-dir"))
    if not base.is_absolute():
        base = pytestconfig.rootpath / base
    session_dir = base / f"{session_stamp(pytestconfig)}-{profile}"
    session_dir.mkdir(parents=True, exist_ok=True)
    return Matrix(pytestconfig, profile, session_dir, tmp_path_factory.mktemp("clusters"))


@pytest.fixture(autouse=True)
def machine_shared(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under pytest-xdist every test holds the machine shared (harness/machine_lock.py), but
    the matrix's: its batch takes it per case, exclusively for a case that needs it alone."""
    if not hasattr(request.config, "workerinput") or "case_result" in request.fixturenames:
        yield  # one process: nothing to share
        return
    with machine(request.getfixturevalue("system_matrix").session_dir):
        yield


@pytest.fixture(scope="session")
def mutation_results(request: pytest.FixtureRequest, system_matrix: Matrix):
    """`row(mutant)`: that mutant's MutantResult; the first call runs every selected mutant
    (systemtests/test_mutants.py) and writes the table."""
    found: dict[str, MutantResult] = {}

    def row(mutant: str) -> MutantResult:
        if not found:
            chosen = _selected_mutants(request.session.items)
            rows = run_mutants(
                chosen,
                profile=system_matrix.profile,
                session_dir=system_matrix.session_dir / "mutants",
                tmp=system_matrix.tmp / "mutants",
                seed_base=system_matrix.seed_base,
                spark_master=system_matrix.config.getoption("--spark-master"),
                say=system_matrix._say,
            )
            found.update({r.mutant: r for r in rows})
            out = system_matrix.session_dir / "mutants"
            lines = mutation_table(rows)
            (out / "mutants.md").write_text("\n".join(lines) + "\n")
            (out / "mutants.json").write_text(json.dumps([r.to_json() for r in rows], indent=1))
            request.config.stash[MUTANTS_KEY] = lines
        return found[mutant]

    return row


def _selected_mutants(items: list[pytest.Item]) -> list[str]:
    """The mutants of the selected tests, the control first (it runs if any mutant does)."""
    chosen = {CONTROL}
    for it in items:
        spec = getattr(it, "callspec", None)
        if spec is not None and "mutant" in spec.params:
            chosen.add(spec.params["mutant"])
    return [CONTROL, *sorted(chosen - {CONTROL})]


@pytest.fixture
def case_result(request: pytest.FixtureRequest, system_matrix: Matrix, case: CaseSpec) -> dict:
    """results.json of this test's `case` (its module's batch is run if it has not been)."""
    res = system_matrix.result(request.node, case)
    request.node.stash[RUN_KEY] = Path(res["run_dir"])
    return res


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    path = item.stash.get(RUN_KEY, None)
    if path is not None and report.when == "call":
        # Shown with a failure (and with -rP for a passing case).
        report.sections.append(("run folder", f"kept: {path}"))
    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    table = config.stash.get(MUTANTS_KEY, [])
    if table:
        terminalreporter.section("KIP-73 verdicts against deliberate bugs")
        for line in table:
            terminalreporter.write_line(line)
    # Sorted by case: under pytest-xdist the workers' lines come in the order the workers end.
    lines = sorted(config.stash.get(SUMMARY_KEY, []))
    if lines:
        terminalreporter.section("KIP-73 system tests")
        for line in lines:
            terminalreporter.write_line(line)
        if config.stash.get(STEP_KEY, False):
            terminalreporter.write_line(STEP_LEGEND)
