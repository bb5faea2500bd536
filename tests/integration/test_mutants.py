"""The launcher of minikafka/testing/mutants.py starts real nodes (the deliberate bugs
themselves, in process: tests/testing/test_mutants.py)."""

from __future__ import annotations

from minikafka.common import TopicPartition
from minikafka.testing.mutants import CONTROL, node_command


async def test_a_cluster_runs_under_the_mutant_launcher(tmp_path):
    """The nodes the mutation run starts are real nodes: a cluster up through the launcher
    (the control, the real code) serves a produce and a read back."""
    from minikafka.client.admin import Admin
    from minikafka.client.cluster_client import open_client
    from minikafka.client.consumer import Consumer
    from minikafka.client.producer import Producer, ProducerConfig
    from minikafka.cluster import LocalCluster, plan_cluster

    spec = plan_cluster(base_dir=tmp_path / "c", brokers=1, seed=5)
    with LocalCluster.up(spec, node_command=node_command(CONTROL), ready_timeout_s=30) as lc:
        async with open_client(lc.bootstrap(), client_id="mutants") as client:
            await Admin(client).create_topic("t", partitions=1, replication_factor=1)
            tp = TopicPartition("t", 0)
            await Producer(client, ProducerConfig(acks=-1)).send_records(tp, [(0, None, b"x")])
            got = await Consumer(client).fetch_once({tp: 0})
        started = (spec.node(1).data_dir / "node.out").read_text().splitlines()[0]
    assert "-m minikafka.testing.mutants none node" in started
    assert [r.value for r in got[tp]] == [b"x"]
