"""The replica manager's metrics: KIP-73's by name (the throttled rates, SumReplicaLag), the
partition counts Kafka's ReplicaManager reports, and the client quota picture (KIP-13).

Read every metrics interval, so none walks every hosted partition (thousands): the counts and the
leader-side lag come from the replica index (server/replica_index.py), kept from the changes.
`PartitionBytesInRate` names only the partitions whose rate is not 0 (rounded to 0.1 B/s): the
others had no byte appended within the rate's window. A reader takes a partition it does not
name as 0 B/s (tools/reassign/plan_input.py). Kafka's JMX reporter likewise shows only the
partitions whose metrics are registered, not every one the broker could host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from functools import partial
from typing import Protocol

from minikafka.clock import now_ms
from minikafka.common import TopicPartition
from minikafka.core.quota.classes import QuotaSide, ThrottleClass
from minikafka.core.quota.sensors import ClientQuotas, ReplicationQuotas
from minikafka.server.config import NodeConfig
from minikafka.server.fetcher import ReplicaFetcherManager
from minikafka.server.local_partition import LocalPartition
from minikafka.server.metrics import Metrics
from minikafka.server.offline_replicas import OfflineReplicas
from minikafka.server.partition_changes import PartitionChanges
from minikafka.server.replica_index import ReplicaIndex


class ReplicaGaugeSource(Protocol):
    """What the gauges read of the replica manager (server/replica_manager.py)."""

    config: NodeConfig
    partitions: Mapping[TopicPartition, LocalPartition]
    changes: PartitionChanges
    index: ReplicaIndex
    offline: OfflineReplicas
    fetchers: ReplicaFetcherManager
    replication_quotas: ReplicationQuotas
    produce_quotas: ClientQuotas
    fetch_quotas: ClientQuotas


def register_replica_gauges(rm: ReplicaGaugeSource, metrics: Metrics) -> None:
    """The replica manager's counters and gauges, registered once at construction."""
    _register_quota_gauges(rm, metrics)
    for counter in (
        "bytes_in",
        "bytes_out",
        "replication_bytes_in",
        "replication_bytes_out",
        "isr_shrinks",
        "isr_expands",
        "produce_duplicates",  # idempotent retries answered from the original (KIP-98)
        "produce_sequence_errors",  # refused: out of order, old epoch, unknown producer
    ):
        metrics.inc(counter, 0)  # present (as 0) from the first snapshot on
    metrics.gauge("offline_replicas", lambda: len(rm.offline))  # Kafka's OfflineReplicaCount
    metrics.gauge("partitions", lambda: len(rm.partitions))
    metrics.gauge("leader_partitions", rm.index.leader_partitions)
    metrics.gauge("under_replicated_partitions", rm.index.under_replicated)
    metrics.gauge("SumReplicaLag", partial(_sum_replica_lag, rm))


def _register_quota_gauges(rm: ReplicaGaugeSource, metrics: Metrics) -> None:
    """KIP-73's metrics by name, and the client quota picture (KIP-13)."""
    q = rm.replication_quotas
    for side in QuotaSide:
        for cls, label in (
            (ThrottleClass.REPLICATION, "Replication"),
            (ThrottleClass.REASSIGNMENT, "Reassignment"),
        ):
            metrics.gauge(
                f"{side.capitalize()}{label}ThrottledRate", partial(_rounded, q.rate, side, cls)
            )
    metrics.gauge("PartitionBytesInRate", partial(partition_bytes_in_rates, rm))
    metrics.gauge(
        "client_byte_rate",
        lambda: {
            "produce": rm.produce_quotas.rates(now_ms()),
            "fetch": rm.fetch_quotas.rates(now_ms()),
        },
    )
    # Kafka's per-client `throttle-time` (ClientQuotaManager): avg and max over the quota
    # window of the throttle times imposed; None when none was within it (Kafka: NaN).
    metrics.gauge(
        "client_throttle_time_ms_avg",
        lambda: {
            "produce": rm.produce_quotas.throttle_time_avg(now_ms()),
            "fetch": rm.fetch_quotas.throttle_time_avg(now_ms()),
        },
    )
    metrics.gauge(
        "client_throttle_time_ms_max",
        lambda: {
            "produce": rm.produce_quotas.throttle_time_max(now_ms()),
            "fetch": rm.fetch_quotas.throttle_time_max(now_ms()),
        },
    )
    metrics.gauge(
        "throttle_configs",
        lambda: {k: v for k, v in asdict(q.config).items() if v not in (None, False)},
    )


def partition_bytes_in_rates(rm: ReplicaGaugeSource) -> dict[str, float]:
    """KIP-73's PartitionBytesInRate of the partitions with bytes in their window (module
    docstring); one whose rate is back to 0 leaves the active set until its next record."""
    t = now_ms()
    out: dict[str, float] = {}
    active = rm.changes.rate_active
    for tp in sorted(active):
        p = rm.partitions.get(tp)
        rate = p.bytes_in_rate(t) if p is not None else 0.0
        if rate == 0:  # nothing in the window: stays 0 until a record marks it again
            active.discard(tp)
        elif round(rate, 1):
            out[str(tp)] = round(rate, 1)
    return out


def _sum_replica_lag(rm: ReplicaGaugeSource) -> int:
    """KIP-73's SumReplicaLag: "the sum of all replica lag values on the broker", both
    sides of it, in messages (offsets).

    - As leader: for each follower of each partition led here, leader LEO minus the LEO the
      follower last fetched from (core/partition.py `replica_lag`).
    - As follower: for each partition followed here, the leader's HW as of the last fetch
      response minus our own LEO (`FollowerFetchState.lag`; unknown before the first
      response, counted as 0). This is the half that an admin watching a bootstrapping
      broker sees fall: it leads nothing, so the leader half reads 0 there.

    Kafka never shipped a metric of this name. What it has is the follower's view:
    FetcherLagMetrics `ConsumerLag` per partition (leader HW - the follower's next fetch
    offset, from AbstractFetcherThread.processFetchRequest) and ReplicaFetcherManager's
    `MaxLag`, their maximum. It reports no per-follower lag on the leader side. A lagging
    replica is counted once by its leader and once by itself here, so summing this metric
    over brokers counts it twice.
    """
    as_leader = rm.index.leader_lag()  # kept from the changes, not scanned
    as_follower = sum(f.planner.total_lag() for f in rm.fetchers.fetchers.values())
    return as_leader + as_follower


def _rounded(measure, side: QuotaSide, cls: ThrottleClass) -> float:  # noqa: ANN001
    return round(measure(side, cls, now_ms()), 1)
