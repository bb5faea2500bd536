"""Cluster membership: the control plane answers only the cluster's own nodes.

In process, on memory streams, under the autojump MockClock: a MemoryNetwork is one cluster
(a generated cluster id and secret); its brokers serve through the real listener pump behind a
ClusterGate, and control requests reach the real `Broker` dispatch. Each attack the issue names
is played from a connection that has not proven membership (a client's), and must be refused
with CLUSTER_AUTHORIZATION_FAILED, logged, and change nothing; the cluster's own nodes, proving
membership with the secret, go on being served. Clients without the secret keep producing,
fetching and creating topics.
"""

from __future__ import annotations

import io
import json
import random

import pytest
import trio

from minikafka.core.cluster_auth import ClusterCredential, proof
from minikafka.core.controller import ControllerConfig, ControllerState
from minikafka.core.records import make_batch
from minikafka.errors import BrokerError, ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.controller_service import ControllerService
from minikafka.server.eventlog import EventLog
from minikafka.testing.memory_node import (
    FakeControllerLink,
    MemoryBroker,
    MemoryNetwork,
    partition_state,
    run_sync_inline,
    wait_until,
)
from minikafka.wire.messages import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ClusterAuthenticateRequest,
    ClusterHandshakeRequest,
    CreatableTopic,
    CreateTopicsRequest,
    FetchPartition,
    FetchRequest,
    LeaderAndIsrRequest,
    ProducePartition,
    ProduceRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
CONTROLLER_ID = 0
BROKER_EPOCH = 1  # what the FakeControllerLink says this broker registered as


def config(node_id: int) -> NodeConfig:
    return NodeConfig(
        node_id=node_id,
        host=f"broker-{node_id}",
        port=9000 + node_id,
        replica_fetch_wait_max_ms=500,
        replica_fetch_backoff_ms=100,
    )


def records(n: int) -> bytes:
    return make_batch([(1000 + i, None, f"v{i}".encode()) for i in range(n)])


def fetch(offset: int, *, replica_id: int) -> FetchRequest:
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        partitions=[
            FetchPartition(topic="t", partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        ],
    )


def update_metadata(controller_epoch: int, *, isr: list[int], partition_epoch: int):
    return UpdateMetadataRequest(
        controller_id=CONTROLLER_ID,
        controller_epoch=controller_epoch,
        brokers=[],
        partitions=[
            partition_state(
                "t", 0, leader=1, isr=isr, replicas=[1, 2], partition_epoch=partition_epoch
            )
        ],
    )


class Leader:
    """Broker 1 on a memory network, leading t-0 (replicas {1, 2}, ISR {1, 2}) with 3 records
    appended and HW 0: broker 2 has not fetched yet. Its event log is echoed to `log`."""

    def __init__(self, broker: MemoryBroker, network: MemoryNetwork, log: io.StringIO) -> None:
        self.broker = broker
        self.network = network
        self.log = log

    def events(self, name: str) -> list[dict]:
        lines = [json.loads(line) for line in self.log.getvalue().splitlines()]
        return [e for e in lines if e["event"] == name]


@pytest.fixture
async def leader(tmp_path):
    network = MemoryNetwork()
    broker = MemoryBroker(
        config(1), tmp_path / "b1", network=network, controller=FakeControllerLink()
    )
    log = io.StringIO()
    broker.events._echo = log  # the gate logs to the broker's own event log
    async with broker.running():
        await broker.apply([partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])])
        async with network.connect(*broker.address, client_id="producer") as client:
            produce = ProduceRequest(
                acks=1,
                timeout_ms=1000,
                partitions=[ProducePartition(topic="t", partition=0, records=records(3))],
            )
            resp = await client.request(produce)
            assert resp.partitions[0].error_code == ErrorCode.NONE
        p = broker.partition("t")
        assert p.log_end_offset == 3 and p.high_watermark == 0
        yield Leader(broker, network, log)


# ---------------------------------------------------------------------------- the attacks


async def test_a_forged_update_metadata_is_refused_and_the_real_controller_still_heard(
    autojump_clock, leader
):
    """Before: an UpdateMetadata with a huge controller epoch shrank the ISR to the leader
    alone, and the epoch was remembered, so the real controller was then refused as stale."""
    b = leader.broker
    async with leader.network.connect(*b.address, client_id="mallory") as conn:
        forged = update_metadata(10**9, isr=[1], partition_epoch=2)
        resp = await conn.request(forged)
        assert resp.error_code == DENIED
    assert sorted(b.partition("t").leader.isr) == [1, 2]  # no shrink
    assert b.broker.controller_epoch == -1  # the forged epoch was not remembered
    [event] = leader.events("cluster_authorization_failed")
    assert event["api"] == "UpdateMetadata" and "not proven" in event["reason"]

    # The real controller (a node of the cluster, proving it) is heard at its own epoch.
    controller = leader.network.credential(CONTROLLER_ID)
    async with leader.network.connect(*b.address, client_id="c", credential=controller) as conn:
        resp = await conn.request(update_metadata(1, isr=[1, 2], partition_epoch=1))
        assert resp.error_code == ErrorCode.NONE
    assert b.broker.controller_epoch == 1


async def test_a_forged_stop_replica_with_delete_is_refused_and_the_log_stays(
    autojump_clock, leader
):
    b = leader.broker
    before = b.log_bytes("t")
    assert before
    stop = StopReplicaRequest(
        controller_id=CONTROLLER_ID,
        controller_epoch=1,
        broker_epoch=BROKER_EPOCH,  # guessed right
        partitions=[StopReplicaPartition(topic="t", partition=0, leader_epoch=1, delete=True)],
    )
    async with leader.network.connect(*b.address, client_id="mallory") as conn:
        assert (await conn.request(stop)).error_code == DENIED
    await b.writer.barrier()
    assert b.log_bytes("t") == before
    assert b.partition("t").log_end_offset == 3
    assert [e["api"] for e in leader.events("cluster_authorization_failed")] == ["StopReplica"]


async def test_a_fake_follower_fetch_is_refused_and_the_hw_stays(autojump_clock, leader):
    """Before: a Fetch claiming replica 2 at offset 3 moved the HW to 3 (and could keep a dead
    follower in the ISR)."""
    b = leader.broker
    async with leader.network.connect(*b.address, client_id="mallory") as conn:
        resp = await conn.request(fetch(3, replica_id=2))
        assert resp.error_code == DENIED
        assert [p.error_code for p in resp.partitions] == [DENIED]
        assert resp.partitions[0].records == b""
    assert b.partition("t").high_watermark == 0
    [event] = leader.events("cluster_authorization_failed")
    assert event["api"] == "Fetch"

    # Broker 2 itself, proving membership, moves the HW as a follower does.
    follower = leader.network.credential(2)
    async with leader.network.connect(*b.address, client_id="f", credential=follower) as conn:
        resp = await conn.request(fetch(3, replica_id=2))
        assert resp.error_code == ErrorCode.NONE
    assert b.partition("t").high_watermark == 3


async def test_a_member_may_fetch_only_as_itself(autojump_clock, leader):
    b = leader.broker
    node3 = leader.network.credential(3)
    async with leader.network.connect(*b.address, client_id="f", credential=node3) as conn:
        assert (await conn.request(fetch(3, replica_id=2))).error_code == DENIED
    assert b.partition("t").high_watermark == 0
    [event] = leader.events("cluster_authorization_failed")
    assert event["reason"] == "node 3 may not act as node 2"


async def test_a_stale_broker_epoch_does_not_advance_the_controller_epoch(autojump_clock, leader):
    """A member's LeaderAndIsr for another incarnation of this broker is refused as stale and
    leaves the controller epoch where it was (before, it was remembered before the check)."""
    b = leader.broker
    controller = leader.network.credential(CONTROLLER_ID)
    req = LeaderAndIsrRequest(
        controller_id=CONTROLLER_ID,
        controller_epoch=10**9,
        broker_epoch=BROKER_EPOCH + 7,
        partitions=[partition_state("t", 0, leader=1, isr=[1], replicas=[1, 2], leader_epoch=2)],
        live_leaders=[],
    )
    async with leader.network.connect(*b.address, client_id="c", credential=controller) as conn:
        assert (await conn.request(req)).error_code == ErrorCode.STALE_BROKER_EPOCH
        assert b.broker.controller_epoch == -1
        ok = await conn.request(update_metadata(1, isr=[1, 2], partition_epoch=1))
        assert ok.error_code == ErrorCode.NONE
    assert b.partition("t").leader_epoch == 1


# ---------------------------------------------------------------------------- the handshake


async def test_a_node_of_another_cluster_is_refused_and_logged(autojump_clock, leader):
    b = leader.broker
    stranger = ClusterCredential(cluster_id="other-cluster", node_id=2, secret=b"s" * 32)
    with pytest.raises(BrokerError) as info:
        async with leader.network.connect(*b.address, client_id="f", credential=stranger):
            pass
    assert info.value.code == DENIED and not info.value.retriable
    assert "'other-cluster'" in str(info.value)
    [event] = leader.events("cluster_authorization_failed")
    assert event["api"] == "ClusterHandshake"
    assert event["reason"] == "cluster id 'other-cluster' is not this cluster's"


async def test_a_wrong_secret_is_refused_and_the_connection_stays_a_clients(autojump_clock, leader):
    b = leader.broker
    net = leader.network
    async with net.connect(*b.address, client_id="mallory") as conn:
        hello = await conn.request(ClusterHandshakeRequest(cluster_id=net.cluster_id, node_id=2))
        assert hello.error_code == ErrorCode.NONE and len(hello.nonce) == 16
        client_nonce = bytes(16)
        bad = proof(b"not-the-secret-at-all", "node", net.cluster_id, 2, hello.nonce, client_nonce)
        resp = await conn.request(ClusterAuthenticateRequest(client_nonce=client_nonce, proof=bad))
        assert resp.error_code == DENIED and resp.server_proof == b""
        # Still unauthenticated: the control plane stays shut, clients' requests are served.
        assert (await conn.request(fetch(3, replica_id=2))).error_code == DENIED
        assert (await conn.request(fetch(0, replica_id=-1))).error_code == ErrorCode.NONE
    assert b.partition("t").high_watermark == 0
    reasons = [e["reason"] for e in leader.events("cluster_authorization_failed")]
    assert reasons[0] == "wrong proof from node 2: not made with this cluster's secret"
    assert len(reasons) == 2


async def test_a_recorded_proof_does_not_open_another_connection(autojump_clock, leader):
    """The server's nonce binds a proof to one connection: replaying it elsewhere fails."""
    b = leader.broker
    net = leader.network
    client_nonce = bytes(range(16))
    async with net.connect(*b.address, client_id="node-2") as first:
        hello = await first.request(ClusterHandshakeRequest(cluster_id=net.cluster_id, node_id=2))
        good = proof(net.secret, "node", net.cluster_id, 2, hello.nonce, client_nonce)
        auth = ClusterAuthenticateRequest(client_nonce=client_nonce, proof=good)
        assert (await first.request(auth)).error_code == ErrorCode.NONE
        assert (await first.request(auth)).error_code == DENIED  # one attempt per nonce
    async with net.connect(*b.address, client_id="mallory") as second:
        await second.request(ClusterHandshakeRequest(cluster_id=net.cluster_id, node_id=2))
        assert (await second.request(auth)).error_code == DENIED
        assert (await second.request(fetch(3, replica_id=2))).error_code == DENIED
    assert b.partition("t").high_watermark == 0


async def test_followers_on_the_network_prove_membership_and_replicate(autojump_clock, tmp_path):
    """The replica fetcher proves membership on its own: replication goes on, nothing refused."""
    network = MemoryNetwork()
    a = MemoryBroker(config(1), tmp_path / "a", network=network)
    b = MemoryBroker(config(2), tmp_path / "b", network=network)
    async with a.running(), b.running():
        st = partition_state("t", 0, leader=1, isr=[1, 2], replicas=[1, 2])
        await a.apply([st])
        await b.apply([st], [a.info])
        async with network.connect(*a.address, client_id="producer") as client:
            produce = ProduceRequest(
                acks=-1,
                timeout_ms=5000,
                partitions=[ProducePartition(topic="t", partition=0, records=records(2))],
            )
            assert (await client.request(produce)).partitions[0].error_code == ErrorCode.NONE
        await wait_until(lambda: b.partition("t").log_end_offset == 2)
    assert a.events.counts.get("cluster_authorization_failed", 0) == 0


# ---------------------------------------------------------------------------- the controller


def controller_service(network: MemoryNetwork) -> ControllerService:
    """A controller knowing brokers 1 and 2 (epochs 1 and 2), its channels on the network."""
    c = NodeConfig(
        node_id=CONTROLLER_ID,
        roles=("controller",),
        cluster_id=network.cluster_id,
        cluster_secret=network.secret,
    )
    service = ControllerService(
        config=c,
        store=_MemoryStore(),  # type: ignore[arg-type]
        events=EventLog(None, node_id=CONTROLLER_ID),
        rng=random.Random(1),
        hold=network.hold,
        run_sync=run_sync_inline,
    )
    state = ControllerState(
        controller_id=CONTROLLER_ID, config=ControllerConfig(), rng=random.Random(1)
    )
    for broker_id in (1, 2):
        state.register_broker(
            broker_id=broker_id,
            incarnation_id=f"i{broker_id}",
            host=f"broker-{broker_id}",
            port=9000 + broker_id,
            now_ms=0,
        )
    service.state = state
    network.add(("controller", 9000), lambda _h, body: service.dispatch(body))
    return service


class _MemoryStore:
    def __init__(self) -> None:
        self.records: dict = {}

    def read(self) -> dict:
        return dict(self.records)

    def write(self, puts: dict, deletes: tuple = ()) -> None:
        for key in deletes:
            self.records.pop(key, None)
        self.records.update(puts)


async def test_a_forged_registration_is_refused_and_the_real_broker_not_fenced(autojump_clock):
    """Before: a re-registration under broker 1's id, from anyone, fenced the real broker 1."""
    network = MemoryNetwork()
    service = controller_service(network)
    state = service.state
    assert state is not None
    epoch = state.broker_epoch(1)
    forged = BrokerRegistrationRequest(broker_id=1, incarnation_id="evil", host="evil", port=1)
    async with network.connect("controller", 9000, client_id="mallory") as conn:
        assert (await conn.request(forged)).error_code == DENIED
        beat = BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch)
        assert (await conn.request(beat)).error_code == DENIED
    # A member may register only as itself.
    node2 = network.credential(2)
    async with network.connect("controller", 9000, client_id="b2", credential=node2) as conn:
        assert (await conn.request(forged)).error_code == DENIED
    assert state.broker_epoch(1) == epoch
    assert 1 in [b.node_id for b in state.live_brokers()]
    assert network.events.counts["cluster_authorization_failed"] == 3
    # The real broker 1 heartbeats on: still registered, not fenced.
    node1 = network.credential(1)
    async with network.connect("controller", 9000, client_id="b1", credential=node1) as conn:
        resp = await conn.request(BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch))
        assert resp.error_code == ErrorCode.NONE and not resp.is_fenced


async def test_clients_without_the_secret_create_topics_produce_and_fetch(autojump_clock, tmp_path):
    """CreateTopics straight to the controller, without the secret, is served; the controller's
    LeaderAndIsr reaches the brokers over its channels, which prove membership; then a client
    produces and consumes, and nothing was refused."""
    network = MemoryNetwork()
    service = controller_service(network)
    assert service.state is not None
    links = {i: FakeControllerLink(broker_epoch=service.state.broker_epoch(i)) for i in (1, 2)}
    a = MemoryBroker(config(1), tmp_path / "a", network=network, controller=links[1])
    b = MemoryBroker(config(2), tmp_path / "b", network=network, controller=links[2])
    async with a.running(), b.running(), trio.open_nursery() as nursery:
        service._nursery = nursery  # the broker channels' home (ControllerService.run sets it)
        async with network.connect("controller", 9000, client_id="admin") as admin:
            create = CreateTopicsRequest(
                topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=2)]
            )
            resp = await admin.request(create)
            assert [r.error_code for r in resp.topics] == [ErrorCode.NONE]
        await wait_until(lambda: "t" in a.topics and "t" in b.topics)
        [st] = service.state.partition_states(["t"])
        leader = a if st.leader == 1 else b
        async with network.connect(*leader.address, client_id="client") as client:
            produce = ProduceRequest(
                acks=-1,
                timeout_ms=5000,
                partitions=[ProducePartition(topic="t", partition=0, records=records(2))],
            )
            assert (await client.request(produce)).partitions[0].error_code == ErrorCode.NONE
            got = await client.request(fetch(0, replica_id=-1))
            assert got.error_code == ErrorCode.NONE and got.partitions[0].high_watermark == 2
        nursery.cancel_scope.cancel()
    assert network.events.counts.get("cluster_authorization_failed", 0) == 0
    assert a.events.counts.get("cluster_authorization_failed", 0) == 0
    assert b.events.counts.get("cluster_authorization_failed", 0) == 0


# ---------------------------------------------------------------------------- connections


async def test_an_error_inside_a_connection_block_comes_out_as_itself(autojump_clock, leader):
    """It used to vanish: the connection's cleanup awaited in its cancelled nursery, Cancelled
    replaced the block's exception and the nursery absorbed it, so the block just ended (the
    asserts of a test inside such a block could never fail, and a node's link or fetcher
    skipped its error handling and backoff)."""
    b = leader.broker
    with pytest.raises(BrokerError) as info:
        async with leader.network.connect(*b.address, client_id="c"):
            raise BrokerError(ErrorCode.NETWORK_EXCEPTION, "inside the block")
    assert "inside the block" in str(info.value)


def test_allocate_producer_ids_is_a_control_api_a_node_sends_only_for_itself():
    """KIP-730's AllocateProducerIds hands out blocks of producer ids: from anyone but a proven
    broker acting as itself, a client could exhaust or skew the ids."""
    from minikafka.core.cluster_auth import MembershipSession, refusal
    from minikafka.wire.messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse

    session = MembershipSession(cluster_id="c", secret=b"s" * 32)
    request = AllocateProducerIdsRequest(broker_id=2, broker_epoch=1)
    assert session.refused(request) == "the connection has not proven cluster membership"
    answer = refusal(request)
    assert isinstance(answer, AllocateProducerIdsResponse) and answer.error_code == DENIED
    session.member = 3
    assert session.refused(request) == "node 3 may not act as node 2"
    session.member = 2
    assert session.refused(request) is None
