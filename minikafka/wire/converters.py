"""The field-by-field converters: a message dataclass to a msgpack-ready map and back.

Each annotation of a message dataclass (wire/messages.py) compiles, once per class, to a pair
(encode, decode) of one-argument functions, cached by class: no reflection per message. The
codec (wire/codec.py) handles the envelopes and msgpack itself and calls `encode_message` and
`decode_message` for the bodies.

Rules (wire/codec.py's docstring has the whole protocol):
- Types are strict when decoding: an `int` field rejects bool and float and must fit in int64,
  `str` and `bytes` are not interchangeable, `X | None` accepts nil; unknown fields are ignored,
  missing fields with a default get it, missing required ones are errors. Lists are capped at
  `MAX_LIST_LEN` items, maps at `MAX_MAP_LEN` entries, strings at `MAX_STR_BYTES` bytes.
- Encoding is a little more lenient on input types: int subclasses (IntEnum error codes) become
  plain ints, tuples encode as arrays, bytearray/memoryview as bin, by reference.
- A failure raises `_FieldError`; every enclosing converter prepends its path segment on the way
  out, so the happy path never builds path strings. `encode_message` turns it into a
  LocalProtocolError (our bug), `decode_message` into a RemoteProtocolError (the peer's fault),
  whose message names the field path, e.g. ``ProduceRequest.partitions[3].records: expected
  bytes, got str``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any

from minikafka.errors import LocalProtocolError, RemoteProtocolError

MAX_LIST_LEN = 1_000_000
MAX_STR_BYTES = 32 * 1024
MAX_MAP_LEN = 100_000  # config maps and field maps are small; a huge map is an attack
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def str_too_long(s: str) -> bool:
    # len() counts code points; UTF-8 needs 1..4 bytes each, so encode only when in doubt.
    n = len(s)
    return n > MAX_STR_BYTES or (n * 4 > MAX_STR_BYTES and len(s.encode()) > MAX_STR_BYTES)


def describe(value: object) -> str:
    """A received value in a few words, for error messages."""
    if value is None:
        return "nil"
    if type(value) is list:
        return f"array of {len(value)}"
    if type(value) is int:
        return f"int {value}"
    return type(value).__name__


Converter = Callable[[Any], Any]


class _FieldError(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.path: list[str] = []  # innermost first

    def render(self, root: str) -> str:
        return f"{root}{''.join(reversed(self.path))}: {self.reason}"


KEY_SHOWN_CHARS = 40  # a map key in an error path: a peer's 32 KiB key is not echoed whole


def _short(key: object) -> str:
    """A map key for an error path, cut: the error is one short line in the events log
    whatever the peer sent."""
    if isinstance(key, str | bytes) and len(key) > KEY_SHOWN_CHARS:
        return f"{key[:KEY_SHOWN_CHARS]!r}... ({len(key)} chars)"
    return repr(key)


def _mismatch(expected: str, value: object) -> _FieldError:
    return _FieldError(f"expected {expected}, got {describe(value)}")


_CACHE: dict[type, tuple[Converter, Converter]] = {}
_BUILDING: set[type] = set()


def converters(cls: type) -> tuple[Converter, Converter]:
    """(encode, decode) for a message dataclass, compiled on first use."""
    pair = _CACHE.get(cls)
    if pair is None:
        pair = _CACHE[cls] = _compile_dataclass(cls)
    return pair


def encode_message(body: object) -> dict[str, Any]:
    """A message dataclass as a msgpack-ready map; LocalProtocolError if it breaks a rule."""
    cls = type(body)
    try:
        return converters(cls)[0](body)
    except _FieldError as e:
        raise LocalProtocolError(e.render(cls.__name__)) from None


def decode_message(message_type: type, raw_body: object) -> Any:
    """Check a raw msgpack map against `message_type` and build it (RemoteProtocolError)."""
    decode = converters(message_type)[1]
    try:
        return decode(raw_body)
    except _FieldError as e:
        raise RemoteProtocolError(e.render(message_type.__name__)) from None


def _compile_dataclass(cls: type) -> tuple[Converter, Converter]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    if cls in _BUILDING:
        raise TypeError(f"recursive message type {cls.__name__} is not supported")
    _BUILDING.add(cls)
    try:
        hints = typing.get_type_hints(cls)
        fields = []
        for f in dataclasses.fields(cls):
            enc, dec = _compile(hints[f.name])
            has_default = (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
            fields.append((f.name, "." + f.name, enc, dec, has_default))
    finally:
        _BUILDING.discard(cls)
    name = cls.__name__
    encoders = tuple((fname, seg, enc) for fname, seg, enc, _dec, _d in fields)
    decoders = tuple(
        (fname, seg, dec, has_default) for fname, seg, _enc, dec, has_default in fields
    )

    def encode(obj: Any) -> dict[str, Any]:
        if type(obj) is not cls:
            raise _mismatch(name, obj)
        out = {}
        for fname, seg, enc in encoders:
            try:
                out[fname] = enc(getattr(obj, fname))
            except _FieldError as e:
                e.path.append(seg)
                raise
        return out

    def decode(raw: Any) -> Any:
        if type(raw) is not dict:
            raise _mismatch(f"map ({name})", raw)
        kwargs = {}
        for fname, seg, dec, has_default in decoders:
            try:
                value = raw[fname]
            except KeyError:
                if has_default:
                    continue  # the dataclass fills in its default
                err = _FieldError("missing required field")
                err.path.append(seg)
                raise err from None
            try:
                kwargs[fname] = dec(value)
            except _FieldError as e:
                e.path.append(seg)
                raise
        return cls(**kwargs)

    return encode, decode


def _compile(tp: Any) -> tuple[Converter, Converter]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp in _PRIMITIVES:
        return _PRIMITIVES[tp]
    if origin in (types.UnionType, typing.Union):
        others = [a for a in args if a is not type(None)]
        if len(others) != 1 or len(args) != 2:
            raise TypeError(f"only `X | None` unions are supported, got {tp!r}")
        return _optional(*_compile(others[0]))
    if origin is list:
        return _list(args[0], *_compile(args[0]))
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"only str-keyed dicts are supported, got {tp!r}")
        return _dict(*_compile(args[1]))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return converters(tp)
    raise TypeError(f"unsupported annotation in a message: {tp!r}")


def _enc_int(v: Any) -> int:
    if type(v) is not int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise _mismatch("int", v)
        v = int(v)  # IntEnum and friends
    if not INT64_MIN <= v <= INT64_MAX:
        raise _FieldError(f"int {v} out of int64 range")
    return v


def _dec_int(v: Any) -> int:
    if type(v) is not int:
        raise _mismatch("int", v)
    if not INT64_MIN <= v <= INT64_MAX:
        raise _FieldError(f"int {v} out of int64 range")
    return v


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise _mismatch("bool", v)
    return v


def _enc_str(v: Any) -> str:
    if type(v) is not str:
        raise _mismatch("str", v)
    if str_too_long(v):
        raise _FieldError(f"str longer than {MAX_STR_BYTES} bytes")
    return v


def _dec_str(v: Any) -> str:
    if type(v) is not str:  # length already capped by msgpack's max_str_len
        raise _mismatch("str", v)
    return v


def _enc_bytes(v: Any) -> Any:
    if type(v) is bytes or isinstance(v, bytes | bytearray | memoryview):
        return v  # by reference: msgpack copies it once into the payload
    raise _mismatch("bytes", v)


def _dec_bytes(v: Any) -> bytes:
    if type(v) is not bytes:
        raise _mismatch("bytes", v)
    return v


_PRIMITIVES: dict[Any, tuple[Converter, Converter]] = {
    int: (_enc_int, _dec_int),
    bool: (_bool, _bool),
    str: (_enc_str, _dec_str),
    bytes: (_enc_bytes, _dec_bytes),
}


def _optional(enc: Converter, dec: Converter) -> tuple[Converter, Converter]:
    def enc_opt(v: Any) -> Any:
        return None if v is None else enc(v)

    def dec_opt(v: Any) -> Any:
        return None if v is None else dec(v)

    return enc_opt, dec_opt


def _list(item_tp: Any, enc: Converter, dec: Converter) -> tuple[Converter, Converter]:
    def check(v: Any, types_: tuple[type, ...]) -> None:
        if type(v) not in types_:
            raise _mismatch("array", v)
        if len(v) > MAX_LIST_LEN:
            raise _FieldError(f"array of {len(v)} items exceeds MAX_LIST_LEN ({MAX_LIST_LEN})")

    def convert(conv: Converter, v: Any) -> list[Any]:
        try:
            return [conv(x) for x in v]
        except _FieldError:
            pass
        for i, x in enumerate(v):  # slow path: find the culprit's index
            try:
                conv(x)
            except _FieldError as e:
                e.path.append(f"[{i}]")
                raise
        raise AssertionError("unreachable")

    def enc_list(v: Any) -> list[Any]:
        check(v, (list, tuple))
        return convert(enc, v)

    if item_tp is int:

        def dec_list(v: Any) -> list[Any]:
            check(v, (list,))
            for x in v:  # fast path for replica lists: check in place, no new list
                if type(x) is not int or not INT64_MIN <= x <= INT64_MAX:
                    return convert(dec, v)  # raises with the index
            return v

    else:

        def dec_list(v: Any) -> list[Any]:
            check(v, (list,))
            return convert(dec, v)

    return enc_list, dec_list


def _dict(enc: Converter, dec: Converter) -> tuple[Converter, Converter]:
    def convert(conv: Converter, key_conv: Converter, v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise _mismatch("map", v)
        if len(v) > MAX_MAP_LEN:
            raise _FieldError(f"map of {len(v)} entries exceeds MAX_MAP_LEN ({MAX_MAP_LEN})")
        out = {}
        for key, value in v.items():
            try:
                key_conv(key)
                out[key] = conv(value)
            except _FieldError as e:
                e.path.append(f"[{_short(key)}]")
                raise
        return out

    def enc_dict(v: Any) -> dict[str, Any]:
        return convert(enc, _enc_str, v)

    def dec_dict(v: Any) -> dict[str, Any]:
        return convert(dec, _dec_str, v)

    return enc_dict, dec_dict
