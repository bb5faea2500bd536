"""Where the analysis reads from: RUN_DIR arguments as Spark paths, and the run-folder layout of
the files Spark lists. Pure (no Spark, no file access), so every rule is a plain unit test.

A RUN_DIR is a plain path or a URI that Spark's Hadoop file systems read: `file:` (and a plain
path, made absolute and turned into `file:/abs/path`), `hdfs://`, `s3a://` (where the cluster
has the connector: hadoop-aws on the classpath), or any other scheme Spark knows. It is one of:

- a **local folder** (a plain path or a `file:` URI naming an existing folder): checked on this
  machine before Spark starts (runs.load_run: case.json present and valid, some metrics logs),
  so a typo costs one line, exit 2, no JVM. Its name is taken literally (a `[` or `*` in it is
  escaped before Spark sees it).
- a **pattern** (`*`, `?`, `[...]`, `{a,b}`: Hadoop's glob): expanded by Spark, never by Python
  on the driver. The run folders are the folders it matches that hold a case.json (matches
  without one, such as a report's `analysis/` folder beside the runs, are not runs); none: the
  argument is refused.
- a **remote folder** (any other URI): its case.json is read through Spark.

Whatever the kind, the log files are listed by Spark (inputs.list_logs), and `classify`
below sorts the listing into each run's files. A run's `key` is its folder as Spark spells it
(the path for `file:`, else the URI, %-escapes decoded): the `run_dir` of the report, and what
every log line is joined on (`LAYOUT_PATTERN`, the same pattern in Python and in Spark's SQL).

Why file: paths and not the driver's own reads: on a cluster the executors open the files, so a
`file:` folder must be visible at the same path on every worker (a shared file system, or
workers on this machine); hdfs:// and s3a:// need no such thing. Only the report (--out) is
written by the driver, on this machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

GLOB_CHARS = frozenset("*?[]{}")  # Hadoop's GlobPattern; `\` escapes one of them
_URI = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|file:)")  # hdfs://..., s3a://..., file:/...
# file:/x, file:///x, file://localhost/x: the path /x
_FILE_URI = re.compile(r"^file:(?://(?:localhost)?)?(?=/)")

# A log file's path inside its run folder: the run folder is what comes before. Java and Python
# read this pattern alike (Spark's regexp_extract names each line's run with it).
LAYOUT_PATTERN = r"^(.*)/(nodes/[^/]+/[^/]+|clients/[^/]+|timeline\.jsonl)$"
_LAYOUT = re.compile(LAYOUT_PATTERN)
_NODE_LOG = re.compile(
    r"^nodes/(?P<node>[^/]+)/(?P<name>metrics|events)\.jsonl(?:\.(?P<i>[1-9]\d*))?$"
)
PRODUCED = "clients/produced.jsonl"
TIMELINE = "timeline.jsonl"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSource:
    """One RUN_DIR argument, as Spark will read it."""

    arg: str  # as given
    uri: str  # the folder or pattern as a Spark path: file:/abs/path for local paths
    local: Path | None  # the local folder (absolute), for file: sources; None for remote ones
    pattern: bool  # holds glob characters: Spark expands it

    @property
    def checked_here(self) -> bool:
        """A local folder named literally: checked on the driver before Spark starts."""
        return self.local is not None and not self.pattern

    def case_json_path(self) -> str:
        """What Spark reads to find this source's case.json files."""
        base = self.uri if self.pattern else glob_escape(self.uri)
        return f"{base.rstrip('/')}/case.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Listed:
    """One file as Spark listed it: `key` its path as LAYOUT_PATTERN reads it (%-escapes decoded, no
    file: scheme), `path` the Hadoop path to read it by, `size` in bytes."""

    key: str
    path: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFiles:
    """A run folder's logs, as Hadoop paths (glob characters escaped, ready for Spark)."""

    metrics: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    produced: str | None = None
    timeline: str | None = None
    size: int = 0  # bytes of metrics, events and produced logs (what the shuffles carry)


def is_uri(arg: str) -> bool:
    return bool(_URI.match(arg))


def is_pattern(text: str) -> bool:
    """Whether Hadoop's glob would expand `text` (an unescaped glob character)."""
    escaped = False
    for c in text:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in GLOB_CHARS:
            return True
    return False


def glob_escape(path: str) -> str:
    """`path` with Hadoop's glob characters escaped, so that Spark reads it literally."""
    return "".join(f"\\{c}" if c in GLOB_CHARS or c == "\\" else c for c in path)


def local_path(uri: str) -> str | None:
    """The path of a file: URI (`file:/x`, `file:///x`, `file://localhost/x`), else None. The
    rest is taken as Hadoop's Path takes it: literally, no %-decoding."""
    m = _FILE_URI.match(uri)
    return uri[m.end() :] if m else None


def parse_source(arg: str, *, exists: bool | None = None) -> RunSource:
    """A RUN_DIR argument as a RunSource. `exists`: whether the local path exists (asked of the
    file system when None): an existing folder is literal even if its name has glob characters."""
    text = os.fspath(arg)
    path = local_path(text) if is_uri(text) else text
    if path is None:  # hdfs://, s3a:// ...: Spark's to read, as given
        return RunSource(
            arg=text, uri=text.rstrip("/") or text, local=None, pattern=is_pattern(text)
        )
    local = Path(os.path.abspath(path))
    if exists is None:
        exists = local.exists()
    return RunSource(
        arg=text, uri=f"file:{local}", local=local, pattern=not exists and is_pattern(path)
    )


def parse_sources(args: Iterable[str | os.PathLike[str]]) -> list[RunSource]:
    return [parse_source(os.fspath(a)) for a in args]


def run_key_of(file_key: str) -> str | None:
    """The run folder of a log file (LAYOUT_PATTERN), or None for a file outside the layout."""
    m = _LAYOUT.match(file_key)
    return m[1] if m else None


def classify(files: Iterable[Listed], keys: Sequence[str]) -> dict[str, LogFiles]:
    """Each run's logs among the listed files: per node (in name order) its metrics and events
    logs with their rotated parts oldest first (`name.N` ... `name.1`, `name`, as
    minikafka/server/jsonl.py `jsonl_parts` reads them), clients/produced.jsonl and
    timeline.jsonl. Files of other runs, or outside the layout (a report's analysis/), are
    left out; a run without files gets an empty LogFiles."""
    wanted = set(keys)
    node_logs: dict[str, dict[str, list[tuple[str, int, str]]]] = {k: {} for k in wanted}
    single: dict[str, dict[str, str]] = {k: {} for k in wanted}
    sizes = dict.fromkeys(wanted, 0)
    for f in files:
        run = run_key_of(f.key)
        if run not in wanted:
            continue
        rel = f.key[len(run) + 1 :]
        m = _NODE_LOG.match(rel)
        if m:
            part = -int(m["i"]) if m["i"] else 0  # oldest (highest index) first, live file last
            node_logs[run].setdefault(m["name"], []).append((m["node"], part, glob_escape(f.path)))
            sizes[run] += f.size
        elif rel in (PRODUCED, TIMELINE):
            single[run][rel] = glob_escape(f.path)
            sizes[run] += f.size if rel == PRODUCED else 0
    out = {}
    for run in wanted:
        logs = {name: tuple(p for *_, p in sorted(parts)) for name, parts in node_logs[run].items()}
        out[run] = LogFiles(
            metrics=logs.get("metrics", ()),
            events=logs.get("events", ()),
            produced=single[run].get(PRODUCED),
            timeline=single[run].get(TIMELINE),
            size=sizes[run],
        )
    return out
