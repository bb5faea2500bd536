"""DESIGN.md rule 1: minikafka/core and minikafka/wire are sans-IO.

Every .py file under those packages is parsed with `ast`; any import of trio, socket, lmdb,
time, threading, asyncio (or their submodules) or of the shell packages (minikafka.server,
.client, .storage, .testing) fails the test. Relative imports are resolved against the file's
package, `from minikafka import server` counts as importing minikafka.server, and
`importlib.import_module("...")` / `__import__("...")` with a literal name are checked too.
Imports under `if TYPE_CHECKING:` count: the rule is about what the layer depends on.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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


def is_banned(module: str) -> bool:
    return any(module == b or module.startswith(b + ".") for b in BANNED)


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


def violations(source: str, package: str, filename: str = "<snippet>") -> list[str]:
    return [
        f"{filename}:{line}: imports {module}"
        for line, module in imported_modules(source, package)
        if is_banned(module)
    ]


def package_of(path: Path) -> str:
    # a module's package and an __init__.py's package are both its directory
    return ".".join(path.relative_to(ROOT).parent.parts)


def pure_files() -> list[Path]:
    return sorted(p for pkg in PURE_PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_pure_packages_exist_and_have_files():
    files = pure_files()
    assert any(p.parent.name == "core" for p in files)
    assert any(p.name == "codec.py" for p in files)


@pytest.mark.parametrize("path", pure_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_and_wire_are_sans_io(path):
    found = violations(path.read_text(encoding="utf-8"), package_of(path), str(path))
    assert not found, "DESIGN.md rule 1 (layering):\n" + "\n".join(found)


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
        "from ..core import types",
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
