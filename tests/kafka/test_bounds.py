"""Kafka requests' lengths checked before kio allocates (kafka/bounds.py, docs/front-door.md).

The walker must accept every valid request of every served API and version, exactly to its
end (hypothesis builds them from kio's own schema classes, which it encodes), refuse every
strict prefix of one, and refuse a length that claims more than the frame holds, before kio's
native reader sizes anything from it: the first test below aborts the whole interpreter
(`memory allocation of 274877906928 bytes failed`) on a codec without the walk, which is why it
runs the decode in a child process.
"""

from __future__ import annotations

import datetime
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.static.primitive import i32, i32Timedelta, i64

from minikafka.errors import RemoteProtocolError
from minikafka.kafka.bounds import check_request
from minikafka.kafka.codec import SUPPORTED, decode_request
from minikafka.testing.fuzz import encode_kafka

# kio registers a strategy for each of its primitive types but the opaque record bytes, which
# minikafka.testing.fuzz registers (valid RecordBatch v2 or junk) when it is imported.

SERVED = [(key, v) for key, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)]

# ListPartitionReassignments v0 (flexible): header v2 (api 46, v0, correlation 1, null
# client id, no tags), timeout_ms 1000, then a topics array whose compact length is the
# varint FF FF FF FF 7F: 2^35 - 2 elements in a 20-byte request.
BOMB_46 = struct.pack(">hhih", 46, 0, 1, -1) + b"\x00" + struct.pack(">i", 1000) + b"\xff" * 4
BOMB_46 += b"\x7f"


encode = encode_kafka  # the fuzzer's: the schema's header version, then the body


def test_an_array_length_past_the_frame_is_refused_before_allocation() -> None:
    """The 20-byte request of docs/front-door.md: a clean RemoteProtocolError, in a child process so
    that an abort (the bug) fails this test instead of ending the test run."""
    code = (
        "from minikafka.kafka.codec import decode_request\n"
        "from minikafka.errors import RemoteProtocolError\n"
        f"try:\n    decode_request({BOMB_46!r})\n"
        "except RemoteProtocolError as exc:\n    print('refused:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-400:]
    assert "refused: kafka ListPartitionReassignmentsRequest v0: an array of 34359738366" in (
        done.stdout
    )


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        # Metadata v1: topics is a legacy int32 array, 2^31 - 1 elements of a 2-byte string.
        ("metadata int32 array", struct.pack(">hhihi", 3, 1, 1, -1, 0x7FFFFFFF)),
        # ApiVersions v3 (flexible): client software name, compact length 2^32.
        ("compact string", struct.pack(">hhih", 18, 3, 1, -1) + b"\x00\xff\xff\xff\xff\x0f"),
        # A legacy client id of 30,000 bytes in a 10-byte header.
        ("client id", struct.pack(">hhih", 3, 1, 1, 30_000)),
        # A varint of six bytes (Kafka's readUnsignedVarint stops at five).
        ("long varint", struct.pack(">hhih", 46, 0, 1, -1) + b"\x00" + b"\0\0\0\0" + b"\xff" * 6),
    ],
)
def test_lengths_past_the_frame_are_refused(name: str, payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_request(payload)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_valid_request_walks_to_its_end(api_key: int, version: int, data) -> None:
    """Each served API and version, built by hypothesis from kio's schema and encoded by kio:
    the walk ends exactly at the end, decode_request agrees, and every strict prefix (cut at a
    drawn point) is refused."""
    schema = load_request_schema(api_key, version)
    body = data.draw(st.from_type(schema))
    payload = encode(body)
    check_request(schema, schema.__header_schema__, payload, 0)
    try:
        decoded = decode_request(payload)
    except RemoteProtocolError as exc:
        # kio reads int64 durations (OffsetCommit v2-4's retention time) as timedelta, which
        # holds about +-10^17 ms: a larger one is refused, the connection closed. Clients send -1.
        assume("timedelta" not in str(exc))
        raise
    assert decoded.body == body
    cut = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    with pytest.raises(RemoteProtocolError):
        check_request(schema, schema.__header_schema__, payload[:cut], 0)


# Found by the fuzzer (tests/integration/test_fuzz_node.py): kio reads a negative length as null
# whatever the schema says, so a handler met None where Kafka guarantees an array (TypeError in
# DescribeGroups, Produce, Fetch, CreateTopics...). Kafka's generated readers refuse it:
# "non-nullable field groups was serialized as null".
NULL_FOR_NON_NULLABLE = [
    # DescribeGroups v0: groups (int32 array) = -1.
    ("array", struct.pack(">hhihi", 15, 0, 1, -1, -1)),
    # Produce v3: transactional_id null (nullable), acks 1, timeout 1000, topic_data = -1.
    ("array", struct.pack(">hhihhhii", 0, 3, 1, -1, -1, 1, 1000, -1)),
    # ApiVersions v3 (flexible): client_software_name compact length 0 (null).
    ("string", struct.pack(">hhih", 18, 3, 1, -1) + b"\x00" + b"\x00" + b"\x021" + b"\x00"),
    # FindCoordinator v0: key (int16 string) = -1.
    ("string", struct.pack(">hhihh", 10, 0, 1, -1, -1)),
]


@pytest.mark.parametrize(
    ("kind", "payload"),
    NULL_FOR_NON_NULLABLE,
    ids=["describe-groups-groups", "produce-topic-data", "api-versions-name", "find-coord-key"],
)
def test_null_for_a_non_nullable_field_is_refused(kind: str, payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match=f"non-nullable {kind}"):
        decode_request(payload)


def test_null_for_a_nullable_field_still_decodes() -> None:
    """Metadata v8's topics may be null (all topics), a Produce's transactional id too."""
    metadata = decode_request(struct.pack(">hhihi", 3, 8, 1, -1, -1) + b"\x01\x00\x00")
    assert metadata.body.topics is None
    produce = decode_request(struct.pack(">hhihhhii", 0, 3, 1, -1, -1, 1, 1000, 0))
    assert produce.body.transactional_id is None and produce.body.topic_data == ()


def metadata_v1(topics: int) -> bytes:
    """Metadata v1 naming `topics` one-letter topics, built by hand (300 KB for 100,000)."""
    head = struct.pack(">hhih", 3, 1, 7, -1) + struct.pack(">i", topics)
    return head + b"\x00\x01a" * topics


def test_a_request_of_more_array_elements_than_the_bound_is_refused_before_kio() -> None:
    """MAX_REQUEST_ELEMENTS at every depth: kio's decode holds the loop about 1 us an element
    (a 1,000,000-partition Fetch stalled a broker 3 s), so a legal request past the bound is
    refused, its connection closed, as a malformed one is; one at the bound decodes."""
    from minikafka.kafka.bounds import MAX_REQUEST_ELEMENTS, TooManyElements

    assert len(decode_request(metadata_v1(MAX_REQUEST_ELEMENTS)).body.topics) == (
        MAX_REQUEST_ELEMENTS
    )
    with pytest.raises(TooManyElements, match="more than the 100,000 array elements"):
        decode_request(metadata_v1(MAX_REQUEST_ELEMENTS + 1))


def test_elements_are_counted_at_every_depth() -> None:
    """A Fetch of 3 topics x 4 partitions holds 15 elements: refused under a bound of 14."""
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic

    from minikafka.kafka.bounds import TooManyElements

    part = FetchPartition(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1))
    topics = tuple(FetchTopic(topic=f"t{i}", partitions=(part,) * 4) for i in range(3))
    body = FetchRequest(
        replica_id=i32(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(1),
        topics=topics,
    )
    payload = encode(body)
    check_request(FetchRequest, FetchRequest.__header_schema__, payload, 0, max_elements=15)
    with pytest.raises(TooManyElements):
        check_request(FetchRequest, FetchRequest.__header_schema__, payload, 0, max_elements=14)
