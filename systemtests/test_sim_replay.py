"""The KIP-73 matrix in simulated time replays byte for byte: every case that can be simulated
(systemtests/harness/sim_replay.py, a tenth of the quick profile's data) runs in two processes
at once, and each case's run folder must hash the same in both, and hold no error.

Both processes pin the hash seed, as `minikafka sim` does: the brokers' order of work within
one instant of simulated time follows set iteration, and so Python's per-process string hash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from systemtests.harness.sim_replay import SIMULATED

pytestmark = pytest.mark.system


def _start(out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    argv = [sys.executable, "-m", "systemtests.harness.sim_replay", str(out)]
    cwd = Path(__file__).resolve().parent.parent
    return subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, text=True)


def test_every_simulated_matrix_case_replays_byte_for_byte(tmp_path: Path) -> None:
    procs = [_start(tmp_path / "a"), _start(tmp_path / "b")]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    a, b = ({r["case"]: r for r in map(json.loads, out.splitlines())} for out in outs)
    assert sorted(a) == sorted(c.name for c in SIMULATED)
    assert {k: r["error"] for k, r in a.items() if r["error"]} == {}
    differ = [k for k in a if a[k]["digest"] != b[k]["digest"]]
    assert differ == [], f"not replayed byte for byte: {differ} (folders under {tmp_path})"
