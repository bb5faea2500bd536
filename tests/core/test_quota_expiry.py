"""Client quota sensors expire after an hour without a record, as Kafka's do
(ClientQuotaManager.InactiveSensorExpirationTimeSeconds = 3600): a broker that has
seen many client ids does not keep their sensors forever."""

from __future__ import annotations

from minikafka.core.quota.sensors import (
    EXPIRE_CHECK_INTERVAL_MS,
    INACTIVE_SENSOR_EXPIRATION_MS,
    ClientQuotas,
)

HOUR_MS = INACTIVE_SENSOR_EXPIRATION_MS


def quotas() -> ClientQuotas:
    return ClientQuotas("produce", samples=11, window_ms=1000)


def test_a_client_silent_for_more_than_an_hour_loses_its_sensors():
    q = quotas()
    q.record_and_throttle("old", 10_000, 100.0, 0)  # throttled: throttle-time stats too
    assert q.throttle_time_max(0)["old"] > 0
    q.record_and_throttle("active", 10, None, HOUR_MS - 1000)
    # exactly an hour: not yet (Kafka's Sensor.hasExpired is strictly longer)
    assert set(q.rates(HOUR_MS)) == {"old", "active"}
    # past the hour, at the next look (at most every 30 s): "old" is gone, whole
    assert set(q.rates(HOUR_MS + EXPIRE_CHECK_INTERVAL_MS)) == {"active"}
    assert q.throttle_time_avg(HOUR_MS + EXPIRE_CHECK_INTERVAL_MS) == {}
    assert q.throttle_time_max(HOUR_MS + EXPIRE_CHECK_INTERVAL_MS) == {}


def test_recording_keeps_a_sensor_and_a_returning_client_starts_afresh():
    q = quotas()
    for t in range(0, 3 * HOUR_MS, HOUR_MS // 2):  # a record every half hour
        q.record_and_throttle("steady", 1, None, t)
        q.rates(t)
    assert "steady" in q.rates(3 * HOUR_MS)
    q.record_and_throttle("back", 1, None, 0)
    later = 2 * HOUR_MS
    assert q.record_and_throttle("back", 5000, 100.0, later) > 0  # a fresh sensor, bound applied
    assert q.rates(later)["back"] > 0


def test_looks_at_most_every_30_seconds():
    q = quotas()
    q.record_and_throttle("a", 1, None, 0)
    q.rates(HOUR_MS - 1)  # a look: nothing expired; the next is 30 s later
    assert "a" in q.rates(HOUR_MS + 1)  # expired, but not looked at yet
    assert "a" not in q.rates(HOUR_MS - 1 + EXPIRE_CHECK_INTERVAL_MS)
