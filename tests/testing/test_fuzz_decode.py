"""Structure-aware fuzzing of both listeners' decoders, in process (docs/front-door.md#the-fuzzer).

Every served Kafka API and version, and every native request message: hypothesis builds a valid
request (minikafka/testing/fuzz.py, fuzz_native.py), mutates it where a decoder trusts the
bytes (lengths, varints, counts, nesting, records, truncation, flipped bytes), and the decoder
must either decode it cleanly or refuse it with RemoteProtocolError (UnsupportedVersion for an
unserved Kafka version): never another exception, never an abort. The Kafka decode runs the
bounds walk first (kafka/bounds.py): without it, the first length mutation that claims 2^35
elements aborts this whole process in kio's native reader.

Fixed seed (derandomize), no example database: the same cases on every run, well under a
minute on the 2-core machine. The regression cases below are the fuzzer's finds, kept as
bytes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.errors import RemoteProtocolError
from minikafka.kafka import codec as kafka_codec
from minikafka.testing.fuzz import (
    KAFKA_SERVED,
    encode_kafka,
    kafka_request,
    mutate_kafka,
    null_where_not_nullable,
)
from minikafka.testing.fuzz_native import NATIVE_SERVED, mutate_native, native_request
from minikafka.wire import codec as native_codec


def fixed(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


REFUSED = (RemoteProtocolError, kafka_codec.UnsupportedVersion)


def _kafka_decodes_or_refuses(payload: bytes) -> None:
    """Refused, or decoded into a request kio can write again and that reads back the same:
    a decoded request breaks no rule of its schema (no None where Kafka has no null)."""
    try:
        request = kafka_codec.decode_request(payload)
    except REFUSED:
        return
    assert null_where_not_nullable(request.body) is None
    again = encode_kafka(request.body, client_id=request.client_id)
    assert kafka_codec.decode_request(again).body == request.body


def _native_decodes_or_refuses(payload: bytes) -> None:
    """Refused, or decoded into a message our own encoder accepts (its checks are the
    decoder's) and that reads back the same."""
    try:
        header, body = native_codec.decode_request(payload)
    except RemoteProtocolError:
        return
    assert native_codec.decode_request(native_codec.encode_request(header, body))[1] == body


@pytest.mark.parametrize(("api_key", "version"), KAFKA_SERVED)
@fixed(12)
@given(data=st.data())
def test_mutated_kafka_requests_decode_or_are_refused(api_key: int, version: int, data) -> None:
    payload = data.draw(kafka_request(api_key, version), label="valid")
    rng = data.draw(st.randoms(use_true_random=False), label="rng")
    for _ in range(4):  # a few mutations of one generated request: generation costs most
        name, mutated = mutate_kafka(payload, rng)
        _kafka_decodes_or_refuses(mutated)


@pytest.mark.parametrize("request_type", NATIVE_SERVED, ids=lambda t: t.__name__)
@fixed(25)
@given(data=st.data())
def test_mutated_native_requests_decode_or_are_refused(request_type: type, data) -> None:
    payload = data.draw(native_request(request_type), label="valid")
    rng = data.draw(st.randoms(use_true_random=False), label="rng")
    for _ in range(4):
        name, mutated = mutate_native(payload, rng)
        _native_decodes_or_refuses(mutated)


# ---------------------------------------------------------------------------- regressions

# Each a request the fuzzer once found that a decoder let through or crashed on, with what it
# must do now. Kafka: header v1 is api, version, correlation id, client id (int16 -1: null).
KAFKA_REGRESSIONS = {
    # kio read a negative array length as None for a non-nullable array; DescribeGroups'
    # handler then iterated None (TypeError). Fixed in kafka/bounds.py.
    "describe-groups-null-groups": struct.pack(">hhihi", 15, 0, 1, -1, -1),
    # Likewise Produce v3's topic_data (transactional id null, acks 1, timeout 1000).
    "produce-null-topic-data": struct.pack(">hhihhhii", 0, 3, 1, -1, -1, 1, 1000, -1),
    # Likewise a non-nullable compact string (ApiVersions v3 client_software_name).
    "api-versions-null-name": struct.pack(">hhih", 18, 3, 1, -1) + b"\x00\x00\x021\x00",
    # The 20-byte request that once aborted: 2^35 - 2 elements claimed (kio aborted the process).
    "reassignments-2^35-elements": struct.pack(">hhih", 46, 0, 1, -1)
    + b"\x00"
    + struct.pack(">i", 1000)
    + b"\xff\xff\xff\xff\x7f",
}


@pytest.mark.parametrize("payload", KAFKA_REGRESSIONS.values(), ids=KAFKA_REGRESSIONS.keys())
def test_kafka_regressions_are_refused(payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        kafka_codec.decode_request(payload)


NATIVE_REGRESSIONS = {
    # Arrays nested 5000 deep in the body: msgpack's stack limit, not a RecursionError.
    "nested-arrays": b"\x95\x03\x00\x07\xa4fuzz" + b"\x91" * 5000 + b"\x00",
    # A map nested 1100 deep inside a known field.
    "nested-maps": b"\x95\x03\x00\x07\xa4fuzz\x81\xa6topics" + b"\x81\xa1a" * 1100 + b"\x00",
    # An array32 header claiming 2^32 - 1 elements in a 20-byte payload.
    "array-of-4g": b"\x95\x03\x00\x07\xa4fuzz\x81\xa6topics\xdd\xff\xff\xff\xff",
    # A bin32 claiming 4 GiB.
    "bin-of-4g": b"\x95\x00\x00\x07\xa4fuzz\xc6\xff\xff\xff\xff",
}


@pytest.mark.parametrize("payload", NATIVE_REGRESSIONS.values(), ids=NATIVE_REGRESSIONS.keys())
def test_native_regressions_are_refused(payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        native_codec.decode_request(payload)
