"""Producer ids (KIP-98 InitProducerId, KIP-730 AllocateProducerIds): unique cluster-wide and
across controller restarts; a broker serves them from blocks."""

from __future__ import annotations

import random

import trio

from minikafka.core.controller import ControllerConfig, ControllerState
from minikafka.core.producer_ids import BLOCK_SIZE, BrokerProducerIds, ProducerIdBlock
from minikafka.errors import BrokerError, ErrorCode
from minikafka.server.producer_ids import ProducerIdManager
from minikafka.wire.messages import InitProducerIdRequest


def controller(doc=None) -> ControllerState:  # noqa: ANN001
    kw = dict(controller_id=0, config=ControllerConfig(), rng=random.Random(1))
    return ControllerState.from_doc(doc, **kw) if doc else ControllerState(**kw)


def registered(c: ControllerState, broker_id: int) -> int:
    code, epoch, _ = c.register_broker(
        broker_id=broker_id,
        incarnation_id=f"i{broker_id}",
        host="127.0.0.1",
        port=9000 + broker_id,
        now_ms=0,
    )
    assert code == ErrorCode.NONE
    return epoch


def test_blocks_are_disjoint_and_survive_a_controller_restart() -> None:
    c = controller()
    e1, e2 = registered(c, 1), registered(c, 2)
    code, b1, effects = c.allocate_producer_ids(broker_id=1, broker_epoch=e1)
    assert code == ErrorCode.NONE and b1 == ProducerIdBlock(first_id=0, size=BLOCK_SIZE)
    assert effects  # the shell persists the document before answering
    _, b2, _ = c.allocate_producer_ids(broker_id=2, broker_epoch=e2)
    assert b2 is not None and b2.first_id == BLOCK_SIZE
    restarted = controller(c.to_doc())
    e1 = registered(restarted, 1)
    _, b3, _ = restarted.allocate_producer_ids(broker_id=1, broker_epoch=e1)
    assert b3 is not None and b3.first_id == 2 * BLOCK_SIZE


def test_an_unknown_broker_or_a_stale_epoch_gets_no_block() -> None:
    c = controller()
    epoch = registered(c, 1)
    assert c.allocate_producer_ids(broker_id=5, broker_epoch=1)[:2] == (
        ErrorCode.BROKER_ID_NOT_REGISTERED,
        None,
    )
    assert c.allocate_producer_ids(broker_id=1, broker_epoch=epoch - 1)[:2] == (
        ErrorCode.STALE_BROKER_EPOCH,
        None,
    )
    assert c.to_doc()["next_producer_id"] == 0


def test_a_broker_hands_out_its_block_then_needs_another() -> None:
    ids = BrokerProducerIds()
    assert ids.take() is None
    ids.add_block(ProducerIdBlock(first_id=10, size=2))
    assert [ids.take(), ids.take(), ids.take()] == [10, 11, None]


async def test_init_producer_id_asks_for_a_block_only_when_it_runs_out() -> None:
    asked = []

    async def next_block() -> ProducerIdBlock:
        await trio.lowlevel.checkpoint()
        asked.append(1)
        if len(asked) == 3:
            raise BrokerError(ErrorCode.NETWORK_EXCEPTION, "controller gone")
        return ProducerIdBlock(first_id=100 * len(asked), size=2)

    m = ProducerIdManager(next_block)
    got = [await m.handle(InitProducerIdRequest()) for _ in range(5)]
    assert [(r.error_code, r.producer_id, r.producer_epoch) for r in got] == [
        (0, 100, 0),
        (0, 101, 0),
        (0, 200, 0),
        (0, 201, 0),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1),  # retriable
    ]
    refused = await m.handle(InitProducerIdRequest(transactional_id="tx"))
    assert refused.error_code == ErrorCode.INVALID_REQUEST


class _DocStore:
    """A controller metadata store holding its saved records (as MetadataStore does)."""

    def __init__(self) -> None:
        self.records: dict = {}
        self.saves = 0

    @property
    def doc(self):  # noqa: ANN201
        from minikafka.core.controller.records import doc_from_records

        return doc_from_records(self.records) if self.records else None

    def read(self):  # noqa: ANN201
        return dict(self.records)

    def write(self, puts, deletes=()) -> None:  # noqa: ANN001
        for key in deletes:
            self.records.pop(key, None)
        self.records.update(puts)
        self.saves += 1


def test_the_controller_service_persists_each_block_before_answering_it() -> None:
    """AllocateProducerIds through the controller service: the advanced counter is saved
    before the answer, so a controller restarted from that document hands out the next block."""
    from minikafka.server.config import NodeConfig
    from minikafka.server.controller_service import ControllerService
    from minikafka.server.eventlog import EventLog
    from minikafka.wire.messages import AllocateProducerIdsRequest

    store = _DocStore()

    def service() -> ControllerService:
        s = ControllerService(
            config=NodeConfig(node_id=100, roles=("controller",)),
            store=store,  # type: ignore[arg-type]
            events=EventLog(None, node_id=100),
            rng=random.Random(1),
        )
        kw = dict(controller_id=100, config=ControllerConfig(), rng=random.Random(1))
        restored = ControllerState.from_records(store.read(), **kw) if store.records else None
        s.state = restored or ControllerState(**kw)
        return s

    async def allocate(s: ControllerService) -> tuple[int, int, int]:
        epoch = registered(s.state, 1)  # type: ignore[arg-type]
        resp = await s.dispatch(AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch))
        return resp.error_code, resp.producer_id_start, resp.producer_id_len

    first = trio.run(allocate, service())
    assert first == (ErrorCode.NONE, 0, BLOCK_SIZE) and store.saves == 1
    assert store.doc["next_producer_id"] == BLOCK_SIZE
    second = trio.run(allocate, service())  # a restarted controller
    assert second == (ErrorCode.NONE, BLOCK_SIZE, BLOCK_SIZE)
