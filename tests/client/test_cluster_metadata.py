"""ClusterClient's view of the metadata: which leader a partition has."""

from __future__ import annotations

from minikafka.client.cluster_client import ClusterClient
from minikafka.common import TopicPartition
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


def test_a_leader_gone_from_the_metadata_is_a_retriable_error() -> None:
    """leader_of saw broker 3, the refresh no longer lists it: retry, do not stop (the
    experiment reassign-leader-fails-kip542 stopped once on BROKER_NOT_AVAILABLE)."""
    import pytest
    import trio

    from minikafka.errors import BrokerError, is_retriable

    client = client_with(3, [1, 2])

    async def refresh(*_args: object) -> None:
        return None

    client.refresh_metadata = refresh  # type: ignore[method-assign]
    with pytest.raises(BrokerError) as caught:
        trio.run(client.node_connection, 3)
    assert is_retriable(caught.value.code)
