"""A client cannot create an internal topic (docs/front-door.md); the group coordinator can.

Broker.dispatch with a controller link that creates whatever it is asked: a client's
CreateTopics naming `__consumer_offsets` is answered INVALID_REQUEST for that name ("Creation of
internal topic ... is prohibited.", Kafka's ControllerApis) and never reaches the controller,
the other names of the same request are created, and the broker's own request (internal=True,
the group coordinator's) goes through. Before, a client could create `__consumer_offsets` with
any partition count and so move every group's coordinator.
"""

from __future__ import annotations

import pytest

from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.testing.memory_node import FakeControllerLink, MemoryBroker
from minikafka.wire.messages import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

OFFSETS = "__consumer_offsets"


class CreatingLink(FakeControllerLink):
    async def request(self, body: object, *, timeout_s: float) -> object:
        if isinstance(body, CreateTopicsRequest):
            self.requests.append(body)
            return CreateTopicsResponse(
                topics=[CreatableTopicResult(name=t.name, error_code=0) for t in body.topics]
            )
        return await super().request(body, timeout_s=timeout_s)


@pytest.fixture
async def broker(tmp_path):
    b = MemoryBroker(
        NodeConfig(node_id=1, host="b1", port=9001), tmp_path / "b1", controller=CreatingLink()
    )
    async with b.running():
        yield b


def create(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=1) for n in names])


async def test_a_client_cannot_create_an_internal_topic(autojump_clock, broker):
    answer = await broker.broker.dispatch(create(OFFSETS))
    assert [(r.name, r.error_code, r.error_message) for r in answer.topics] == [
        (OFFSETS, ErrorCode.INVALID_REQUEST, f"Creation of internal topic {OFFSETS} is prohibited.")
    ]
    assert broker.controller.requests == []  # nothing reached the controller


async def test_the_other_topics_of_the_request_are_created(autojump_clock, broker):
    answer = await broker.broker.dispatch(create("a", OFFSETS, "b"))
    assert [(r.name, r.error_code) for r in answer.topics] == [
        ("a", 0),
        (OFFSETS, ErrorCode.INVALID_REQUEST),
        ("b", 0),
    ]
    (forwarded,) = broker.controller.requests
    assert [t.name for t in forwarded.topics] == ["a", "b"]


async def test_the_group_coordinator_creates_it(autojump_clock, broker):
    answer = await broker.broker.dispatch(create(OFFSETS), internal=True)
    assert [(r.name, r.error_code) for r in answer.topics] == [(OFFSETS, 0)]
