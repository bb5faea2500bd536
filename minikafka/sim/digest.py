"""One hash of a run folder's contents, to check that a seed replays byte for byte.

`folder_digest` hashes every file under the folder (its path relative to the folder, then its
bytes) in path order, with the folder's own absolute path written as "." first: a replay lands
in a folder of another name (`create_run_dir` adds a millisecond to a taken timestamp), and
results.json and the tool outputs name their folder. Nothing else is normalised, so anything
else that differs between two runs of one seed (a timestamp, an order, a count) shows.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def folder_digest(path: Path, *, exclude: tuple[str, ...] = ()) -> str:
    """SHA-256 of the folder (module docstring); `exclude`: relative paths (files or folders)
    left out."""
    root = path.absolute()
    own = str(root).encode()
    h = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = file.relative_to(root).as_posix()
        if any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in exclude):
            continue
        h.update(rel.encode() + b"\0")
        h.update(file.read_bytes().replace(own, b".") + b"\0")
    return h.hexdigest()


def differing_files(a: Path, b: Path) -> list[str]:
    """The relative paths whose normalised bytes differ between folders `a` and `b` (or that
    only one has): what to look at when two digests differ."""
    ra, rb = a.absolute(), b.absolute()

    def files(root: Path) -> dict[str, bytes]:
        own = str(root).encode()
        return {
            p.relative_to(root).as_posix(): p.read_bytes().replace(own, b".")
            for p in root.rglob("*")
            if p.is_file() and not p.is_symlink()
        }

    fa, fb = files(ra), files(rb)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
