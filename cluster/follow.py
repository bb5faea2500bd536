"""Following node logs as they grow, like `tail -F`: `minikafka cluster logs --follow`.

A node's log rolls over by renaming `events.jsonl` to `events.jsonl.1` and opening a new
`events.jsonl` (minikafka/server/jsonl.py). A follower holds the file it opened: at each poll it
reads what was appended, and when the name has come to mean another file (a rotation, or a node
that was wiped and started again) it finishes the old one and then reads the new one from its
start. Only whole lines are returned; a line still being written waits for its newline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from minikafka.cluster.files import tail_lines
from minikafka.server.jsonl import jsonl_parts

POLL_S = 0.25


class FileFollower:
    """New whole lines of one log file, across rotations. Opened at the file's end (what is
    already there is for `backlog`); a file that does not exist yet is read from its start
    once it appears."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file: BinaryIO | None = None
        self._partial = b""
        self._open(at_end=True)
        self._opened_at = None if self._file is None else self._file.tell()

    def backlog(self, n: int) -> list[str]:
        """The last `n` lines written before this follower opened the file (rotated parts
        included), so that backlog then polls print every line once."""
        if n <= 0:
            return []
        if self._opened_at is None:
            return []
        out = tail_lines(self.path, n, end=self._opened_at)
        for part in reversed(jsonl_parts(self.path)[:-1]):
            if len(out) >= n:
                break
            out = tail_lines(part, n - len(out)) + out
        return out

    def poll(self) -> list[str]:
        """The whole lines appended since the last poll, following a rotation."""
        if self._file is None:
            self._open(at_end=False)
            if self._file is None:
                return []
        lines = self._read_lines()
        if self._replaced():
            lines += self._read_lines()  # the old file's last lines (written before the roll)
            self._file.close()
            self._file, self._partial = None, b""
            self._open(at_end=False)
            if self._file is not None:
                lines += self._read_lines()
        return lines

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self, *, at_end: bool) -> None:
        try:
            self._file = self.path.open("rb")
        except (FileNotFoundError, NotADirectoryError):
            self._file = None
            return
        if at_end:
            self._file.seek(0, os.SEEK_END)

    def _read_lines(self) -> list[str]:
        assert self._file is not None
        data = self._partial + self._file.read()
        *whole, self._partial = data.split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in whole]

    def _replaced(self) -> bool:
        """Whether the name now means another file (renamed away, deleted, or truncated)."""
        assert self._file is not None
        try:
            now = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return False  # rolled away and not created again yet: keep the old one for now
        mine = os.fstat(self._file.fileno())
        return (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev) or now.st_size < (
            self._file.tell() - len(self._partial)
        )


def follow(
    paths: Mapping[str, Path],
    *,
    backlog: int,
    sleep: Callable[[float], None],
    poll_s: float = POLL_S,
) -> Iterator[str]:
    """Lines of several logs as `"<label> <line>"`: first each one's last `backlog` lines,
    then new lines as they come, every `poll_s` seconds, until the caller stops iterating."""
    followers = {label: FileFollower(path) for label, path in paths.items()}
    try:
        for label, follower in followers.items():
            for line in follower.backlog(backlog):
                yield f"{label} {line}"
        while True:
            for label, follower in followers.items():
                for line in follower.poll():
                    yield f"{label} {line}"
            sleep(poll_s)
    finally:
        for follower in followers.values():
            follower.close()
