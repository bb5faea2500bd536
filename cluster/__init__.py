"""Launching and controlling local multi-process minikafka clusters."""

from minikafka.cluster.clusterfile import CLUSTER_FILE, ClusterRecord, read_record
from minikafka.cluster.fault_proxy import FaultProxySpec
from minikafka.cluster.local import LOG_FILES, LocalCluster
from minikafka.cluster.managed import StopOutcome
from minikafka.cluster.ports import free_ports
from minikafka.cluster.processes import NODE_COMMAND, NodeProcess, node_argv
from minikafka.cluster.spec import (
    BROKER,
    CONTROLLER,
    MAX_BROKERS,
    ClusterSpec,
    NodeSpec,
    parse_node_configs,
    plan_cluster,
    validate_node_configs,
)
from minikafka.cluster.status import NodeStatus, ProxyStatus

__all__ = [
    "BROKER",
    "CLUSTER_FILE",
    "CONTROLLER",
    "LOG_FILES",
    "MAX_BROKERS",
    "NODE_COMMAND",
    "ClusterRecord",
    "ClusterSpec",
    "FaultProxySpec",
    "LocalCluster",
    "NodeProcess",
    "NodeSpec",
    "NodeStatus",
    "ProxyStatus",
    "StopOutcome",
    "free_ports",
    "node_argv",
    "parse_node_configs",
    "plan_cluster",
    "read_record",
    "validate_node_configs",
]
