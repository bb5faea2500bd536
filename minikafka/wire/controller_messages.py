"""The controller's messages: the shapes it hands out (brokers, partition registrations) and
the requests between the controller and the brokers.

Controller -> broker: LeaderAndIsr, UpdateMetadata and StopReplica, as the ZooKeeper-era
KafkaController sends them (ControllerChannelManager). Broker -> controller: BrokerRegistration,
BrokerHeartbeat and AlterPartition, KRaft's (ClusterControlManager, BrokerHeartbeatManager,
ReplicationControlManager.alterPartition).

Split from wire/messages.py, which re-exports every name here and holds the API registry; the
same rules apply (frozen dataclasses checked field by field by the codec).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.common import NO_LEADER, UNDEFINED_EPOCH
from minikafka.wire.admin_messages import ConfigEntity
from minikafka.wire.request import Request

MSG = dict(frozen=True, slots=True, kw_only=True)

# ---------------------------------------------------------------------------- shared shapes


@dataclass(**MSG)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    # Its Kafka-protocol listener (minikafka/kafka; Kafka's second listener of a broker's
    # `listeners`), port -1 when it has none. Metadata asked on that listener advertises these.
    kafka_host: str = ""
    kafka_port: int = -1


@dataclass(**MSG)
class TopicPartitionError:
    topic: str
    partition: int
    error_code: int


@dataclass(**MSG)
class PartitionState:
    """A partition's registration as the controller holds it (LeaderAndIsr, UpdateMetadata)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


# ---------------------------------------------------------------------------- controller -> broker


@dataclass(**MSG)
class LeaderAndIsrRequest(Request["LeaderAndIsrResponse"]):
    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the receiving broker's epoch: a restarted broker rejects old requests
    partitions: list[PartitionState]
    live_leaders: list[BrokerInfo]


@dataclass(**MSG)
class LeaderAndIsrResponse:
    error_code: int
    partitions: list[TopicPartitionError] = field(default_factory=list)


@dataclass(**MSG)
class UpdateMetadataRequest(Request["UpdateMetadataResponse"]):
    controller_id: int
    controller_epoch: int
    brokers: list[BrokerInfo]
    partitions: list[PartitionState]
    # The whole dynamic config snapshot when `configs_version` >= 0 (sent when it changes and to
    # a newly registered broker); -1: this request carries no configs, keep the ones you have.
    configs: list[ConfigEntity] = field(default_factory=list)
    configs_version: int = -1
    # Topics deleted (DeleteTopics): forgotten before `partitions` are applied.
    deleted_topics: list[str] = field(default_factory=list)
    # The first request of a full picture (a broker that just registered, or whose channel
    # overflowed): forget every partition known before applying this and the ones that follow,
    # so a topic deleted while the broker was away is not kept.
    replace: bool = False


@dataclass(**MSG)
class UpdateMetadataResponse:
    error_code: int


@dataclass(**MSG)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int
    delete: bool


@dataclass(**MSG)
class StopReplicaRequest(Request["StopReplicaResponse"]):
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: list[StopReplicaPartition]


@dataclass(**MSG)
class StopReplicaResponse:
    error_code: int
    partitions: list[TopicPartitionError] = field(default_factory=list)


# ---------------------------------------------------------------------------- broker -> controller


@dataclass(**MSG)
class BrokerRegistrationRequest(Request["BrokerRegistrationResponse"]):
    broker_id: int
    incarnation_id: str  # new on every process start: a restart is a new incarnation
    host: str
    port: int
    kafka_host: str = ""  # its Kafka-protocol listener (BrokerInfo), port -1: none
    kafka_port: int = -1


@dataclass(**MSG)
class BrokerRegistrationResponse:
    error_code: int
    broker_epoch: int = -1


@dataclass(**MSG)
class OfflineReplica:
    topic: str
    partition: int


@dataclass(**MSG)
class BrokerHeartbeatRequest(Request["BrokerHeartbeatResponse"]):
    broker_id: int
    broker_epoch: int
    # Every replica this broker cannot write, in every heartbeat (KIP-858's OfflineLogDirs at
    # partition grain; server/offline_replicas.py).
    offline_replicas: list[OfflineReplica] = field(default_factory=list)


@dataclass(**MSG)
class BrokerHeartbeatResponse:
    error_code: int
    is_fenced: bool = False


@dataclass(**MSG)
class AlterPartitionItem:
    topic: str
    partition: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int


@dataclass(**MSG)
class AlterPartitionRequest(Request["AlterPartitionResponse"]):
    broker_id: int
    broker_epoch: int
    partitions: list[AlterPartitionItem]


@dataclass(**MSG)
class AlterPartitionItemResponse:
    topic: str
    partition: int
    error_code: int
    leader: int = NO_LEADER
    leader_epoch: int = UNDEFINED_EPOCH
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = -1


@dataclass(**MSG)
class AlterPartitionResponse:
    error_code: int
    partitions: list[AlterPartitionItemResponse] = field(default_factory=list)
