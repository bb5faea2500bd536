"""What scale_bench.py reads from outside the nodes: CPU time and RSS of a process from /proc,
and the growth of a node's JSON-lines logs, rotated parts included.

Rules: nothing here talks to a node; every reading is a plain value taken at one instant, and
the figures are differences of two readings over a named window. Linux only (/proc).

- CPU: utime + stime of /proc/<pid>/stat (fields 14 and 15, clock ticks), which for a process
  sum all its threads (LMDB work runs in Trio's worker threads); children are not counted.
- RSS: VmRSS of /proc/<pid>/status.
- Logs: every `*.jsonl` file of a data dir and its rotated parts (`events.jsonl.1` ...,
  server/jsonl.py), keyed by inode. A roll renames files (the inode stays) and deletes the oldest
  part, so the bytes written over a window are, per inode alive at its end, its size then minus
  its size at the start (0 for a file created meanwhile): exact for append-only files, whatever
  rolled in between. The inode of the deleted oldest part is often reused at once for the fresh
  live file, so an inode is the same file only if it kept its log, moved up or stayed in the
  part order (`.jsonl` -> `.jsonl.1` -> ...) and did not shrink; else it counts as new.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PART = re.compile(r"^(?P<stem>[^.]+)\.jsonl(?:\.(?P<index>\d+))?$")


def parse_cpu_ticks(stat_text: str) -> int:
    """utime + stime from the text of /proc/<pid>/stat. The command name (field 2) is in
    parentheses and may hold spaces or parentheses, so fields are counted after the last ')'."""
    rest = stat_text[stat_text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): utime is field 14 -> rest[11], stime field 15 -> rest[12].
    return int(rest[11]) + int(rest[12])


def cpu_seconds(pid: int) -> float:
    return parse_cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) / CLOCK_TICKS


def parse_rss_bytes(status_text: str) -> int:
    """VmRSS from the text of /proc/<pid>/status (kB there), in bytes."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmRSS line (a zombie process?)")


def rss_bytes(pid: int) -> int:
    return parse_rss_bytes(Path(f"/proc/{pid}/status").read_text())


@dataclass(frozen=True, slots=True)
class LogFile:
    kind: str  # the file's stem: events, metrics, replicas ...
    size: int
    index: int = 0  # 0 for the live file, i for the rotated part `<kind>.jsonl.<i>`

    def may_be_later_of(self, earlier: LogFile) -> bool:
        """Could this be `earlier` some appends and renames later (server/jsonl.py's roll)?"""
        return (
            self.kind == earlier.kind and self.index >= earlier.index and self.size >= earlier.size
        )


def log_files(data_dir: Path) -> dict[tuple[int, int], LogFile]:
    """(device, inode) -> the JSON-lines log file (live or rotated) of a node's data dir."""
    out: dict[tuple[int, int], LogFile] = {}
    try:
        entries = list(os.scandir(data_dir))
    except OSError:
        return out
    for entry in entries:
        m = _PART.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # rotated away between the listing and the stat
        out[(st.st_dev, st.st_ino)] = LogFile(m["stem"], st.st_size, int(m["index"] or 0))
    return out


def log_growth(
    before: dict[tuple[int, int], LogFile], after: dict[tuple[int, int], LogFile]
) -> dict[str, int]:
    """Bytes written per log kind between two `log_files` readings (see the module docstring)."""
    grown: dict[str, int] = {}
    for key, f in after.items():
        old = before.get(key)
        start = old.size if old is not None and f.may_be_later_of(old) else 0
        grown[f.kind] = grown.get(f.kind, 0) + f.size - start
    return grown


@dataclass(frozen=True, slots=True)
class NodeReading:
    """One instant of one node process: CPU seconds so far, RSS, its log files."""

    at: float  # time.monotonic()
    cpu_s: float
    rss: int
    logs: dict[tuple[int, int], LogFile]


def read_node(pid: int, data_dir: Path, at: float) -> NodeReading:
    return NodeReading(at=at, cpu_s=cpu_seconds(pid), rss=rss_bytes(pid), logs=log_files(data_dir))


def idle_figures(before: NodeReading, after: NodeReading) -> dict[str, object]:
    """CPU % of one core, RSS at the end, and log bytes/s (in all and per kind) over the window."""
    window = after.at - before.at
    grown = log_growth(before.logs, after.logs)
    return {
        "window_s": round(window, 2),
        "cpu_pct": round(100 * (after.cpu_s - before.cpu_s) / window, 2),
        "rss_mb": round(after.rss / 1e6, 1),
        "log_bytes_per_s": round(sum(grown.values()) / window, 1),
        "log_bytes_per_s_by_kind": {k: round(v / window, 1) for k, v in sorted(grown.items())},
    }
