"""The KIP-219 throttle of one connection (core/quota/gate.py): times in plain int ms."""

from __future__ import annotations

from minikafka.core.quota.gate import ThrottleGate


def test_a_fresh_gate_holds_nothing() -> None:
    gate = ThrottleGate()
    assert gate.next_deadline_ms() is None
    assert gate.delay_ms(0) == 0 and gate.delay_ms(-5) == 0  # monotonic clocks may be negative


def test_a_throttle_holds_until_its_end_counted_from_when_it_was_set() -> None:
    gate = ThrottleGate()
    gate.throttle(1000, 250)  # a response with throttle_time_ms = 250 at t = 1000
    assert gate.next_deadline_ms() == 1250
    assert gate.delay_ms(1000) == 250
    assert gate.delay_ms(1249) == 1
    assert gate.delay_ms(1250) == 0  # reads again at the end itself
    assert gate.delay_ms(9999) == 0


def test_zero_or_negative_throttles_change_nothing() -> None:
    gate = ThrottleGate()
    gate.throttle(1000, 0)
    gate.throttle(1000, -1)
    assert gate.next_deadline_ms() is None
    gate.throttle(1000, 10)
    gate.throttle(1005, 0)  # an unthrottled answer does not lift a running mute
    assert gate.delay_ms(1005) == 5


def test_overlapping_throttles_end_at_the_latest() -> None:
    # Requests in flight are answered while the connection is muted; each answer's throttle
    # counts from its own time. 100 ms at t = 0 and 30 ms at t = 50: until max(100, 80) = 100;
    # 80 ms at t = 60: until 140. A shorter, later one never shortens the mute.
    gate = ThrottleGate()
    gate.throttle(0, 100)
    gate.throttle(50, 30)
    assert gate.next_deadline_ms() == 100
    gate.throttle(60, 80)
    assert gate.next_deadline_ms() == 140
    assert gate.delay_ms(60) == 80


def test_a_throttle_after_the_last_one_ended_starts_afresh() -> None:
    gate = ThrottleGate()
    gate.throttle(0, 100)
    gate.throttle(500, 20)
    assert gate.next_deadline_ms() == 520
    assert gate.delay_ms(510) == 10
