"""Local clusters for the integration tests (tests/integration/): Kafka's fencing timings
shortened, and a cluster planned, started and stopped around a `with` block.

- `QUICK_FENCING`: a broker heartbeats every 200 ms and is fenced 1.5 s after its last heartbeat
  (Kafka: 2 s and 9 s), so that a killed node's partitions move within a test's patience; the
  integration tests' own config sets start from it.
- `cluster_up(base_dir, brokers=..., seed=..., **plan)`: `plan_cluster` with those options, the
  cluster up (`LocalCluster.up`, 30 s per phase unless `ready_timeout_s` says otherwise), yielded
  ready, and stopped when the block ends, whatever ended it. The fixture of each test module
  picks its own size, seed and configs; the launcher is the same for all.

The pytest plugin (pytest_plugin.py) has its own `FAST_CONFIGS` for users' clusters: it also
shortens the fetch backoff and wait, which these tests set per module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from minikafka.cluster import LocalCluster, plan_cluster

QUICK_FENCING: Mapping[str, str] = MappingProxyType(
    {"broker.heartbeat.interval.ms": "200", "broker.session.timeout.ms": "1500"}
)


@contextmanager
def cluster_up(
    base_dir: Path, *, brokers: int, seed: int, ready_timeout_s: float = 30.0, **plan: Any
) -> Iterator[LocalCluster]:
    """A cluster planned in `base_dir` (`plan` is plan_cluster's other options: node_configs,
    fault_proxy, combined_controller...), running for the block, stopped after it."""
    spec = plan_cluster(base_dir=base_dir, brokers=brokers, seed=seed, **plan)
    with LocalCluster.up(spec, ready_timeout_s=ready_timeout_s) as lc:
        yield lc
