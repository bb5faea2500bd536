"""An append-only JSON-lines file of a node (`events.jsonl`, `metrics.jsonl`, `replicas.jsonl`)
whose failures never stop the node.

These files are the input of the analysis, not part of the replicated state: a full disk or a
removed directory must cost lines, not the broker. So a write that raises OSError is dropped and
counted (the `log_write_errors_<kind>` counter of the node's Metrics, `kind` being the file's
stem), the first failure of each file is reported once on stderr, and the file is reopened at
the next write (a partial line may be left behind; readers skip a line that does not parse).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Protocol


class Counters(Protocol):
    """Where the write errors are counted (the node's Metrics; a protocol, so that metrics.py,
    which writes through this file, is not imported back)."""

    def inc(self, name: str, amount: int = 1) -> None: ...


class JsonlFile:
    def __init__(self, path: Path, *, metrics: Counters | None = None) -> None:
        self.path = path
        self.kind = path.stem
        self.metrics = metrics
        self.write_errors = 0
        self._file: IO[str] | None = None
        if metrics is not None:
            metrics.inc(self.counter, 0)  # present (as 0) from the first snapshot on
        self._open()  # the file exists from the start, as readers expect

    def _open(self) -> None:
        try:
            self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        except OSError as exc:
            self._failed(exc)

    @property
    def counter(self) -> str:
        return f"log_write_errors_{self.kind}"

    def write_line(self, line: str) -> bool:
        """Append `line` and a newline; False (counted, reported once) if the write failed."""
        if self._file is None:
            self._open()
            if self._file is None:
                return False
        try:
            self._file.write(line + "\n")
        except OSError as exc:
            self._failed(exc)
            return False
        return True

    def _failed(self, exc: OSError) -> None:
        self.write_errors += 1
        if self.metrics is not None:
            self.metrics.inc(self.counter)
        if self.write_errors == 1:
            print(
                f"minikafka: cannot write {self.path} ({exc}); lines are dropped and counted "
                f"in {self.counter}, the node goes on",
                file=sys.stderr,
                flush=True,
            )
        self._drop()

    def _drop(self) -> None:
        """Close the file, discarding what its buffer still holds; reopened at the next write."""
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        self._drop()
