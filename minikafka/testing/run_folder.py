"""The run folder: everything one system-test case or experiment leaves behind, in one place.

The PySpark analysis (tools/analysis) reads exactly this layout, and nothing else:

    RUN_DIR/
      case.json        what was run (`CaseInfo`): nodes, partitions, throttle, load, prediction,
                       and, optionally, how the analysis judges the move and the throttle
                       (absent: defaults):
                         predicted_move_alternatives_s   what the move may take instead of
                                             predicted_move_s, across a step of the quota
                                             algorithm: the duration is judged against the
                                             first prediction whose accepted ratios hold it
                                             (default: none)
                         throttle_window_s   span in whole seconds of the sliding windows (one
                                             starting every second) the throttled rate is
                                             averaged over (default: the analysis' 5 s)
                         throttle_bound_bytes_per_s   the largest acceptable windowed rate
                                             (default: 1.15 x throttle_bytes_per_s)
                         throttle_window_past_end   true: a window may run past the move's end,
                                             counting zero bytes after it (default false: windows
                                             end by the move's end)
                         throttle_judged     "move" (default: windows from 2 s after the move
                                             start) or "run" (from 2 s after the timeline's
                                             first throttle_set to the end of the node logs;
                                             a move only where the timeline logs one)
                         throttle_exempt_counted   false: in-sync replicas' bytes
                                             (`*_exempt_bytes`) are left out (default true)
                       (tools/analysis/runs.py `ThrottleCheck` is the reference for these rules)
      nodes/node-<id>/events.jsonl, metrics.jsonl   each node's own logs, copied at the end
                       (with replicas.jsonl and node.out), each with its rotated parts
                       `<name>.N` ... `<name>.1`, oldest first (minikafka/server/jsonl.py)
      clients/produced.jsonl   one line per acknowledged batch:
                               {"ts" (wall s, ack time), "topic", "partition", "offset" (base),
                                "count", "latency_ms"}
      clients/consumed.jsonl   one line per partition chunk read back:
                               {"ts", "topic", "partition", "offset" (first), "count"}
      timeline.jsonl   {"ts": wall s, "event": "throttle_set" | "move_start" | "move_end" |
                        "load_start" | "load_end" | ..., ...fields}
      tool/<name>.txt  the command line, exit code and output of every CLI tool run
      results.json     the verdicts (analysis report + acknowledged-writes checker + ISR)

Rules: timestamps are wall-clock seconds (`time.time()`), the only clock comparable across the
node processes and the test process (each node's metrics lines carry `ts` too; a simulated run
uses its own wall clock everywhere, sim/cluster.py `wall_clock`); JSON lines are
written whole and flushed per line, so a folder left by a crash is readable up to the crash;
`CaseInfo` checks the contract's types when it is built, so a malformed case.json is never
written, and writes the optional throttle fields only when they are set. Nothing is removed: a
folder is kept whether the run passes or fails.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from minikafka.errors import ConfigError
from minikafka.server.jsonl import jsonl_parts

THROTTLE_MODES = ("lists", "kip542")
THROTTLE_JUDGED = ("move", "run")
# The optional fields of how the move and the throttle are judged, and their defaults (written
# only when set).
OPTIONAL = {
    "predicted_move_alternatives_s": [],
    "throttle_window_s": None,
    "throttle_bound_bytes_per_s": None,
    "throttle_window_past_end": False,
    "throttle_judged": "move",
    "throttle_exempt_counted": True,
    "throttle_bounds_bytes_per_s": {},
    "throttle_wire_judged": False,
}
NODE_LOGS = ("events.jsonl", "metrics.jsonl", "replicas.jsonl", "node.out")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SENSOR = re.compile(r"[0-9]+ (leader|follower)")


def _ids(name: str, value: Sequence[int]) -> list[int]:
    if not isinstance(value, list | tuple) or any(
        isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value
    ):
        raise ConfigError(f"{name} {value!r}: expected a list of node ids (integers >= 0)")
    return [int(v) for v in value]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseInfo:
    """case.json. `extra` holds fields beyond the contract (written alongside, never needed)."""

    case: str
    seed: int
    nodes: Sequence[int]
    partitions: int
    replication_factor: int
    throttle_bytes_per_s: int | None
    # "lists" (KIP-73 replica lists) | "kip542" | None (with a throttle: both classes, e.g. a
    # KIP-1009 broker-wide throttle)
    throttle_mode: str | None
    receiving_brokers: Sequence[int]
    sending_brokers: Sequence[int]
    bytes_to_move: int
    produce_bytes_per_s: float
    predicted_move_s: float | None
    # What the move may take instead, across a step of the quota algorithm (the system tests
    # judge a run against the one its charges followed: systemtests/harness/verdicts.py).
    predicted_move_alternatives_s: Sequence[float] = ()
    throttle_window_s: int | None = None
    throttle_bound_bytes_per_s: float | None = None
    throttle_window_past_end: bool = False
    throttle_judged: str = "move"
    throttle_exempt_counted: bool = True
    # A sensor's own bound, "<node> <side>" -> B/s, where it differs from the case's bound.
    throttle_bounds_bytes_per_s: Mapping[str, float] = field(default_factory=dict)
    # Whether every replication byte on the judged brokers' wire is of the throttled class, so
    # the wire's windows are judged against the bound too (the analysis' `wire_violated`).
    throttle_wire_judged: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.case, str) or not _NAME.fullmatch(self.case):
            raise ConfigError(f"case {self.case!r}: expected a name of letters, digits, . _ -")
        for name in ("seed", "partitions", "replication_factor", "bytes_to_move"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{name} {v!r}: expected an integer >= 0")
        for name in ("nodes", "receiving_brokers", "sending_brokers"):
            object.__setattr__(self, name, _ids(name, getattr(self, name)))
        t = self.throttle_bytes_per_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ConfigError(f"throttle_bytes_per_s {t!r}: expected an integer >= 1 or None")
        if self.throttle_mode not in (*THROTTLE_MODES, None):
            raise ConfigError(
                f"throttle_mode {self.throttle_mode!r}: expected one of {THROTTLE_MODES} or None"
            )
        if t is None and self.throttle_mode is not None:
            raise ConfigError(f"throttle_mode {self.throttle_mode!r} needs throttle_bytes_per_s")
        self._check_judging()
        rate = self.produce_bytes_per_s
        if isinstance(rate, bool) or not isinstance(rate, int | float) or rate < 0:
            raise ConfigError(f"produce_bytes_per_s {rate!r}: expected a number >= 0")
        p = self.predicted_move_s
        if p is not None and (isinstance(p, bool) or not isinstance(p, int | float) or p <= 0):
            raise ConfigError(f"predicted_move_s {p!r}: expected a number > 0 or None")
        alts = self.predicted_move_alternatives_s
        if not isinstance(alts, list | tuple) or any(
            isinstance(a, bool) or not isinstance(a, int | float) or a <= 0 for a in alts
        ):
            raise ConfigError(
                f"predicted_move_alternatives_s {alts!r}: expected a list of numbers > 0"
            )
        if alts and p is None:
            raise ConfigError("predicted_move_alternatives_s needs predicted_move_s")
        object.__setattr__(self, "predicted_move_alternatives_s", tuple(alts))
        overlap = set(self.extra) & {f for f in self.__slots__ if f != "extra"}
        if overlap:
            raise ConfigError(f"extra fields {sorted(overlap)} would overwrite contract fields")

    def _check_judging(self) -> None:
        w = self.throttle_window_s
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            raise ConfigError(f"throttle_window_s {w!r}: expected whole seconds >= 1 or None")
        b = self.throttle_bound_bytes_per_s
        if b is not None and (isinstance(b, bool) or not isinstance(b, int | float) or b <= 0):
            raise ConfigError(f"throttle_bound_bytes_per_s {b!r}: expected B/s > 0 or None")
        bounds = self.throttle_bounds_bytes_per_s
        if not isinstance(bounds, Mapping) or any(
            not isinstance(k, str)
            or not _SENSOR.fullmatch(k)
            or isinstance(v, bool)
            or not isinstance(v, int | float)
            or v <= 0
            for k, v in bounds.items()
        ):
            raise ConfigError(
                f"throttle_bounds_bytes_per_s {bounds!r}: expected a map of "
                '"<node> leader|follower" to B/s > 0'
            )
        object.__setattr__(self, "throttle_bounds_bytes_per_s", dict(bounds))
        for name in ("throttle_window_past_end", "throttle_exempt_counted", "throttle_wire_judged"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} {getattr(self, name)!r}: expected true or false")
        if self.throttle_judged not in THROTTLE_JUDGED:
            raise ConfigError(
                f"throttle_judged {self.throttle_judged!r}: expected one of {THROTTLE_JUDGED}"
            )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        extra = out.pop("extra")
        out["produce_bytes_per_s"] = float(out["produce_bytes_per_s"])
        out["predicted_move_alternatives_s"] = list(out["predicted_move_alternatives_s"])
        for name, default in OPTIONAL.items():
            if out[name] == default:  # types checked above: no 0 taken for False
                del out[name]
        return out | dict(extra)


class JsonLines:
    """An append-only JSON-lines file, one flushed line per record; opened at the first write
    (so a folder opened again to add results.json touches nothing else), and again after close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None
        self.count = 0

    def write(self, record: Mapping[str, Any]) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8", buffering=1)
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.count += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class RunFolder:
    """Writer of one run folder (module docstring). Use as a context manager or call close()."""

    def __init__(self, path: Path | str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path).absolute()
        self.clock = clock  # the timestamps' wall clock: time.time, or a simulation's
        for sub in ("nodes", "clients", "tool"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        self.produced = JsonLines(self.path / "clients" / "produced.jsonl")
        self.consumed = JsonLines(self.path / "clients" / "consumed.jsonl")
        self._timeline = JsonLines(self.path / "timeline.jsonl")
        self._tool_runs = 0

    @classmethod
    def create(
        cls, base: Path | str, name: str, *, clock: Callable[[], float] = time.time
    ) -> RunFolder:
        """A new folder `base/name`, or `base/name-2`, `-3` ... if that one exists."""
        if not _NAME.fullmatch(name):
            raise ConfigError(f"run name {name!r}: expected letters, digits, . _ -")
        base = Path(base)
        base.mkdir(parents=True, exist_ok=True)
        path, n = base / name, 1
        while True:
            try:
                path.mkdir()
                break
            except FileExistsError:
                n += 1
                path = base / f"{name}-{n}"
        return cls(path, clock=clock)

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    # -- the files ------------------------------------------------------------------------

    def write_case(self, info: CaseInfo) -> Path:
        return self._write_json("case.json", info.to_json())

    def event(self, event: str, *, ts: float | None = None, **fields: Any) -> float:
        """Append a timeline line; returns its timestamp (now unless given)."""
        stamp = self.clock() if ts is None else ts
        self._timeline.write({"ts": round(stamp, 4), "event": event, **fields})
        return stamp

    def record_produced(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        count: int,
        latency_ms: float,
        ts: float | None = None,
        **extra: Any,
    ) -> None:
        """One acknowledged batch (`extra`: more fields, e.g. its bytes or the load phase)."""
        self.produced.write(
            {
                "ts": round(self.clock() if ts is None else ts, 4),
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "count": count,
                "latency_ms": round(latency_ms, 2),
                **extra,
            }
        )

    def record_consumed(
        self, *, topic: str, partition: int, offset: int, count: int, ts: float | None = None
    ) -> None:
        self.consumed.write(
            {
                "ts": round(self.clock() if ts is None else ts, 4),
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "count": count,
            }
        )

    def tool_output(
        self, name: str, *, argv: Sequence[str], returncode: int, stdout: str, stderr: str
    ) -> Path:
        """tool/<NN>-<name>.txt: the command, its exit code and output (NN: run order)."""
        if not _NAME.fullmatch(name):
            raise ConfigError(f"tool output name {name!r}: expected letters, digits, . _ -")
        self._tool_runs += 1
        path = self.path / "tool" / f"{self._tool_runs:02d}-{name}.txt"
        text = [
            "$ " + " ".join(_quote(a) for a in argv),
            f"# exit code {returncode}",
            stdout.rstrip("\n"),
        ]
        if stderr.strip():
            text += ["# stderr", stderr.rstrip("\n")]
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
        return path

    def collect_node_logs(self, node_dirs: Mapping[int, Path]) -> list[Path]:
        """Copy each node's logs (`NODE_LOGS`) with their rotated parts into nodes/node-<id>/,
        under the same names: the copies are bounded by the nodes' caps (`log.jsonl.max.bytes`
        x `log.jsonl.max.files` per log). Parts an earlier collection left that the node no
        longer has are removed, so that a collection made twice reads as the node's logs."""
        copied = []
        for node_id, data_dir in sorted(node_dirs.items()):
            dest = self.path / "nodes" / f"node-{node_id}"
            dest.mkdir(parents=True, exist_ok=True)
            for name in NODE_LOGS:
                parts = jsonl_parts(Path(data_dir) / name)
                kept = {p.name for p in parts}
                for stale in jsonl_parts(dest / name):
                    if stale.name not in kept:
                        stale.unlink()
                for src in parts:
                    copied.append(Path(shutil.copy2(src, dest / src.name)))
        return copied

    def write_results(self, results: Mapping[str, Any]) -> Path:
        return self._write_json("results.json", results)

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text(encoding="utf-8"))

    def close(self) -> None:
        for f in (self.produced, self.consumed, self._timeline):
            f.close()

    def _write_json(self, name: str, doc: Any) -> Path:
        path = self.path / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2, default=_jsonable) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """Every whole line of a JSON-lines file (a line cut short by a crash is skipped)."""
    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _quote(arg: str) -> str:
    return arg if arg and not re.search(r"[^\w@%+=:,./-]", arg) else "'" + arg + "'"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return sorted(value) if isinstance(value, set | frozenset) else list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
