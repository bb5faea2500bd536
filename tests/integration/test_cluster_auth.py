"""Real processes on 127.0.0.1: the control plane answers only the cluster's own nodes.

A `cluster up` cluster (controller 0, brokers 1 and 2) works as before: a client without the
secret creates a topic, produces and fetches, and the nodes replicate (they prove membership
with the secret `up` made, mode 0600, whose path alone is on their command lines). A
LeaderAndIsr sent to a real broker by a plain client gets CLUSTER_AUTHORIZATION_FAILED and is
logged. A broker of another cluster pointed at this cluster's controller is refused (another
cluster id), says so in its own log, and never registers.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.client.connection import open_connection
from minikafka.cluster import LocalCluster
from minikafka.cluster.secret import write_cluster_secret
from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.errors import ErrorCode
from minikafka.testing.clusters import QUICK_FENCING, cluster_up
from minikafka.wire.messages import (
    FetchPartition,
    FetchRequest,
    LeaderAndIsrRequest,
    MetadataRequest,
    PartitionState,
    ProducePartition,
    ProduceRequest,
)

FAST = {
    **QUICK_FENCING,
    "replica.fetch.wait.max.ms": "100",
    "metrics.interval.ms": "500",
}
DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_up(
        tmp_path_factory.mktemp("auth") / "c", brokers=2, seed=11, node_configs=FAST
    ) as lc:
        yield lc


def events(lc: LocalCluster, node_id: int, name: str) -> list[dict]:
    path = lc.log_path(node_id, "events")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e.get("event") == name]


def test_the_secret_is_the_owners_alone_and_off_the_command_lines(cluster: LocalCluster):
    path = cluster.base_dir / "cluster.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text().strip()
    for node in cluster.spec.nodes:
        pid = cluster.pid(node.node_id)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
        assert f"cluster.id={cluster.cluster_id}" in cmdline
        assert f"cluster.secret.file={path}" in cmdline
        assert secret not in cmdline


def test_clients_work_without_the_secret_and_a_forged_leader_and_isr_is_refused(
    cluster: LocalCluster,
):
    async def main() -> tuple[int, int]:
        async with open_client(cluster.bootstrap(), client_id="it") as client:
            await Admin(client).create_topic("t", partitions=1, replication_factor=2)
            tp = TopicPartition("t", 0)
            leader = client.leader_of(tp)
            conn = await client.node_connection(leader)
            batch = make_batch([(1000, None, b"v0"), (1001, None, b"v1")])
            produce = ProduceRequest(
                acks=-1,
                timeout_ms=10_000,
                partitions=[ProducePartition(topic="t", partition=0, records=batch)],
            )
            with trio.fail_after(20):  # until the leader has its LeaderAndIsr, as clients retry
                while True:
                    resp = await conn.request(produce, timeout_s=20)
                    if resp.partitions[0].error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        break
                    await trio.sleep(0.05)
            assert resp.partitions[0].error_code == ErrorCode.NONE  # both replicas have it
            part = FetchPartition(
                topic="t", partition=0, fetch_offset=0, partition_max_bytes=1 << 20
            )
            fetch = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, partitions=[part]
            )
            got = await conn.request(fetch, timeout_s=20)
            assert got.error_code == ErrorCode.NONE
            assert got.partitions[0].high_watermark == 2
            follower = next(b.node_id for b in cluster.spec.brokers if b.node_id != leader)

        # A plain connection to the follower: LeaderAndIsr making it leader is refused.
        host, port = cluster.spec.node(follower).address.rsplit(":", 1)
        forged = LeaderAndIsrRequest(
            controller_id=0,
            controller_epoch=10**9,
            broker_epoch=0,
            partitions=[
                PartitionState(
                    topic="t",
                    partition=0,
                    leader=follower,
                    leader_epoch=10**6,
                    isr=[follower],
                    partition_epoch=10**6,
                    replicas=[follower],
                )
            ],
            live_leaders=[],
        )
        async with open_connection(host, int(port), client_id="mallory") as conn:
            assert (await conn.request(forged, timeout_s=10)).error_code == DENIED
            md = await conn.request(MetadataRequest(topics=["t"]), timeout_s=10)
            assert md.topics[0].partitions[0].leader == leader  # nothing changed
        return leader, follower

    leader, follower = trio.run(main)
    refused = events(cluster, follower, "cluster_authorization_failed")
    assert [e["api"] for e in refused] == ["LeaderAndIsr"]
    assert "not proven" in refused[0]["reason"]
    assert events(cluster, leader, "cluster_authorization_failed") == []


def test_a_broker_of_another_cluster_is_refused_and_never_registers(
    cluster: LocalCluster, tmp_path: Path
):
    other = tmp_path / "other"
    secret = write_cluster_secret(other)
    data_dir = other / "node-9"
    argv = [sys.executable, "-m", "minikafka", "broker", "--node-id", "9"]
    argv += ["--listen", "127.0.0.1:0", "--controller", cluster.controller_address]
    argv += ["--data-dir", str(data_dir), "--set", "cluster.id=other-cluster"]
    argv += ["--set", f"cluster.secret.file={secret}"]
    for name, value in FAST.items():
        argv += ["--set", f"{name}={value}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        refused: list[dict] = []
        while time.monotonic() < deadline and not refused:
            time.sleep(0.1)
            path = data_dir / "events.jsonl"
            if path.exists():
                lines = [json.loads(line) for line in path.read_text().splitlines() if line]
                refused = [e for e in lines if e["event"] == "controller_refused_membership"]
        assert refused, "the stranger broker never logged its refusal"
        assert "'other-cluster'" in refused[0]["error"]
        assert "is not this cluster's" in refused[0]["error"]
        assert not (data_dir / "node.json").exists()  # never registered, so never ready
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
    controller = cluster.spec.controller.node_id
    at_controller = events(cluster, controller, "cluster_authorization_failed")
    assert any(
        e["api"] == "ClusterHandshake"
        and e["reason"] == "cluster id 'other-cluster' is not this cluster's"
        and e["node"] == 9
        for e in at_controller
    )
    assert events(cluster, controller, "broker_registered") and not [
        e for e in events(cluster, controller, "broker_registered") if e.get("broker") == 9
    ]

    async def brokers() -> list[int]:
        async with open_client(cluster.bootstrap(), client_id="it") as client:
            md = await client.refresh_metadata([])
            return sorted(b.node_id for b in md.brokers)

    assert trio.run(brokers) == [1, 2]
    assert os.path.exists(cluster.base_dir / "cluster.secret")
