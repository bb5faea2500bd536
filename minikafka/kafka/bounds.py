"""Every length in a Kafka request, checked against the bytes left before anything is allocated.

kio's native readers size a collection from its length prefix before reading an element: a
20-byte ListPartitionReassignments request whose array length is the varint `FF FF FF FF 7F`
asks the allocator for 256 GiB, and a failed allocation in native code aborts the process, no
handler runs. Kafka's generated readers refuse such a request first: every array,
string and bytes length is compared with `remainingBytes()` of the frame (`MessageUtil`,
`ByteBufferAccessor`; "Tried to allocate a collection of size N, but there are only M bytes
remaining").

`check_request(schema, payload, pos)` does the same walk over a payload before kio reads it: it
follows the schema (the same kio dataclasses kio decodes with: field types from their
`kafka_type`, flexible or not per entity, tagged fields by tag), allocates nothing, and raises
RemoteProtocolError at the first length that runs past the frame, or a varint longer than 5
bytes. An array of n elements must fit n times its elements' smallest encoding, which is
stricter than Kafka's "n bytes" and as cheap. Runs of fixed-size fields are skipped in one
step, and so are arrays of fixed-size elements (Fetch's partitions, Metadata v1's int32
arrays), so a walk costs O(variable-size elements), not O(bytes).

The walk also counts array elements, at every depth: a request holding more than
`MAX_REQUEST_ELEMENTS` is refused (TooManyElements) before kio decodes it, since kio's decode
holds the event loop for about a microsecond an element.

`length_prefixes(schema, header_schema, payload)` walks a valid request the same way and
returns where each length prefix is (`LengthPrefix`: its position, width and encoding, the span
it covers): the fuzzer (minikafka/testing/fuzz.py) rewrites exactly those bytes.

Pure: no I/O; a walker per schema is built once and cached (one recording walker per schema
besides, which fills the module's one `_Recorder`: a walk is not reentrant, nor threaded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from kio.static.constants import EntityType

from minikafka.errors import RemoteProtocolError
from minikafka.kafka import KIO_IMPORTS

# Encoded sizes of Kafka's fixed-size types (Kafka's `Type` and kio's `kafka_type` names).
FIXED_BYTES: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "error_code": 2,
    "uint16": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
VARIABLE = frozenset({"string", "bytes", "records"})

# walk(buf, pos, end) -> the position after the value; RemoteProtocolError past `end`.
Walk = Callable[[Any, int, int], int]


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthPrefix:
    """One length prefix of a valid request: `kind` (string, bytes, records, array, tagged),
    `encoding` (int16, int32, or uvarint, which is n + 1 in compact fields, plain n for a
    tagged-fields count), the prefix's bytes [at, start), its value (-1: null), the content
    [start, stop), and for an array of at least one element the end of the first one."""

    kind: str
    encoding: str
    at: int
    start: int
    stop: int
    value: int
    first_stop: int | None = None


class _Recorder:
    """Collects LengthPrefix rows during one recording walk (hashable by identity)."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: list[LengthPrefix] = []


_RECORDER = _Recorder()

# The most array elements (all arrays, at any depth) one request may hold. Kafka has no such
# bound: its requests are decoded and handled on threads of their own. Here kio's native decode
# holds the GIL and the event loop for about 1 us an element (a 1,000,000-partition Fetch: 3 s
# of stall with everything else off the loop), so the count is bounded before kio runs. 100,000
# is twice the partitions one topic may have (max.topic.partitions) and 12 x those one broker
# may host (max.broker.partitions): an OffsetCommit or Fetch of them all still fits.
MAX_REQUEST_ELEMENTS = 100_000


class _Budget:
    """Elements a walk may still pass (module-level, like _RECORDER: a walk is not reentrant)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_REQUEST_ELEMENTS


_BUDGET = _Budget()


class TooManyElements(RemoteProtocolError):
    """A request holds more array elements than MAX_REQUEST_ELEMENTS."""


class Oversized(RemoteProtocolError):
    """A length prefix claims more than the frame has left (the peer's fault)."""


def _past(what: str, need: int, pos: int, end: int) -> Oversized:
    return Oversized(f"{what} of {need} bytes at byte {pos}, only {max(end - pos, 0)} left")


def uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (Kafka's ByteUtils.readUnsignedVarint)."""
    value = shift = 0
    for _ in range(5):
        if pos >= end:
            raise Oversized(f"varint runs past the frame at byte {pos}")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise Oversized(f"varint longer than 5 bytes at byte {pos - 5}")


def _int16(buf: Any, pos: int, end: int) -> int:
    if pos + 2 > end:
        raise _past("an int16 length", 2, pos, end)
    return int.from_bytes(buf[pos : pos + 2], "big", signed=True)


def _int32(buf: Any, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise _past("an int32 length", 4, pos, end)
    return int.from_bytes(buf[pos : pos + 4], "big", signed=True)


def _fixed(size: int) -> Walk:
    def walk(buf: Any, pos: int, end: int) -> int:
        if pos + size > end:
            raise _past("a field", size, pos, end)
        return pos + size

    return walk


def _null(kind: str, name: str, at: int) -> RemoteProtocolError:
    # kio reads any negative length as None whatever the schema says; Kafka's generated
    # readers refuse it ("non-nullable field X was serialized as null"), and the handlers
    # rely on it (a None where a tuple is promised was a TypeError in a dozen of them).
    return RemoteProtocolError(f"non-nullable {kind} {name} was serialized as null at byte {at}")


def _sized(kind: str, *, flexible: bool, rec: _Recorder | None, nullable: bool, name: str) -> Walk:
    """A string, bytes or records field: a length, then that many bytes (-1 / 0: null)."""
    if flexible:

        def walk(buf: Any, pos: int, end: int) -> int:
            at = pos
            n, pos = uvarint(buf, pos, end)
            n -= 1  # compact: length + 1, 0 for null
            if n > end - pos:
                raise _past(f"a {kind}", n, pos, end)
            if n < 0 and not nullable:
                raise _null(kind, name, at)
            if rec is not None:
                rec.found.append(_row(kind, "uvarint", at, pos, n))
            return pos + max(n, 0)

    else:
        width = 2 if kind == "string" else 4
        read = _int16 if kind == "string" else _int32

        def walk(buf: Any, pos: int, end: int) -> int:
            n = read(buf, pos, end)
            pos += width
            if n > end - pos:
                raise _past(f"a {kind}", n, pos, end)
            if n < 0 and not nullable:
                raise _null(kind, name, pos - width)
            if rec is not None:
                rec.found.append(_row(kind, f"int{8 * width}", pos - width, pos, n))
            return pos + max(n, 0)

    return walk


def _row(kind: str, encoding: str, at: int, start: int, n: int) -> LengthPrefix:
    return LengthPrefix(
        kind=kind, encoding=encoding, at=at, start=start, stop=start + max(n, 0), value=n
    )


def _array(
    element: Walk | None,
    min_bytes: int,
    fixed: int | None,
    *,
    flexible: bool,
    rec: _Recorder | None = None,
    nullable: bool = True,
    name: str = "",
) -> Walk:
    """An array: its count (compact uvarint n+1 or int32; null allowed), then its elements.
    Elements of one fixed size are skipped in one step."""

    def walk(buf: Any, pos: int, end: int) -> int:
        at = pos
        if flexible:
            n, pos = uvarint(buf, pos, end)
            n -= 1
        else:
            n = _int32(buf, pos, end)
            pos += 4
        if n <= 0:
            if n < 0 and not nullable:
                raise _null("array", name, at)
            if rec is not None:
                rec.found.append(_row("array", "uvarint" if flexible else "int32", at, pos, n))
            return pos
        if n * min_bytes > end - pos:
            raise Oversized(
                f"an array of {n} elements of at least {min_bytes} bytes at byte {pos}, "
                f"only {end - pos} bytes left"
            )
        _BUDGET.left -= n
        if _BUDGET.left < 0:
            raise TooManyElements(
                f"more than the {MAX_REQUEST_ELEMENTS:,} array elements one request may hold "
                f"(an array of {n:,} at byte {pos})"
            )
        start = pos
        if fixed is not None:
            pos, first = pos + n * fixed, pos + fixed
        else:
            assert element is not None
            pos = first = element(buf, pos, end)
            for _ in range(n - 1):
                pos = element(buf, pos, end)
        if rec is not None:
            encoding = "uvarint" if flexible else "int32"
            rec.found.append(
                LengthPrefix(
                    kind="array",
                    encoding=encoding,
                    at=at,
                    start=start,
                    stop=pos,
                    value=n,
                    first_stop=first,
                )
            )
        return pos

    return walk


def _tagged(known: dict[int, Walk], rec: _Recorder | None) -> Walk:
    """The tagged-fields section of a flexible entity: a count, then (tag, size, bytes) each.
    A known tag's value is walked within its own size; unknown ones are skipped."""

    def walk(buf: Any, pos: int, end: int) -> int:
        at = pos
        count, pos = uvarint(buf, pos, end)
        if rec is not None:
            rec.found.append(_row("tagged", "uvarint", at, pos, count))
        if count > end - pos:
            raise _past("tagged fields", count, pos, end)
        for _ in range(count):
            tag, pos = uvarint(buf, pos, end)
            size, pos = uvarint(buf, pos, end)
            if size > end - pos:
                raise _past(f"tagged field {tag}", size, pos, end)
            inner = known.get(tag)
            if inner is not None and inner(buf, pos, pos + size) != pos + size:
                raise RemoteProtocolError(f"tagged field {tag} at byte {pos} is not {size} bytes")
            pos += size
        return pos

    return walk


@cache
def entity_shape(entity: type, rec: _Recorder | None = None) -> tuple[Walk, int, int | None]:
    """(walk, smallest encoding in bytes, fixed size or None) of one kio entity class; with
    `rec`, a walk that also records each length prefix it reads there."""
    # kio.serial when the first request is checked, not when a node starts: it imports asyncio
    # (codec.py says why that waits, and why under KIO_IMPORTS).
    with KIO_IMPORTS:
        from kio.serial._introspect import get_field_tag

    flexible = bool(getattr(entity, "__flexible__", False))
    # RequestHeader v2 is flexible (it ends with tagged fields) but its client_id keeps the
    # legacy int16-prefixed string, so that any broker can read who is asking (KIP-482).
    compact = flexible and getattr(entity, "__type__", None) is not EntityType.header
    steps: list[Walk] = []
    tagged: dict[int, Walk] = {}
    min_total, fixed_run, all_fixed = 0, 0, True
    for f in fields(entity):
        walk, min_bytes, fixed = _field_shape(f, flexible=compact, rec=rec)
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = walk
            continue
        min_total += min_bytes
        if fixed is not None:
            fixed_run += fixed  # consecutive fixed fields become one step
            continue
        all_fixed = False
        if fixed_run:
            steps.append(_fixed(fixed_run))
            fixed_run = 0
        steps.append(walk)
    if flexible:
        all_fixed = False
        min_total += 1
    if all_fixed:
        return _fixed(fixed_run), fixed_run, fixed_run
    if fixed_run:
        steps.append(_fixed(fixed_run))
    if flexible:
        steps.append(_tagged(tagged, rec))

    def walk_entity(buf: Any, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        return pos

    return walk_entity, min_total, None


def _field_shape(f: Any, *, flexible: bool, rec: _Recorder | None) -> tuple[Walk, int, int | None]:
    with KIO_IMPORTS:
        from kio.serial._introspect import (
            EntityField,
            EntityTupleField,
            PrimitiveTupleField,
            classify_field,
            get_schema_field_type,
            is_optional,
        )

    kind = classify_field(f)
    nullable, name = is_optional(f), f.name
    if isinstance(kind, EntityField):
        walk, min_bytes, fixed = entity_shape(kind.type_, rec)
        if nullable:  # a nullable struct: an int8 marker (-1 null, 1 present) first
            return _nullable_struct(walk), 1, None
        return walk, min_bytes, fixed
    if isinstance(kind, EntityTupleField):
        element, min_bytes, fixed = entity_shape(kind.type_, rec)
        array = _array(
            element,
            max(min_bytes, 1),
            fixed,
            flexible=flexible,
            rec=rec,
            nullable=nullable,
            name=name,
        )
        return array, 1, None
    kafka_type = get_schema_field_type(f)
    if isinstance(kind, PrimitiveTupleField):
        size = FIXED_BYTES.get(kafka_type)
        element = None
        if size is None:  # elements of a primitive array are never null
            element = _sized(kafka_type, flexible=flexible, rec=rec, nullable=False, name=name)
        array = _array(
            element, size or 1, size, flexible=flexible, rec=rec, nullable=nullable, name=name
        )
        return array, 1, None
    if kafka_type in FIXED_BYTES:
        size = FIXED_BYTES[kafka_type]
        return _fixed(size), size, size
    if kafka_type in VARIABLE:
        walk = _sized(kafka_type, flexible=flexible, rec=rec, nullable=nullable, name=name)
        return walk, 1 if flexible else 2, None
    raise TypeError(f"{f.name}: kafka type {kafka_type!r} has no bounds rule")


def _nullable_struct(walk: Walk) -> Walk:
    def walk_nullable(buf: Any, pos: int, end: int) -> int:
        if pos >= end:
            raise _past("a struct marker", 1, pos, end)
        present = buf[pos] != 0xFF
        return walk(buf, pos + 1, end) if present else pos + 1

    return walk_nullable


def check_request(
    schema: type,
    header_schema: type,
    payload: Any,
    pos: int,
    *,
    max_elements: int = MAX_REQUEST_ELEMENTS,
) -> None:
    """RemoteProtocolError unless every length of the header (from `pos`) and the body of
    `schema` fits in `payload`, together they end exactly at its end, and its arrays hold at
    most `max_elements` elements in all (TooManyElements)."""
    end = len(payload)
    _BUDGET.left = max_elements
    try:
        pos = entity_shape(header_schema)[0](payload, pos, end)
        stop = entity_shape(schema)[0](payload, pos, end)
    except RemoteProtocolError as exc:
        raise type(exc)(f"kafka {schema.__name__} v{schema.__version__}: {exc}") from None
    if stop != end:
        raise RemoteProtocolError(
            f"kafka {schema.__name__} v{schema.__version__} has {end - stop} trailing bytes"
        )


def length_prefixes(schema: type, header_schema: type, payload: Any) -> list[LengthPrefix]:
    """Every length prefix of a valid request (header from byte 0, then body), in the order
    the walk read them (an array's own row comes after its elements'); RemoteProtocolError
    as check_request for an invalid one."""
    _RECORDER.found = []
    _BUDGET.left = 1 << 62  # any valid request: the fuzzer mutates what it finds
    end = len(payload)
    pos = entity_shape(header_schema, _RECORDER)[0](payload, 0, end)
    stop = entity_shape(schema, _RECORDER)[0](payload, pos, end)
    found, _RECORDER.found = _RECORDER.found, []
    if stop != end:
        raise RemoteProtocolError(f"{end - stop} trailing bytes")
    return found
