"""Kafka's leniency for a MetadataRequest v9 the strict decoder refuses. Pure.

Kafka's generated readers skip tagged fields they do not know (KIP-482) and never look at bytes
after a request's last field (RequestContext.parseRequest). The listener's decoder is stricter
(kafka/bounds.py, codec.decode_request): a request must end exactly where its fields do, and kio
refuses an unknown tag. librdkafka 2.16's all-topics MetadataRequest v9 (an AdminClient's
`list_topics`) depends on Kafka's leniency: after the null topic array and the three booleans
its bytes go on `01 00 00 00`, which Kafka reads as one unknown tagged field (tag 0, empty) and
one ignored byte. Metadata v9 is served because clients trust a partition's leader epoch only
from v9 (KIP-320, KAFKA-9212), so such a request is read here as Kafka reads it: its topics and
booleans, and nothing after them. Every length is still checked against the frame.
"""

from __future__ import annotations

from typing import Any

from minikafka.errors import RemoteProtocolError
from minikafka.kafka.bounds import uvarint


def _skip_tags(buf: bytes, pos: int, end: int) -> int:
    count, pos = uvarint(buf, pos, end)
    for _ in range(count):
        _tag, pos = uvarint(buf, pos, end)
        size, pos = uvarint(buf, pos, end)
        if size > end - pos:
            raise RemoteProtocolError(f"tagged field of {size} bytes at byte {pos} past the frame")
        pos += size
    return pos


def metadata_request_v9(schema: type, buf: bytes, pos: int) -> Any:
    """A kio MetadataRequest (v9, `schema`) from the body at `pos`, read as Kafka's
    MetadataRequestData.read reads it; RemoteProtocolError if even that fails."""
    import sys

    end = len(buf)
    topic_cls = sys.modules[schema.__module__].MetadataRequestTopic
    n, pos = uvarint(buf, pos, end)
    topics: tuple[Any, ...] | None = None
    if n:  # a compact array: count + 1, 0 for null
        if n - 1 > end - pos:
            raise RemoteProtocolError(f"{n - 1} topics at byte {pos} past the frame")
        out = []
        for _ in range(n - 1):
            size, pos = uvarint(buf, pos, end)
            if size == 0 or size - 1 > end - pos:
                raise RemoteProtocolError(f"topic name of {size - 1} bytes at byte {pos}")
            name = bytes(buf[pos : pos + size - 1]).decode("utf-8")
            pos = _skip_tags(buf, pos + size - 1, end)
            out.append(topic_cls(name=name))
        topics = tuple(out)
    if end - pos < 3:
        raise RemoteProtocolError(f"MetadataRequest v9 ends at byte {end} before its booleans")
    flags = [buf[pos + i] != 0 for i in range(3)]
    return schema(
        topics=topics,
        allow_auto_topic_creation=flags[0],
        include_cluster_authorized_operations=flags[1],
        include_topic_authorized_operations=flags[2],
    )
