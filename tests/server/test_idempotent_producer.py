"""The idempotent producer end to end, in process: the library's Producer and the experiment's
retrying workload against in-process brokers (testing/memory_client.py) whose network drops
the answer of a produce AFTER the write, and the experiment checker reading the history.

Idempotence off: the retry is stored twice and the checker reports `duplicated`.
Idempotence on (the default): stored once, answered with the original offset, nothing flagged.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
import trio

from minikafka.checker.anomalies import check
from minikafka.checker.history import parse_history
from minikafka.client.producer import Producer, ProducerConfig
from minikafka.common import TopicPartition
from minikafka.core.records import iter_batches, make_batch
from minikafka.errors import MiniKafkaError
from minikafka.experiment.workload import History, WorkloadSpec, _Values, final_read, run_producer
from minikafka.testing.memory_client import open_memory_client
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    replicating_config,
)
from minikafka.wire.messages import ProduceRequest

TP = TopicPartition("t", 0)
# A request unanswered for request_timeout_ms + 5 s is retried; every send ends within 60 s.
FAST = dict(request_timeout_ms=1000, delivery_timeout_s=60)


class DropAnswers:
    """Serve a broker but lose the answer of the first `n` produce requests after they were
    handled (written): it never comes, so the client's request times out and it retries, as
    when the answer is lost with a leader that dies right after the write."""

    def __init__(self, broker: MemoryBroker, n: int = 1) -> None:
        self.broker, self.left, self.dropped = broker, n, 0
        broker.network.add(broker.address, self.dispatch)  # type: ignore[union-attr]

    async def dispatch(self, header, body):  # noqa: ANN001, ANN201
        result = await self.broker.dispatch(header, body)
        if isinstance(body, ProduceRequest) and self.left > 0:
            self.left -= 1
            self.dropped += 1
            await trio.sleep_forever()
        return result


@pytest.fixture
async def single(tmp_path):
    network = MemoryNetwork()
    broker = MemoryBroker(replicating_config(1), tmp_path / "b1", network=network)
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        yield network, broker


def stored_values(broker: MemoryBroker) -> list[bytes]:
    from minikafka.core.records import decode_records

    return [r.value for b in iter_batches(broker.log_bytes("t")) for r in decode_records(b)]


@pytest.mark.parametrize("idempotence", [False, True])
async def test_a_retry_after_a_lost_answer(autojump_clock, single, idempotence):
    network, broker = single
    drop = DropAnswers(broker)
    async with open_memory_client(network, [broker]) as client:
        producer = Producer(client, ProducerConfig(enable_idempotence=idempotence, **FAST))
        first = await producer.send_records(TP, [(1, None, b"a"), (2, None, b"b")])
        second = await producer.send_records(TP, [(3, None, b"c")])
    assert drop.dropped == 1 and first.retries == 1
    if idempotence:
        assert stored_values(broker) == [b"a", b"b", b"c"]
        assert (first.base_offset, second.base_offset) == (0, 2)  # the ORIGINAL offset
        assert producer.producer_id >= 0
        assert broker.metrics.counters["produce_duplicates"] == 1
    else:
        assert stored_values(broker) == [b"a", b"b", b"a", b"b", b"c"]
        assert (first.base_offset, second.base_offset) == (2, 4)


async def test_idempotence_is_the_default_with_acks_all_only(autojump_clock, single):
    network, broker = single
    async with open_memory_client(network, [broker]) as client:
        assert Producer(client).idempotent
        assert not Producer(client, ProducerConfig(acks=1)).idempotent
        assert not Producer(client, ProducerConfig(enable_idempotence=False)).idempotent
        with pytest.raises(MiniKafkaError, match="acks"):
            Producer(client, ProducerConfig(acks=1, enable_idempotence=True))


async def test_concurrent_sends_keep_at_most_5_in_flight_and_store_each_once(
    autojump_clock, single
):
    """20 concurrent sends to one partition: at most 5 unresolved at a time, every batch stored
    once and in a sequence the broker accepted (requests that overtake each other are retried)."""
    network, broker = single
    DropAnswers(broker, n=3)
    async with open_memory_client(network, [broker]) as client:
        producer = Producer(client, ProducerConfig(**FAST))
        peak = 0

        async def send(i: int) -> None:
            nonlocal peak
            await trio.sleep(i / 1000)  # in order: offsets then follow the values
            await producer.send_batches([(TP, make_batch([(i, None, b"%d" % i)]), 1)])
            peak = max(peak, len(producer._partitions[TP].window))

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(send, i)
    assert sorted(stored_values(broker), key=int) == [b"%d" % i for i in range(20)]
    assert peak <= 5
    assert network.connections == 1  # concurrent sends share one connection (in order)
    seqs = [b.base_sequence for b in iter_batches(broker.log_bytes("t"))]
    assert seqs == list(range(20))


async def test_a_gap_at_the_leader_bumps_the_epoch_and_renumbers(autojump_clock, single):
    """The leader lacks what came before the oldest unresolved batch (acknowledged batches lost
    in an unclean failover; here: a producer state the broker forgot): the producer bumps the
    partition's epoch and restarts its sequence at 0 instead of retrying forever."""
    network, broker = single
    async with open_memory_client(network, [broker]) as client:
        producer = Producer(client, ProducerConfig(**FAST))
        await producer.send_records(TP, [(1, None, b"a")])
        broker.partition("t").producers.entries.clear()  # the leader lost the state
        await producer.send_records(TP, [(2, None, b"b")])  # seq 1: UNKNOWN_PRODUCER_ID
    assert producer.epoch_bumps == 1
    stored = list(iter_batches(broker.log_bytes("t")))
    assert [(b.producer_epoch, b.base_sequence) for b in stored] == [(0, 0), (1, 0)]
    assert stored_values(broker) == [b"a", b"b"]


# ---------------------------------------------------------------------------- the checker proof


async def run_workload(network, broker, tmp_path: Path, *, idempotence: bool):  # noqa: ANN001
    spec = WorkloadSpec(
        topic="t",
        partitions=1,
        producers=1,
        consumers=0,
        records_per_s=100.0,
        batch_records=5,
        retries=True,
        idempotence=idempotence,
        request_timeout_s=1.0,
        delivery_timeout_s=60.0,
    )
    history = History(tmp_path / f"history-{idempotence}.jsonl", time.time())
    async with open_memory_client(network, [broker]) as client:
        counts = await run_producer(
            client, spec, history, _Values(), 0, deadline=trio.current_time() + 15
        )
        await final_read(client, spec, history, timeout_s=10)
    history.close()
    lines = (tmp_path / f"history-{idempotence}.jsonl").read_text().splitlines()
    import json

    return counts, check(parse_history(json.loads(line) for line in lines))


async def test_the_checker_catches_duplicates_without_idempotence(autojump_clock, single, tmp_path):
    network, broker = single
    DropAnswers(broker, n=2)
    counts, verdict = await run_workload(network, broker, tmp_path, idempotence=False)
    assert counts["ok"] >= 5
    dup = verdict.anomalies["duplicated"]
    # The first batch's 5 values: its first attempt and its first retry lost their answers
    # (both written), so it is stored three times; the checker flags each value once.
    assert dup.count == 5
    assert verdict.valid is False


async def test_with_idempotence_the_checker_finds_no_duplicate(autojump_clock, single, tmp_path):
    network, broker = single
    drop = DropAnswers(broker, n=2)
    counts, verdict = await run_workload(network, broker, tmp_path, idempotence=True)
    assert drop.dropped == 2 and counts["ok"] >= 5 and counts["info"] == 0
    assert verdict.anomalies["duplicated"].count == 0
    assert verdict.valid is True


async def test_concurrent_callers_share_one_new_connection(autojump_clock, single):
    """Several tasks asking for a node's connection at once get the same one: a producer's
    requests to a node then leave in the order they were numbered."""
    network, broker = single
    async with open_memory_client(network, [broker]) as client:
        got = []

        async def ask() -> None:
            got.append(await client.connection(broker.address))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(ask)
    assert network.connections == 1 and len({id(c) for c in got}) == 1


async def test_a_producer_idle_past_its_expiry_writes_again(autojump_clock, tmp_path):
    """KIP-854: the broker forgets a producer idle for producer.id.expiration.ms. Its next
    batch (sequence 2) is then UNKNOWN_PRODUCER_ID, on which the library's producer bumps the
    partition's epoch and renumbers from 0 (KIP-360), as Kafka's client does: stored once."""
    network = MemoryNetwork()
    cfg = replace(
        replicating_config(1),
        producer_id_expiration_ms=60_000,
        producer_id_expiration_check_interval_ms=10_000,
    )
    broker = MemoryBroker(cfg, tmp_path / "b1", network=network)
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1], replicas=[1])])
        async with open_memory_client(network, [broker]) as client:
            producer = Producer(client, ProducerConfig(**FAST))
            await producer.send_records(TP, [(1, None, b"a"), (2, None, b"b")])
            await trio.sleep(90)  # seen at the 10 s check, forgotten at the 70 s one
            assert broker.partition("t").producers.entries == {}
            again = await producer.send_records(TP, [(3, None, b"c")])
        assert again.base_offset == 2
        assert stored_values(broker) == [b"a", b"b", b"c"]
        batches = list(iter_batches(broker.log_bytes("t")))
        assert [(b.producer_epoch, b.base_sequence) for b in batches] == [(0, 0), (1, 0)]
        assert broker.metrics.counters["producer_ids_expired"] == 1
