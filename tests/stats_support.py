"""A sensor for the core/quota/stats.py tests (test_core_stats_*.py).

`tests/` is not a package: pytest's default (prepend) import mode puts this directory on
sys.path, so the test files import this module by its bare name.
"""

from __future__ import annotations

from minikafka.core.quota.stats import MetricConfig, Rate, Sensor


def sensor(kind: type[Rate], *, samples: int = 11, window_ms: int = 1000, quota=None) -> Sensor:
    cfg = MetricConfig(samples=samples, window_ms=window_ms, quota=quota)
    return Sensor("test", kind(cfg), cfg)
