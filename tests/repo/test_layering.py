"""The layering rule (docs/architecture.md): minikafka/core and minikafka/wire are sans-IO.

Every .py file under those packages is parsed with `ast`; any import of trio, socket, lmdb,
time, threading, asyncio (or their submodules) or of the shell packages (minikafka.server,
.client, .storage, .testing) fails the test. Relative imports are resolved against the file's
package, `from minikafka import server` counts as importing minikafka.server, and
`importlib.import_module("...")` / `__import__("...")` with a literal name are checked too.
Imports under `if TYPE_CHECKING:` count: the rule is about what the layer depends on.

The same scanner holds the direction between the packages. The folders
cluster/ and tools/ are the packages minikafka.cluster (the local-cluster launcher) and
minikafka.tools (perf, reassignment, the PySpark analysis), on top of the broker:
- the broker's layers (core, wire, server, storage, client, faults, errors) import neither;
- minikafka.cluster does not import minikafka.tools: the tools use the launcher (the demo starts
  a cluster), never the other way round;
- nothing imports the bare top-level names `cluster` or `tools` any more: they are not installed,
  and PyPI, or a user's own folder, has packages of those names.
The command line, the experiments and the test fixtures (minikafka.cli, .experiment, .testing)
stand above all of them and may import both.

And every room of the house (a package, or a module standing alone) has a floor (FLOORS): a
room imports only the floors below it, so no import runs back up and no circle of rooms forms.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ("minikafka/core", "minikafka/wire")
BANNED = (
    "trio",
    "socket",
    "lmdb",
    "time",
    "threading",
    "asyncio",
    "minikafka.server",
    "minikafka.client",
    "minikafka.storage",
    "minikafka.testing",
)


# The broker's layers: below the launcher and the tools.
BROKER_LAYERS = (
    "minikafka/core",
    "minikafka/wire",
    "minikafka/server",
    "minikafka/storage",
    "minikafka/client",
    "minikafka/faults",
    "minikafka/errors.py",
)
LAUNCHER_AND_TOOLS = ("minikafka.cluster", "minikafka.tools")
TOOLS = ("minikafka.tools",)
# the names the folders installed as before they became minikafka.cluster and .tools
BARE_NAMES = ("cluster", "tools")
# a folder and the package it installs as (pyproject.toml [tool.setuptools] package-dir)
PACKAGE_DIRS = {"cluster": "minikafka.cluster", "tools": "minikafka.tools"}
# what the whole-tree rule does not read: venvs, caches, build output
SKIPPED_DIRS = {"build", "dist", "__pycache__", "node_modules"}


def is_banned(module: str, banned: tuple[str, ...] = BANNED) -> bool:
    return any(module == b or module.startswith(b + ".") for b in banned)


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    if node.level > len(parts):
        return node.module or ""  # beyond the top: Python would fail; report as written
    base = parts[: len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of everything `source` imports; `package` is its package."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, package)
            found.append((node.lineno, module))
            # `from minikafka import server` imports the submodule minikafka.server
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((node.lineno, arg.value))
    return found


def violations(
    source: str, package: str, filename: str = "<snippet>", banned: tuple[str, ...] = BANNED
) -> list[str]:
    return [
        f"{filename}:{line}: imports {module}"
        for line, module in imported_modules(source, package)
        if is_banned(module, banned)
    ]


def package_of(path: Path) -> str:
    # a module's package and an __init__.py's package are both its directory, under the name
    # it installs as: cluster/local.py is in minikafka.cluster
    parts = list(path.relative_to(ROOT).parent.parts)
    if parts and parts[0] in PACKAGE_DIRS:
        parts[0:1] = PACKAGE_DIRS[parts[0]].split(".")
    return ".".join(parts)


def files_of(places: tuple[str, ...]) -> list[Path]:
    return sorted(
        p
        for place in places
        for p in ([ROOT / place] if place.endswith(".py") else (ROOT / place).rglob("*.py"))
    )


def pure_files() -> list[Path]:
    return files_of(PURE_PACKAGES)


def tree_files() -> list[Path]:
    """Every .py file of the checkout: the packages, tests, system tests, benchmarks."""
    return sorted(
        p
        for p in ROOT.rglob("*.py")
        if not any(
            part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info")
            for part in p.relative_to(ROOT).parts[:-1]
        )
    )


def _ids(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_pure_packages_exist_and_have_files():
    files = pure_files()
    assert any(p.parent.name == "core" for p in files)
    assert any(p.name == "codec.py" for p in files)


@pytest.mark.parametrize("path", pure_files(), ids=_ids)
def test_core_and_wire_are_sans_io(path):
    found = violations(path.read_text(encoding="utf-8"), package_of(path), str(path))
    assert not found, "sans-IO layering (README, architecture):\n" + "\n".join(found)


# ------------------------------------------------- the broker, the launcher and the tools


def test_the_rules_read_files():
    assert any(p.name == "replica_manager.py" for p in files_of(BROKER_LAYERS))
    assert ROOT / "minikafka/errors.py" in files_of(BROKER_LAYERS)
    assert any(p.name == "local.py" for p in files_of(("cluster",)))
    tree = tree_files()
    for place in ("minikafka/cli", "cluster", "tools/analysis", "tests", "systemtests"):
        assert any(p.is_relative_to(ROOT / place) for p in tree), place
    assert ROOT / "tests/conftest.py" in tree
    assert not any(".venv" in p.parts or "__pycache__" in p.parts for p in tree)


@pytest.mark.parametrize("path", files_of(BROKER_LAYERS), ids=_ids)
def test_the_broker_imports_neither_the_launcher_nor_the_tools(path):
    source = path.read_text(encoding="utf-8")
    found = violations(source, package_of(path), str(path), LAUNCHER_AND_TOOLS)
    assert not found, "the broker's layers stand below minikafka.cluster and .tools:\n" + (
        "\n".join(found)
    )


@pytest.mark.parametrize("path", files_of(("cluster",)), ids=_ids)
def test_the_launcher_does_not_import_the_tools(path):
    found = violations(path.read_text(encoding="utf-8"), package_of(path), str(path), TOOLS)
    assert not found, "minikafka.tools uses minikafka.cluster, not the other way:\n" + (
        "\n".join(found)
    )


@pytest.mark.parametrize("path", tree_files(), ids=_ids)
def test_nothing_imports_the_bare_names_cluster_and_tools(path):
    found = violations(path.read_text(encoding="utf-8"), package_of(path), str(path), BARE_NAMES)
    assert not found, "import minikafka.cluster / minikafka.tools instead:\n" + "\n".join(found)


# ------------------------------------------------------------------------------ the floor table

# Every room of the house (a package, or a module standing alone) on its floor, lowest first:
# a room imports only rooms on floors below its own, so no import runs back up and no circle of
# rooms can form. A new room fails `test_every_room_has_a_floor` until it is given one here.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("minikafka/__init__.py",),
    ("minikafka/errors.py", "minikafka/common.py"),  # the words every layer shares
    ("minikafka/wire", "minikafka/checker"),
    ("minikafka/core",),
    ("minikafka/clock.py", "minikafka/storage", "minikafka/kafka"),
    ("minikafka/client",),
    ("minikafka/server",),
    ("minikafka/faults",),
    ("cluster",),
    ("minikafka/testing",),
    ("tools",),
    ("minikafka/experiment",),
    ("minikafka/sim",),
    ("minikafka/cli",),
    ("minikafka/__main__.py",),
)
FLOOR_OF = {room: n for n, rooms in enumerate(FLOORS) for room in rooms}


def room_of_file(path: Path) -> str | None:
    rel = path.relative_to(ROOT)
    for room in FLOOR_OF:
        if rel == Path(room) or (not room.endswith(".py") and rel.is_relative_to(room)):
            return room
    return None


def room_of_module(module: str) -> str | None:
    """The room a `minikafka...` module lives in (None: not ours, or the bare package)."""
    parts = module.split(".")
    if parts[0] != "minikafka" or len(parts) == 1:
        return None
    for folder, package in PACKAGE_DIRS.items():
        if parts[1] == package.split(".")[1]:
            return folder
    return f"minikafka/{parts[1]}" + ("" if (ROOT / "minikafka" / parts[1]).is_dir() else ".py")


def upward_imports(source: str, package: str, room: str, filename: str) -> list[str]:
    return [
        f"{filename}:{line}: {room} (floor {FLOOR_OF[room]}) imports {module} "
        f"({target}, floor {FLOOR_OF.get(target, '?')})"
        for line, module in imported_modules(source, package)
        if (target := room_of_module(module)) is not None
        and target != room
        and FLOOR_OF.get(target, len(FLOORS)) >= FLOOR_OF[room]
    ]


def house_files() -> list[Path]:
    return files_of(("minikafka", "cluster", "tools"))


def test_every_room_has_a_floor():
    lost = sorted({_ids(p) for p in house_files() if room_of_file(p) is None})
    assert not lost, "give these a floor in FLOORS:\n" + "\n".join(lost)
    missing = [room for room in FLOOR_OF if not (ROOT / room).exists()]
    assert not missing, missing


@pytest.mark.parametrize("path", house_files(), ids=_ids)
def test_no_import_runs_back_up(path):
    room = room_of_file(path)
    assert room is not None
    found = upward_imports(path.read_text(encoding="utf-8"), package_of(path), room, str(path))
    assert not found, "a room imports only the floors below it (FLOORS):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "package", "room"),
    [
        # the three arrows that ran back up until they moved (minikafka.common, .clock, .checker)
        ("from minikafka.core.types import NO_LEADER", "minikafka.wire", "minikafka/wire"),
        ("from minikafka.server.clock import now_ms", "minikafka.client", "minikafka/client"),
        (
            "from minikafka.experiment.history import History",
            "minikafka.testing",
            "minikafka/testing",
        ),
        ("from ..sim import network", "minikafka.experiment", "minikafka/experiment"),
        ("from minikafka.cli.main import main", "minikafka.tools.reassign", "tools"),
        ("import minikafka.storage", "minikafka.wire", "minikafka/wire"),  # same floor
    ],
)
def test_the_floor_table_catches_an_import_back_up(snippet, package, room):
    assert upward_imports(snippet, package, room, "<snippet>"), snippet
    # and the way down is open: the fault proxy stands above the server it borrows listeners of
    assert upward_imports("from ..server import listener", "minikafka.faults", "minikafka/faults",
                          "<snippet>") == []  # fmt: skip


# ---------------------------------------------------------------------------- the scanner itself


@pytest.mark.parametrize(
    "snippet",
    [
        "import trio",
        "import trio.lowlevel",
        "import socket as s",
        "import os, time",
        "from time import monotonic",
        "from threading import Lock",
        "import asyncio.events",
        "import lmdb",
        "from minikafka.server.listener import run_listener",
        "from minikafka import storage",
        "from minikafka.client import Producer",
        "from .. import testing",
        "from ..server import handlers",
        "def f():\n    import time\n    return time.monotonic()",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import trio",
        "import importlib\nm = importlib.import_module('socket')",
        "t = __import__('time')",
    ],
)
def test_scanner_catches_violations(snippet):
    assert violations(snippet, "minikafka.wire"), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "import msgpack",
        "import timeit",
        "import socketserver_free_name_that_is_not_socket",
        "from minikafka.core.records import iter_batches",
        "from minikafka.errors import RemoteProtocolError",
        "from . import messages",
        "from .. import common",
        "from minikafka import errors",
        "from datetime import time",  # a name called time, not the module
        "import zlib, struct, random, dataclasses",
    ],
)
def test_scanner_allows_pure_imports(snippet):
    assert violations(snippet, "minikafka.wire") == []


def test_relative_imports_resolve_against_the_package():
    assert imported_modules("from ..server import x", "minikafka.wire") == [
        (1, "minikafka.server"),
        (1, "minikafka.server.x"),
    ]
    assert package_of(ROOT / "minikafka/wire/codec.py") == "minikafka.wire"
    assert package_of(ROOT / "minikafka/wire/__init__.py") == "minikafka.wire"
    assert package_of(ROOT / "cluster/local.py") == "minikafka.cluster"
    assert package_of(ROOT / "tools/analysis/frames.py") == "minikafka.tools.analysis"
    assert package_of(ROOT / "tests/test_layering.py") == "tests"
    # a relative import inside cluster/ is an import of minikafka.cluster, not of `cluster`
    assert imported_modules("from .spec import NodeSpec", "minikafka.cluster") == [
        (1, "minikafka.cluster.spec"),
        (1, "minikafka.cluster.spec.NodeSpec"),
    ]


@pytest.mark.parametrize(
    ("snippet", "package"),
    [
        ("from minikafka.cluster import LocalCluster", "minikafka.server"),
        ("import minikafka.tools.perf", "minikafka.client"),
        ("from minikafka import cluster", "minikafka.storage"),
        ("from .. import tools", "minikafka.core"),
        ("from ..cluster.ports import free_ports", "minikafka.faults"),
        ("from .cluster import spec", "minikafka"),  # minikafka/errors.py's package
        ("import importlib\nm = importlib.import_module('minikafka.tools')", "minikafka.wire"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import minikafka.cluster", "x"),
    ],
)
def test_scanner_catches_the_broker_importing_the_launcher_or_the_tools(snippet, package):
    assert violations(snippet, package, banned=LAUNCHER_AND_TOOLS), snippet


@pytest.mark.parametrize(
    ("snippet", "package"),
    [
        ("from minikafka.tools.demo import run_demo", "minikafka.cluster"),
        ("import minikafka.tools", "minikafka.cluster"),
        ("from minikafka import tools", "minikafka.cluster"),
        ("from .. import tools", "minikafka.cluster"),
        ("from ..tools.reassign import moves", "minikafka.cluster"),
        ("def f():\n    from minikafka.tools.analysis import analyze", "minikafka.cluster"),
    ],
)
def test_scanner_catches_the_launcher_importing_the_tools(snippet, package):
    assert violations(snippet, package, banned=TOOLS), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "import cluster",
        "import cluster.local",
        "from cluster import LocalCluster",
        "from cluster.spec import ClusterSpec",
        "import tools",
        "import os, tools",
        "from tools import perf",
        "import tools as t",
        "def f():\n    from tools import demo",
        "t = __import__('tools')",
        "import importlib\nm = importlib.import_module('cluster')",
    ],
)
def test_scanner_catches_the_bare_names(snippet):
    assert violations(snippet, "tests", banned=BARE_NAMES), snippet


@pytest.mark.parametrize(
    ("snippet", "package"),
    [
        ("from minikafka.cluster import LocalCluster", "tests"),
        ("import minikafka.tools.perf", "benchmarks"),
        ("from minikafka import cluster, tools", "systemtests.harness"),
        ("from . import spec", "minikafka.cluster"),
        ("from .files import tail_log", "minikafka.cluster"),
        ("from ..cluster import LocalCluster", "minikafka.tools"),
        ("import clusters, toolz, toolkit", "tests"),
        ("from minikafka.client.cluster_client import ClusterClient", "tests"),
    ],
)
def test_scanner_allows_the_installed_names(snippet, package):
    assert violations(snippet, package, banned=BARE_NAMES) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "from minikafka.client.cluster_client import ClusterClient",  # not minikafka.cluster
        "from minikafka.core.controller import Controller",
        "from ..errors import ClusterError",
        "import clusterlib",
    ],
)
def test_scanner_allows_the_broker_its_own_imports(snippet):
    assert violations(snippet, "minikafka.server", banned=LAUNCHER_AND_TOOLS) == []


def test_scanner_allows_the_tools_the_launcher():
    assert (
        violations("from minikafka.cluster import LocalCluster", "minikafka.tools", banned=TOOLS)
        == []
    )
