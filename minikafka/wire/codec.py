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
- Speed: per-dataclass converters (wire/converters.py) are compiled once from
  `typing.get_type_hints` and cached by class, so no reflection happens per message. `bytes` values are passed to and taken from
  msgpack by reference: the only copies are msgpack's own.

Responses are decoded in two steps because the client learns which type to expect only from the
correlation id: `decode_response_envelope()` returns (correlation_id, raw body map) and
`decode_body(response_type, raw_body)` checks and builds the message. `decode_response()` does
both when the type is already known. (wire/correlation.py pairs the two for clients.)
"""

from __future__ import annotations

import sys
import typing
from dataclasses import dataclass
from typing import Any

import msgpack

from minikafka.errors import LocalProtocolError, RemoteProtocolError
from minikafka.wire.converters import (  # noqa: F401 - the limits are importable from here too
    INT64_MAX,
    INT64_MIN,
    MAX_LIST_LEN,
    MAX_MAP_LEN,
    MAX_STR_BYTES,
    decode_message,
    describe,
    encode_message,
    str_too_long,
)
from minikafka.wire.messages import API, API_KEY_OF, SUPPORTED_VERSIONS, ApiKey

DECODE_EXPANSION_MAX = 16  # legitimate messages build ~6x their size in Python objects
DECODE_BUDGET_SLACK_BYTES = 64 * 1024  # small frames: a few empty lists are not an attack
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
    if client_id is not None and (type(client_id) is not str or str_too_long(client_id)):
        raise LocalProtocolError(f"client_id must be a str of at most {MAX_STR_BYTES} bytes")
    raw = encode_message(body)
    return _pack([int(api_key), header.api_version, header.correlation_id, client_id, raw])


def decode_request(payload: bytes) -> tuple[RequestHeader, object]:
    """Parse a request payload. RemoteProtocolError (or a subclass) if anything is malformed."""
    envelope = _unpack(payload, "request")
    if type(envelope) is not list or len(envelope) != 5:
        raise RemoteProtocolError(
            "request envelope must be an array "
            f"[api_key, api_version, correlation_id, client_id, body], got {describe(envelope)}"
        )
    api_key, api_version, correlation_id, client_id, raw_body = envelope
    for name, value, lo, hi in (
        ("api_key", api_key, INT16_MIN, INT16_MAX),
        ("api_version", api_version, INT16_MIN, INT16_MAX),
        ("correlation_id", correlation_id, INT32_MIN, INT32_MAX),
    ):
        if type(value) is not int or not lo <= value <= hi:
            raise RemoteProtocolError(
                f"request envelope {name}: expected int in {lo}..{hi}, got {describe(value)}"
            )
    if client_id is not None and type(client_id) is not str:
        raise RemoteProtocolError(
            f"request envelope client_id: expected str or nil, got {describe(client_id)}"
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
    return _pack([correlation_id, encode_message(body)])


def decode_response_envelope(payload: bytes) -> tuple[int, object]:
    """Step one of decoding a response: (correlation_id, raw body) with the envelope checked.

    The raw body is whatever msgpack produced; hand it to `decode_body` with the type the
    correlation id says to expect.
    """
    envelope = _unpack(payload, "response")
    if type(envelope) is not list or len(envelope) != 2:
        raise RemoteProtocolError(
            f"response envelope must be an array [correlation_id, body], got {describe(envelope)}"
        )
    correlation_id, raw_body = envelope
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        raise RemoteProtocolError(
            f"response envelope correlation_id: expected int32, got {describe(correlation_id)}"
        )
    return correlation_id, raw_body


def decode_body(message_type: type, raw_body: object) -> Any:
    """Step two: check a raw body against `message_type` and build it (RemoteProtocolError)."""
    return decode_message(message_type, raw_body)


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
