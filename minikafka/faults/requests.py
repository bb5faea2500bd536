"""The fault proxy's control protocol, pure: JSON lines in, validated requests out.

One JSON object per line, one reply object per line. Requests (`op` plus fields):

    {"op": "show"}                                  every link: faults and counters
    {"op": "set", "links": [[1, 2], [2, 1]], "latency_ms": 100}
                                                    any of blocked, latency_ms, bandwidth_bps;
                                                    null restores the default (healthy)
    {"op": "partition", "groups": [[1], [2, 3]]}    block every link between groups, both ways
    {"op": "heal"}                                  clear every fault on every link
    {"op": "reset", "links": [[1, 2]]}              close the link's current connections

A request is checked whole before anything is applied: a bad one gets
`{"ok": false, "error": "<one line>"}` and changes nothing (like a ConfigError from the CLI).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.errors import ConfigError
from minikafka.faults.links import LinkId

MAX_LINE_BYTES = 64 * 1024
MAX_LATENCY_MS = 600_000
MAX_BANDWIDTH_BPS = 1 << 40
FAULT_FIELDS = ("blocked", "latency_ms", "bandwidth_bps")
OPS: dict[str, tuple[str, ...]] = {
    "show": (),
    "set": ("links", *FAULT_FIELDS),
    "partition": ("groups",),
    "heal": (),
    "reset": ("links",),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Show:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class SetFaults:
    links: tuple[LinkId, ...]
    changes: Mapping[str, Any]  # Faults field -> value, None = default


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Heal:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Reset:
    links: tuple[LinkId, ...]


Request = Show | SetFaults | Partition | Heal | Reset


def decode_line(line: bytes) -> dict[str, Any]:
    """One request line -> a JSON object; ConfigError if it is not one."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"a request must be one JSON object per line ({e})") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"a request must be a JSON object, got {type(obj).__name__}")
    return obj


def parse_request(obj: Mapping[str, Any], links: Collection[LinkId]) -> Request:
    """Validate one request against the proxy's links; ConfigError (one line) if it is bad."""
    op = obj.get("op")
    if op not in OPS:
        raise ConfigError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    unknown = sorted(set(obj) - {"op", *OPS[op]})
    if unknown:
        accepted = ", ".join(OPS[op]) or "nothing"
        raise ConfigError(f"op {op} does not take {', '.join(unknown)} (it takes {accepted})")
    match op:
        case "show":
            return Show()
        case "heal":
            return Heal()
        case "reset":
            return Reset(links=_links(obj, links))
        case "partition":
            return Partition(groups=_groups(obj.get("groups"), links))
    changes = {name: _fault_value(name, obj[name]) for name in FAULT_FIELDS if name in obj}
    if not changes:
        raise ConfigError(f"op set needs at least one of {', '.join(FAULT_FIELDS)}")
    return SetFaults(links=_links(obj, links), changes=changes)


def _links(obj: Mapping[str, Any], known: Collection[LinkId]) -> tuple[LinkId, ...]:
    items = obj.get("links")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"links must be a non-empty list of [src, dst] pairs, got {items!r}")
    out: list[LinkId] = []
    for item in items:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in item)
        ):
            raise ConfigError(f"a link is a [src, dst] pair of node ids, got {item!r}")
        link = (item[0], item[1])
        if link not in known:
            raise ConfigError(f"no link {link[0]}->{link[1]}; links: {_describe(known)}")
        if link not in out:
            out.append(link)
    return tuple(out)


def _groups(groups: Any, known: Collection[LinkId]) -> tuple[tuple[int, ...], ...]:
    shape = "groups must be a list of at least two non-empty lists of node ids"
    if not isinstance(groups, list) or len(groups) < 2:
        raise ConfigError(f"{shape}, got {groups!r}")
    nodes = {n for link in known for n in link}
    seen: set[int] = set()
    out = []
    for group in groups:
        if not isinstance(group, list) or not group:
            raise ConfigError(f"{shape}, got {groups!r}")
        for node in group:
            if isinstance(node, bool) or not isinstance(node, int):
                raise ConfigError(f"{shape}, got {groups!r}")
            if node not in nodes:
                raise ConfigError(f"no node {node}; nodes: {', '.join(map(str, sorted(nodes)))}")
            if node in seen:
                raise ConfigError(f"node {node} is in two groups")
            seen.add(node)
        out.append(tuple(group))
    return tuple(out)


def _fault_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == "blocked":
        if not isinstance(value, bool):
            raise ConfigError(f"blocked must be true, false or null, got {value!r}")
        return value
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if name == "latency_ms":
        if not is_int or not 0 <= value <= MAX_LATENCY_MS:
            raise ConfigError(
                f"latency_ms must be an integer from 0 to {MAX_LATENCY_MS} or null, got {value!r}"
            )
        return value
    if not is_int or not 1 <= value <= MAX_BANDWIDTH_BPS:
        raise ConfigError(
            f"bandwidth_bps must be a positive integer (bytes per second) or null for no cap, "
            f"got {value!r}"
        )
    return value


def _describe(links: Collection[LinkId]) -> str:
    return ", ".join(f"{s}->{d}" for s, d in sorted(links)) or "none"
