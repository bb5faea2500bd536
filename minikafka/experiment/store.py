"""Where experiment runs are kept: Jepsen's store layout, and what makes a folder a run.

    OUT/                              (default runs/experiments)
      latest -> NAME/TIMESTAMP        the run started last, of any experiment
      NAME/                           one experiment (a catalog variant, or `custom`)
        latest -> TIMESTAMP           its run started last
        TIMESTAMP/                    one run folder (below)

TIMESTAMP is the run's start in UTC to the millisecond, in Jepsen's form (`20261125T013000.123Z`),
so the runs of an experiment sort in the order they started; two runs started in the same
millisecond get the next free one (mkdir is the claim, so two processes never share a folder).
The links are relative (the tree can be moved or copied) and updated when a run starts, as
Jepsen's store does, so `latest` is the run in progress; each is replaced atomically, a new link
under a temporary name renamed over the old one (os.replace), so a reader never finds it missing.

A run folder is `minikafka.testing.run_folder`'s layout plus the experiment's own files:
experiment.json (the spec, `ExperimentSpec.to_json`), history.jsonl (every op, Jepsen's format;
its first op, the nemesis schedule, carries `started_at`, the wall-clock time the history's
`time` counts from), nemesis.jsonl, replica_dumps.jsonl (each replica's log read from disk after
the cluster stopped, when it settled), report/report.json (the PySpark analysis), results.json
(the verdict) and, if the harness crashed, crash.txt (the traceback). `REQUIRED` are the files
without which a folder is not a run `minikafka experiment check` can judge.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from minikafka.errors import ConfigError

REQUIRED = ("experiment.json", "history.jsonl")
LATEST = "latest"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_STAMP = "%Y%m%dT%H%M%S"


class NotARunError(ConfigError):
    """FOLDER given to `experiment check` is not an experiment run folder (one line: what lacks)."""


def timestamp(wall_s: float) -> str:
    """`20261125T013000.123Z`: UTC to the millisecond, Jepsen's form, sortable as text."""
    ms = int(round(wall_s * 1000))
    return datetime.fromtimestamp(ms // 1000, UTC).strftime(_STAMP) + f".{ms % 1000:03d}Z"


def create_run_dir(base: Path | str, name: str, *, now: float | None = None) -> Path:
    """A new, empty `base/name/TIMESTAMP/` (module docstring), with both `latest` links
    pointing at it."""
    if not _NAME.fullmatch(name) or name == LATEST:
        raise ConfigError(f"experiment name {name!r}: expected letters, digits, . _ - (not latest)")
    parent = Path(base) / name
    parent.mkdir(parents=True, exist_ok=True)
    ms = int(round((time.time() if now is None else now) * 1000))
    while True:
        path = parent / timestamp(ms / 1000)
        try:
            path.mkdir()
            break
        except FileExistsError:
            ms += 1
    link(parent / LATEST, path.name)
    link(Path(base) / LATEST, f"{name}/{path.name}")
    return path.absolute()


def link(at: Path, target: str) -> None:
    """Point the symlink `at` to `target` (relative to its folder), replacing it atomically."""
    tmp = at.with_name(f".{at.name}.{os.getpid()}.{time.monotonic_ns()}")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, at)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def run_dir(folder: Path | str) -> Path:
    """The run folder FOLDER names (a `latest` link is followed), or NotARunError saying what
    is missing."""
    given = Path(folder)
    if not given.exists():
        raise NotARunError(f"{given}: no such folder")
    path = given.resolve()
    if not path.is_dir():
        raise NotARunError(f"{given}: not a folder (expected a run folder of `experiment run`)")
    missing = [name for name in REQUIRED if not (path / name).is_file()]
    if missing:
        hint = ""
        if (path / LATEST).exists():
            hint = f"; its latest run is {given / LATEST}"
        raise NotARunError(
            f"{given}: not an experiment run folder: no {' or '.join(missing)} (a folder of "
            f"`minikafka experiment run` holds {' and '.join(REQUIRED)}){hint}"
        )
    return path
