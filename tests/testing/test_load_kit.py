"""The load kit (minikafka/testing/load.py): bounds, pacing, and one attempt's outcome read
from the library's Producer against an in-process broker (testing/memory_client.py)."""

from __future__ import annotations

import pytest
import trio

from minikafka.client.producer import DeliveryError
from minikafka.common import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.testing.load import (
    Bounds,
    Rate,
    Turns,
    attempt_once,
    batch_of,
    load_producer,
    run_senders,
)
from minikafka.testing.memory_client import open_memory_client
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    broker_config,
    partition_state,
)
from minikafka.wire.messages import ProduceRequest

TP = TopicPartition("t", 0)


async def test_senders_stop_at_the_count_bound(autojump_clock):
    calls: list[int] = []

    async def send(k: int) -> bool:
        calls.append(k)
        await trio.sleep(0.01)
        return True

    started = await run_senders(3, send, Bounds(until=trio.current_time() + 60, max_sends=10))
    assert started == len(calls) == 10 and set(calls) == {0, 1, 2}


async def test_senders_stop_at_the_time_bound_and_cut_only_when_told(autojump_clock):
    finished = 0

    async def send(_k: int) -> bool:
        nonlocal finished
        await trio.sleep(0.4)
        finished += 1
        return True

    t0 = trio.current_time()
    await run_senders(2, send, Bounds(until=t0 + 1.0, max_sends=1000))
    assert finished == 6 and trio.current_time() == pytest.approx(t0 + 1.2)  # ran to its end
    finished, t0 = 0, trio.current_time()
    await run_senders(2, send, Bounds(until=t0 + 1.0, max_sends=1000, cut=True))
    assert finished == 4 and trio.current_time() == pytest.approx(t0 + 1.0)  # cut at `until`


async def test_a_sender_that_is_done_stops_alone(autojump_clock):
    todo = list(range(5))

    async def send(_k: int) -> bool:
        if not todo:
            return False
        todo.pop()
        await trio.sleep(0.1)
        return True

    await run_senders(4, send, Bounds(until=trio.current_time() + 60, max_sends=100))
    assert todo == []


async def test_turns_skip_the_missed_ones_instead_of_bursting(autojump_clock):
    t0 = trio.current_time()
    turns = Turns(1.0, t0)
    assert await turns.wait(t0 + 10) and trio.current_time() == pytest.approx(t0)
    await trio.sleep(3.5)  # a stall: turns 1, 2 and 3 missed: ONE send for them, at once
    assert await turns.wait(t0 + 10) and trio.current_time() == pytest.approx(t0 + 3.5)
    assert await turns.wait(t0 + 10) and trio.current_time() == pytest.approx(t0 + 4.0)
    assert await turns.wait(t0 + 10) and trio.current_time() == pytest.approx(t0 + 5.0)
    assert not await turns.wait(t0 + 5.5)  # the load is over by the next turn


async def test_a_rate_catches_up_after_a_stall(autojump_clock):
    rate = Rate(10.0, trio.current_time())
    await trio.sleep(1.05)
    assert rate.due(trio.current_time()) == 10  # all ten due now, not spread out
    await rate.wait_for(15)
    assert trio.current_time() == pytest.approx(rate.start + 1.5)


def test_one_attempt_means_no_idempotence_and_a_bounded_send():
    class Client:  # the Producer only keeps it until a send
        pass

    producer = load_producer(Client(), request_timeout_s=2.0, attempts=1)  # type: ignore[arg-type]
    assert not producer.idempotent and producer.config.retries == 0
    assert producer.config.delivery_timeout_s == pytest.approx(8.0)
    assert load_producer(Client()).idempotent  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="attempts"):
        load_producer(Client(), attempts=0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ one attempt's outcome


class SilentOnce:
    """Writes the first produce request, then never answers it (the answer was lost)."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker, self.left = broker, 1
        broker.network.add(broker.address, self.dispatch)  # type: ignore[union-attr]

    async def dispatch(self, header, body):  # noqa: ANN001, ANN201
        result = await self.broker.dispatch(header, body)
        if isinstance(body, ProduceRequest) and self.left:
            self.left -= 1
            await trio.sleep_forever()
        return result


@pytest.fixture
async def broker(tmp_path):
    network = MemoryNetwork()
    b = MemoryBroker(broker_config(1), tmp_path / "b1", network=network)
    async with b.running():
        await b.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        yield network, b


async def test_one_attempt_ok_fail_and_info(autojump_clock, broker):
    network, b = broker
    SilentOnce(b)
    async with open_memory_client(network, [b]) as client:
        await client.refresh_metadata(["t"])
        producer = load_producer(client, request_timeout_s=1.0, attempts=1)
        batch, n = batch_of([b"a", b"b"], now_ms=1)
        # The answer is lost: written, but the producer cannot know: indeterminate, no retry.
        kind, fields = await attempt_once(producer, TP, batch, n)
        assert (kind, fields["error"]) == ("info", "REQUEST_TIMED_OUT") and fields["node"] == 1
        assert await attempt_once(producer, TP, batch, n) == ("ok", {"offset": 2, "node": 1})
        # No leader for this partition: never sent, certainly not written.
        kind, fields = await attempt_once(producer, TopicPartition("t", 7), batch, n)
        assert kind == "fail" and "never sent" in fields["error"]


async def test_past_its_retries_a_send_raises_the_last_error(autojump_clock, broker):
    network, b = broker
    async with open_memory_client(network, [b]) as client:
        producer = load_producer(client, request_timeout_s=1.0, attempts=2)
        batch, n = batch_of([b"a"])
        with pytest.raises(DeliveryError) as caught:
            await producer.send_batches([(TopicPartition("t", 7), batch, n)])
    assert caught.value.code == ErrorCode.LEADER_NOT_AVAILABLE and not caught.value.sent
