"""A ClusterClient over a `MemoryNetwork` (testing/memory_node.py), for client and workload
tests under Trio's MockClock: the library's Producer, Consumer and experiment workload run
unchanged against in-process brokers.

Metadata comes from the brokers themselves (the leader each one was told of with the newest
leader epoch), as a controller's UpdateMetadata would have told a real broker; bootstrap requests
(InitProducerId) go to the first broker that is not cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.client.connection import Connection
from minikafka.common import TopicPartition
from minikafka.testing.memory_node import MemoryBroker, MemoryNetwork
from minikafka.wire.messages import MetadataResponse, PartitionMetadata


class MemoryClusterClient(ClusterClient):
    def __init__(
        self,
        nursery: trio.Nursery,
        network: MemoryNetwork,
        brokers: Sequence[MemoryBroker],
        client_id: str,
    ) -> None:
        super().__init__(nursery, [b.address for b in brokers], client_id)
        self.network = network
        self.members = list(brokers)

    async def _open(self, address: tuple[str, int]) -> tuple[Connection, trio.CancelScope]:
        return await self._nursery.start(self._hold, address)

    async def _hold(
        self, address: tuple[str, int], *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED
    ) -> None:
        with trio.CancelScope() as scope:
            async with self.network.connect(*address, client_id=self.client_id) as conn:
                task_status.started((conn, scope))
                await trio.sleep_forever()

    async def refresh_metadata(self, topics: Sequence[str] | None = None) -> MetadataResponse:
        await trio.lowlevel.checkpoint()
        self.brokers = {b.config.node_id: b.info for b in self.members}
        newest: dict[TopicPartition, PartitionMetadata] = {}
        for b in self.members:
            for tp, p in b.replica_manager.partitions.items():
                st = p.state
                if st is None or (topics is not None and tp.topic not in topics):
                    continue
                known = newest.get(tp)
                if known is None or st.leader_epoch > known.leader_epoch:
                    newest[tp] = PartitionMetadata(
                        error_code=0,
                        partition=tp.partition,
                        leader=st.leader,
                        leader_epoch=st.leader_epoch,
                        replicas=list(st.replicas),
                        isr=list(st.isr),
                    )
        self.partitions.update(newest)
        return MetadataResponse(brokers=list(self.brokers.values()), controller_id=-1, topics=[])


@asynccontextmanager
async def open_memory_client(
    network: MemoryNetwork, brokers: Sequence[MemoryBroker], *, client_id: str = "test-client"
) -> AsyncIterator[MemoryClusterClient]:
    async with trio.open_nursery() as nursery:
        client = MemoryClusterClient(nursery, network, brokers, client_id)
        try:
            yield client
        finally:
            await client.aclose()
            nursery.cancel_scope.cancel()
