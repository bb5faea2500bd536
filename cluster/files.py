"""Small file helpers for the launcher: atomic JSON writes, tolerant JSON reads, log tails.

Readers of a file another process is writing never see half of it: writers go through a
temporary file in the same directory and `os.replace`, the same contract nodes follow for
`node.json`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from minikafka.server.jsonl import jsonl_parts

_TAIL_CHUNK = 8192


def atomic_write_json(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` so readers see either the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def strictly_inside(path: Path, base: Path) -> bool:
    """Whether `path` lies inside `base` and is not `base` itself, symlinks and `..` resolved."""
    real, real_base = Path(path).resolve(), Path(base).resolve()
    return real != real_base and real.is_relative_to(real_base)


def read_json(path: Path) -> Any | None:
    """The parsed JSON in `path`, or None if it is missing or not (yet) valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def tail_lines(path: Path, n: int, start: int = 0, end: int | None = None) -> list[str]:
    """The last `n` lines of a text file between byte `start` and `end` (default: its end),
    without newlines; [] if none.

    Reads backwards in chunks, so tailing a large metrics log costs only its last few KiB.
    """
    if n <= 0:
        return []
    try:
        f = path.open("rb")
    except (FileNotFoundError, NotADirectoryError):
        return []
    with f:
        f.seek(0, os.SEEK_END)
        pos = f.tell() if end is None else min(end, f.tell())
        data = b""
        while pos > start and data.count(b"\n") <= n:
            step = min(_TAIL_CHUNK, pos - start)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-n:]


def tail_log(path: Path, n: int) -> list[str]:
    """The last `n` lines of a node log across its rotated parts (minikafka/server/jsonl.py):
    a file that has just rolled over holds few lines, the rest are in `<name>.1` and older."""
    out: list[str] = []
    for part in reversed(jsonl_parts(path)):
        if len(out) >= n:
            break
        out = tail_lines(part, n - len(out)) + out
    return out
