"""The lock that makes one node the only user of its data dir.

A node takes an exclusive `fcntl.flock` on `<data_dir>/node.lock` before it touches anything
else there and holds it for its whole life. The OS drops the lock when the process ends, however
it ends (SIGKILL included), so a crashed node never leaves a stale lock behind. A second node on
the same data dir (say a mistyped `--data-dir`, or a node restarted while the old one still
runs) gets `DataDirInUse` at once and writes nothing: two writers on one LMDB environment would
interleave two logs, and the cluster would trust both.

The lock file holds the owner's pid, for the message only: the lock itself is the flock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from minikafka.errors import MiniKafkaError

LOCK_FILE = "node.lock"


class DataDirInUse(MiniKafkaError):
    """Another process holds the data dir's lock; nothing was written."""


class DataDirLock:
    """A held data-dir lock; `close()` (or the end of the process) releases it."""

    def __init__(self, file: IO[str], path: Path) -> None:
        self._file: IO[str] | None = file
        self.path = path

    @property
    def held(self) -> bool:
        return self._file is not None

    def close(self) -> None:
        """Release the lock (idempotent)."""
        if self._file is not None:
            self._file.close()  # closing the only descriptor drops the flock
            self._file = None

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def lock_data_dir(data_dir: Path | str) -> DataDirLock:
    """Take `data_dir`'s lock (creating the dir); `DataDirInUse` if another holder has it."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    # "a+": create without truncating, so a refused caller does not erase the holder's pid.
    file = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the node's life
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.seek(0)
        holder = file.read().strip() or "unknown"
        file.close()
        raise DataDirInUse(
            f"data dir {data_dir} is in use by another node (pid {holder}, lock {path}); "
            "stop that node or pass a different --data-dir"
        ) from None
    except BaseException:
        file.close()
        raise
    file.seek(0)
    file.truncate()
    file.write(f"{os.getpid()}\n")
    file.flush()
    return DataDirLock(file, path)
