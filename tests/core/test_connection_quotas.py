"""core/connection_quotas.py: Kafka's ConnectionQuotas, as plain counts.

docs/front-door.md#connections says what they bound.
"""

from __future__ import annotations

from minikafka.core.connection_quotas import KAFKA, NATIVE, ConnectionQuotas


def quotas(**limits) -> ConnectionQuotas:
    return ConnectionQuotas(
        max_connections=limits.pop("max_connections", 100),
        max_connections_per_ip=limits.pop("per_ip", 100),
        listener_max_connections=limits,
    )


def test_one_address_is_held_to_max_connections_per_ip_over_both_listeners() -> None:
    q = quotas(per_ip=2)
    assert q.admit(NATIVE, "10.0.0.1") is None
    assert q.admit(KAFKA, "10.0.0.1") is None
    assert q.admit(KAFKA, "10.0.0.1") == "max.connections.per.ip=2 reached for 10.0.0.1"
    assert q.admit(NATIVE, "10.0.0.2") is None  # another address is not held back
    q.release(NATIVE, "10.0.0.1")
    assert q.admit(KAFKA, "10.0.0.1") is None
    assert (q.open, q.refused, q.per_ip) == (3, 1, {"10.0.0.1": 2, "10.0.0.2": 1})


def test_a_listener_limit_holds_that_listener_only() -> None:
    q = quotas(kafka=1)
    assert q.admit(KAFKA, "a") is None
    assert q.admit(KAFKA, "b") == "listener.name.kafka.max.connections=1 reached"
    assert q.admit(NATIVE, "b") is None


def test_max_connections_holds_all_listeners_together() -> None:
    q = quotas(max_connections=2)
    assert q.admit(KAFKA, "a") is None
    assert q.admit(NATIVE, "b") is None
    assert q.admit(NATIVE, "c") == "max.connections=2 reached"
    assert q.refused == 1


def test_a_connection_that_proves_membership_gives_its_client_slot_back() -> None:
    """KIP-402: the cluster's own connections are not held to the broker-wide limit."""
    q = quotas(max_connections=1, per_ip=1)
    assert q.admit(NATIVE, "127.0.0.1") is None
    q.to_member(NATIVE, "127.0.0.1")
    assert (q.open, q.members, q.per_ip) == (0, 1, {})
    assert q.admit(NATIVE, "127.0.0.1") is None  # a client fits again beside the node
    q.member_closed()
    assert q.members == 0


def test_released_addresses_leave_the_table() -> None:
    """Many addresses, each come and gone: the table does not grow with them."""
    q = quotas()
    for i in range(1000):
        ip = f"10.0.{i // 256}.{i % 256}"
        assert q.admit(NATIVE, ip) is None
        q.release(NATIVE, ip)
    assert (q.open, q.per_ip, q.per_listener) == (0, {}, {NATIVE: 0})


def test_probation_places_are_bounded() -> None:
    q = quotas()
    q.max_probation = 2
    assert [q.try_probation() for _ in range(3)] == [True, True, False]
    q.end_probation()
    assert q.try_probation() and q.on_probation == 2
