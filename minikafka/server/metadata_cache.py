"""What a node knows of the cluster: live brokers and partition registrations.

Brokers fill it from UpdateMetadata and LeaderAndIsr (a registration replaces an older one by
leader epoch, then partition epoch); the controller answers Metadata from its own state through
the same `metadata_response`, so clients see one shape whichever node they ask.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set

from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    BrokerInfo,
    MetadataResponse,
    PartitionMetadata,
    PartitionState,
    TopicMetadata,
)


class MetadataCache:
    """Partitions are kept per topic (a broker may hold thousands): a Metadata request naming topics
    costs those topics, and the known-topic set Produce and Fetch check is kept, not rebuilt per
    request."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self._by_topic: dict[str, dict[int, PartitionState]] = {}
        self.controller_id = -1

    def update(
        self,
        *,
        brokers: Sequence[BrokerInfo] | None,
        partitions: Iterable[PartitionState],
        replace: bool = False,
        deleted_topics: Iterable[str] = (),
    ) -> None:
        """Apply the controller's states (newer leader / partition epochs win). `replace`: the
        first of a full picture, so everything known before goes; `deleted_topics` go first."""
        if brokers is not None:
            self.brokers = {b.node_id: b for b in brokers}
        if replace:
            self._by_topic.clear()
        for name in deleted_topics:
            self._by_topic.pop(name, None)
        for st in partitions:
            topic = self._by_topic.get(st.topic)
            if topic is None:
                topic = self._by_topic[st.topic] = {}
            old = topic.get(st.partition)
            if old is None or (st.leader_epoch, st.partition_epoch) >= (
                old.leader_epoch,
                old.partition_epoch,
            ):
                topic[st.partition] = st

    @property
    def topics(self) -> Set[str]:
        """The known topics (a live view)."""
        return self._by_topic.keys()

    def partitions_of(self, topic: str) -> Mapping[int, PartitionState] | None:
        """The topic's partitions known here, by index; None for an unknown topic."""
        return self._by_topic.get(topic)

    def response(self, topics: Sequence[str] | None) -> MetadataResponse:
        if topics is None:
            wanted: Iterable[dict[int, PartitionState]] = self._by_topic.values()
        else:
            wanted = [self._by_topic[t] for t in set(topics) if t in self._by_topic]
        partitions = (st for topic in wanted for st in topic.values())
        return metadata_response(
            list(self.brokers.values()), partitions, self.controller_id, topics
        )


def metadata_response(
    brokers: Sequence[BrokerInfo],
    partitions: Iterable[PartitionState],
    controller_id: int,
    topics: Sequence[str] | None,
) -> MetadataResponse:
    live = {b.node_id for b in brokers}
    wanted = None if topics is None else set(topics)  # not `in topics`: a list, per partition
    by_topic: dict[str, list[PartitionMetadata]] = {}
    for st in partitions:
        if wanted is not None and st.topic not in wanted:
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
