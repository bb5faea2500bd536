"""The msgpack codec: message dataclasses to frame payloads and back, checked field by field.

Envelopes (one msgpack array per frame payload, see wire/framing.py):

    request   [api_key, api_version, correlation_id, client_id (str | nil), body]
    response  [correlation_id, body]

A body is a msgpack map {field name: value} of the message dataclass (wire/messages.py):
nested dataclasses are maps, lists are arrays, `bytes` are msgpack bin, `str` is msgpack str.

Rules:

- Decoding trusts nothing. Anything malformed raises `RemoteProtocolError` (the peer's fault)
  whose message names the field path, e.g. ``ProduceRequest.partitions[3].records: expected
  bytes, got str``. Types are strict: an `int` field rejects bool and float and must fit in
  int64, `str` and `bytes` are not interchangeable, `X | None` accepts nil. Unknown fields are
  ignored (a newer peer may add some); missing fields with a default get the default; missing
  required fields are errors. Lists are capped at `MAX_LIST_LEN` items and strings at
  `MAX_STR_BYTES` bytes, so absurd sizes are refused by msgpack before they are built.
- Decoding is budgeted by payload size. msgpack expands: one byte 0x90 is an empty list of 56
  bytes plus its 8-byte slot, so 8 MB of nested empty arrays would build 551 MiB. A per-decode
  `_DecodeBudget` (msgpack's list and object hooks, called as each container is finished) adds
  up what the Python objects cost and refuses the payload once that exceeds
  `DECODE_EXPANSION_MAX` times its size (plus `DECODE_BUDGET_SLACK_BYTES`). Real messages
  expand about 6x (a 50,000-partition metadata response); the worst a payload can make is then
  bounded by the budget plus one container (at most `MAX_LIST_LEN` slots). A MemoryError while
  decoding is the peer's fault too: that connection closes, the node goes on (Kafka bounds the
  same thing with `socket.request.max.bytes` and its memory pool; its binary protocol cannot
  expand like this).
- Encoding checks the same rules and raises `LocalProtocolError` (our bug) rather than send
  something the peer would reject. It is a little more lenient on input types: int subclasses
  (IntEnum error codes) become plain ints, tuples encode as arrays, bytearray/memoryview encode
  as bin (so record data can be sent straight from a storage buffer).
- Speed: per-dataclass converters are compiled once from `typing.get_type_hints` and cached by
  class, so no reflection happens per message. `bytes` values are passed to and taken from
  msgpack by reference: the only copies are msgpack's own.

Responses are decoded in two steps because the client learns which type to expect only from the
correlation id: `decode_response_envelope()` returns (correlation_id, raw body map) and
`decode_body(response_type, raw_body)` checks and builds the message. `decode_response()` does
both when the type is already known. (wire/correlation.py pairs the two for clients.)
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from minikafka.errors import LocalProtocolError, RemoteProtocolError
from minikafka.wire.messages import API, API_KEY_OF, SUPPORTED_VERSIONS, ApiKey

MAX_LIST_LEN = 1_000_000
MAX_STR_BYTES = 32 * 1024
MAX_MAP_LEN = 100_000  # config maps and field maps are small; a huge map is an attack
DECODE_EXPANSION_MAX = 16  # legitimate messages build ~6x their size in Python objects
DECODE_BUDGET_SLACK_BYTES = 64 * 1024  # small frames: a few empty lists are not an attack
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1

_REQUEST_TYPES: dict[type, ApiKey] = dict(API_KEY_OF)
_RESPONSE_TYPES: frozenset[type] = frozenset(resp for _req, resp in API.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class UnknownApiError(RemoteProtocolError):
    """The peer sent a request with an api key we do not serve.

    Carries the envelope so a server may answer (or log) before closing the connection.
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        super().__init__(f"unknown api key {api_key} (correlation id {correlation_id})")


class UnsupportedVersionError(RemoteProtocolError):
    """The peer sent a known api at a version outside SUPPORTED_VERSIONS."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        lo, hi = SUPPORTED_VERSIONS[ApiKey(api_key)]
        super().__init__(
            f"unsupported version {api_version} of {ApiKey(api_key).name} "
            f"(supported {lo}..{hi}, correlation id {correlation_id})"
        )


# ============================================================================ public API


def encode_request(header: RequestHeader, body: object) -> bytes:
    """The frame payload of a request (no length prefix). LocalProtocolError if inconsistent."""
    api_key = _REQUEST_TYPES.get(type(body))
    if api_key is None:
        raise LocalProtocolError(f"{type(body).__name__} is not a request message")
    if header.api_key != api_key:
        raise LocalProtocolError(
            f"header api key {header.api_key} does not match {type(body).__name__} ({api_key})"
        )
    lo, hi = SUPPORTED_VERSIONS[api_key]
    if _not_int(header.api_version) or not lo <= header.api_version <= hi:
        raise LocalProtocolError(
            f"cannot send {api_key.name} version {header.api_version!r}: supported {lo}..{hi}"
        )
    _check_correlation_id(header.correlation_id)
    client_id = header.client_id
    if client_id is not None and (type(client_id) is not str or _str_too_long(client_id)):
        raise LocalProtocolError(f"client_id must be a str of at most {MAX_STR_BYTES} bytes")
    raw = _encode_top(body)
    return _pack([int(api_key), header.api_version, header.correlation_id, client_id, raw])


def decode_request(payload: bytes) -> tuple[RequestHeader, object]:
    """Parse a request payload. RemoteProtocolError (or a subclass) if anything is malformed."""
    envelope = _unpack(payload, "request")
    if type(envelope) is not list or len(envelope) != 5:
        raise RemoteProtocolError(
            "request envelope must be an array "
            f"[api_key, api_version, correlation_id, client_id, body], got {_describe(envelope)}"
        )
    api_key, api_version, correlation_id, client_id, raw_body = envelope
    for name, value, lo, hi in (
        ("api_key", api_key, INT16_MIN, INT16_MAX),
        ("api_version", api_version, INT16_MIN, INT16_MAX),
        ("correlation_id", correlation_id, INT32_MIN, INT32_MAX),
    ):
        if type(value) is not int or not lo <= value <= hi:
            raise RemoteProtocolError(
                f"request envelope {name}: expected int in {lo}..{hi}, got {_describe(value)}"
            )
    if client_id is not None and type(client_id) is not str:
        raise RemoteProtocolError(
            f"request envelope client_id: expected str or nil, got {_describe(client_id)}"
        )
    try:
        key = ApiKey(api_key)
    except ValueError:
        raise UnknownApiError(api_key, api_version, correlation_id) from None
    lo, hi = SUPPORTED_VERSIONS[key]
    if not lo <= api_version <= hi:
        raise UnsupportedVersionError(api_key, api_version, correlation_id)
    header = RequestHeader(
        api_key=key, api_version=api_version, correlation_id=correlation_id, client_id=client_id
    )
    return header, decode_body(API[key][0], raw_body)


def encode_response(correlation_id: int, body: object) -> bytes:
    """The frame payload of a response (no length prefix). LocalProtocolError if invalid."""
    if type(body) not in _RESPONSE_TYPES:
        raise LocalProtocolError(f"{type(body).__name__} is not a response message")
    _check_correlation_id(correlation_id)
    return _pack([correlation_id, _encode_top(body)])


def decode_response_envelope(payload: bytes) -> tuple[int, object]:
    """Step one of decoding a response: (correlation_id, raw body) with the envelope checked.

    The raw body is whatever msgpack produced; hand it to `decode_body` with the type the
    correlation id says to expect.
    """
    envelope = _unpack(payload, "response")
    if type(envelope) is not list or len(envelope) != 2:
        raise RemoteProtocolError(
            f"response envelope must be an array [correlation_id, body], got {_describe(envelope)}"
        )
    correlation_id, raw_body = envelope
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        raise RemoteProtocolError(
            f"response envelope correlation_id: expected int32, got {_describe(correlation_id)}"
        )
    return correlation_id, raw_body


def decode_body(message_type: type, raw_body: object) -> Any:
    """Step two: check a raw body against `message_type` and build it (RemoteProtocolError)."""
    decode = _converters(message_type)[1]
    try:
        return decode(raw_body)
    except _FieldError as e:
        raise RemoteProtocolError(e.render(message_type.__name__)) from None


def decode_response(payload: bytes, response_type: type) -> tuple[int, Any]:
    """Both steps at once, when the expected type is already known."""
    correlation_id, raw_body = decode_response_envelope(payload)
    return correlation_id, decode_body(response_type, raw_body)


# ============================================================================ msgpack edges


def _pack(obj: object) -> bytes:
    # packb builds a fresh Packer per call: no state shared between threads.
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:  # the converters should prevent this
        raise LocalProtocolError(f"msgpack cannot encode message: {e}") from e


_UNPACK_ERRORS = (ValueError, TypeError, msgpack.UnpackException)


class _DecodeBudgetExceeded(Exception):
    pass


class _DecodeBudget:
    """Adds up the bytes of the Python objects msgpack builds for one payload (sys.getsizeof,
    measured against tracemalloc within a few %) and raises once they exceed the budget.

    Hooks see each container after its elements were built, inner first, so the count stops
    an expansion one container after the budget is gone. Objects CPython shares are free: None,
    bools, small ints (-5..256), the empty and one-character strings; map keys are counted once
    per distinct key (msgpack interns them, so repeated field names cost nothing more).
    """

    __slots__ = ("left", "_keys")

    def __init__(self, budget_bytes: int) -> None:
        self.left = budget_bytes
        self._keys: set[object] = set()

    def list_hook(self, items: list[object]) -> list[object]:
        self._spend(56 + 8 * len(items) + _scalars_size(items))
        return items

    def object_hook(self, fields: dict[object, object]) -> dict[object, object]:
        cost = sys.getsizeof(fields) + _scalars_size(fields.values())
        keys = self._keys
        for key in fields:
            if key not in keys:
                keys.add(key)
                cost += sys.getsizeof(key)
        self._spend(cost)
        return fields

    def _spend(self, cost: int) -> None:
        self.left -= cost
        if self.left < 0:
            raise _DecodeBudgetExceeded


def _scalars_size(values: typing.Iterable[object]) -> int:
    size = 0
    for x in values:
        t = type(x)
        if t is int:
            if not -5 <= x <= 256:  # type: ignore[operator]
                size += sys.getsizeof(x)
        elif t is str or t is bytes:
            if len(x) > 1:  # type: ignore[arg-type]
                size += sys.getsizeof(x)
        elif t is float:
            size += 24
    return size  # containers are counted by their own hook


def _unpack(payload: bytes, what: str) -> object:
    budget_bytes = DECODE_EXPANSION_MAX * len(payload) + DECODE_BUDGET_SLACK_BYTES
    budget = _DecodeBudget(budget_bytes)
    try:
        return msgpack.unpackb(
            payload,
            raw=False,
            use_list=True,
            strict_map_key=True,
            list_hook=budget.list_hook,
            object_hook=budget.object_hook,
            max_str_len=MAX_STR_BYTES,
            # Every element takes at least one byte: a longer header is a lie that would make
            # msgpack allocate the slots before finding the payload short.
            max_array_len=min(MAX_LIST_LEN, len(payload)),
            max_map_len=min(MAX_MAP_LEN, len(payload)),
            max_ext_len=0,  # no ext types in this protocol
        )
    except _DecodeBudgetExceeded:
        raise RemoteProtocolError(
            f"{what} payload of {len(payload)} bytes expands past {budget_bytes} bytes of "
            f"objects ({DECODE_EXPANSION_MAX}x its size): refused"
        ) from None
    except MemoryError:
        raise RemoteProtocolError(
            f"{what} payload of {len(payload)} bytes: out of memory while decoding"
        ) from None
    except msgpack.StackError:
        raise RemoteProtocolError(f"{what} payload nests too deeply") from None
    except msgpack.FormatError:
        raise RemoteProtocolError(f"{what} payload is not msgpack (reserved type byte)") from None
    except msgpack.ExtraData:
        raise RemoteProtocolError(f"{what} payload has trailing bytes after one document") from None
    except _UNPACK_ERRORS as e:
        raise RemoteProtocolError(f"{what} payload is not valid msgpack: {e}") from None


def _check_correlation_id(correlation_id: int) -> None:
    if _not_int(correlation_id) or not INT32_MIN <= correlation_id <= INT32_MAX:
        raise LocalProtocolError(f"correlation id must be an int32, got {correlation_id!r}")


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)


def _str_too_long(s: str) -> bool:
    # len() counts code points; UTF-8 needs 1..4 bytes each, so encode only when in doubt.
    n = len(s)
    return n > MAX_STR_BYTES or (n * 4 > MAX_STR_BYTES and len(s.encode()) > MAX_STR_BYTES)


def _describe(value: object) -> str:
    if value is None:
        return "nil"
    if type(value) is list:
        return f"array of {len(value)}"
    if type(value) is int:
        return f"int {value}"
    return type(value).__name__


# ============================================================================ converters
#
# Each annotation compiles to a pair (encode, decode) of one-argument functions. A failure
# raises _FieldError; every enclosing converter prepends its path segment on the way out, so
# the happy path never builds path strings. The public functions turn a _FieldError into a
# LocalProtocolError (encoding) or RemoteProtocolError (decoding).

Converter = Callable[[Any], Any]


class _FieldError(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.path: list[str] = []  # innermost first

    def render(self, root: str) -> str:
        return f"{root}{''.join(reversed(self.path))}: {self.reason}"


def _mismatch(expected: str, value: object) -> _FieldError:
    return _FieldError(f"expected {expected}, got {_describe(value)}")


_CACHE: dict[type, tuple[Converter, Converter]] = {}
_BUILDING: set[type] = set()


def _converters(cls: type) -> tuple[Converter, Converter]:
    """(encode, decode) for a message dataclass, compiled on first use."""
    pair = _CACHE.get(cls)
    if pair is None:
        pair = _CACHE[cls] = _compile_dataclass(cls)
    return pair


def _encode_top(body: object) -> dict[str, Any]:
    cls = type(body)
    try:
        return _converters(cls)[0](body)
    except _FieldError as e:
        raise LocalProtocolError(e.render(cls.__name__)) from None


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
        return _converters(tp)
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
    if _str_too_long(v):
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
                e.path.append(f"[{key!r}]")
                raise
        return out

    def enc_dict(v: Any) -> dict[str, Any]:
        return convert(enc, _enc_str, v)

    def dec_dict(v: Any) -> dict[str, Any]:
        return convert(dec, _dec_str, v)

    return enc_dict, dec_dict
