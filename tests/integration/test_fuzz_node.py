"""The fuzzer against a real node, over TCP on both listeners (docs/front-door.md#the-fuzzer).

`test_fixed_seed_fuzz_leaves_the_node_serving` (integration, in make test): a few thousand
mutated requests of every served API, Kafka's and the native ones (minikafka/testing/
fuzz_driver.py), each on a connection of its own; the node answers valid requests after every
batch, a connection opened before the run is still served after it, RSS stays bounded, and no
Kafka request reaches a handler in a shape its schema forbids (a handler_error event).

`test_long_fuzz_run` (marker `fuzz`, opt-in:
`pytest -m fuzz tests/integration/test_fuzz_node.py -s`): MINIKAFKA_FUZZ_REQUESTS requests
(default 1,000,000), printing requests/s, deaths and RSS. It is the one test of
tests/integration/ without the `integration` marker (conftest.py): it runs only when asked for.
"""

from __future__ import annotations

import datetime
import json
import os
import struct
from collections import Counter

import pytest
import trio
from kio.schema.produce.v3.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v3.response import ProduceResponse
from kio.serial import entity_reader
from kio.static.primitive import Records, i16, i32

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster
from minikafka.testing.clusters import cluster_up
from minikafka.testing.fuzz import encode_kafka
from minikafka.testing.fuzz_batches import bomb
from minikafka.testing.fuzz_driver import _kafka_probe, alive, exchange, fuzz_node, rss_kib
from minikafka.wire import messages as m
from minikafka.wire.codec import RequestHeader, decode_response, encode_request

Address = tuple[str, int]
RSS_GROWTH_MAX_KIB = 256 * 1024


@pytest.fixture
def node(tmp_path):
    """One node (broker and controller in one process), with a topic to produce to; connection
    limits raised so that the fuzzer's concurrent connections are not what is refused."""
    with cluster_up(
        tmp_path / "c",
        brokers=1,
        seed=5,
        combined_controller=True,
        node_configs={"max.connections.per.ip": "100000"},
        ready_timeout_s=60,
    ) as lc:

        async def create() -> None:
            async with open_client(lc.bootstrap(), client_id="setup") as client:
                await Admin(client).create_topic("t", partitions=1, replication_factor=1)

        trio.run(create)
        yield lc


def addresses(lc: LocalCluster) -> tuple[Address, Address]:
    host, port = lc.bootstrap().split(",")[0].rsplit(":", 1)
    khost, kport = lc.kafka_bootstrap().split(",")[0].rsplit(":", 1)
    return (host, int(port)), (khost, int(kport))


def handler_errors(lc: LocalCluster) -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for line in lc.log_path(1, "events").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "handler_error":
            found[event["api"], event["error"][:120]] += 1
    return found


async def ask_on(stream: trio.SocketStream, payload: bytes) -> bytes:
    await stream.send_all(struct.pack(">I", len(payload)) + payload)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        data += await stream.receive_some(65536)
    return data


def test_fixed_seed_fuzz_leaves_the_node_serving(node: LocalCluster) -> None:
    native, kafka = addresses(node)
    pid = node.pid(1)
    assert pid is not None

    async def run():
        stream = await trio.open_tcp_stream(*kafka)  # a client connected all along
        async with stream:
            await ask_on(stream, _kafka_probe())
            report = await fuzz_node(
                native=native, kafka=kafka, pid=pid, requests=3000, seed=25, batch=500
            )
            with trio.fail_after(10):
                answer = await ask_on(stream, _kafka_probe())
        return report, answer

    report, answer = trio.run(run)
    print(report.summary())
    assert report.deaths == 0 and report.sent == 3000
    assert struct.unpack(">i", answer[4:8])[0] == 1  # ApiVersions answered, correlation id 1
    assert max(report.rss_kib) - report.rss_kib[0] < RSS_GROWTH_MAX_KIB
    kafka_apis = {name for name, _count in report.mutations.items() if name.startswith("kafka")}
    assert kafka_apis and report.outcomes["closed"] > 1000  # most requests were refused
    native_names = {request.__name__ for request, _response in m.API.values()}
    kafka_errors = {key: n for key, n in handler_errors(node).items() if key[0] not in native_names}
    assert kafka_errors == {}


def test_a_gzip_bomb_is_refused_on_both_listeners_with_bounded_memory(node: LocalCluster) -> None:
    """Records that inflate to 1 GiB of zeros (1 MiB on the wire), claiming one record: the
    produce is refused and the node's peak RSS (VmHWM) barely moves: the records are inflated
    in bounded chunks (core/compression.py), never whole."""
    native, kafka = addresses(node)
    pid = node.pid(1)
    assert pid is not None
    batch = bomb()
    produce = ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name="t",
                partition_data=(PartitionProduceData(index=i32(0), records=Records(batch)),),
            ),
        ),
    )
    native_produce = m.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        partitions=[m.ProducePartition(topic="t", partition=0, records=batch)],
    )
    header = RequestHeader(api_key=m.ApiKey.PRODUCE, api_version=0, correlation_id=1, client_id="x")
    before = rss_kib(pid, "VmHWM")

    async def run():
        k = await exchange(kafka, encode_kafka(produce), 60)
        n = await exchange(native, encode_request(header, native_produce), 60)
        return k, n, await alive(native, kafka)

    (k_outcome, k_answer), (n_outcome, n_answer), still_alive = trio.run(run)
    assert still_alive
    assert rss_kib(pid, "VmHWM") - before < RSS_GROWTH_MAX_KIB  # the peak, not just now
    assert (k_outcome, n_outcome) == ("answered", "answered")
    kafka_response, _used = entity_reader(ProduceResponse)(k_answer, 8)  # frame, correlation id
    kafka_error = kafka_response.responses[0].partition_responses[0].error_code
    _cid, native_response = decode_response(n_answer[4:], m.ProduceResponse)
    # Refused as corrupt (Kafka's CORRUPT_MESSAGE): the one record claimed is not there.
    assert (int(kafka_error), native_response.partitions[0].error_code) == (2, 2)


@pytest.mark.fuzz
def test_long_fuzz_run(node: LocalCluster, request: pytest.FixtureRequest) -> None:
    if "fuzz" not in (request.config.getoption("markexpr") or ""):
        pytest.skip(
            "the long fuzz run is opt-in: pytest -m fuzz tests/integration/test_fuzz_node.py -s"
        )
    requests = int(os.environ.get("MINIKAFKA_FUZZ_REQUESTS", "1000000"))
    seed = int(os.environ.get("MINIKAFKA_FUZZ_SEED", "1"))
    native, kafka = addresses(node)
    pid = node.pid(1)
    assert pid is not None
    report = trio.run(
        lambda: fuzz_node(
            native=native, kafka=kafka, pid=pid, requests=requests, seed=seed, batch=2000, per_api=8
        )
    )
    print(f"\nlong fuzz run: {report.summary()}")
    print(f"mutations: {dict(report.mutations)}")
    print(f"handler errors: {dict(handler_errors(node))}")
    assert report.deaths == 0
    assert report.peak_rss_kib - report.rss_kib[0] < 2 * RSS_GROWTH_MAX_KIB


# Requests the fuzzer found that ended in a handler's exception (a handler_error event, the
# connection dropped, no answer), kept as regression cases: each is answered now, as Kafka
# answers it (server/broker.py forward_timeout_s, server/node.py refusal).
HANDLER_REGRESSIONS = [
    pytest.param(
        "kafka",
        # CreatePartitions v0: topic "t" to 2 partitions, timeout_ms -10000 (Kafka: no wait).
        "0025000000000001ffff0000000100017400000002ffffffffffffd8f000",
        id="create-partitions-negative-timeout",
    ),
    pytest.param(
        "kafka",
        # DeleteTopics v1: topic "nope", timeout_ms -10000.
        "0014000100000001ffff0000000100046e6f7065ffffd8f0",
        id="delete-topics-negative-timeout",
    ),
    pytest.param(
        "native",
        # OffsetForLeaderEpoch {replica_id: 1, partitions: []} from an unregistered peer.
        "95170001a17882aa7265706c6963615f696401aa706172746974696f6e7390",
        id="native-offset-for-leader-epoch-refusal",
    ),
]


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory):
    with cluster_up(
        tmp_path_factory.mktemp("shared") / "c",
        brokers=1,
        seed=5,
        combined_controller=True,
        ready_timeout_s=60,
    ) as lc:
        yield lc


@pytest.mark.parametrize(("listener", "payload_hex"), HANDLER_REGRESSIONS)
def test_found_requests_are_answered_without_a_handler_error(
    shared_node: LocalCluster, listener: str, payload_hex: str
) -> None:
    native, kafka = addresses(shared_node)
    before = sum(handler_errors(shared_node).values())
    outcome, _answer = trio.run(
        exchange, kafka if listener == "kafka" else native, bytes.fromhex(payload_hex), 30.0
    )
    trio.run(trio.sleep, 0.5)  # the event is written after the connection closes
    assert (outcome, sum(handler_errors(shared_node).values()) - before) == ("answered", 0)
