"""ClusterClient's view of the metadata: which leader a partition has."""

from __future__ import annotations

from minikafka.client.cluster_client import ClusterClient
from minikafka.core.types import TopicPartition
from minikafka.wire.controller_messages import BrokerInfo
from minikafka.wire.messages import PartitionMetadata

TP = TopicPartition("t", 0)


def client_with(leader: int, brokers: list[int]) -> ClusterClient:
    client = ClusterClient(None, [("127.0.0.1", 1)], "test")  # type: ignore[arg-type]
    client.brokers = {b: BrokerInfo(node_id=b, host="127.0.0.1", port=9000 + b) for b in brokers}
    client.partitions[TP] = PartitionMetadata(
        error_code=0, partition=0, leader=leader, leader_epoch=1, replicas=[1, 3], isr=[1]
    )
    return client


def test_a_listed_leader_is_the_leader() -> None:
    assert client_with(3, [1, 2, 3]).leader_of(TP) == 3


def test_a_leader_missing_from_the_brokers_is_unknown() -> None:
    # Broker 3 was wiped and is restarting: the controller still names it, the brokers do not.
    # Before, a send raised BROKER_NOT_AVAILABLE (not retriable) and stopped the experiment
    # wiped-broker-kip1009; now the producer retries after fresh metadata.
    assert client_with(3, [1, 2]).leader_of(TP) == -1


def test_an_unknown_partition_has_no_leader() -> None:
    assert ClusterClient(None, [], "test").leader_of(TP) == -1  # type: ignore[arg-type]
