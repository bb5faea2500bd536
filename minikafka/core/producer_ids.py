"""Producer ids for idempotent producers, unique cluster-wide (KIP-98, KIP-730).

Kafka's controller hands brokers BLOCKS of producer ids (KIP-730 AllocateProducerIds,
ProducerIdControlManager): a broker answers InitProducerId from its block and asks for the next
block when it runs out. The controller's only state is the next unallocated id, persisted in its
metadata document before any block is handed out, so a restarted controller never hands out an
id twice (a block lost with a broker's restart is simply skipped, as in Kafka).
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.errors import ErrorCode

BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdBlock:
    first_id: int
    size: int

    @property
    def next_block_first_id(self) -> int:
        return self.first_id + self.size


def allocate_block(
    next_id: int, *, broker_epoch: int, registered_epoch: int | None
) -> tuple[ErrorCode, ProducerIdBlock | None]:
    """The block a broker gets, or why not (ProducerIdControlManager.generateNextProducerId:
    an unknown broker or an older epoch than the registered one is STALE_BROKER_EPOCH)."""
    if registered_epoch is None:
        return ErrorCode.BROKER_ID_NOT_REGISTERED, None
    if broker_epoch != registered_epoch:
        return ErrorCode.STALE_BROKER_EPOCH, None
    return ErrorCode.NONE, ProducerIdBlock(first_id=next_id, size=BLOCK_SIZE)


class BrokerProducerIds:
    """A broker's side: ids handed out one by one from the current block (Kafka's
    RPCProducerIdManager). `take()` -> an id, or None when a new block is needed."""

    def __init__(self) -> None:
        self._next = 0
        self._end = 0

    def take(self) -> int | None:
        if self._next >= self._end:
            return None
        pid = self._next
        self._next += 1
        return pid

    def add_block(self, block: ProducerIdBlock) -> None:
        self._next, self._end = block.first_id, block.next_block_first_id
