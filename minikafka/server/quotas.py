"""The broker's quota sensors: replication (leader and follower side, KIP-73 and KIP-542) and
client byte rates (KIP-13), bound to the live dynamic configs.

Replication sensors are SimpleRates over `replication.quota.window.num` windows of
`replication.quota.window.size.seconds` (Kafka's ReplicationQuotaManager); client sensors are
Rates over `quota.window.num` x `quota.window.size.seconds` (ClientQuotaManager). When a config
changes, bounds are replaced and the samples kept, as Kafka does. The decisions themselves are
in core/replication_quota.py; this module only holds the state and reads the clock it is given.
"""

from __future__ import annotations

from minikafka.core.dynamic_config import BrokerThrottleConfig
from minikafka.core.replication_quota import ThrottleClass, class_rate
from minikafka.core.stats import MetricConfig, Rate, Sensor, SimpleRate

SIDES = ("leader", "follower")


class ReplicationQuotas:
    """Four sensors: {leader, follower} x {replication, reassignment}."""

    def __init__(self, *, samples: int, window_ms: int, exempt_in_sync: bool = True) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.exempt_in_sync = exempt_in_sync
        self.config = BrokerThrottleConfig()
        self._sensors: dict[tuple[str, ThrottleClass], Sensor] = {}
        for side in SIDES:
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

    def exceeded(self, side: str, cls: ThrottleClass | None, now_ms: int) -> bool:
        return cls is not None and self._sensors[(side, cls)].quota_exceeded(now_ms)

    def record(self, side: str, cls: ThrottleClass | None, nbytes: int, now_ms: int) -> None:
        if cls is not None and nbytes:
            self._sensors[(side, cls)].record(nbytes, now_ms)

    def remaining(self, side: str, cls: ThrottleClass, now_ms: int) -> float:
        return self._sensors[(side, cls)].precise_remaining_bytes(now_ms)

    def rate(self, side: str, cls: ThrottleClass, now_ms: int) -> float:
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
        self.throttle_ms_total: dict[str, int] = {}

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
        """Record the bytes; the delay (ms) this response owes: KIP-13's throttle time."""
        self.set_bound(client_id, bound)
        sensor = self._sensors.get(client_id)
        if sensor is None:
            cfg = self._config(bound)
            sensor = self._sensors[client_id] = Sensor(f"{self.kind}-{client_id}", Rate(cfg), cfg)
        sensor.record(nbytes, now_ms)
        throttle = sensor.throttle_time_ms(now_ms) if bound is not None else 0
        if throttle > 0:
            self.throttle_ms_total[client_id] = self.throttle_ms_total.get(client_id, 0) + throttle
        return throttle

    def rates(self, now_ms: int) -> dict[str, float]:
        return {cid: round(s.peek(now_ms), 1) for cid, s in self._sensors.items()}
