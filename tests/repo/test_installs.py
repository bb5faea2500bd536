"""Installs: the lock and pyproject name the same packages, and everything but
the analysis runs without the `[analysis]` extra.

The import test runs in a subprocess whose first act is a `sys.meta_path` finder refusing
pyspark, py4j and matplotlib (this venv has them; a user's may not), then imports every module
of minikafka, minikafka.cluster and minikafka.tools, and runs the CLI. Only the Spark job's two
modules may fail to import, and then with the one-line pip hint.

The import names: the folders cluster/ and tools/ install as minikafka.cluster
and minikafka.tools, never as top-level `cluster` and `tools`. pyproject.toml lists the packages
(setuptools' find cannot rename a folder), held here equal to the folders; a built wheel holds
every module under its minikafka name and nothing else at the top
(tests/integration/test_installs.py builds it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements-dev.lock"
HINT = "pip install 'minikafka[analysis]'"
ANALYSIS_PACKAGES = {"pyspark", "matplotlib"}

# ---------------------------------------------------------------------------- lock, pyproject


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (pinned version, its hashes), from the lock's `name==version \\` entries."""
    pins: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            name = canonicalize_name(m[1])
            pins[name] = (m[2], [])
        elif (h := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line)) and name:
            pins[name][1].append(h[1])
        elif line.strip() and not line.lstrip().startswith("#"):
            pytest.fail(f"{LOCK.name}: a line that is neither a pin nor a hash: {line!r}")
    return pins


def _requirements() -> list[Requirement]:
    project = _project()
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def test_lock_pins_every_dependency_pyproject_names_within_its_range() -> None:
    pins = _locked()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not in {LOCK.name}: make lock"
        version, hashes = pins[name]
        assert req.specifier.contains(version, prereleases=True), (
            f"{LOCK.name} pins {name}=={version}, outside pyproject's {req}: make lock"
        )
        assert hashes, f"{name} has no hash in {LOCK.name}"


def test_every_locked_package_is_hashed_and_pinned_once() -> None:
    text = LOCK.read_text()
    pins = _locked()
    assert len(pins) == len(re.findall(r"(?m)^[A-Za-z0-9][A-Za-z0-9._-]*==", text))
    assert all(hashes for _, hashes in pins.values())
    assert "file://" not in text and "--find-links" not in text and "-e " not in text


def test_analysis_is_an_extra_and_dev_holds_it() -> None:
    project = _project()
    base = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    assert not base & ANALYSIS_PACKAGES, "pyspark and matplotlib belong to the [analysis] extra"
    extras = project["optional-dependencies"]
    assert {canonicalize_name(Requirement(r).name) for r in extras["analysis"]} == ANALYSIS_PACKAGES
    # dev repeats the analysis' lines (pip-compile cannot lock a self-reference): the same specs
    assert set(extras["analysis"]) <= set(extras["dev"])


def test_the_install_stamp_depends_on_the_lock_and_installs_it_hash_checked() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"(?m)^LOCK := requirements-dev\.lock$", makefile)
    rule = re.search(r"(?m)^\$\(STAMP\): (.*)\n((?:\t.*\n)+)", makefile)
    assert rule is not None
    assert "$(LOCK)" in rule[1].split() and "pyproject.toml" in rule[1].split()
    assert "--require-hashes -r $(LOCK)" in rule[2]
    assert "--no-deps -e ." in rule[2]


# ---------------------------------------------------------------- without the analysis extra

# Installed first in each subprocess: pyspark, py4j and matplotlib (and their submodules) are
# not to be found, as in a venv without the extra.
BLOCKER = textwrap.dedent(
    """
    import sys

    BLOCKED = ("pyspark", "py4j", "matplotlib")

    class NoAnalysisExtra:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, NoAnalysisExtra())
    """
)

WALK = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    # The fuzzer wants kio's hypothesis strategies, which kio registers only if hypothesis is
    # imported before it (minikafka/kafka/__init__.py); a process that fuzzes imports it
    # first, as this walk, which meets minikafka.kafka before minikafka.testing.fuzz, must.
    import hypothesis  # noqa: F401

    SPARK_JOB = {
        f"minikafka.tools.analysis.{m}" for m in ("spark_job", "frames", "inputs", "session")
    }
    from minikafka.tools.analysis.environment import MissingAnalysisExtra

    imported, hinted = [], []
    for top in ("minikafka", "minikafka.cluster", "minikafka.tools"):
        package = importlib.import_module(top)
        imported.append(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the CLI
                continue
            try:
                importlib.import_module(info.name)
            except MissingAnalysisExtra as exc:
                assert info.name in SPARK_JOB, f"{info.name}: {exc}"
                assert "pip install 'minikafka[analysis]'" in str(exc), exc
                hinted.append(info.name)
                continue
            imported.append(info.name)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not leaked, leaked
    assert sorted(hinted) == sorted(SPARK_JOB), hinted
    print(len(imported))
    """
)

CLI = textwrap.dedent(
    """
    from minikafka.cli import main
    main(sys.argv[1:], prog_name="minikafka")
    """
)


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + script, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_module_but_the_spark_job_imports_without_the_analysis_extra() -> None:
    done = _run(WALK)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 100  # the walk did walk: minikafka alone has 100+ modules


@pytest.mark.parametrize(
    "args",
    [["--help"], ["analyze", "--help"], ["cluster", "--help"], ["produce", "--help"]],
)
def test_the_cli_runs_without_the_analysis_extra(args: list[str]) -> None:
    done = _run(CLI, *args)
    assert done.returncode == 0, done.stderr
    assert "Usage: minikafka" in done.stdout


def test_analyze_without_the_extra_says_the_pip_line(tmp_path: Path) -> None:
    """With a Java 17 (a fake one, so this holds on a machine without Java), the missing
    extra is what analyze reports: one line, exit 2, nothing written."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    java.chmod(0o755)
    out = tmp_path / "out"
    run_dir = ROOT / "tests" / "fixtures" / "runs" / "clean_move"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "JAVA_HOME": ""}
    done = _run(CLI, "analyze", str(run_dir), "--out", str(out), env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and HINT in done.stderr, done.stderr
    assert not out.exists()


# ---------------------------------------------------------------- import names, the wheel

# the folders that hold packages, and the name each installs as
PACKAGE_FOLDERS = {
    "minikafka": "minikafka",
    "cluster": "minikafka.cluster",
    "tools": "minikafka.tools",
}


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _installed_name(path: Path) -> str:
    """minikafka.tools.analysis.frames for tools/analysis/frames.py (a package: its folder)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE_FOLDERS[parts[0]], *parts[1:]])


def _wheel_path(path: Path) -> str:
    """minikafka/tools/analysis/frames.py for tools/analysis/frames.py."""
    first, *rest = path.relative_to(ROOT).parts
    return "/".join([*PACKAGE_FOLDERS[first].split("."), *rest])


def _source_files() -> list[Path]:
    return sorted(
        p
        for folder in PACKAGE_FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def test_pyproject_installs_the_folders_under_minikafka_only() -> None:
    config = _setuptools()
    assert config["package-dir"] == {v: k for k, v in PACKAGE_FOLDERS.items()}
    folders = sorted(_installed_name(p) for p in _source_files() if p.name == "__init__.py")
    assert sorted(config["packages"]) == folders, (
        "pyproject.toml [tool.setuptools] packages must list every folder with an __init__.py"
    )
    assert all(name.split(".")[0] == "minikafka" for name in config["packages"])
