"""Which replication bytes are throttled, and by which quota (KIP-73, KAFKA-4313, KIP-542,
KIP-1009), as plain decisions. Kafka's ReplicationQuotaManager and the `shouldLeaderThrottle` /
`shouldFollowerThrottle` checks of ReplicaManager and ReplicaFetcherThread.

Every replica's traffic falls into one class per side (leader or follower), for this broker:
- REASSIGNMENT (KIP-542): the replica is one that LeaderAndIsr marks as being added
  (`adding_replicas`) and this side's reassignment rate is set. It has its own sensor and bound,
  so with both rates set the total budget is their sum; no replica list is needed, and a leader
  change during the move needs no manual step.
- REPLICATION (KIP-73): the partition is in this side's throttle set (the topic's
  `*.replication.throttled.replicas` list names `partition:this-broker`, or `*`, or the KIP-1009
  broker boolean is on) and this side's replication rate is set. A rate without a list, or a
  list without a rate, throttles nothing.
- None: never throttled.

A partition of a throttled class is throttled (returns or fetches nothing) when all three
hold: the replica is not in sync (leader: follower not in the ISR; follower: not caught up),
it is in a throttle class, and that class's quota is currently exceeded. The first condition is
KAFKA-4313's in-sync exemption; `exempt_in_sync=False` removes it, to reproduce ISR thrashing.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum, StrEnum

from minikafka.core.dynamic_config import BrokerThrottleConfig, ThrottledReplicas


class ThrottleClass(Enum):
    REPLICATION = "replication"
    REASSIGNMENT = "reassignment"


class QuotaSide(StrEnum):
    """Which end of replication a quota bounds (KIP-73): the leader's sends or the follower's
    fetches. A StrEnum: its value is the name metrics and configs use ("leader.replication...")."""

    LEADER = "leader"
    FOLLOWER = "follower"


def leader_throttle_class(
    *,
    partition: int,
    local_id: int,
    follower_id: int,
    adding_replicas: Collection[int],
    topic_leader_list: ThrottledReplicas,
    config: BrokerThrottleConfig,
) -> ThrottleClass | None:
    """The class of what this broker, leading `partition`, sends to `follower_id`."""
    if follower_id in adding_replicas and config.leader_reassignment_rate is not None:
        return ThrottleClass.REASSIGNMENT
    listed = config.leader_all or topic_leader_list.contains(partition, local_id)
    if listed and config.leader_rate is not None:
        return ThrottleClass.REPLICATION
    return None


def follower_throttle_class(
    *,
    partition: int,
    local_id: int,
    adding_replicas: Collection[int],
    topic_follower_list: ThrottledReplicas,
    config: BrokerThrottleConfig,
) -> ThrottleClass | None:
    """The class of what this broker fetches for `partition` as a follower."""
    if local_id in adding_replicas and config.follower_reassignment_rate is not None:
        return ThrottleClass.REASSIGNMENT
    listed = config.follower_all or topic_follower_list.contains(partition, local_id)
    if listed and config.follower_rate is not None:
        return ThrottleClass.REPLICATION
    return None


def leader_charge_class(
    throttle_class: ThrottleClass | None,
    *,
    partition: int,
    local_id: int,
    topic_leader_list: ThrottledReplicas,
    config: BrokerThrottleConfig,
) -> ThrottleClass | None:
    """The sensor a partition's part of a response is charged to, in Kafka's accounting
    (core/quota/charge.py): its throttle class (`leader_throttle_class`) when it has one;
    otherwise REPLICATION if the leader list names it: Kafka's
    `ReplicationQuotaManager.isThrottled` is the list alone, so a listed partition is recorded
    even before a rate is set, and counts once one is."""
    if throttle_class is not None:
        return throttle_class
    if config.leader_all or topic_leader_list.contains(partition, local_id):
        return ThrottleClass.REPLICATION
    return None


def follower_charge_class(
    throttle_class: ThrottleClass | None,
    *,
    partition: int,
    local_id: int,
    topic_follower_list: ThrottledReplicas,
    config: BrokerThrottleConfig,
) -> ThrottleClass | None:
    """The follower sensor a partition's fetched record bytes are recorded into: its throttle
    class (`follower_throttle_class`) when it has one; otherwise REPLICATION if the follower
    list names it. Kafka's ReplicaFetcherThread.processPartitionData records
    `if (quota.isThrottled(tp))`, and `isThrottled` is list membership alone, so a listed
    partition is recorded before a rate is set and the sensor has its history once one is
    (the leader side's `leader_charge_class`). Which partitions are held back is still
    `follower_throttle_class`'s."""
    if throttle_class is not None:
        return throttle_class
    if config.follower_all or topic_follower_list.contains(partition, local_id):
        return ThrottleClass.REPLICATION
    return None


def should_throttle(
    *,
    in_sync: bool,
    throttle_class: ThrottleClass | None,
    quota_exceeded: bool,
    exempt_in_sync: bool = True,
) -> bool:
    """Kafka's three-part condition: !inSync && isThrottled && isQuotaExceeded (KAFKA-4313
    added the first part; without the exemption in-sync replicas are throttled too)."""
    if throttle_class is None or not quota_exceeded:
        return False
    return not (in_sync and exempt_in_sync)


def class_rate(
    config: BrokerThrottleConfig, side: QuotaSide, throttle_class: ThrottleClass
) -> int | None:
    """The bound of a class on a side; None when unset."""
    if side == QuotaSide.LEADER:  # a plain "leader" string compares equal too
        return (
            config.leader_rate
            if throttle_class is ThrottleClass.REPLICATION
            else config.leader_reassignment_rate
        )
    return (
        config.follower_rate
        if throttle_class is ThrottleClass.REPLICATION
        else config.follower_reassignment_rate
    )
