"""Producer id messages (KIP-98 InitProducerId, api 22; KIP-730 AllocateProducerIds, api 67),
re-exported by wire/messages.py with the rest."""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.wire.request import Request

MSG = dict(frozen=True, slots=True, kw_only=True)


@dataclass(**MSG)
class InitProducerIdRequest(Request["InitProducerIdResponse"]):
    """KIP-98: a client asks any broker for a producer id (idempotence without transactions:
    `transactional_id` is None; Kafka's v3+ fields let a producer name its current id/epoch)."""

    transactional_id: str | None = None
    transaction_timeout_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(**MSG)
class InitProducerIdResponse:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
    throttle_time_ms: int = 0


@dataclass(**MSG)
class AllocateProducerIdsRequest(Request["AllocateProducerIdsResponse"]):
    """KIP-730: a broker asks the controller for a block of producer ids."""

    broker_id: int
    broker_epoch: int


@dataclass(**MSG)
class AllocateProducerIdsResponse:
    error_code: int
    producer_id_start: int = -1
    producer_id_len: int = 0
    throttle_time_ms: int = 0
