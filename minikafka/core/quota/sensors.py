"""The broker's quota sensors: replication (leader and follower side, KIP-73 and KIP-542) and
client byte rates (KIP-13), bound to the live dynamic configs.

Replication sensors are SimpleRates over `replication.quota.window.num` windows of
`replication.quota.window.size.seconds` (Kafka's ReplicationQuotaManager); client sensors are
Rates over `quota.window.num` x `quota.window.size.seconds` (ClientQuotaManager). When a config
changes, bounds are replaced and the samples kept, as Kafka does. The decisions themselves are
in core/quota/classes.py and core/quota/stats.py; this module only holds the state and uses the
time it is given.

A consumer fetch over its quota is answered empty and its bytes un-recorded
(`record_and_throttle_fetch`, KIP-219 as Kafka's KafkaApis serves it); a produce over its quota
keeps its bytes recorded, since they were appended.

Per client id, each throttle time imposed is also recorded into an Avg and a Max over the same
quota window (Kafka's `throttle-time` sensor of ClientQuotaManager, recorded in `throttle()`
only when a throttle is imposed): the metrics show how long each client was held lately.
Kafka's broker sensor keeps only the Avg, over the Metrics default window (`metrics.num.samples`
x `metrics.sample.window.ms`); the Max is what Kafka's clients report (`produce-throttle-time-max`).

A client id's sensors expire after `INACTIVE_SENSOR_EXPIRATION_MS` without a record (Kafka's
ClientQuotaManager.InactiveSensorExpirationTimeSeconds, 3600; Metrics' ExpireSensorTask looks
every 30 s): otherwise every client id ever seen would hold its sensors forever: unbounded memory.
Here the look is taken, at most every `EXPIRE_CHECK_INTERVAL_MS`, when bytes are recorded or
the rates are read (the metrics log reads them every interval). A client that comes back
starts afresh, as in Kafka; its quota window was long over anyway.
"""

from __future__ import annotations

import math

from minikafka.core.dynamic_config import BrokerThrottleConfig
from minikafka.core.quota.charge import Charge
from minikafka.core.quota.classes import QuotaSide, ThrottleClass, class_rate
from minikafka.core.quota.stats import Avg, Max, MetricConfig, Rate, Sensor, SimpleRate

INACTIVE_SENSOR_EXPIRATION_MS = (
    3600 * 1000
)  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds
EXPIRE_CHECK_INTERVAL_MS = 30_000  # Metrics' ExpireSensorTask period


class ReplicationQuotas:
    """Four sensors: {leader, follower} x {replication, reassignment}."""

    def __init__(self, *, samples: int, window_ms: int, exempt_in_sync: bool = True) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.exempt_in_sync = exempt_in_sync
        self.config = BrokerThrottleConfig()
        self._sensors: dict[tuple[QuotaSide, ThrottleClass], Sensor] = {}
        for side in QuotaSide:
            for cls in ThrottleClass:
                cfg = MetricConfig(samples=samples, window_ms=window_ms, quota=None)
                self._sensors[(side, cls)] = Sensor(f"{side}-{cls.value}", SimpleRate(cfg), cfg)

    def apply(self, config: BrokerThrottleConfig) -> None:
        """New effective broker config: new bounds, same samples."""
        self.config = config
        for (side, cls), sensor in self._sensors.items():
            rate = class_rate(config, side, cls)
            sensor.reconfigure(
                MetricConfig(
                    samples=self.samples,
                    window_ms=self.window_ms,
                    quota=None if rate is None else float(rate),
                )
            )

    def bounded(self, side: QuotaSide) -> bool:
        """Whether any class has a bound on this side (without one nothing is ever held back,
        and the fetchers skip the per-partition throttle decisions)."""
        return any(self._sensors[(side, cls)].config.quota is not None for cls in ThrottleClass)

    def exceeded(self, side: QuotaSide, cls: ThrottleClass | None, now_ms: int) -> bool:
        return cls is not None and self._sensors[(side, cls)].quota_exceeded(now_ms)

    def record(self, side: QuotaSide, cls: ThrottleClass | None, nbytes: int, now_ms: int) -> None:
        if cls is not None and nbytes:
            self._sensors[(side, cls)].record(nbytes, now_ms)

    def charge(self, charge: Charge, now_ms: int) -> None:
        """Record what a fetch cost (core/quota/planner.py `Charge`)."""
        self.record(charge.side, charge.throttle_class, charge.bytes, now_ms)

    def remaining(self, side: QuotaSide, cls: ThrottleClass, now_ms: int) -> float:
        return self._sensors[(side, cls)].precise_remaining_bytes(now_ms)

    def rate(self, side: QuotaSide, cls: ThrottleClass, now_ms: int) -> float:
        """For gauges: a read that leaves the quota window as it is."""
        return self._sensors[(side, cls)].peek(now_ms)


class ClientQuotas:
    """Per client id byte-rate sensors for one kind of traffic (produce or fetch), KIP-13."""

    def __init__(self, kind: str, *, samples: int, window_ms: int) -> None:
        self.kind = kind
        self.samples = samples
        self.window_ms = window_ms
        self._sensors: dict[str, Sensor] = {}
        self._bounds: dict[str, float | None] = {}
        self._throttle_avg: dict[str, Avg] = {}
        self._throttle_max: dict[str, Max] = {}
        self._last_record_ms: dict[str, int] = {}
        self._next_expiry_check_ms = 0

    def _config(self, bound: float | None) -> MetricConfig:
        return MetricConfig(samples=self.samples, window_ms=self.window_ms, quota=bound)

    def set_bound(self, client_id: str, bound: float | None) -> None:
        if self._bounds.get(client_id, "unset") == bound:
            return
        self._bounds[client_id] = bound
        sensor = self._sensors.get(client_id)
        if sensor is not None:
            sensor.reconfigure(self._config(bound))

    def record_and_throttle(
        self, client_id: str, nbytes: int, bound: float | None, now_ms: int
    ) -> int:
        """Record the bytes; the throttle time (ms) of this response (KIP-13's formula), for
        which the connection is then muted (KIP-219). A throttle is recorded into the client's
        throttle-time stats."""
        self.expire(now_ms)
        self._last_record_ms[client_id] = now_ms
        self.set_bound(client_id, bound)
        sensor = self._sensors.get(client_id)
        if sensor is None:
            cfg = self._config(bound)
            sensor = self._sensors[client_id] = Sensor(f"{self.kind}-{client_id}", Rate(cfg), cfg)
        sensor.record(nbytes, now_ms)
        throttle = sensor.throttle_time_ms(now_ms) if bound is not None else 0
        if throttle > 0:
            cfg = self._config(None)
            self._throttle_avg.setdefault(client_id, Avg(cfg)).record(throttle, now_ms)
            self._throttle_max.setdefault(client_id, Max(cfg)).record(throttle, now_ms)
        return throttle

    def record_and_throttle_fetch(
        self, client_id: str, nbytes: int, bound: float | None, now_ms: int
    ) -> int:
        """A consumer fetch's bytes, as Kafka's KafkaApis.handleFetchRequest charges them since
        KIP-219: recorded and the throttle time read (`record_and_throttle`); if it is > 0 the
        response goes out EMPTY, so the bytes are taken back out of the sensor
        (ClientQuotaManager.unrecordQuotaSensor) and only the throttle time stays recorded.
        The data is read again and sent once the client comes back after the throttle."""
        throttle = self.record_and_throttle(client_id, nbytes, bound, now_ms)
        if throttle > 0:
            self._sensors[client_id].unrecord(nbytes, now_ms)
        return throttle

    def max_value_in_quota_window(self, bound: float | None) -> int | None:
        """The most one response may carry without a certain throttle (None: no bound):
        bound x (N - 1) x W, what a fresh sensor's window admits. Kafka's
        ClientQuotaManager.getMaxValueInQuotaWindow, by which KafkaApis caps a consumer's fetch
        max bytes (KAFKA-9677): since a throttled fetch is answered empty (KIP-219), a response
        larger than that would be throttled, un-recorded and read again forever."""
        if bound is None:
            return None
        return int(min(bound * (self.samples - 1) * self.window_ms / 1000, 2**31 - 1))

    def expire(self, now_ms: int) -> None:
        """Drop the sensors of client ids not recorded for INACTIVE_SENSOR_EXPIRATION_MS (Kafka's
        Sensor.hasExpired: strictly longer), looking at most every EXPIRE_CHECK_INTERVAL_MS."""
        if now_ms < self._next_expiry_check_ms:
            return
        self._next_expiry_check_ms = now_ms + EXPIRE_CHECK_INTERVAL_MS
        expired = [
            cid
            for cid, last in self._last_record_ms.items()
            if now_ms - last > INACTIVE_SENSOR_EXPIRATION_MS
        ]
        for cid in expired:
            for sensors in (
                self._last_record_ms,
                self._sensors,
                self._bounds,
                self._throttle_avg,
                self._throttle_max,
            ):
                sensors.pop(cid, None)

    def rates(self, now_ms: int) -> dict[str, float]:
        self.expire(now_ms)
        return {cid: round(s.peek(now_ms), 1) for cid, s in self._sensors.items()}

    def throttle_time_avg(self, now_ms: int) -> dict[str, float | None]:
        """Per client id ever throttled: the mean throttle time (ms) over the quota window,
        None (Kafka: NaN) when it was not throttled within it. Read without side effects."""
        return {cid: _finite(s.peek(now_ms)) for cid, s in self._throttle_avg.items()}

    def throttle_time_max(self, now_ms: int) -> dict[str, float | None]:
        """Per client id ever throttled: the longest throttle time (ms) in the quota window."""
        return {cid: _finite(s.peek(now_ms)) for cid, s in self._throttle_max.items()}


def _finite(value: float) -> float | None:
    """NaN (no event in the window) as None: JSON has no NaN, and Prometheus skips None."""
    return None if math.isnan(value) else round(value, 1)
