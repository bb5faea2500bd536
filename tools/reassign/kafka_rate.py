"""Kafka's replication-quota rate and its check, written from Kafka's Java for the simulation of
tools/reassign/kafka_algorithm.py, pure.

The simulation is the prediction a Kafka-mode move is judged against, so it must not share its
arithmetic with the brokers it judges (minikafka/core/quota/stats.py): a bug there would move the
run and the prediction together. This module is a second, independent transcription of
`org.apache.kafka.common.metrics` (Kafka 3.9 / trunk of 2024-10), tested against the numbers of
Kafka's own unit tests (tests/tools/test_reassign_kafka_rate.py):

- `SampledStat` (stats/SampledStat.java) over a `WindowedSum` (stats/WindowedSum.java): a ring
  of `samples + 1` samples ("keep one extra placeholder for overlapping sample"). `record`
  takes the current sample, advances to the next slot (reset, start = now) when the current
  one is complete (`now - start >= window`), adds the value and sets the last event time.
  `measure` first purges: every sample whose last event is `samples * window` old or more is
  reset to start at now (`purgeObsoleteSamples`), then sums the samples in list order.
  `oldest` creates a sample at now when there is none.
- `SimpleRate` (stats/SimpleRate.java, the rate `ReplicationQuotaManager` registers): window =
  max(now - oldest start, one window), so the first window counts as full. `Rate`
  (stats/Rate.java, client quotas) pads the window to `samples - 1` whole windows, at least 1 ms;
  kept here because Kafka's RateTest pins the shared sample logic through it.
  Rate.measure: sum / convert(window ms, SECONDS), a double division.
- The check (`Sensor.checkQuotas` -> `Quota.acceptable`): an upper bound is acceptable while
  value <= bound, so the quota is exceeded only when the measured rate is above it.
  `ReplicationQuotaManager.isQuotaExceeded` is that check at the current time; `record` records
  without checking (`sensor.record(value, now, false)`).

Kafka's event-count window (`MetricConfig.eventWindow`) is Long.MAX_VALUE by default and never
set for quotas: left out. Times are integer milliseconds (`now_ms`), values floats (doubles).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RateConfig:
    """The parts of Kafka's MetricConfig a quota rate reads: `samples` (N, the
    `replication.quota.window.num`), `window_ms` (`timeWindowMs`) and the upper bound (`quota`,
    units per second; None: no quota)."""

    samples: int
    window_ms: int
    quota: float | None = None

    def __post_init__(self) -> None:
        if self.samples < 1 or self.window_ms < 1:
            raise ValueError(
                f"samples and window_ms must be >= 1, got {self.samples} and {self.window_ms}"
            )


@dataclass(slots=True)
class Sample:
    """SampledStat.Sample: start time, last event time, value, event count."""

    start_ms: int
    last_event_ms: int
    value: float = 0.0
    event_count: int = 0

    def reset(self, now_ms: int) -> None:
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class WindowedSum:
    """SampledStat with WindowedSum's update (add) and combine (sum in list order)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.current = 0

    def record(self, config: RateConfig, value: float, now_ms: int) -> None:
        sample = self._current(now_ms)
        if now_ms - sample.start_ms >= config.window_ms:  # Sample.isComplete
            sample = self._advance(config, now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, config: RateConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        total = 0.0
        for sample in self.samples:
            total += sample.value
        return total

    def oldest(self, now_ms: int) -> Sample:
        if not self.samples:
            self.samples.append(Sample(now_ms, now_ms))
        oldest = self.samples[0]
        for sample in self.samples[1:]:
            if sample.start_ms < oldest.start_ms:
                oldest = sample
        return oldest

    def purge_obsolete_samples(self, config: RateConfig, now_ms: int) -> None:
        expire_age = config.samples * config.window_ms
        for sample in self.samples:
            # "samples overlapping the monitored window are kept, even if they started before it"
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def _current(self, now_ms: int) -> Sample:
        if not self.samples:
            self.samples.append(Sample(now_ms, now_ms))
        return self.samples[self.current]

    def _advance(self, config: RateConfig, now_ms: int) -> Sample:
        self.current = (self.current + 1) % (config.samples + 1)
        if self.current >= len(self.samples):
            sample = Sample(now_ms, now_ms)
            self.samples.append(sample)
            return sample
        sample = self.samples[self.current]
        sample.reset(now_ms)
        return sample


class Rate:
    """Kafka's Rate: the windowed sum over `window_size` (per second)."""

    def __init__(self) -> None:
        self.stat = WindowedSum()

    def record(self, config: RateConfig, value: float, now_ms: int) -> None:
        self.stat.record(config, value, now_ms)

    def measure(self, config: RateConfig, now_ms: int) -> float:
        value = self.stat.measure(config, now_ms)
        return value / (self.window_size(config, now_ms) / 1000.0)

    def window_size(self, config: RateConfig, now_ms: int) -> int:
        self.stat.purge_obsolete_samples(config, now_ms)
        elapsed = now_ms - self.stat.oldest(now_ms).start_ms
        full_windows = elapsed // config.window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.window_ms
        return max(elapsed, 1)


class SimpleRate(Rate):
    """Kafka's SimpleRate: the first window counts as full, then the true elapsed time."""

    def window_size(self, config: RateConfig, now_ms: int) -> int:
        self.stat.purge_obsolete_samples(config, now_ms)
        elapsed = now_ms - self.stat.oldest(now_ms).start_ms
        return max(elapsed, config.window_ms)


def acceptable(value: float, bound: float) -> bool:
    """Quota.acceptable for an upper bound (the replication quotas'): value <= bound."""
    return value <= bound


class QuotaSensor:
    """A replication quota as ReplicationQuotaManager builds it: one SimpleRate under `config`.

    `record` never checks (`sensor.record(value, now, false)`); `quota_exceeded` is
    `isQuotaExceeded`, i.e. `Sensor.checkQuotas` at `now_ms`: measure, then not acceptable."""

    def __init__(self, config: RateConfig) -> None:
        self.config = config
        self.rate = SimpleRate()

    def record(self, value: float, now_ms: int) -> None:
        self.rate.record(self.config, value, now_ms)

    def measure(self, now_ms: int) -> float:
        return self.rate.measure(self.config, now_ms)

    def quota_exceeded(self, now_ms: int) -> bool:
        bound = self.config.quota
        return bound is not None and not acceptable(self.measure(now_ms), bound)
