"""Fixtures shared by the test modules."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# hypothesis before any test module loads kio: kio registers its types' strategies (the
# property tests' st.from_type) only when hypothesis is already imported by then, since
# minikafka.kafka loads kio without it otherwise (minikafka/kafka/__init__.py).
import hypothesis  # noqa: F401
import pytest


@pytest.fixture(scope="session")
def analysis_ready() -> None:
    """Skips the test unless the analysis can run here (Java 17+, the [analysis] extra): what
    `minikafka analyze` checks before anything else (tests/tools/test_java_check.py tests the
    check)."""
    from minikafka.tools.analysis.environment import AnalysisUnavailable, require_analysis

    try:
        require_analysis()
    except AnalysisUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for every `spark` test of the run, stopped at its end: a JVM's
    start costs 15-40 s here, once per module before."""
    from minikafka.tools.analysis import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.fixture
def clean_history() -> Callable[[Path], None]:
    """Writes an experiment's clean history.jsonl into a run folder: one value sent,
    acknowledged and read back (the checker finds nothing; the tests judge what else)."""

    def write(run_dir: Path) -> None:
        tp = {"topic": "exp", "partition": 0}
        ops = [
            {"process": "p0", "type": "invoke", "f": "send", **tp, "values": [1]},
            {"process": "p0", "type": "ok", "f": "send", **tp, "offset": 0},
            {"process": "final-0", "type": "invoke", "f": "final-read", **tp},
            {"process": "final-0", "type": "ok", "f": "final-read", **tp, "records": [[0, 1]],
             "log_end_offset": 1},
        ]  # fmt: skip
        lines = [json.dumps({"index": i, "time": i / 10, **op}) for i, op in enumerate(ops)]
        (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n")

    return write
