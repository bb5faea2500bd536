"""The controller service's request dispatch (server/controller_service.py), in process."""

from __future__ import annotations

import random

import trio

from minikafka.core.controller import ControllerState
from minikafka.core.controller_model import ControllerConfig
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.controller_service import ControllerService
from minikafka.server.eventlog import EventLog
from minikafka.wire.messages import CreatableTopic, CreateTopicsRequest


class CountingStore:
    def __init__(self) -> None:
        self.saves = 0

    def load(self) -> None:
        return None

    def save(self, doc: object) -> None:
        self.saves += 1


def service_with_brokers(store: CountingStore) -> ControllerService:
    service = ControllerService(
        config=NodeConfig(node_id=100, roles=("controller",)),
        store=store,  # type: ignore[arg-type]
        events=EventLog(None, node_id=100),
        rng=random.Random(1),
    )
    state = ControllerState(controller_id=100, config=ControllerConfig(), rng=random.Random(1))
    for broker_id in (1, 2):
        state.register_broker(
            broker_id=broker_id,
            incarnation_id=f"i{broker_id}",
            host="127.0.0.1",
            port=9000 + broker_id,
            now_ms=0,
        )
    service.state = state
    return service


def test_create_topics_validate_only_answers_as_if_created_and_creates_nothing():
    store = CountingStore()
    service = service_with_brokers(store)
    good = CreatableTopic(name="t", num_partitions=2, replication_factor=2)
    bad = CreatableTopic(name="u", num_partitions=1, replication_factor=5)

    async def main() -> None:
        req = CreateTopicsRequest(topics=[good, bad], validate_only=True)
        resp = await service.dispatch(req)
        codes = [r.error_code for r in resp.topics]
        assert codes == [ErrorCode.NONE, ErrorCode.INVALID_REPLICATION_FACTOR]

    trio.run(main)
    assert service.state is not None and service.state.topic_names() == []
    assert store.saves == 0  # nothing to persist, nothing sent
