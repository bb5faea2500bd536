"""The input format of a fault-injection experiment: the history and the replica dumps.

The history is Jepsen's: one JSON object per line, each an *op* with `index` (strictly
increasing), `time` (seconds since the run started), `process`, `type` (invoke | ok | fail |
info) and `f` (send | poll | final-read | seek). A process is sequential: its invoke is followed,
as that process's next op, by its completion (ok: it happened; fail: it definitely did not;
info: nobody knows). An invoke still open at the end is indeterminate, as if completed with info.
So a process never has two invokes open: a runner reading partitions concurrently uses one
process per partition. A `seek` is a lone info op a consumer writes when it repositions on
purpose; it may not interrupt an outstanding invoke. The final read is an invoke/completion pair
like the others; a partition may be final-read again after a fail/info, the last ok one counts.

Fields by op (a completion inherits topic, partition and values from its invoke; if it repeats
them they must match):

  send        invoke: topic, partition, values (non-empty list of ints)
              ok: offset (base: values[i] is at offset + i)     fail/info: error
  poll        invoke: topic, partition, offset (the fetch offset asked for)
              ok: records [[offset, value], ...]                 fail/info: error
  final-read  invoke: topic, partition
              ok: records, log_end_offset[, log_start_offset]  fail/info: error
  seek        info: topic, partition, offset

Values are unique across the whole history (the workload never resends a value); the checker
keys everything by value, so a reused value is rejected here rather than misjudged there.
Unknown extra keys are ignored, so the runner may add its own (node, latency, ...). Ops of the
process `nemesis` (`schedule`, `start-fault`, `end-fault`, `heal`) record the faults; the
checker skips them.

Everything malformed raises `HistoryError` with one line naming the place and the field. Nothing
here does I/O except `load_jsonl` / `load_history`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from minikafka.errors import MiniKafkaError

__all__ = [
    "History",
    "HistoryError",
    "Op",
    "Operation",
    "ReplicaDump",
    "load_history",
    "load_jsonl",
    "parse_dumps",
    "parse_history",
    "parse_op",
]

VALUE = dict(frozen=True, slots=True, kw_only=True)
TYPES = ("invoke", "ok", "fail", "info")
FUNCTIONS = ("send", "poll", "final-read", "seek")
NEMESIS = "nemesis"  # the process whose info ops record the faults (skipped by the checker)
Record = tuple[int, int]  # (offset, value)
TP = tuple[str, int]  # (topic, partition)


class HistoryError(MiniKafkaError, ValueError):
    """An experiment input is malformed; the one-line message names the place and the field."""


# ----------------------------------------------------------------------------- field readers
# Shared with invariants.py. `where` is the place for the message ("history line 4 (index 3)").

_MISSING = object()


def _bad(where: str, key: str, expected: str, value: Any) -> HistoryError:
    got = "nothing" if value is _MISSING else repr(value)
    return HistoryError(f"{where}: field {key!r} must be {expected}, got {got[:60]}")


def _is_int(v: Any) -> bool:
    return type(v) is int  # JSON true is a bool, not 1


def field_int(doc: Mapping[str, Any], key: str, where: str, *, minimum: int | None = 0) -> int:
    v = doc.get(key, _MISSING)
    if type(v) is not int or (minimum is not None and v < minimum):
        raise _bad(where, key, "an int" + (f" >= {minimum}" if minimum is not None else ""), v)
    return v


def field_number(doc: Mapping[str, Any], key: str, where: str, *, positive: bool = False) -> float:
    v = doc.get(key, _MISSING)
    ok = (_is_int(v) or isinstance(v, float)) and math.isfinite(v) and (not positive or v > 0)
    if not ok:
        raise _bad(where, key, "a finite number" + (" > 0" if positive else ""), v)
    return float(v)


def field_str(doc: Mapping[str, Any], key: str, where: str) -> str:
    v = doc.get(key, _MISSING)
    if type(v) is not str or not v:
        raise _bad(where, key, "a non-empty string", v)
    return v


def field_bool(doc: Mapping[str, Any], key: str, where: str) -> bool:
    v = doc.get(key, _MISSING)
    if not isinstance(v, bool):
        raise _bad(where, key, "true or false", v)
    return v


def field_ints(
    doc: Mapping[str, Any], key: str, where: str, *, nonempty: bool = False
) -> tuple[int, ...]:
    v = doc.get(key, _MISSING)
    # set(map(type, ...)) keeps the per-item work in C: histories carry a million values
    if type(v) is not list or (nonempty and not v) or not set(map(type, v)) <= {int}:
        raise _bad(where, key, ("a non-empty " if nonempty else "a ") + "list of ints", v)
    return tuple(v)


def field_records(doc: Mapping[str, Any], key: str, where: str) -> tuple[Record, ...]:
    v = doc.get(key, _MISSING)
    if type(v) is list and set(map(type, v)) <= {list} and set(map(len, v)) <= {2}:
        out = tuple(map(tuple, v))
        if set(map(type, chain.from_iterable(out))) <= {int} and (not out or min(out)[0] >= 0):
            return out  # type: ignore[return-value]
    raise _bad(where, key, "a list of [offset, value] int pairs, offsets >= 0", v)


def require_object(doc: Any, where: str) -> Mapping[str, Any]:
    if type(doc) is not dict and not isinstance(doc, Mapping):  # the ABC check is slow
        raise HistoryError(f"{where}: expected a JSON object, got {repr(doc)[:60]}")
    return doc


# ---------------------------------------------------------------------------------------- ops


@dataclass(**VALUE)
class Op:
    index: int
    time: float
    process: str
    type: str
    f: str
    topic: str | None = None
    partition: int | None = None
    values: tuple[int, ...] | None = None
    offset: int | None = None  # send ok: base offset; poll invoke and seek: the fetch offset
    records: tuple[Record, ...] | None = None
    log_end_offset: int | None = None
    # final read ok: where the partition's log started when it was read (retention and
    # DeleteRecords remove what is below it); absent in older histories: 0
    log_start_offset: int | None = None
    error: str | None = None
    # "history line 4 (index 3)", for messages; not part of the op's value
    where: str = field(default="", compare=False, repr=False)


@dataclass(**VALUE)
class Operation:
    """An invoke and its completion (None: never completed, which counts as info)."""

    invoke: Op
    completion: Op | None

    @property
    def index(self) -> int:
        return self.invoke.index

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def process(self) -> str:
        return self.invoke.process

    @property
    def tp(self) -> TP:
        return (self.invoke.topic, self.invoke.partition)  # type: ignore[return-value]

    @property
    def type(self) -> str:
        return "info" if self.completion is None else self.completion.type

    @property
    def values(self) -> tuple[int, ...]:
        return self.invoke.values or ()

    @property
    def base_offset(self) -> int | None:
        return self.completion.offset if self.f == "send" and self.type == "ok" else None  # type: ignore[union-attr]

    @property
    def fetch_offset(self) -> int | None:
        return self.invoke.offset

    @property
    def records(self) -> tuple[Record, ...]:
        return (self.completion.records or ()) if self.completion is not None else ()

    @property
    def error(self) -> str | None:
        return "no completion" if self.completion is None else self.completion.error


@dataclass(**VALUE)
class History:
    ops: tuple[Op, ...]
    operations: tuple[Operation, ...]  # in invoke order
    seeks: tuple[Op, ...]


def parse_op(doc: Any, where: str = "op") -> Op:
    """One op from its JSON object; HistoryError naming `where` and the field if malformed."""
    doc = require_object(doc, where)
    index = field_int(doc, "index", where)
    where = f"{where} (index {index})"
    process = doc.get("process")
    if _is_int(process):
        process = str(process)  # Jepsen numbers its processes
    kw: dict[str, Any] = {
        "index": index,
        "time": field_number(doc, "time", where),
        "process": field_str({"process": process}, "process", where),
        "where": where,
    }
    type_, f = doc.get("type"), doc.get("f")
    if type_ not in TYPES:
        raise _bad(where, "type", " | ".join(TYPES), type_)
    if f not in FUNCTIONS:
        raise _bad(where, "f", " | ".join(FUNCTIONS), f)
    kw.update(type=type_, f=f)
    invoke = type_ == "invoke" or f == "seek"
    if f == "seek" and type_ != "info":
        raise _bad(where, "type", "'info' for a seek", type_)
    if invoke or "topic" in doc or "partition" in doc:
        kw.update(
            topic=field_str(doc, "topic", where), partition=field_int(doc, "partition", where)
        )
    if f == "send" and (invoke or "values" in doc):
        kw["values"] = field_ints(doc, "values", where, nonempty=True)
    if (f in ("poll", "seek") and invoke) or (f == "send" and type_ == "ok"):
        kw["offset"] = field_int(doc, "offset", where)
    if type_ == "ok" and f in ("poll", "final-read"):
        kw["records"] = field_records(doc, "records", where)
    if type_ == "ok" and f == "final-read":
        kw["log_end_offset"] = field_int(doc, "log_end_offset", where)
        if "log_start_offset" in doc:
            kw["log_start_offset"] = field_int(doc, "log_start_offset", where)
    if type_ in ("fail", "info") and f != "seek":
        kw["error"] = field_str(doc, "error", where)
    return Op(**kw)


def parse_history(docs: Iterable[Any], *, source: str = "history") -> History:
    """Parse and pair a history: the ops in order, `source` naming it in messages. The ops of
    process `nemesis` (the fault schedule, each fault's start and end: Jepsen's nemesis ops) are
    the run's record of what was done to the cluster, not client ops: they are skipped here."""
    ops = tuple(
        parse_op(doc, f"{source} line {n}")
        for n, doc in enumerate(docs, 1)
        if not (isinstance(doc, Mapping) and doc.get("process") == NEMESIS)
    )
    return _pair(ops)


def _pair(ops: tuple[Op, ...]) -> History:
    slots: list[Operation] = []
    open_: dict[str, tuple[int, Op]] = {}  # process -> (slot, its outstanding invoke)
    sent_at: dict[int, int] = {}  # value -> index of the send that carried it
    seeks: list[Op] = []
    previous = -1
    for op in ops:
        if op.index <= previous:
            raise _bad(op.where, "index", f"greater than the previous op's {previous}", op.index)
        previous = op.index
        pending = open_.get(op.process)
        if op.f == "seek":
            if pending is not None:
                raise HistoryError(
                    f"{op.where}: seek while index {pending[1].index} is outstanding"
                )
            seeks.append(op)
        elif op.type == "invoke":
            if pending is not None:
                raise HistoryError(
                    f"{op.where}: second invoke of process {op.process!r} while index "
                    f"{pending[1].index} is outstanding"
                )
            values = op.values or ()
            if len(set(values)) < len(values) or not sent_at.keys().isdisjoint(values):
                _reused_value(op, sent_at)
            sent_at.update(dict.fromkeys(values, op.index))
            open_[op.process] = (len(slots), op)
            slots.append(Operation(invoke=op, completion=None))
        else:
            if pending is None:
                raise HistoryError(f"{op.where}: {op.type} completion without an invoke")
            _check_matches(pending[1], op)
            del open_[op.process]
            slots[pending[0]] = Operation(invoke=pending[1], completion=op)
    return History(ops=ops, operations=tuple(slots), seeks=tuple(seeks))


def _reused_value(op: Op, sent_at: dict[int, int]) -> None:
    seen: set[int] = set()
    for v in op.values or ():
        if v in sent_at or v in seen:
            said = "twice" if v in seen else f"already sent at index {sent_at[v]}"
            raise HistoryError(f"{op.where}: field 'values': value {v} {said}")
        seen.add(v)


def _check_matches(invoke: Op, completion: Op) -> None:
    if completion.f != invoke.f:
        raise _bad(completion.where, "f", f"{invoke.f!r} like its invoke", completion.f)
    for key in ("topic", "partition", "values"):
        mine = getattr(completion, key)
        if mine is not None and mine != getattr(invoke, key):
            raise _bad(completion.where, key, f"{getattr(invoke, key)!r} like its invoke", mine)


# ------------------------------------------------------------------------------ replica dumps


@dataclass(**VALUE)
class ReplicaDump:
    """One replica's own log, read from its disk after settle."""

    node: int
    topic: str
    partition: int
    high_watermark: int
    log_end_offset: int
    records: tuple[Record, ...]

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


def parse_dumps(docs: Iterable[Any], *, source: str = "replica dumps") -> tuple[ReplicaDump, ...]:
    out: list[ReplicaDump] = []
    seen: set[tuple[int, str, int]] = set()
    for n, doc in enumerate(docs, 1):
        where = f"{source} line {n}"
        doc = require_object(doc, where)
        d = ReplicaDump(
            node=field_int(doc, "node", where),
            topic=field_str(doc, "topic", where),
            partition=field_int(doc, "partition", where),
            high_watermark=field_int(doc, "high_watermark", where),
            log_end_offset=field_int(doc, "log_end_offset", where),
            records=field_records(doc, "records", where),
        )
        if (d.node, d.topic, d.partition) in seen:
            raise HistoryError(f"{where}: node {d.node} dumped {d.topic}/{d.partition} twice")
        seen.add((d.node, d.topic, d.partition))
        out.append(d)
    return tuple(out)


# ----------------------------------------------------------------------------------------- I/O


def load_jsonl(path: str | Path) -> list[Any]:
    """The JSON values of a JSON-lines file; HistoryError naming file and line if one is not
    JSON. A blank line is an error too: skipping it would shift every later line number."""
    path = Path(path)
    out: list[Any] = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                raise HistoryError(
                    f"{path.name} line {n}: blank line (expected one JSON object per line)"
                )
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise HistoryError(f"{path.name} line {n}: not JSON ({e.msg})") from None
    return out


def load_history(path: str | Path) -> History:
    return parse_history(load_jsonl(path), source=Path(path).name)
