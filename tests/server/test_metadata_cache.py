"""A broker's metadata cache (server/metadata_cache.py) and the Metadata answer it shares with
the controller: what a topic filter returns, and that its cost is the topics named."""

from __future__ import annotations

from collections.abc import Sequence

from minikafka.errors import ErrorCode
from minikafka.server.metadata_cache import MetadataCache, metadata_response
from minikafka.testing.controller_state import create, make, register
from minikafka.testing.memory_node import partition_state
from minikafka.wire.messages import BrokerInfo

BROKERS = [BrokerInfo(node_id=b, host="h", port=9000 + b) for b in (1, 2)]


def cache_with(topics: dict[str, int]) -> MetadataCache:
    cache = MetadataCache()
    cache.update(
        brokers=BROKERS,
        partitions=[
            partition_state(name, p, leader=1 + p % 2, isr=[1, 2], replicas=[1 + p % 2, 3])
            for name, n in topics.items()
            for p in reversed(range(n))
        ],
    )
    return cache


def test_a_topic_filter_answers_those_topics_and_names_the_unknown_ones():
    cache = cache_with({"big": 50, "small": 2, "other": 3})
    resp = cache.response(["small", "nope", "other"])
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("other", ErrorCode.NONE),
        ("small", ErrorCode.NONE),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    small = resp.topics[1].partitions
    assert [(p.partition, p.leader, p.offline_replicas) for p in small] == [
        (0, 1, [3]),
        (1, 2, [3]),
    ]
    assert [t.name for t in cache.response(None).topics] == ["big", "other", "small"]
    assert set(cache.topics) == {"big", "small", "other"} and "nope" not in cache.topics


def test_an_older_registration_does_not_replace_a_newer_one():
    cache = cache_with({"t": 1})
    newer = partition_state("t", 0, leader=2, isr=[2], leader_epoch=3)
    older = partition_state("t", 0, leader=1, isr=[1], leader_epoch=2, partition_epoch=9)
    cache.update(brokers=None, partitions=[newer, older])
    (p,) = cache.response(["t"]).topics[0].partitions
    assert (p.leader, p.leader_epoch) == (2, 3)
    assert [b.node_id for b in cache.response(None).brokers] == [1, 2]  # brokers=None keeps them


class CountingTopics(Sequence[str]):
    """A topic filter that counts the membership tests made on it."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.tests = names, 0

    def __getitem__(self, i):  # noqa: ANN001, ANN204
        return self.names[i]

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        self.tests += 1
        return name in self.names


def test_a_topic_filter_is_not_searched_once_per_partition():
    """`st.topic not in topics` used to search the request's list for every partition, so a
    filter of T topics over P partitions cost P x T."""
    states = [partition_state("t", p, leader=1, isr=[1]) for p in range(1000)]
    topics = CountingTopics(["t", "u"])
    resp = metadata_response(BROKERS, states, 1, topics)
    assert len(resp.topics[0].partitions) == 1000
    assert topics.tests == 0


def test_the_controller_answers_a_topic_filter_from_those_topics():
    c = make()
    register(c)
    create(c, "a", num_partitions=3, replication_factor=2)
    create(c, "b", num_partitions=2, replication_factor=2)
    every = c.partition_states()
    assert [(s.topic, s.partition) for s in every] == [
        (t, p) for t, n in (("a", 3), ("b", 2)) for p in range(n)
    ]
    assert c.partition_states(["b", "zz", "b"]) == every[3:]
    assert c.partition_states([]) == []


def test_deleted_topics_go_and_a_full_picture_replaces_what_was_known():
    """DeleteTopics reaches a live broker as UpdateMetadata `deleted_topics`; a broker that was
    away gets the controller's whole picture with `replace`, which drops a topic deleted
    meanwhile (one it kept would be served as if it existed)."""
    cache = cache_with({"a": 2, "b": 1, "c": 1})
    known = cache.topics  # a live view
    cache.update(brokers=None, partitions=[], deleted_topics=["a", "nope"])
    assert set(known) == {"b", "c"}
    cache.update(
        brokers=BROKERS, partitions=[partition_state("c", 0, leader=2, isr=[2])], replace=True
    )
    assert set(cache.topics) == {"c"} and cache.response(["b"]).topics[0].error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
