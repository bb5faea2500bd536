"""An append-only JSON-lines file of a node (`events.jsonl`, `metrics.jsonl`, `replicas.jsonl`)
whose failures never stop the node, and which never grows without bound.

These files are the input of the analysis, not part of the replicated state: a full disk or a
removed directory must cost lines, not the broker. So a write that raises OSError is dropped and
counted (the `log_write_errors_<kind>` counter of the node's Metrics, `kind` being the file's
stem), the first failure of each file is reported once on stderr, and the file is reopened at
the next write (a partial line may be left behind; readers skip a line that does not parse).

Rotation, as log4j's RollingFileAppender under Kafka's `log4j.properties` (`MaxFileSize`,
`MaxBackupIndex`): before a line that would take the file past `max_bytes`, the file is renamed
`<name>.1`, the older parts shift up (`.1` -> `.2` ...) and the oldest is deleted, so a log is
at most `max_files` files (the live one included) of about `max_bytes` each. A line is never
split across files: it goes whole into the fresh file (one longer than the cap makes a file of
its own). The size is tracked, not stat'ed, so a write costs O(1); only a roll lists the dir.
A failed rename or delete counts like a failed write and the node goes on; if the live file
itself cannot be moved away, the line is dropped rather than let the file pass its cap, and the
roll is tried again at the next line. `jsonl_parts` gives readers every part, oldest first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

MiB = 1024 * 1024


class Counters(Protocol):
    """Where the write errors are counted (the node's Metrics; a protocol, so that metrics.py,
    which writes through this file, is not imported back)."""

    def inc(self, name: str, amount: int = 1) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Rotation:
    """The caps of one log (NodeConfig's `log.jsonl.max.bytes` and `log.jsonl.max.files`)."""

    max_bytes: int = 100 * MiB  # log4j's MaxFileSize in Kafka's own config
    max_files: int = 5  # the live file and its rotated parts (log4j's MaxBackupIndex + 1)


DEFAULT_ROTATION = Rotation()


# ---------------------------------------------------------------------------- pure rules


def must_roll(size: int, line_bytes: int, max_bytes: int) -> bool:
    """Whether a line of `line_bytes` goes to a fresh file: it would take a non-empty file past
    the cap. An empty file takes any line, so a line is never split nor dropped for its size."""
    return size > 0 and size + line_bytes > max_bytes


def roll_steps(
    path: Path, backups: Iterable[int], max_files: int
) -> list[tuple[Path, Path | None]]:
    """The renames `(src, dst)` and deletions `(src, None)` that roll `path` over, in order,
    given the indexes of its existing rotated parts (`path.<i>`).

    Parts at or past index max_files - 1 are deleted (the oldest, and any a larger earlier
    setting left), the others shift up one, highest first so that nothing is overwritten, and
    `path` becomes `path.1` (with max_files 1 there are no parts: `path` is deleted)."""
    last = max_files - 1  # the highest index kept after the roll
    existing = sorted(set(backups), reverse=True)
    steps: list[tuple[Path, Path | None]] = [(_part(path, i), None) for i in existing if i >= last]
    steps += [(_part(path, i), _part(path, i + 1)) for i in existing if i < last]
    steps.append((path, _part(path, 1) if last >= 1 else None))
    return steps


def _part(path: Path, index: int) -> Path:
    return path.with_name(f"{path.name}.{index}")


def backup_indexes(path: Path) -> list[int]:
    """The indexes of `path`'s rotated parts on disk (`events.jsonl.3` -> 3), in no order."""
    prefix = path.name + "."
    try:
        names = os.listdir(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names:
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest.isascii() and rest.isdigit() and rest[0] != "0":
            out.append(int(rest))
    return out


def jsonl_parts(path: Path | str) -> list[Path]:
    """Every regular file of the log `path`, oldest first: `path.N` ... `path.1`, `path`: what
    every reader of a node log reads instead of `path` alone (lines in order across them). A
    roll between this listing and the reads shifts the names: read logs of a stopped node, or
    accept a duplicated or missed part."""
    path = Path(path)
    parts = [_part(path, i) for i in sorted(backup_indexes(path), reverse=True)]
    return [p for p in [*parts, path] if p.is_file()]


# ---------------------------------------------------------------------------- the writer


class JsonlFile:
    def __init__(
        self, path: Path, *, metrics: Counters | None = None, rotation: Rotation = DEFAULT_ROTATION
    ) -> None:
        self.path = path
        self.kind = path.stem
        self.metrics = metrics
        self.rotation = rotation
        self.write_errors = 0  # failed writes, renames and deletes
        self._file: IO[str] | None = None
        self._size = 0  # bytes in the live file, tracked from its size at open
        if metrics is not None:
            metrics.inc(self.counter, 0)  # present (as 0) from the first snapshot on
        self._open()  # the file exists from the start, as readers expect

    def _open(self) -> None:
        try:
            self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            self._size = os.fstat(self._file.fileno()).st_size  # a restart appends to it
        except OSError as exc:
            self._failed(exc, "write")

    @property
    def counter(self) -> str:
        return f"log_write_errors_{self.kind}"

    def starts_part(self, line_bytes: int) -> bool:
        """Whether a line of `line_bytes` would be the first of a file: the live file is empty,
        or the line would roll it. A writer whose lines depend on earlier ones (replicas.jsonl's
        deltas) writes a whole snapshot there instead, so every part reads on its own."""
        if self._file is None or self._size == 0:
            return True
        return must_roll(self._size, line_bytes, self.rotation.max_bytes)

    def write_line(self, line: str) -> bool:
        """Append `line` and a newline, rolling the file first if it would pass its cap; False
        (counted, reported once) if the line was dropped."""
        data = line + "\n"
        size = len(data) if data.isascii() else len(data.encode("utf-8"))
        if self._file is None:
            self._open()
            if self._file is None:
                return False
        if must_roll(self._size, size, self.rotation.max_bytes) and not self._roll():
            return False
        assert self._file is not None
        try:
            self._file.write(data)
        except OSError as exc:
            self._failed(exc, "write")
            return False
        self._size += size
        return True

    def _roll(self) -> bool:
        """Close the live file, shift the parts (module docstring) and open a fresh file; False
        if the live file could not be moved away (it stays closed, retried at the next line)."""
        self._drop()  # flushes: every whole line stays in the part it was written to
        for src, dst in roll_steps(self.path, backup_indexes(self.path), self.rotation.max_files):
            try:
                if dst is None:
                    src.unlink()
                else:
                    os.replace(src, dst)
            except FileNotFoundError:
                continue  # gone already (removed by hand): nothing to move out of the way
            except OSError as exc:
                self._count(exc, "rotate")
                if src == self.path:
                    return False
        self._open()
        return self._file is not None

    def _count(self, exc: OSError, what: str) -> None:
        self.write_errors += 1
        if self.metrics is not None:
            self.metrics.inc(self.counter)
        if self.write_errors == 1:
            print(
                f"minikafka: cannot {what} {self.path} ({exc}); failures are counted in "
                f"{self.counter}, a line that cannot be written is dropped, the node goes on",
                file=sys.stderr,
                flush=True,
            )

    def _failed(self, exc: OSError, what: str) -> None:
        self._count(exc, what)
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
