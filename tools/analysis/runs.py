"""The run-folder contract the analysis reads, checked before Spark starts.

A run folder is what one system-test case or experiment leaves behind:

    RUN_DIR/
      case.json          what was asked: brokers, throttle and mode, who sends and receives,
                         bytes to move, target produce rate, predicted move time (and its
                         alternatives across a step of the quota algorithm, if any), and
                         optionally how the throttle is judged (`ThrottleCheck`)
      nodes/node-<id>/events.jsonl, nodes/node-<id>/metrics.jsonl   copies of each node's logs
                         (each with its rotated parts `<name>.N` ... `<name>.1`, all read)
      clients/produced.jsonl   one line per acknowledged batch: ts (ack time), latency_ms, ...
      clients/consumed.jsonl   (optional, not read)
      timeline.jsonl     what the driver did and when: throttle_set, move_start, move_end, ...

Only `case.json` (with a string "case") and at least one `nodes/*/metrics.jsonl` are required;
the rest is optional and the report says so by nulls. Bad input is a `ConfigError` with one
line naming the folder, what is wrong and what is accepted (bad user input is one line and
changes nothing, everywhere in minikafka); nothing is read past the first bad folder.

A local folder named literally is checked here, on the driver, before Spark starts
(`load_run`); the case.json of a pattern or a remote folder is read through Spark and checked by
the same rules (`case_from_text`; tools/analysis/sources.py says which is which). The log files
a run's `RunCase` lists are never found here: Spark lists them (inputs.list_logs) and
`with_logs` fills them in.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from minikafka.errors import ConfigError
from minikafka.server.jsonl import jsonl_parts
from minikafka.tools.analysis.sources import LogFiles, RunSource, parse_source

THROTTLE_MODES = ("lists", "kip542")
JUDGED = ("move", "run")  # ThrottleCheck.judged
SENSOR = re.compile(r"([0-9]+) (leader|follower)")  # a key of throttle_bounds_bytes_per_s
SENSOR_BOUNDS = 'a map "<node> leader|follower" -> B/s (a number > 0), e.g. {"1 leader": 1.2e7}'
LAYOUT = (
    "case.json, nodes/node-<id>/metrics.jsonl and events.jsonl, "
    "clients/produced.jsonl, timeline.jsonl"
)
NO_RUN_DIR = "no run folder given: pass one or more RUN_DIRs (each holding case.json)"
NO_METRICS = f"no nodes/node-<id>/metrics.jsonl (a run folder holds {LAYOUT})"
NOT_LOCAL = "is not a local folder: name a report folder on this machine (--out DIR)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Params:
    """The thresholds of the verdict (issue text; KIP-73 test plan,
    docs/throttling.md#the-operators-arithmetic).
    A case.json may set its own window span and bound (`ThrottleCheck`); these are the defaults."""

    window_s: int = 5  # span of the sliding windows (1 s slide) the throttled rate is averaged over
    window_skip_s: int = 2  # windows start this long after the move start (the first burst)
    violation_factor: float = 1.15  # a window above factor x throttle violates it
    duration_ratio_min: float = 0.9  # accepted move duration / predicted_move_s
    duration_ratio_max: float = 1.2


@dataclass(frozen=True, slots=True, kw_only=True)
class ThrottleCheck:
    """How one case's throttle is judged: its case.json's optional fields, defaults filled in.

    - `window_s` (case.json `throttle_window_s`, whole seconds, default `Params.window_s`): the
      span of the sliding windows; they start on every whole second (a 1 s slide).
    - `bound_bytes_per_s` (`throttle_bound_bytes_per_s`, default `Params.violation_factor` x
      `throttle_bytes_per_s`): a window whose mean rate is above it violates the throttle; None
      (no throttle, no bound) judges nothing.
    - `past_end` (`throttle_window_past_end`, default false): windows of a move may run past its
      end, counting zero bytes after it (a window longer than a short move); by default they end
      by the move's end.
    - `judged` (`throttle_judged`, default "move"): when windows may lie. "move": from
      `Params.window_skip_s` after the move start to its end. "run": from `window_skip_s` after
      the throttle was set (the timeline's first `throttle_set`, else each node's first metrics
      second) to the end of each node's logs, for runs throttled all along (the experiments);
      such a case's move is only the timeline's, never inferred. Either way the follower side of `receiving_brokers` and the leader side of
      `sending_brokers` are judged.
    - `exempt_counted` (`throttle_exempt_counted`, default true): whether in-sync replicas' bytes
      (`*_exempt_bytes`: counted by the quota, KAFKA-4313, never held back) count; false judges
      only the bytes the throttle could hold back.
    - `sensor_bounds` (`throttle_bounds_bytes_per_s`, default none): a judged side's own bound,
      "<node> <side>" -> B/s (each of Kafka's quota sensors, ReplicationQuotaManager, is one
      broker's leader or follower side, and their predicted rates differ); a side with an entry
      is judged against it, the others against `bound_bytes_per_s` (`bound_for`).
    - `wire_judged` (`throttle_wire_judged`, default false): whether the record bytes on the
      wire (in-sync replicas' share inside, which cannot be told apart there) are judged
      against the same bound too, beside the bytes the quota counted.
    """

    window_s: int
    bound_bytes_per_s: float | None
    past_end: bool
    judged: str
    exempt_counted: bool
    sensor_bounds: Mapping[tuple[int, str], float]
    wire_judged: bool

    def sensor_bound(self, node: int, side: str) -> float | None:
        """The side's own bound, None where case.json gives none."""
        return self.sensor_bounds.get((node, side))

    def bound_for(self, node: int, side: str) -> float | None:
        """The bound a judged side's windows are judged against: its own, else the case's."""
        own = self.sensor_bound(node, side)
        return own if own is not None else self.bound_bytes_per_s

    def describe(self) -> dict[str, Any]:
        """The case's fields in the report (the values used, defaults filled in)."""
        return {
            "throttle_window_s": self.window_s,
            "throttle_bound_bytes_per_s": self.bound_bytes_per_s,
            "throttle_window_past_end": self.past_end,
            "throttle_judged": self.judged,
            "throttle_exempt_counted": self.exempt_counted,
            "throttle_bounds_bytes_per_s": {
                f"{node} {side}": bound for (node, side), bound in sorted(self.sensor_bounds.items())
            },
            "throttle_wire_judged": self.wire_judged,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCase:
    """One run folder: its case.json, and the log files Spark listed in it (Hadoop paths)."""

    run_dir: Path | None  # the local folder (file: runs), None for a remote one
    uri: str  # the folder as a Spark path (file:/abs/path, hdfs://..., s3a://...)
    key: str  # the folder as Spark names it: the absolute path for file: (no symlinks resolved)
    case: str
    seed: int | None
    nodes: tuple[int, ...]
    partitions: int | None
    replication_factor: int | None
    throttle_bytes_per_s: int | None
    throttle_mode: str | None
    receiving_brokers: tuple[int, ...]
    sending_brokers: tuple[int, ...]
    bytes_to_move: int
    produce_bytes_per_s: float
    predicted_move_s: float | None
    # across a step of the quota algorithm (run_folder.CaseInfo): judged against as well
    predicted_move_alternatives_s: tuple[float, ...]
    throttle_window_s: int | None  # None: Params.window_s (ThrottleCheck says how they apply)
    throttle_bound_bytes_per_s: float | None  # None: Params.violation_factor x throttle
    throttle_window_past_end: bool
    throttle_judged: str
    throttle_exempt_counted: bool
    # (node, side, B/s): the sensors' own bounds (ThrottleCheck.sensor_bounds)
    throttle_bounds_bytes_per_s: tuple[tuple[int, str, float], ...] = ()
    throttle_wire_judged: bool = False
    metrics_files: tuple[str, ...] = ()  # filled in from Spark's listing (`with_logs`)
    events_files: tuple[str, ...] = ()
    produced_file: str | None = None
    timeline_file: str | None = None
    log_bytes: int = 0  # size of the metrics, events and produced logs

    def describe(self) -> dict[str, Any]:
        """The case.json fields as they appear in the report."""
        return {
            "case": self.case,
            "run_dir": self.key,
            "seed": self.seed,
            "nodes": list(self.nodes),
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "throttle_bytes_per_s": self.throttle_bytes_per_s,
            "throttle_mode": self.throttle_mode,
            "receiving_brokers": list(self.receiving_brokers),
            "sending_brokers": list(self.sending_brokers),
            "bytes_to_move": self.bytes_to_move,
            "produce_bytes_per_s": self.produce_bytes_per_s,
            "predicted_move_s": self.predicted_move_s,
            "predicted_move_alternatives_s": list(self.predicted_move_alternatives_s),
        }

    def throttle_check(self, params: Params) -> ThrottleCheck:
        bound = self.throttle_bound_bytes_per_s
        if bound is None and self.throttle_bytes_per_s is not None:
            bound = params.violation_factor * self.throttle_bytes_per_s
        return ThrottleCheck(
            window_s=self.throttle_window_s or params.window_s,
            bound_bytes_per_s=bound,
            past_end=self.throttle_window_past_end,
            judged=self.throttle_judged,
            exempt_counted=self.throttle_exempt_counted,
            sensor_bounds={(n, side): b for n, side, b in self.throttle_bounds_bytes_per_s},
            wire_judged=self.throttle_wire_judged,
        )


def load_runs(run_dirs: Sequence[str | os.PathLike[str]]) -> list[RunCase]:
    """Every local folder checked and loaded, in the order given (a folder named twice counts
    once); a pattern or a remote folder is refused (only Spark reads those: inputs.find_runs)."""
    if not run_dirs:
        raise ConfigError(NO_RUN_DIR)
    runs: dict[str, RunCase] = {}
    for d in run_dirs:
        source = parse_source(os.fspath(d))
        if not source.checked_here:
            raise ConfigError(f"{d}: not a local folder; Spark reads it (analyze, not load_runs)")
        run = load_run(d)
        runs.setdefault(run.key, run)
    return list(runs.values())


def precheck(sources: Sequence[RunSource], *, out_given: bool) -> dict[str, RunCase]:
    """What the driver checks before Spark starts: some RUN_DIR, every local folder named
    literally (`load_run`, by argument), and a report folder (--out) if a run is remote (the
    report is written on this machine)."""
    if not sources:
        raise ConfigError(NO_RUN_DIR)
    checked = {s.arg: load_run(s.arg) for s in sources if s.checked_here}
    remote = next((s for s in sources if s.local is None), None)
    if remote is not None and not out_given:
        raise ConfigError(f"{remote.arg} {NOT_LOCAL}")
    return checked


def load_run(run_dir: str | os.PathLike[str]) -> RunCase:
    """A local run folder (a path or a file: URI), checked on the driver: its case.json read and
    checked, some nodes/*/metrics.jsonl present. Its log files are left for Spark to list."""
    source = parse_source(os.fspath(run_dir))
    path = source.local
    if path is None or not path.is_dir():
        raise ConfigError(f"{run_dir}: not a folder (expected a run folder holding {LAYOUT})")
    if not any(path.iterdir()):
        raise ConfigError(f"{run_dir}: empty folder (expected a run folder holding {LAYOUT})")
    case_file = path / "case.json"
    if not case_file.is_file():
        inner = sorted(p.parent.name for p in path.glob("*/case.json"))
        if inner:  # a folder of runs: name them
            raise ConfigError(
                f"{run_dir}: no case.json, but it holds run folders ({', '.join(inner[:3])}"
                f"{', ...' if len(inner) > 3 else ''}): pass those, e.g. '{run_dir}/*'"
            )
        raise ConfigError(f"{run_dir}: no case.json (a run folder holds {LAYOUT})")
    try:
        text = case_file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{case_file}: not valid JSON ({exc})") from None
    run = case_from_text(text, key=str(path), uri=source.uri, run_dir=path)
    if not any(p.is_file() for d in path.glob("nodes/*") for p in jsonl_parts(d / "metrics.jsonl")):
        # a pre-check only: what Spark reads, it lists itself
        raise ConfigError(f"{run_dir}: {NO_METRICS}")
    return run


def case_from_text(text: str, *, key: str, uri: str, run_dir: Path | None) -> RunCase:
    """A run from its case.json's text (read here, or through Spark), checked (one line)."""
    where = f"{key}/case.json"
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a JSON object with at least a string 'case'")
    return RunCase(run_dir=run_dir, uri=uri, key=key, **_case_fields(raw, where))


def with_logs(run: RunCase, logs: LogFiles) -> RunCase:
    """The run with the log files Spark listed; refused without a metrics log."""
    if not logs.metrics:
        raise ConfigError(f"{run.key}: {NO_METRICS}")
    return replace(
        run,
        metrics_files=logs.metrics,
        events_files=logs.events,
        produced_file=logs.produced,
        timeline_file=logs.timeline,
        log_bytes=logs.size,
    )


def _case_fields(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    def get(name: str, kinds: tuple[type, ...], default: Any, accepted: str) -> Any:
        value = raw.get(name, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise ConfigError(f"{where}: '{name}' is {value!r}; expected {accepted}")
        return value

    def ids(name: str) -> tuple[int, ...]:
        value = raw.get(name) or []
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"{where}: '{name}' is {value!r}; expected a list of node ids")
        return tuple(value)

    def flag(name: str, default: bool) -> bool:
        value = raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: '{name}' is {value!r}; expected true, false or null")
        return value

    case = raw.get("case")
    if not isinstance(case, str) or not case:
        raise ConfigError(f"{where}: 'case' is {case!r}; expected the case name (a string)")
    mode = raw.get("throttle_mode")
    if mode is not None and mode not in THROTTLE_MODES:
        raise ConfigError(f"{where}: 'throttle_mode' is {mode!r}; expected lists, kip542 or null")
    predicted = get("predicted_move_s", (int, float), None, "seconds (a number) or null")
    alternatives = raw.get("predicted_move_alternatives_s") or []
    if not isinstance(alternatives, list) or any(
        isinstance(a, bool) or not isinstance(a, int | float) or a <= 0 for a in alternatives
    ):
        raise ConfigError(
            f"{where}: 'predicted_move_alternatives_s' is {alternatives!r}; "
            "expected a list of seconds (numbers > 0)"
        )
    window = get("throttle_window_s", (int,), None, "whole seconds (an integer >= 1) or null")
    if window is not None and window < 1:
        raise ConfigError(f"{where}: 'throttle_window_s' is {window!r}; expected an integer >= 1")
    bound = get("throttle_bound_bytes_per_s", (int, float), None, "B/s (a number > 0) or null")
    if bound is not None and bound <= 0:
        raise ConfigError(f"{where}: 'throttle_bound_bytes_per_s' is {bound!r}; expected > 0")
    judged = raw.get("throttle_judged") or "move"
    if judged not in JUDGED:
        raise ConfigError(f"{where}: 'throttle_judged' is {judged!r}; expected move or run")
    return {
        "case": case,
        "seed": get("seed", (int,), None, "an integer"),
        "nodes": ids("nodes"),
        "partitions": get("partitions", (int,), None, "an integer"),
        "replication_factor": get("replication_factor", (int,), None, "an integer"),
        "throttle_bytes_per_s": _int(
            get("throttle_bytes_per_s", (int, float), None, "B/s or null")
        ),
        "throttle_mode": mode,
        "receiving_brokers": ids("receiving_brokers"),
        "sending_brokers": ids("sending_brokers"),
        "bytes_to_move": _int(get("bytes_to_move", (int, float), 0, "bytes (a number)")),
        "produce_bytes_per_s": float(get("produce_bytes_per_s", (int, float), 0.0, "B/s")),
        "predicted_move_s": float(predicted) if predicted is not None else None,
        "predicted_move_alternatives_s": tuple(float(a) for a in alternatives),
        "throttle_window_s": window,
        "throttle_bound_bytes_per_s": float(bound) if bound is not None else None,
        "throttle_window_past_end": flag("throttle_window_past_end", False),
        "throttle_judged": judged,
        "throttle_exempt_counted": flag("throttle_exempt_counted", True),
        "throttle_bounds_bytes_per_s": _sensor_bounds(raw.get("throttle_bounds_bytes_per_s"), where),
        "throttle_wire_judged": flag("throttle_wire_judged", False),
    }


def _sensor_bounds(value: Any, where: str) -> tuple[tuple[int, str, float], ...]:
    """case.json's `throttle_bounds_bytes_per_s` (null: none), checked: (node, side, B/s)."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{where}: 'throttle_bounds_bytes_per_s' is {value!r}; expected {SENSOR_BOUNDS}"
        )
    out = []
    for key, bound in value.items():
        sensor = SENSOR.fullmatch(key)
        number = isinstance(bound, int | float) and not isinstance(bound, bool)
        if sensor is None or not number or not math.isfinite(bound) or bound <= 0:
            raise ConfigError(
                f"{where}: 'throttle_bounds_bytes_per_s' has {key!r}: {bound!r}; "
                f"expected {SENSOR_BOUNDS}"
            )
        out.append((int(sensor[1]), sensor[2], float(bound)))
    return tuple(sorted(out))


def _int(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def default_out_dir(runs: Sequence[RunCase]) -> Path:
    """RUN_DIR/analysis for one run; the runs' common parent folder's analysis/ for many. The
    report is written by the driver, so a remote run has no default: --out is needed."""
    local = [r.run_dir for r in runs if r.run_dir is not None]
    if len(local) < len(runs):
        remote = next(r.key for r in runs if r.run_dir is None)
        raise ConfigError(f"{remote} {NOT_LOCAL}")
    if len(local) == 1:
        return local[0] / "analysis"
    return Path(os.path.commonpath([str(d) for d in local])) / "analysis"


def slugs(runs: Sequence[RunCase]) -> dict[str, str]:
    """A file-name-safe, unique name per run (its case name; -2, -3 ... on a clash)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for r in runs:
        if r.key in out:
            continue
        base = "".join(c if c.isalnum() or c in "-_." else "_" for c in r.case) or "case"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        out[r.key] = name
    return out
