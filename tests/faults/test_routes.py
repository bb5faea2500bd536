"""Node routes (`--route DST=VIA`): parsing, `NodeConfig.route`, and a replica fetcher that
dials the route instead of the leader (two in-process brokers on memory streams, MockClock)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from minikafka.cli.main import main
from minikafka.core.records import make_batch
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig, parse_routes
from minikafka.server.produce import handle_produce
from minikafka.testing.memory_node import (
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    wait_until,
)
from minikafka.wire.messages import ProducePartition, ProduceRequest


def test_routes_parse_into_a_mapping_and_route_is_identity_otherwise():
    routes = parse_routes(["127.0.0.1:9092=127.0.0.1:19092", " h2:9093 = proxy:20000 "])
    assert routes == {("127.0.0.1", 9092): ("127.0.0.1", 19092), ("h2", 9093): ("proxy", 20000)}
    config = NodeConfig(node_id=1, routes=routes)
    assert config.route("127.0.0.1", 9092) == ("127.0.0.1", 19092)
    assert config.route("127.0.0.1", 9093) == ("127.0.0.1", 9093)  # no route: dial it directly
    assert NodeConfig(node_id=1).route("h", 1) == ("h", 1)
    assert parse_routes([]) == {}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("127.0.0.1:9092", "expected DST_HOST:DST_PORT=VIA_HOST:VIA_PORT"),
        ("127.0.0.1:9092=proxy", "expected DST_HOST:DST_PORT=VIA_HOST:VIA_PORT"),
        ("9092=127.0.0.1:1", "expected DST_HOST:DST_PORT=VIA_HOST:VIA_PORT"),
        ("h:70000=h:1", "expected DST_HOST:DST_PORT=VIA_HOST:VIA_PORT"),
        ("h:1=h:0", "ports must be 1..65535"),
    ],
)
def test_bad_routes_get_one_line_naming_the_form(item, message):
    with pytest.raises(ConfigError) as err:
        parse_routes([item])
    assert message in str(err.value) and item in str(err.value)
    assert "\n" not in str(err.value)


def test_a_destination_routed_twice_is_refused():
    with pytest.raises(ConfigError, match="routed twice"):
        parse_routes(["h:1=p:2", "h:1=p:3"])


def test_node_command_refuses_a_bad_route_before_starting(tmp_path):
    result = CliRunner().invoke(
        main,
        ["node", "--node-id", "1", "--data-dir", str(tmp_path), "--controller", "h:1"]
        + ["--route", "h:1->p:2"],
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: --route 'h:1->p:2': expected DST_HOST:DST_PORT=VIA_HOST:VIA_PORT, "
        "e.g. 127.0.0.1:9092=127.0.0.1:19092"
    )
    assert not any(tmp_path.iterdir())  # nothing started


# ---------------------------------------------------------------------------- a connection site


# LMDB calls run inline (tests/conftest.py).


async def test_replica_fetcher_dials_the_route_not_the_leader(autojump_clock, tmp_path):
    network = MemoryNetwork()
    leader_config = NodeConfig(node_id=1, host="broker-1", port=9001)
    via = ("proxy", 20001)
    follower_config = NodeConfig(
        node_id=2,
        host="broker-2",
        port=9002,
        replica_fetch_backoff_ms=100,
        routes={("broker-1", 9001): via},
    )
    leader = MemoryBroker(leader_config, tmp_path / "a", network=network)
    follower = MemoryBroker(follower_config, tmp_path / "b", network=network)
    network.add(via, leader.dispatch)  # "the proxy": reaches the leader at another address
    network.cut(leader.address)  # dialling the leader directly would fail
    dialled: list[tuple[str, int]] = []
    connect = network.connect

    def recording_connect(host, port, **kw):
        dialled.append((host, port))
        return connect(host, port, **kw)

    follower.fetchers.connect = recording_connect
    async with leader.running(), follower.running():
        state = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
        await leader.apply([state], [leader.info, follower.info])
        await follower.apply([state], [leader.info, follower.info])
        batch = make_batch([(1000, None, b"through the proxy")])
        request = ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            partitions=[ProducePartition(topic="t", partition=0, records=batch)],
        )
        reply = await handle_produce(leader.replica_manager, request, leader.topics, "test")
        assert reply.response.partitions[0].error_code == 0  # acks=all: the follower fetched it
        await wait_until(lambda: follower.partition("t").log_end_offset == 1)
        assert follower.log_bytes("t") == leader.log_bytes("t")
    assert dialled and set(dialled) == {via}
