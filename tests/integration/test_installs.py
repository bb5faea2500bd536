"""A wheel built from a copy of the sources holds every module under its minikafka name and
nothing else at the top (the folders and the names: tests/repo/test_installs.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path

from tests.repo.test_installs import ROOT, _source_files, _wheel_path


def test_the_wheel_holds_minikafka_alone(tmp_path: Path) -> None:
    """A wheel built from a copy of the sources: every file of minikafka/, cluster/ and tools/
    under its minikafka name, no top-level cluster/ or tools/ (the editable install is what the
    rest of the suite runs on)."""
    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md"):
        src.mkdir(exist_ok=True)
        (src / name).write_bytes((ROOT / name).read_bytes())
    for path in _source_files():
        copy = src / path.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(path.read_bytes())
    # without build isolation if this venv can build a wheel (setuptools >= 70.1 has
    # bdist_wheel, older ones need `wheel`); else pip fetches setuptools as `pip install .` does
    try:
        setuptools = tuple(int(x) for x in version("setuptools").split(".")[:2])
    except PackageNotFoundError:
        setuptools = (0, 0)
    has_bdist_wheel = setuptools >= (70, 1) or (setuptools >= (61, 0) and find_spec("wheel"))
    isolation = ["--no-build-isolation"] if has_bdist_wheel else []
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            *isolation,
            "-w",
            str(out),
            str(src),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("minikafka-*.whl")
    names = zipfile.ZipFile(wheel).namelist()

    tops = {n.split("/")[0] for n in names}
    dist_info = {top for top in tops if top.endswith(".dist-info")}
    assert tops - dist_info == {"minikafka"}, "the wheel installs more than minikafka"
    for top_level in (n for n in names if n.endswith(".dist-info/top_level.txt")):
        assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["minikafka"]
    # every file of the folders, .py or data (a template, a json), at its installed place
    missing = {_wheel_path(p) for p in _source_files()} - set(names)
    assert not missing, (
        f"not in the wheel (package data needs [tool.setuptools.package-data]): {missing}"
    )
    assert "minikafka/cluster/local.py" in names and "minikafka/tools/analysis/frames.py" in names
