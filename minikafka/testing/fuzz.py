"""Structure-aware fuzzing of the Kafka listener's requests: generation and mutation.

Generation: hypothesis builds a valid request of any served API and version from kio's own
schema classes (`st.from_type(schema)`; kio registers a strategy for each of its primitive
types, `Records` gets one here: none, a valid RecordBatch v2, or raw bytes), and kio's entity
writer encodes it behind a RequestHeader of the schema's own header version.

Mutation: `mutate_kafka(payload, rng)` rewrites a valid request where a broker's decoder is
tempted to trust it. The length prefixes come from the bounds walk itself
(`kafka.bounds.length_prefixes`: every array, string, bytes, records and tagged-fields length,
its encoding and its span), so the mutations hit exactly those bytes: a length set to huge,
negative, off-by-one or null; a uvarint rewritten overlong (5 bytes, legal) or too long (6+);
an element duplicated or repeated (nested arrays grow with it); the records replaced by a
malformed RecordBatch v2 (fuzz_batches.py); the frame cut short, bytes flipped, trailing bytes,
another version's header over this body. Everything is chosen by a `random.Random`: in tests
hypothesis's `st.randoms()`, so a failure shrinks to a small case, in long runs a seeded one.

Needs hypothesis (a dev dependency) for generation; mutation alone does not.
"""

from __future__ import annotations

import io
import random
import struct
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)
from kio.static import _phantom as kio_phantom
from kio.static.primitive import Records, i16, i32

from minikafka.kafka.bounds import LengthPrefix, length_prefixes
from minikafka.kafka.codec import SUPPORTED
from minikafka.testing.fuzz_batches import malformed_batch, valid_batch

# kio registers a strategy for its types only if hypothesis was importable when kio loaded,
# and minikafka.kafka loads kio without it unless this process imported hypothesis first
# (minikafka/kafka/__init__.py: a node never needs it). Without them st.from_type fails deep in
# a test, so say it here.
if kio_phantom.hypothesis is None:
    raise ImportError(
        "kio was loaded without hypothesis, so it has no strategies for its types: import "
        "hypothesis (or minikafka.testing.fuzz) before minikafka.kafka in this process"
    )

KAFKA_SERVED: list[tuple[int, int]] = [
    (key, v) for key, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)
]
MAX_GROWN_BYTES = 256 * 1024  # a repeated element stops growing the request here

_records = st.one_of(
    st.none(),
    st.randoms(use_true_random=False).map(lambda r: Records(valid_batch(r))),
    st.binary(max_size=64).map(Records),
)
st.register_type_strategy(Records, _records)


def encode_kafka(body: object, *, correlation_id: int = 7, client_id: str | None = "fuzz") -> bytes:
    """A request payload (no frame length): the schema's header version, then the body."""
    schema = type(body)
    header_schema = schema.__header_schema__
    out = io.BytesIO()
    header = header_schema(
        request_api_key=i16(schema.__api_key__),
        request_api_version=i16(schema.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_schema)(out, header)
    entity_writer(schema)(out, body)
    return out.getvalue()


def kafka_request(api_key: int, version: int) -> st.SearchStrategy[bytes]:
    """Valid request payloads of one served API and version."""
    return st.from_type(load_request_schema(api_key, version)).map(encode_kafka)


def kafka_requests() -> st.SearchStrategy[bytes]:
    """Valid request payloads of any served API and version."""
    return st.sampled_from(KAFKA_SERVED).flatmap(lambda kv: kafka_request(*kv))


def examples(strategy: st.SearchStrategy[bytes], n: int, seed: int) -> list[bytes]:
    """`n` examples of a strategy, the same for the same seed (hypothesis outside a test: a
    given-decorated function run once, its generate phase only, no example database)."""
    out: list[bytes] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(payload: bytes) -> None:
        out.append(payload)

    collect()
    return out


def null_where_not_nullable(entity: Any) -> str | None:
    """The path of the first None in a decoded kio entity where its schema allows no null
    (Kafka's nullableVersions), or None: what a handler may rely on."""
    for f in fields(entity):
        value = getattr(entity, f.name)
        path = f"{type(entity).__name__}.{f.name}"
        if value is None:
            if not is_optional(f):
                return path
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityField):
            inner = null_where_not_nullable(value)
        elif isinstance(kind, EntityTupleField):
            inner = next(filter(None, map(null_where_not_nullable, value)), None)
        elif isinstance(kind, PrimitiveTupleField):
            inner = f"{path}[]" if any(v is None for v in value) else None
        else:
            continue
        if inner is not None:
            return inner
    return None


# ---------------------------------------------------------------------------- length bytes


def uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def prefix_bytes(p: LengthPrefix, n: int) -> bytes:
    """Length `n` (-1: null) in the encoding of `p`; compact lengths are n + 1 (wrapping a
    value the encoding cannot hold, as a hostile client would)."""
    if p.encoding == "int16":
        return struct.pack(">H", n & 0xFFFF)
    if p.encoding == "int32":
        return struct.pack(">I", n & 0xFFFF_FFFF)
    value = n if p.kind == "tagged" else n + 1
    return uvarint_bytes(value & (2**35 - 1))


def _lengths_to_try(p: LengthPrefix) -> list[int]:
    top = {"int16": 2**15 - 1, "int32": 2**31 - 1}.get(p.encoding, 2**35 - 2)
    return [top, top // 2, -1, -2, -top - 1, p.value + 1, p.value - 1, 0, 1 << 20]


def _splice(payload: bytes, at: int, stop: int, new: bytes) -> bytes:
    return payload[:at] + new + payload[stop:]


# ---------------------------------------------------------------------------- mutations

Mutation = Callable[[bytes, list[LengthPrefix], random.Random], bytes | None]


def _length(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    p = rng.choice(found)
    n = rng.choice(_lengths_to_try(p))
    return _splice(payload, p.at, p.start, prefix_bytes(p, n))


def _varint(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    uv = [p for p in found if p.encoding == "uvarint"]
    if not uv:
        return None
    p = rng.choice(uv)
    value = p.value if p.kind == "tagged" else p.value + 1
    width = rng.choice((5, 6, 10))  # 5: overlong but legal; 6 and 10: past Kafka's limit
    body = bytearray(uvarint_bytes(value).ljust(width, b"\x00"))
    for i in range(width - 1):
        body[i] |= 0x80
    if rng.random() < 0.2:  # or never ending, at the frame's end
        return payload[: p.at] + b"\xff" * rng.randrange(1, 6)
    return _splice(payload, p.at, p.start, bytes(body))


def _duplicate(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    arrays = [p for p in found if p.first_stop is not None]
    if not arrays:
        return None
    p = rng.choice(arrays)
    assert p.first_stop is not None
    element = payload[p.start : p.first_stop]
    room = MAX_GROWN_BYTES // max(len(element), 1)
    extra = rng.choice((1, 2, rng.randrange(1, max(room, 2))))
    grown = p.value + extra
    if rng.random() < 0.2:
        grown += rng.choice((1, -1))  # and the count off by one
    head = prefix_bytes(p, grown)
    return payload[: p.at] + head + element * extra + payload[p.start :]


def _records(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    fields = [p for p in found if p.kind == "records"]
    if not fields:
        return None
    p = rng.choice(fields)
    _kind, bad = malformed_batch(rng)
    return _splice(payload, p.at, p.stop, prefix_bytes(p, len(bad)) + bad)


def _truncate(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    if found and rng.random() < 0.5:  # inside or right after a length prefix
        p = rng.choice(found)
        return payload[: rng.randrange(p.at, p.start + 1)] or payload[:1]
    return payload[: rng.randrange(1, len(payload))] if len(payload) > 1 else None


def _flip(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    out = bytearray(payload)
    for _ in range(rng.randrange(1, 5)):
        i = rng.randrange(len(out))
        out[i] = rng.choice((out[i] ^ (1 << rng.randrange(8)), rng.randrange(256), 0xFF, 0x80))
    return bytes(out)


def _trailing(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    return payload + rng.randbytes(rng.randrange(1, 9))


def _other_version(payload: bytes, found: list[LengthPrefix], rng: random.Random) -> bytes | None:
    """Another version's (or API's) header over this body: a schema misread."""
    key, version = rng.choice(KAFKA_SERVED)
    if rng.random() < 0.5:
        key = struct.unpack_from(">h", payload)[0]
        version = rng.randrange(-1, 20)
    return struct.pack(">hh", key, version) + payload[4:]


KAFKA_MUTATIONS: dict[str, Mutation] = {
    "length": _length,
    "varint": _varint,
    "duplicate": _duplicate,
    "records": _records,
    "truncate": _truncate,
    "flip": _flip,
    "trailing": _trailing,
    "other_version": _other_version,
}


def mutate_kafka(payload: bytes, rng: random.Random) -> tuple[str, bytes]:
    """(mutation name, mutated payload) of a valid Kafka request payload. Some mutations
    leave a request that still decodes (a doubled element, a flipped string byte): fine."""
    key, version = struct.unpack_from(">hh", payload)
    schema = load_request_schema(key, version)
    found = length_prefixes(schema, schema.__header_schema__, payload)
    names = list(KAFKA_MUTATIONS)
    if any(p.kind == "records" for p in found) and rng.random() < 0.3:
        names = ["records"]  # the produce path deserves more than one draw in eight
    for _ in range(8):  # a mutation without a target (no records field) draws again
        name = rng.choice(names)
        out = KAFKA_MUTATIONS[name](payload, found, rng)
        if out is not None and out != payload:
            return name, out
        names = list(KAFKA_MUTATIONS)
    return "trailing", payload + b"\x00"
