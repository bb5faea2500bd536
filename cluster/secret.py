"""A local cluster's identity: its cluster id and the secret its nodes share.

`minikafka cluster up` makes both: the id goes into the cluster file and onto every node's
command line (`--set cluster.id=...`, not secret), the secret into `<base_dir>/cluster.secret`,
which every node is pointed at (`--set cluster.secret.file=...`) so that `ps` never shows it.
The file is created with mode 0600 (mkstemp's mode, before any byte is written, then renamed
into place), so it is never readable by anyone but its owner, not even briefly; a node refuses a
secret file open to group or others. Each `up` makes a fresh id and secret: nothing of an
earlier run's identity outlives it (nodes keep no cluster id on disk).
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from pathlib import Path

SECRET_FILE = "cluster.secret"
SECRET_BYTES = 32
_NOT_ID = re.compile(r"[^A-Za-z0-9._-]")


def secret_path(base_dir: Path) -> Path:
    return Path(base_dir) / SECRET_FILE


def new_cluster_id(name: str) -> str:
    """The cluster's name (for people reading logs) and 12 random hex digits."""
    stem = _NOT_ID.sub("-", name)[:80].lstrip("._-") or "cluster"
    return f"{stem}-{secrets.token_hex(6)}"


def write_cluster_secret(base_dir: Path) -> Path:
    """A fresh secret in `<base_dir>/cluster.secret`, mode 0600 from creation; its path."""
    path = secret_path(base_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{SECRET_FILE}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)  # mkstemp's mode already; said again, since it is the point
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(SECRET_BYTES) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_cluster_secret(base_dir: Path) -> None:
    secret_path(base_dir).unlink(missing_ok=True)
