"""InitProducerId on a broker (KIP-98): producer ids from blocks the controller allocates.

Kafka's RPCProducerIdManager: the broker hands out ids from its current block and asks the
controller for the next block (AllocateProducerIds, KIP-730) when it runs out; the controller
persists the allocation first, so ids are unique cluster-wide and across controller restarts.
Only idempotence is served (no transactions): a request naming a transactional id is refused
with INVALID_REQUEST. Every InitProducerId gets a NEW id at epoch 0, as Kafka gives an
idempotent producer (which then bumps its epoch itself, KIP-360).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from minikafka.core.producer_ids import BrokerProducerIds, ProducerIdBlock
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError
from minikafka.wire.messages import (
    AllocateProducerIdsRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

BlockSource = Callable[[], Awaitable[ProducerIdBlock]]


class ProducerIdManager:
    def __init__(self, next_block: BlockSource) -> None:
        self._next_block = next_block
        self._ids = BrokerProducerIds()
        self._lock = trio.Lock()  # one block request at a time

    async def handle(self, body: InitProducerIdRequest) -> InitProducerIdResponse:
        if body.transactional_id is not None:
            return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST)
        async with self._lock:
            pid = self._ids.take()
            if pid is None:
                try:
                    self._ids.add_block(await self._next_block())
                except MiniKafkaError:
                    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS/NOT_AVAILABLE: retry later.
                    return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
                pid = self._ids.take()
                assert pid is not None
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)


def controller_block_source(link, broker_id: int) -> BlockSource:  # noqa: ANN001 - ControllerLink
    """Blocks from the controller over the broker's controller link."""

    async def next_block() -> ProducerIdBlock:
        resp = await link.request(
            AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=link.broker_epoch),
            timeout_s=30,
        )
        if resp.error_code != ErrorCode.NONE or resp.producer_id_len < 1:
            raise BrokerError(resp.error_code, "no producer id block from the controller")
        return ProducerIdBlock(first_id=resp.producer_id_start, size=resp.producer_id_len)

    return next_block
