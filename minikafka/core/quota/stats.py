"""Windowed rates, sensors and quota bounds: Kafka's metrics package, sans IO.

Mirrors `org.apache.kafka.common.metrics` (`MetricConfig`, `stats.SampledStat`,
`stats.WindowedSum`, `stats.Rate`, `stats.SimpleRate`, `stats.Avg`, `stats.Max`, `Sensor`,
`Quota`) and the KIP-13 throttle time of `QuotaUtils.throttleTime` / `ClientQuotaManager`.
Time comes in as `now_ms` (monotonic, non-decreasing); nothing here reads a clock.

The rules (docs/throttling.md#measuring-a-rate). N = `samples`, W = `window_ms`.

- A stat keeps a ring of N + 1 samples (start time, last event time, value). The extra slot is
  Kafka's "need to keep one extra sample (see purgeObsoleteSamples() logic)": the slot a record
  reuses was last written N advances ago, each advance at least W after the previous start, so
  its data is at least N*W old and already counted as expired: wrapping never drops live data.
  (It may be an empty sample a purge restarted, whose reuse moves the oldest start: see
  `Sensor.remaining_bytes`.)
- `record(v, now)`: take the current sample; if `now - start >= W` advance to the next slot and
  reset it (start = now); add v; last event = now. Samples advance only on a record.
- Before every measurement, each sample with `now - last_event >= N*W` is reset (start = last
  event = now, value 0): Kafka's `purgeObsoleteSamples`. A sample is kept while any of its events
  is younger than N*W, even if it started earlier ("samples overlapping the monitored window are
  kept").
- Measuring a stat that has no sample yet creates one starting at `now` (`SampledStat.oldest`),
  so a quota checked before anything is recorded starts its window at that check.
- Avg and Max (the throttle-time stats of ClientQuotaManager) combine the live samples after the
  same purge: Avg = sum of values / number of events, Max = the largest value; both are NaN
  when no live sample holds an event (Kafka's `combine` with count 0). They never create a
  sample when measured.
- Rates: `measure = sum / window_seconds`. SimpleRate (replication quotas): window =
  max(now - oldest start, W), so the first window counts as full-sized. Rate (client quotas):
  elapsed = now - oldest start; with `full = elapsed // W`, if full < N - 1 the missing
  `(N - 1 - full) * W` are added, so the window is N - 1 whole windows plus the current partial
  one; at least 1 ms.
  Derivation of the Rate shape: for elapsed in [kW, (k+1)W) with k < N - 1 the window is
  `(N - 1) * W + (elapsed - k * W)`: a fresh stat is measured as if the N - 1 previous windows
  had been recorded as empty, so a first burst does not read as an absurd rate.
- A quota is an upper bound: respected while measured <= bound (`Quota.acceptable`: equal is
  fine). A sensor records even over the bound; "exceeded" is a separate check at `now`.

Points where this module had to interpret or differs in detail (all deliberate):

1. Purge compares the *last event* time (current Kafka; older Kafka compared the start) and a
   reset sets start and last event to `now`. A purged sample therefore acts as an empty window
   starting at the purge, and may be the oldest start afterwards (see `Sensor.remaining_bytes`).
2. Kafka's event-count window (`MetricConfig.eventWindow`, unbounded by default) is not modelled;
   samples count their events only for Avg and Max.
3. Sums use `math.fsum` and the rate is `sum * 1000 / window_ms`, one rounding from exact
   integer byte counts, so "measured <= bound" is decided exactly for integer bytes.
4. `reconfigure` keeps the samples (Kafka keeps the sensor when a quota changes). If `samples`
   changes, the ring is re-laid in age order and the newest `samples + 1` are kept.
5. Rounding is Java's `Math.round` (half up), not Python's `round` (half to even).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Self

from minikafka.errors import ConfigError

__all__ = [
    "LONG_MAX_MS",
    "Avg",
    "Max",
    "MetricConfig",
    "Rate",
    "SampledStat",
    "Sensor",
    "SimpleRate",
    "throttle_time_ms",
]

# Java's Long.MAX_VALUE: what Math.round(+Infinity) gives for a zero quota in Kafka.
LONG_MAX_MS = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricConfig:
    """Kafka's MetricConfig: N samples of `window_ms` each, and an optional upper bound (units/s).

    `samples` is `quota.window.num` / `replication.quota.window.num`; `window_ms` is
    `*.window.size.seconds * 1000`; `quota` None means unbounded.
    """

    samples: int = 11
    window_ms: int = 1000
    quota: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("samples", self.samples), ("window_ms", self.window_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        q = self.quota
        if q is not None and (isinstance(q, bool) or not isinstance(q, int | float) or not q >= 0):
            raise ConfigError(f"quota must be a rate >= 0 (units/s) or None, got {q!r}")


class _Sample:
    """SampledStat.Sample: start, last event, value and event count (for Avg and Max)."""

    __slots__ = ("event_count", "initial", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int, initial: float = 0.0) -> None:
        self.initial = initial
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = self.initial
        self.event_count = 0


class SampledStat:
    """Kafka's SampledStat: a ring of N + 1 samples of W ms each (module docstring).

    Subclasses say how a value enters a sample (`_update`) and how the live samples combine
    into one figure (`_combine`); recording, advancing and purging are shared.
    """

    __slots__ = ("_current", "_samples", "config")
    INITIAL = 0.0  # a fresh or reset sample's value (Kafka's SampledStat.initialValue)

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self._samples: list[_Sample] = []
        self._current = 0

    def reconfigure(self, config: MetricConfig) -> None:
        """New settings, same samples (Kafka: KafkaMetric.config(newConfig) keeps the stat).

        When `samples` changes, the ring is re-laid oldest to newest and the newest
        `samples + 1` kept, so the next advance appends (if short) or reuses the oldest.
        """
        if config.samples != self.config.samples and self._samples:
            ordered = self._samples[self._current + 1 :] + self._samples[: self._current + 1]
            self._samples = ordered[-(config.samples + 1) :]
            self._current = len(self._samples) - 1
        self.config = config

    def record(self, value: float, now_ms: int) -> None:
        """SampledStat.record: advance when the current sample is complete, then add."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.config.window_ms:  # Sample.isComplete
            sample = self._advance(now_ms)
        self._update(sample, value)
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """SampledStat.measure: purge the obsolete samples, combine the rest."""
        self._purge(now_ms)
        return self._combine(now_ms)

    def peek(self, now_ms: int) -> float:
        """`measure(now_ms)` on a copy: a reader (a gauge) leaves the samples as they are."""
        return self._copy().measure(now_ms)

    def _update(self, sample: _Sample, value: float) -> None:
        raise NotImplementedError

    def _combine(self, now_ms: int) -> float:
        raise NotImplementedError

    # -- the ring ------------------------------------------------------------------------------

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, self.INITIAL))
            self._current = 0
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.config.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, self.INITIAL))
            self._current = len(self._samples) - 1
            return self._samples[self._current]
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_age_ms = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age_ms:
                sample.reset(now_ms)

    def _copy(self) -> Self:
        twin = type(self)(self.config)
        for s in self._samples:
            t = _Sample(s.start_ms, s.initial)
            t.last_event_ms, t.value, t.event_count = s.last_event_ms, s.value, s.event_count
            twin._samples.append(t)
        twin._current = self._current
        return twin


class Rate(SampledStat):
    """Kafka's Rate over a WindowedSum: the client-quota rate (KIP-13).

    The window is N - 1 whole windows plus the current partial one while fewer than N - 1 whole
    windows have elapsed since the oldest sample started (module docstring), else the elapsed
    time itself; never below 1 ms.
    """

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def total(self, now_ms: int) -> float:
        """The sum of the live samples at `now_ms` (SampledStat.measure over a WindowedSum)."""
        self._purge(now_ms)
        return math.fsum(s.value for s in self._samples)

    def _combine(self, now_ms: int) -> float:
        """Units per second: total / window seconds (Rate.measure)."""
        total = math.fsum(s.value for s in self._samples)
        return total * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: elapsed since the oldest start, padded to N - 1 whole windows."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest_start(now_ms)
        window = self.config.window_ms
        full_windows = elapsed // window
        min_full_windows = self.config.samples - 1  # prior samples = required - current
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * window
        # A window of 0 ms (N = 1, measured at its first instant) has no rate: Kafka uses 1 ms.
        return max(elapsed, 1)

    def _measure_after(self, value: float, now_ms: int) -> float:
        """What `measure(now_ms)` would give after `record(value, now_ms)`, without recording."""
        probe = self._copy()
        probe.record(value, now_ms)
        return probe.measure(now_ms)

    def _oldest_start(self, now_ms: int) -> int:
        if not self._samples:  # SampledStat.oldest creates the first sample at `now`
            self._samples.append(_Sample(now_ms))
            self._current = 0
        return min(s.start_ms for s in self._samples)


class SimpleRate(Rate):
    """Kafka's SimpleRate, the replication-quota rate (KIP-73): window = max(now - oldest, W).

    The first window is treated as full-sized, "to avoid an artificially high rate when the gap
    between readings is close to 0"; after that the window is the true elapsed time.
    """

    __slots__ = ()

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        elapsed = now_ms - self._oldest_start(now_ms)
        return max(elapsed, self.config.window_ms)


class Avg(SampledStat):
    """Kafka's Avg: the mean of the values recorded in the live samples (sum / event count).

    NaN when no live sample holds an event. ClientQuotaManager records every throttle time it
    imposes into one of these (the `throttle-time` metric per client id, KIP-13).
    """

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self, now_ms: int) -> float:
        count = sum(s.event_count for s in self._samples)
        return math.fsum(s.value for s in self._samples) / count if count else math.nan


class Max(SampledStat):
    """Kafka's Max: the largest value recorded in the live samples; NaN when there is none.

    A sample starts at -inf (Kafka's initial value), so negative values are maxed correctly.
    """

    __slots__ = ()
    INITIAL = -math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value = max(sample.value, value)

    def _combine(self, now_ms: int) -> float:
        if not any(s.event_count for s in self._samples):
            return math.nan
        return max(s.value for s in self._samples)


class Sensor:
    """Kafka's Sensor with one rate stat and its quota; the config here governs the stat.

    Kafka's `Sensor.record` throws QuotaViolationException after recording; here recording and
    checking are separate calls and the outcome is a value, as every decision of the core is.
    """

    __slots__ = ("config", "name", "stat")

    def __init__(self, name: str, stat: Rate, config: MetricConfig) -> None:
        self.name = name
        self.stat = stat
        self.config = config
        stat.reconfigure(config)

    def record(self, value: float, now_ms: int) -> None:
        """Always records, even over the bound (Kafka's Sensor.record with checkQuotas false; the
        check is `quota_exceeded`)."""
        self.stat.record(value, now_ms)

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back a `record(value, now_ms)` whose bytes were not sent: Kafka's
        ClientQuotaManager.unrecordQuotaSensor records `value * -1` (KIP-219: a throttled fetch
        is answered empty). At the same `now_ms` it lands in the sample the record went to
        (that sample started at or before `now_ms`, so it is not complete), so the window's sum
        is back where it was; the sample's last event time stays moved, as in Kafka."""
        self.stat.record(-value, now_ms)

    def measure(self, now_ms: int) -> float:
        return self.stat.measure(now_ms)

    def reconfigure(self, config: MetricConfig) -> None:
        """New quota and/or window settings; the samples are kept (ClientQuotaManager.updateQuota
        and ReplicationQuotaManager.updateQuota replace the metric config, not the sensor)."""
        self.config = config
        self.stat.reconfigure(config)

    def quota_exceeded(self, now_ms: int) -> bool:
        """measured > bound; equal is acceptable (Quota.acceptable); False without a quota."""
        bound = self.config.quota
        return bound is not None and self.measure(now_ms) > bound

    def throttle_time_ms(self, now_ms: int) -> int:
        """KIP-13 client delay at `now_ms`, with the stat's own window (QuotaUtils.throttleTime).

        0 without a quota or when the bound holds. See `throttle_time_ms` (the function) for
        the formula and when waiting that long really brings the measured rate to the bound.
        """
        bound = self.config.quota
        if bound is None:
            return 0
        measured = self.measure(now_ms)
        if measured <= bound:
            return 0
        return throttle_time_ms(measured, bound, self.stat.window_size_ms(now_ms))

    def remaining_bytes(self, now_ms: int) -> float:
        """How many more units a record at `now_ms` may carry with measure <= bound (beyond Kafka).

        For KIP-73's rejected "pessimistic" design, which never exceeds the bound. With S' the
        total and w' the window (ms) as they will be *after* a record at `now_ms`:

            (S' + r) * 1000 / w' <= T   <=>   r <= T * w' / 1000 - S'

        S' and w' are read from a probe that records 0 at `now_ms`: the record itself may
        advance the ring and reset a slot, and when that slot is an empty sample left by a purge
        it can be the oldest start, so the window shrinks with the record. The result is then
        shaved by a few ulps if float rounding would put the measure after recording it above the
        bound. May be <= 0 (nothing more fits); +inf without a quota.
        """
        bound = self.config.quota
        if bound is None or math.isinf(bound):
            return math.inf
        probe = self.stat._copy()
        probe.record(0.0, now_ms)
        total = probe.total(now_ms)
        allowance = bound * probe.window_size_ms(now_ms) / 1000.0
        room = allowance - total
        step = math.ulp(max(abs(total), allowance, 1.0))
        while room > 0 and self.stat._measure_after(room, now_ms) > bound:
            room -= step
            step *= 2
        return room

    def peek(self, now_ms: int) -> float:
        """`measure(now_ms)` without touching the sensor's samples. Kafka's measure may create
        and reset samples (SampledStat.oldest, purgeObsoleteSamples), which moves the start of
        the quota window: a metrics reader calling it every second would change the throttle it
        observes. Gauges read through here, so observing changes nothing."""
        return self.stat._copy().measure(now_ms)

    def precise_remaining_bytes(self, now_ms: int) -> float:
        """The allowance of the precise mode (beyond Kafka): like `remaining_bytes`, but over a
        window that starts at the oldest sample holding traffic, not at an empty sample that a
        measurement or a purge created (at least W):

            r = T * max(now - oldest busy start, W) / 1000 - S'

        Kafka's window counts idle time since any sample began, so an idle sensor that metrics
        reporters keep measuring would admit up to N windows' worth at once, and the expiry of
        a burst's sample would free another burst. Here an idle sensor admits one window's
        worth (T * W), and steady traffic keeps S'/w' at the bound as samples expire.
        """
        bound = self.config.quota
        if bound is None or math.isinf(bound):
            return math.inf
        probe = self.stat._copy()
        probe.record(0.0, now_ms)
        total = probe.total(now_ms)  # purges first
        busy = [s.start_ms for s in probe._samples if s.value > 0]
        window = max(now_ms - min(busy, default=now_ms), self.config.window_ms)
        return bound * window / 1000.0 - total


def throttle_time_ms(measured: float, quota: float, window_ms: int) -> int:
    """KIP-13's delay X (ms) that brings a measured rate O back to the quota T.

    With S bytes in a window of W ms, O = S / W. If the client is held for X ms and records
    nothing meanwhile, the same S spreads over W + X:  O * W / (W + X) = T, so

        X = (O - T) / T * W,   rounded half up (Java Math.round).

    KIP-13's example: T = 5 MB/s, W = 10 s, 60 MB recorded -> O = 6 MB/s, X = 1/5 * 10 s = 2 s.
    0 when O <= T. A zero quota gives Kafka's Math.round(+Infinity) = Long.MAX_VALUE.

    The identity assumes the window grows by X while the client waits. It does for a Rate
    whose oldest sample started at least N - 1 windows ago, until a sample expires. It does not
    during a Rate's first N - 1 windows, where the padded window is `(N-1)*W + elapsed mod W`
    and falls back by W at each whole window, nor once samples expire during the wait (Kafka's
    own ClientQuotaManagerTest story is still above its quota after the delay). The delay is
    Kafka's answer, not a guarantee; the next request is measured again.
    """
    if quota < 0 or window_ms < 0:
        raise ValueError(f"quota and window_ms must be >= 0, got {quota!r} and {window_ms!r}")
    if not measured > quota:
        return 0
    if quota == 0:
        return LONG_MAX_MS
    return _java_round((measured - quota) / quota * window_ms)


def _java_round(x: float) -> int:
    """Java's Math.round for x > 0: the nearest integer, halves rounded up; saturates."""
    if not x < LONG_MAX_MS:
        return LONG_MAX_MS
    floor = math.floor(x)
    return floor + (1 if x - floor >= 0.5 else 0)
