"""The node's metrics as Prometheus metric families: names, types, HELP texts and labels.

`NodeCollector` is a prometheus_client custom Collector over the node's `Metrics`
(server/metrics.py), read at each scrape. `node_registry` puts it in a registry of the node's
own, beside prometheus_client's `ProcessCollector` (`process_cpu_seconds_total`,
`process_resident_memory_bytes`, ... of this node's process), never in the library's global
REGISTRY: tests run many nodes in one process.

Rules:

- A counter (`Metrics.inc`) is a CounterMetricFamily, exposed as `<name>_total`; a gauge
  (`Metrics.gauge`) is a GaugeMetricFamily. Every family has a HELP line (the table below, or a
  generic one naming the metrics.jsonl key) and every sample a `node` label.
- Names are the Kafka JMX exporter's where Kafka has the metric, as its example configs
  prometheus/jmx_exporter `example_configs/kafka-2_0_0.yml` and `examples/kafka-kraft-3_0_0.yml`
  (`lowercaseOutputName: true`; the exporter replaces other characters by `_`) name them:
  the Yammer meter `kafka.server<type=BrokerTopicMetrics, name=BytesInPerSec><>Count` becomes
  `kafka_server_brokertopicmetrics_bytesin_total` (rule `name=(.+)PerSec\\w*` ->
  `kafka_$1_$2_$3_total`), the Yammer gauge `kafka.server<type=ReplicaManager,
  name=LeaderCount><>Value` becomes `kafka_server_replicamanager_leadercount`, the client
  quota's `kafka.server<type=Produce, client-id=app><>byte-rate` becomes
  `kafka_server_quota_byte_rate{resource="Produce",clientId="app"}`, and (kraft config, rule
  `kafka.server<type=(.+)><>([a-z-]+)`) ReplicationQuotaManager's
  `kafka.server<type=LeaderReplication><>byte-rate` becomes
  `kafka_server_leaderreplication_byte_rate`.
- A metric Kafka does not have keeps its metrics.jsonl name behind `minikafka_`, other
  characters than `[a-zA-Z0-9_:]` replaced by `_` (`minikafka_SumReplicaLag`).
- A mapping gives one sample per key: a known metric names its labels (a partition `t-0` is
  `topic="t",partition="0"`); an unknown one gets `key`, or `kind` and `key` two levels deep.
  None (no value: Kafka's NaN, e.g. no throttle within the window), text and empty mappings
  give no sample; booleans are 0 and 1. A family with no sample still shows its HELP and TYPE.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from minikafka.server.metrics import Metrics

_UNSAFE = re.compile(r"[^a-zA-Z0-9_:]")
Path = tuple[str, ...]  # the keys from a gauge's value down to one number


def _topic_partition(path: Path) -> Path:
    """`("t-0",)` -> `("t", "0")`: TopicPartition's str, split at its last `-`."""
    topic, _, partition = path[0].rpartition("-")
    return (topic, partition) if len(path) == 1 else path


def _quota_client(path: Path) -> Path:
    """`("produce", "app")` -> `("Produce", "app")`: Kafka's QuotaType names the resource."""
    return (path[0].capitalize(), *path[1:])


@dataclass(frozen=True, slots=True)
class Family:
    """How one of our metrics is exposed: its name (a counter's without `_total`), HELP text,
    and the labels of its mapping's keys (`relabel` turns the keys into their values)."""

    name: str
    help: str
    labels: Path = ()
    relabel: Callable[[Path], Path] | None = None

    def label_values(self, path: Path) -> dict[str, str]:
        values = self.relabel(path) if self.relabel is not None else path
        if len(values) == len(self.labels):
            return dict(zip(self.labels, values, strict=True))
        # nested deeper (or less) than the table says: the generic labels
        names = {0: (), 1: ("key",), 2: ("kind", "key")}.get(len(path))
        return dict(zip(names or tuple(f"key{i}" for i in range(len(path))), path, strict=True))


_CLIENT = ("resource", "clientId")  # the Kafka config's quota labels

# Our metrics.jsonl key -> its family. The Kafka names come from the JMX bean each mirrors
# (in the comment), through the jmx_exporter rules quoted in the module docstring.
FAMILIES: dict[str, Family] = {
    # BrokerTopicMetrics (kafka.server), Yammer meters: the broker-wide, not the per-topic, one
    "bytes_in": Family(
        "kafka_server_brokertopicmetrics_bytesin",
        "Record bytes appended from producers (BrokerTopicMetrics BytesInPerSec).",
    ),
    "bytes_out": Family(
        "kafka_server_brokertopicmetrics_bytesout",
        "Record bytes sent to consumers (BrokerTopicMetrics BytesOutPerSec).",
    ),
    "replication_bytes_in": Family(
        "kafka_server_brokertopicmetrics_replicationbytesin",
        "Record bytes appended from leaders by this broker's replica fetchers "
        "(BrokerTopicMetrics ReplicationBytesInPerSec).",
    ),
    "replication_bytes_out": Family(
        "kafka_server_brokertopicmetrics_replicationbytesout",
        "Record bytes sent to followers (BrokerTopicMetrics ReplicationBytesOutPerSec).",
    ),
    # ReplicaManager (kafka.server)
    "isr_shrinks": Family(
        "kafka_server_replicamanager_isrshrinks",
        "ISR shrinks of partitions led here (ReplicaManager IsrShrinksPerSec).",
    ),
    "isr_expands": Family(
        "kafka_server_replicamanager_isrexpands",
        "ISR expansions of partitions led here (ReplicaManager IsrExpandsPerSec).",
    ),
    "partitions": Family(
        "kafka_server_replicamanager_partitioncount",
        "Partitions with a replica on this broker (ReplicaManager PartitionCount).",
    ),
    "leader_partitions": Family(
        "kafka_server_replicamanager_leadercount",
        "Partitions this broker leads (ReplicaManager LeaderCount).",
    ),
    "under_replicated_partitions": Family(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Partitions led here whose ISR is smaller than their replica set "
        "(ReplicaManager UnderReplicatedPartitions).",
    ),
    "offline_replicas": Family(
        "kafka_server_replicamanager_offlinereplicacount",
        "Replicas here taken offline by a storage error (ReplicaManager OfflineReplicaCount).",
    ),
    # ReplicationQuotaManager's Kafka Metrics (KIP-73): type=LeaderReplication, byte-rate
    "LeaderReplicationThrottledRate": Family(
        "kafka_server_leaderreplication_byte_rate",
        "Throttled replication bytes per second sent by this leader, over the quota window "
        "(KIP-73 LeaderReplicationThrottledRate; Kafka's LeaderReplication byte-rate).",
    ),
    "FollowerReplicationThrottledRate": Family(
        "kafka_server_followerreplication_byte_rate",
        "Throttled replication bytes per second fetched by this follower, over the quota window "
        "(KIP-73 FollowerReplicationThrottledRate; Kafka's FollowerReplication byte-rate).",
    ),
    # ClientQuotaManager's Kafka Metrics (KIP-13): type=Produce|Fetch, client-id=...
    "client_byte_rate": Family(
        "kafka_server_quota_byte_rate",
        "Bytes per second of each client id over the quota window (KIP-13 byte-rate).",
        _CLIENT,
        _quota_client,
    ),
    "client_throttle_time_ms_avg": Family(
        "kafka_server_quota_throttle_time",
        "Average throttle time in ms imposed on each client id over the quota window; "
        "absent when none was (KIP-13 throttle-time).",
        _CLIENT,
        _quota_client,
    ),
    # no Kafka counterpart: minikafka_
    "client_throttle_time_ms_max": Family(
        "minikafka_client_throttle_time_ms_max",
        "Largest throttle time in ms imposed on each client id over the quota window; "
        "absent when none was (Kafka's broker keeps only the average).",
        _CLIENT,
        _quota_client,
    ),
    "LeaderReassignmentThrottledRate": Family(
        "minikafka_LeaderReassignmentThrottledRate",
        "Throttled reassignment bytes per second sent by this leader, over the quota window "
        "(KIP-542, not in Kafka).",
    ),
    "FollowerReassignmentThrottledRate": Family(
        "minikafka_FollowerReassignmentThrottledRate",
        "Throttled reassignment bytes per second fetched by this follower, over the quota "
        "window (KIP-542, not in Kafka).",
    ),
    "SumReplicaLag": Family(
        "minikafka_SumReplicaLag",
        "Sum of replica lags in messages, as leader of its followers and as follower of its "
        "leaders (KIP-73 SumReplicaLag; Kafka shipped only FetcherLagMetrics ConsumerLag).",
    ),
    "PartitionBytesInRate": Family(
        "minikafka_PartitionBytesInRate",
        "Bytes per second appended to each partition (clients and replication) over its rate "
        "window; partitions with none are absent (KIP-73 PartitionBytesInRate).",
        ("topic", "partition"),
        _topic_partition,
    ),
    "throttle_configs": Family(
        "minikafka_throttle_configs",
        "Replication throttle configs in force on this broker: rates in bytes per second, "
        "1 for a throttle-all flag (KIP-1009); unset ones are absent.",
        ("config",),
    ),
    "messages_in_batches": Family(
        "minikafka_messages_in_batches",
        "Record batches appended from producers, one per partition of a produce request "
        "(batches, not Kafka's MessagesInPerSec records).",
    ),
    "produce_duplicates": Family(
        "minikafka_produce_duplicates",
        "Idempotent produce retries answered from the original append (KIP-98).",
    ),
    "produce_sequence_errors": Family(
        "minikafka_produce_sequence_errors",
        "Idempotent produces refused: out of order sequence, old epoch, unknown producer.",
    ),
    "append_failures": Family(
        "minikafka_append_failures",
        "Partition appends that failed in storage, from producers or replica fetchers.",
    ),
    "fetch_errors": Family(
        "minikafka_fetch_errors",
        "Replica fetcher requests to a leader that failed (connection or request error).",
    ),
    "fetch_session_errors": Family(
        "minikafka_fetch_session_errors",
        "Fetch session errors, as leader refusing a session epoch or as follower told so "
        "(KIP-227).",
    ),
    "hw_checkpoint_failures": Family(
        "minikafka_hw_checkpoint_failures",
        "High watermark checkpoints that failed to write (retried at the next interval).",
    ),
}
for _side, _does in (("leader", "sent by this leader"), ("follower", "fetched by this follower")):
    for _cls in ("replication", "reassignment"):
        _key = f"{_side}_{_cls}"
        FAMILIES[f"{_key}_throttled_bytes"] = Family(
            f"minikafka_{_key}_throttled_bytes",
            f"Bytes of throttled {_cls} {_does}, as charged to its quota (KIP-73).",
        )
        FAMILIES[f"{_key}_exempt_bytes"] = Family(
            f"minikafka_{_key}_exempt_bytes",
            f"Bytes of throttled {_cls} {_does} for in-sync replicas, which the quota "
            "cannot hold back (KAFKA-4313).",
        )
        if _side == "leader":
            FAMILIES[f"{_key}_overhead_bytes"] = Family(
                f"minikafka_{_key}_overhead_bytes",
                f"Bytes of a throttled {_cls} response beyond its records (headers) that its "
                "quota was charged, as Kafka's leader charges the whole response size.",
            )
for _log in ("events", "metrics", "replicas"):
    FAMILIES[f"log_write_errors_{_log}"] = Family(
        f"minikafka_log_write_errors_{_log}",
        f"Failed writes, renames and deletes of the node's {_log}.jsonl (server/jsonl.py).",
    )


def family_of(name: str, *, counter: bool) -> Family:
    """The family our metric `name` is exposed as: the table's, or `minikafka_<name>`."""
    known = FAMILIES.get(name)
    if known is not None:
        return known
    kind = "counter" if counter else "gauge"
    return Family(
        f"minikafka_{_UNSAFE.sub('_', name)}", f"minikafka {kind} {name} (metrics.jsonl)."
    )


def _leaves(value: object, path: Path = ()) -> Iterator[tuple[Path, float]]:
    """The numbers in a gauge's value with their key paths; None and text give none."""
    if isinstance(value, bool | int | float):
        yield path, float(value)
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _leaves(inner, (*path, str(key)))


class NodeCollector(Collector):
    """The node's counters and gauges, read at collect time (the scrape)."""

    def __init__(self, metrics: Metrics, node_id: int) -> None:
        self.metrics = metrics
        self.node = str(node_id)

    def collect(self) -> Iterator[Metric]:
        """Counters and gauges in the order of their exposed names."""
        m = self.metrics
        named = [(family_of(k, counter=True), k, None) for k in m.counters]
        named += [(family_of(k, counter=False), k, read) for k, read in m.gauges.items()]
        for family, key, read in sorted(named, key=lambda t: t[0].name):
            if read is None:
                counter = CounterMetricFamily(family.name, family.help)
                labels = {"node": self.node}
                counter.add_sample(f"{counter.name}_total", labels, float(m.counters[key]))
                yield counter
                continue
            gauge = GaugeMetricFamily(family.name, family.help)
            for path, number in _leaves(read()):
                labels = {"node": self.node, **family.label_values(path)}
                gauge.add_sample(gauge.name, labels, number)
            yield gauge


def node_registry(metrics: Metrics, node_id: int) -> CollectorRegistry:
    """A registry of the node's own: its metrics and its process's CPU, memory and fds."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(metrics, node_id))
    ProcessCollector(registry=registry)  # reads /proc/self: nothing where there is none
    return registry
