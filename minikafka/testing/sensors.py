"""A sensor for the core/quota/stats.py tests (tests/core/test_stats_*.py)."""

from __future__ import annotations

from minikafka.core.quota.stats import MetricConfig, Rate, Sensor


def sensor(kind: type[Rate], *, samples: int = 11, window_ms: int = 1000, quota=None) -> Sensor:
    cfg = MetricConfig(samples=samples, window_ms=window_ms, quota=quota)
    return Sensor("test", kind(cfg), cfg)
