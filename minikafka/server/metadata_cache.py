"""What a node knows of the cluster: live brokers and partition registrations.

Brokers fill it from UpdateMetadata and LeaderAndIsr (a registration replaces an older one by
leader epoch, then partition epoch); the controller answers Metadata from its own state through
the same `metadata_response`, so clients see one shape whichever node they ask.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from minikafka.core.types import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    BrokerInfo,
    MetadataResponse,
    PartitionMetadata,
    PartitionState,
    TopicMetadata,
)


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[TopicPartition, PartitionState] = {}
        self.controller_id = -1

    def update(
        self, *, brokers: Sequence[BrokerInfo] | None, partitions: Iterable[PartitionState]
    ) -> None:
        if brokers is not None:
            self.brokers = {b.node_id: b for b in brokers}
        for st in partitions:
            tp = TopicPartition(st.topic, st.partition)
            old = self.partitions.get(tp)
            if old is None or (st.leader_epoch, st.partition_epoch) >= (
                old.leader_epoch,
                old.partition_epoch,
            ):
                self.partitions[tp] = st

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(tp.topic for tp in self.partitions)

    def response(self, topics: Sequence[str] | None) -> MetadataResponse:
        return metadata_response(
            list(self.brokers.values()), self.partitions.values(), self.controller_id, topics
        )


def metadata_response(
    brokers: Sequence[BrokerInfo],
    partitions: Iterable[PartitionState],
    controller_id: int,
    topics: Sequence[str] | None,
) -> MetadataResponse:
    live = {b.node_id for b in brokers}
    by_topic: dict[str, list[PartitionMetadata]] = {}
    for st in partitions:
        if topics is not None and st.topic not in topics:
            continue
        by_topic.setdefault(st.topic, []).append(
            PartitionMetadata(
                error_code=ErrorCode.NONE if st.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition=st.partition,
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                replicas=list(st.replicas),
                isr=list(st.isr),
                offline_replicas=[r for r in st.replicas if r not in live],
            )
        )
    out = [
        TopicMetadata(
            error_code=ErrorCode.NONE,
            name=name,
            partitions=sorted(parts, key=lambda m: m.partition),
        )
        for name, parts in sorted(by_topic.items())
    ]
    for name in topics or ():
        if name not in by_topic:
            out.append(
                TopicMetadata(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]
                )
            )
    return MetadataResponse(
        brokers=sorted(brokers, key=lambda b: b.node_id), controller_id=controller_id, topics=out
    )
