"""Structure-aware fuzzing of the native listener's requests: generation and mutation.

Generation: hypothesis builds every request message of wire/messages.py's registry from its
annotations (ints across int64, mostly small; short strings and bytes; `records` fields a valid
RecordBatch v2 or raw bytes), and wire/codec.py's encoder packs it in the request envelope.

Mutation (`mutate_native(payload, rng)`), at both of the protocol's levels:
- msgpack's own lengths: `msgpack_lengths` walks a payload and returns every array, map, str
  and bin header (position, format byte, declared length), so a length can be set huge,
  off by one or zero, or widened to a 32-bit header that claims 4 GiB; the frame cut short;
  bytes flipped; reserved (0xc1) or ext type bytes put in.
- the messages' fields: the decoded tree is changed and packed again, a value replaced by
  another msgpack type, an int past int64, a string over the codec's cap, arrays nested deeper
  than the unpacker's stack, a list grown long, a required field removed, or a records field
  replaced by a malformed RecordBatch v2 (fuzz_batches.py).

Pure; a `random.Random` chooses (hypothesis's `st.randoms()` in tests).
"""

from __future__ import annotations

import dataclasses
import random
import struct
import types
import typing
from typing import Any

import msgpack
from hypothesis import strategies as st

from minikafka.testing.fuzz_batches import malformed_batch, valid_batch
from minikafka.wire.codec import RequestHeader, encode_request
from minikafka.wire.converters import MAX_STR_BYTES
from minikafka.wire.messages import API, SUPPORTED_VERSIONS

NATIVE_SERVED: list[type] = [request for request, _response in API.values()]
INT64 = 2**63

_ints = st.one_of(st.integers(-1, 100), st.integers(-INT64, INT64 - 1))


def _field(tp: Any, name: str) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return _ints
    if tp is str:
        return st.text(max_size=12)
    if tp is bytes:
        if name == "records":
            return st.one_of(
                st.randoms(use_true_random=False).map(valid_batch), st.binary(max_size=32)
            )
        return st.binary(max_size=32)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | _field(inner, name)
    if origin is list:
        return st.lists(_field(args[0], name), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), _field(args[1], name), max_size=3)
    if dataclasses.is_dataclass(tp):
        return message(tp)
    raise TypeError(f"no strategy for {tp!r}")


def message(cls: type) -> st.SearchStrategy[Any]:
    """Valid instances of one message dataclass."""
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{f.name: _field(hints[f.name], f.name) for f in dataclasses.fields(cls)})


def native_request(cls: type) -> st.SearchStrategy[bytes]:
    """Valid request payloads (no frame length) of one native request message."""
    from minikafka.wire.messages import API_KEY_OF

    key = API_KEY_OF[cls]
    lo, _hi = SUPPORTED_VERSIONS[key]

    def encode(body: object) -> bytes:
        header = RequestHeader(api_key=key, api_version=lo, correlation_id=7, client_id="fuzz")
        return encode_request(header, body)

    return message(cls).map(encode)


def native_requests() -> st.SearchStrategy[bytes]:
    return st.sampled_from(NATIVE_SERVED).flatmap(native_request)


# ---------------------------------------------------------------------------- msgpack lengths

# format byte -> (kind, width of the length after it); fix formats carry the length inside.
_SIZED = {
    0xC4: ("bin", 1), 0xC5: ("bin", 2), 0xC6: ("bin", 4),
    0xD9: ("str", 1), 0xDA: ("str", 2), 0xDB: ("str", 4),
    0xDC: ("array", 2), 0xDD: ("array", 4), 0xDE: ("map", 2), 0xDF: ("map", 4),
}  # fmt: skip
_FIXED = {0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MsgpackLength:
    kind: str  # array, map, str, bin
    at: int  # the format byte
    start: int  # the first byte after the header
    value: int


def msgpack_lengths(buf: bytes) -> list[MsgpackLength]:
    """Every container and str/bin header of a valid msgpack document (no ext types)."""
    found: list[MsgpackLength] = []
    _walk(buf, 0, found)
    return found


def _walk(buf: bytes, pos: int, found: list[MsgpackLength]) -> int:
    b = buf[pos]
    if b <= 0x7F or b >= 0xE0 or b in (0xC0, 0xC2, 0xC3):
        return pos + 1
    if b in _FIXED:
        return pos + 1 + _FIXED[b]
    if 0x80 <= b <= 0x9F:
        kind, n, start = ("map" if b < 0x90 else "array"), b & 0x0F, pos + 1
    elif 0xA0 <= b <= 0xBF:
        kind, n, start = "str", b & 0x1F, pos + 1
    else:
        kind, width = _SIZED[b]
        n, start = int.from_bytes(buf[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
    found.append(MsgpackLength(kind=kind, at=pos, start=start, value=n))
    if kind in ("str", "bin"):
        return start + n
    pos = start
    for _ in range(n * 2 if kind == "map" else n):
        pos = _walk(buf, pos, found)
    return pos


def _header(kind: str, n: int, wide: bool) -> bytes:
    n &= 0xFFFF_FFFF
    if kind == "bin":
        return b"\xc6" + struct.pack(">I", n)
    if wide or n > 0xFFFF:
        return bytes([{"str": 0xDB, "array": 0xDD, "map": 0xDF}[kind]]) + struct.pack(">I", n)
    return bytes([{"str": 0xDA, "array": 0xDC, "map": 0xDE}[kind]]) + struct.pack(">H", n)


def _msgpack_length(payload: bytes, rng: random.Random) -> bytes:
    h = rng.choice(msgpack_lengths(payload))
    n = rng.choice((0xFFFF_FFFF, 2**31, 0xFFFF, h.value + 1, h.value - 1, 0, len(payload)))
    return payload[: h.at] + _header(h.kind, n, rng.random() < 0.5) + payload[h.start :]


# ---------------------------------------------------------------------------- tree mutations


def _nodes(tree: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if type(tree) is list:
        for i, x in enumerate(tree):
            out += _nodes(x, (*path, i))
    elif type(tree) is dict:
        for k, x in tree.items():
            out += _nodes(x, (*path, k))
    return out


def _hostile_value(rng: random.Random) -> Any:
    return rng.choice(
        (
            None, True, 1.5, -INT64, 2**64 - 1, INT64, "x", b"x", [], {}, {1: 2},
            "é" * (MAX_STR_BYTES // 2 + 1), [0] * rng.randrange(1, 5000),
            msgpack.ExtType(1, b"abc"), [[]] * 2000, {str(i): i for i in range(300)},
        )
    )  # fmt: skip


_SPOT = b"\x00fuzz-spot\x00"  # a bin value replaced by raw bytes after packing


def _deep(depth: int, kind: str) -> bytes:
    """Arrays (or maps) nested `depth` deep, as bytes: msgpack's packer refuses to nest past
    its own limit, a hostile peer does not."""
    return (b"\x91" * depth if kind == "array" else b"\x81\xa1a" * depth) + b"\x00"


def _tree(payload: bytes, rng: random.Random) -> tuple[str, bytes] | None:
    tree = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    paths = [p for p in _nodes(tree) if p]
    path = rng.choice(paths)
    parent = tree
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    roll = rng.random()
    if any(p[-1] == "records" for p in paths) and rng.random() < 0.5:
        roll = 0.4  # the records field, where a produce's batches are read
    if type(parent) is dict and roll < 0.15:
        del parent[last]
        name = "tree_drop_field"
    elif roll < 0.3:
        parent[last] = _SPOT
        deep = _deep(rng.choice((100, 1000, 1100, 5000)), rng.choice(("array", "map")))
        spot = msgpack.packb(_SPOT)
        return "tree_nest", msgpack.packb(tree, use_bin_type=True).replace(spot, deep, 1)
    elif roll < 0.45:
        records = [p for p in paths if p[-1] == "records"]
        if not records:
            return None
        parent, last = tree, records[0][-1]
        for step in records[0][:-1]:
            parent = parent[step]
        parent[last] = malformed_batch(rng)[1]
        name = "tree_records"
    else:
        parent[last] = _hostile_value(rng)
        name = "tree_retype"
    return name, msgpack.packb(tree, use_bin_type=True)


def mutate_native(payload: bytes, rng: random.Random) -> tuple[str, bytes]:
    """(mutation name, mutated payload) of a valid native request payload."""
    for _ in range(8):
        roll = rng.random()
        if roll < 0.3:
            return "msgpack_length", _msgpack_length(payload, rng)
        if roll < 0.4:
            return "truncate", payload[: rng.randrange(1, len(payload))]
        if roll < 0.5:
            out = bytearray(payload)
            for _ in range(rng.randrange(1, 4)):
                i = rng.randrange(len(out))
                out[i] = rng.choice((0xC1, 0xC7, 0xD4, 0xDD, 0xDF, rng.randrange(256)))
            return "flip", bytes(out)
        if roll < 0.55:
            return "trailing", payload + rng.randbytes(rng.randrange(1, 9))
        done = _tree(payload, rng)
        if done is not None:
            return done
    return "trailing", payload + b"\xc0"
