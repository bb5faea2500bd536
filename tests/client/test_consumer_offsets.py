"""Consumer.list_offsets (client/consumer.py): a retriable refusal (a leader moving, a new
leader whose high watermark has not reached its epoch's start: KIP-207's OFFSET_NOT_AVAILABLE)
is asked again after metadata is refreshed, as Kafka's consumer does; anything else raises.
The client and connection are scripted; Trio's MockClock jumps the backoffs."""

from __future__ import annotations

from collections import deque

import pytest
import trio

from minikafka.client.consumer import Consumer
from minikafka.common import TopicPartition
from minikafka.errors import BrokerError, ErrorCode
from minikafka.wire.messages import ListOffsetsPartitionResponse, ListOffsetsResponse

TP = TopicPartition("t", 0)


class ScriptedClient:
    """Leader 1 for every partition; each ListOffsets answers the next (code, offset)."""

    def __init__(self, answers: list[tuple[int, int]]) -> None:
        self.answers = deque(answers)
        self.refreshes = 0
        self.asked_at: list[float] = []

    def leader_of(self, tp: TopicPartition) -> int:
        return 1

    async def refresh_metadata(self, topics: list[str]) -> None:
        self.refreshes += 1

    async def node_connection(self, node_id: int) -> ScriptedClient:
        return self

    async def request(self, body: object, *, timeout_s: float) -> ListOffsetsResponse:
        self.asked_at.append(trio.current_time())
        code, offset = self.answers.popleft()
        part = ListOffsetsPartitionResponse(topic="t", partition=0, error_code=code, offset=offset)
        return ListOffsetsResponse(partitions=[part])


async def test_offset_not_available_is_asked_again_until_the_leader_knows(autojump_clock):
    na = (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
    client = ScriptedClient([na, na, (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1), (0, 1904)])
    got = await Consumer(client).list_offsets([TP], earliest=False)  # type: ignore[arg-type]
    assert got == {TP: 1904}
    assert len(client.asked_at) == 4 and client.refreshes >= 3
    gaps = [b - a for a, b in zip(client.asked_at, client.asked_at[1:], strict=False)]
    assert all(g >= 0.1 for g in gaps), gaps  # retry.backoff.ms between attempts


async def test_a_refusal_that_is_not_retriable_raises_at_once(autojump_clock):
    client = ScriptedClient([(ErrorCode.UNKNOWN_SERVER_ERROR, -1), (0, 5)])
    with pytest.raises(BrokerError) as caught:
        await Consumer(client).list_offsets([TP], earliest=False)  # type: ignore[arg-type]
    assert caught.value.code == ErrorCode.UNKNOWN_SERVER_ERROR and len(client.asked_at) == 1


async def test_a_leader_that_never_catches_up_raises_after_the_timeout(autojump_clock):
    client = ScriptedClient([(ErrorCode.OFFSET_NOT_AVAILABLE, -1)] * 1000)
    start = trio.current_time()
    with pytest.raises(BrokerError) as caught:
        await Consumer(client).list_offsets([TP], earliest=False, timeout_s=5)  # type: ignore[arg-type]
    assert caught.value.code == ErrorCode.OFFSET_NOT_AVAILABLE
    assert trio.current_time() - start == pytest.approx(5.0)
