"""What a node process imports before it serves: no hypothesis, no pytest, no kio schema of an
API (minikafka/kafka/__init__.py and codec.py say why and how).

Each case imports a node's entry in a fresh interpreter under `-X importtime` and reads which
modules that import loaded. It asserts on the modules, never on the time they took: speed is
measured by hand on a quiet machine (docs/benchmarks.md), not in a test beside other work.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What `python -m minikafka node ...` (cluster/processes.py NODE_COMMAND) imports before it
# serves: the command line, then the node (cli/main.py imports it when the command runs).
ENTRIES = {
    "server.node": "import minikafka.server.node",
    "cli node": "import minikafka.cli.main, minikafka.server.node",
}
# Test-only packages: hypothesis (with the trio plugin it runs, which imports pytest) once
# cost a node 0.35 s of its start, through kio's phantom types.
FORBIDDEN_TOPS = {"hypothesis", "_hypothesis_globals", "pytest", "_pytest"}
# kio.schema's modules shared by every API (error codes, the named types); any other is one
# API's schema (kio.schema.<api>.v<N>...) or the index of them all, loaded on first use.
STARTUP_KIO_SCHEMA = {"kio.schema", "kio.schema.errors", "kio.schema.types"}

_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|( *)(\S+)")
_REPORT = "import sys; print(*sorted(m for m, v in sys.modules.items() if v is not None))"


def startup_imports(code: str) -> dict[str, str]:
    """Every module in sys.modules after `code` ran in a fresh interpreter, with the chain of
    imports that loaded it (from `-X importtime`, where a module's line comes after those it
    imported, one level of indent deeper): what to look at when a rule below fails. An import
    that failed has a line too but no module: sys.modules says what was loaded."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"{code}\n{_REPORT}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = [(len(m[1]), m[2]) for m in map(_LINE.match, done.stderr.splitlines()) if m]
    chains: dict[str, str] = {}
    for i, (depth, name) in enumerate(rows):
        chain, want = [name], depth
        for later_depth, later in rows[i + 1 :]:
            if later_depth < want:
                chain.append(later)
                want = later_depth
        chains.setdefault(name, " <- ".join(chain))
    return {name: chains.get(name, name) for name in done.stdout.split()}


def dev_only_packages(modules: dict[str, str]) -> list[str]:
    return [chain for name, chain in modules.items() if name.split(".")[0] in FORBIDDEN_TOPS]


def api_schemas(modules: dict[str, str]) -> list[str]:
    return [
        chain
        for name, chain in modules.items()
        if name.startswith("kio.schema") and name not in STARTUP_KIO_SCHEMA
    ]


@pytest.fixture(scope="module", params=sorted(ENTRIES))
def startup(request: pytest.FixtureRequest) -> dict[str, str]:
    return startup_imports(ENTRIES[request.param])


def test_no_test_only_package_at_start(startup: dict[str, str]) -> None:
    found = sorted(dev_only_packages(startup), key=len)
    assert not found, "a node imports test-only packages at start:\n" + "\n".join(found[:10])


def test_no_api_schema_of_kio_at_start(startup: dict[str, str]) -> None:
    found = sorted(api_schemas(startup), key=len)
    assert not found, "a node imports kio schemas before any request:\n" + "\n".join(found[:10])


# What only the other commands use: `minikafka node` loads its own command alone (cli/main.py
# LazyGroup), not the tools, the experiments or the analysis.
OTHER_COMMANDS = ("minikafka.tools", "minikafka.experiment", "minikafka.cli.cluster", "pyspark")


def other_commands(modules: dict[str, str]) -> list[str]:
    return [chain for name, chain in modules.items() if name.startswith(OTHER_COMMANDS)]


def test_a_node_loads_no_other_command(startup: dict[str, str]) -> None:
    found = sorted(other_commands(startup), key=len)
    assert not found, "a node imports other commands' modules:\n" + "\n".join(found[:10])


def test_the_rules_catch_what_they_are_about() -> None:
    """Both rules, on a run that imports what they forbid: kio straight away (so kio loads
    hypothesis itself), and one API's schema."""
    modules = startup_imports("import kio.schema.metadata.v8.request")
    assert "kio.static._phantom" in dev_only_packages(modules)[0]
    assert any(c.startswith("kio.schema.metadata.v8.request") for c in api_schemas(modules))
    assert not api_schemas(startup_imports("import kio.schema.errors, kio.schema.types"))
    eager = startup_imports("import minikafka.cli.main, minikafka.cli.cluster, minikafka.cli.demo")
    assert other_commands(eager)
