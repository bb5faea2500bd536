"""The controller state machine: broker registration, epochs and incarnations, heartbeats, and
the addresses a broker may register with (a broker may not claim another's address).

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import pytest

from minikafka.core.controller import SendUpdateMetadata
from minikafka.errors import ErrorCode
from minikafka.testing.controller_state import events, lai, make, register, updates
from minikafka.wire.messages import BrokerInfo

# ---------------------------------------------------------------------------- registration


def test_fresh_state():
    c = make()
    assert c.controller_epoch == 1
    assert c.live_brokers() == []
    assert c.partition_states() == []
    assert c.next_deadline_ms() is None
    assert c.on_deadline(10**9) == []


def test_register_gives_increasing_epochs_and_announces_broker():
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=1, incarnation_id="a", host="h1", port=1, now_ms=0
    )
    assert (code, epoch) == (ErrorCode.NONE, 1)
    assert [e.name for e in events(effects)] == ["broker_registered", "broker_unfenced"]
    assert lai(effects) == {}
    assert updates(effects) == [SendUpdateMetadata(broker_ids=(1,), partitions=(), full=True)]
    _, epoch2, effects2 = c.register_broker(
        broker_id=2, incarnation_id="b", host="h2", port=2, now_ms=5
    )
    assert epoch2 == 2
    # The newcomer gets the full (empty) partition set; the others learn of the new broker.
    assert updates(effects2) == [
        SendUpdateMetadata(broker_ids=(2,), partitions=(), full=True),
        SendUpdateMetadata(broker_ids=(1,), partitions=()),
    ]
    assert c.live_brokers() == [
        BrokerInfo(node_id=1, host="h1", port=1),
        BrokerInfo(node_id=2, host="h2", port=2),
    ]
    assert c.broker_info(2) == BrokerInfo(node_id=2, host="h2", port=2)
    assert c.broker_info(9) is None
    assert c.broker_epoch(1) == 1


def test_register_retry_same_incarnation_returns_same_epoch_without_effects():
    c = make()
    register(c)
    code, epoch, effects = c.register_broker(
        broker_id=2, incarnation_id="inc-2", host="127.0.0.1", port=9002, now_ms=10
    )
    assert (code, epoch, effects) == (ErrorCode.NONE, 2, [])
    code, epoch, _ = c.register_broker(
        broker_id=4, incarnation_id="inc-4", host="127.0.0.1", port=9004, now_ms=10
    )
    assert epoch == 4  # the counter moved on; nothing was reused


def test_register_negative_id_rejected():
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=-1, incarnation_id="x", host="h", port=1, now_ms=0
    )
    assert (code, epoch, effects) == (ErrorCode.INVALID_REQUEST, -1, [])
    assert c.live_brokers() == []


def test_heartbeat_errors_and_plain_heartbeat():
    c = make()
    epochs = register(c)
    assert c.heartbeat(broker_id=9, broker_epoch=1, now_ms=1) == (
        ErrorCode.BROKER_ID_NOT_REGISTERED,
        True,
        [],
    )
    assert c.heartbeat(broker_id=1, broker_epoch=epochs[1] + 7, now_ms=1) == (
        ErrorCode.STALE_BROKER_EPOCH,
        True,
        [],
    )
    assert c.heartbeat(broker_id=1, broker_epoch=epochs[1], now_ms=1) == (ErrorCode.NONE, False, [])


# ---------------------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("host", "port", "why"),
    [
        ("a" * 64 + ".example", 9092, "label 'aaaa"),  # UnicodeError from the idna codec before
        ("bad host", 9092, "label 'bad host'"),
        ("h\u00e9", 9092, "label"),
        ("", 9092, "host name of 0 characters"),
        ("a." * 127 + "a", 9092, "host name of 255 characters"),
        ("h1..x", 9092, "label ''"),
        ("-h", 9092, "label '-h'"),
        ("h1", 0, "port 0 is outside 1..65535"),
        ("h1", 65536, "port 65536"),
    ],
)
def test_register_with_an_unusable_address_is_refused_and_logged(host, port, why):
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=1, incarnation_id="x", host=host, port=port, now_ms=0
    )
    assert (code, epoch) == (ErrorCode.INVALID_REQUEST, -1)
    [refused] = events(effects)
    assert refused.name == "broker_registration_refused"
    assert why in refused.fields["error"]
    assert c.live_brokers() == [] and c.broker_info(1) is None
    # the controller goes on: a good registration after it is accepted
    code, _, _ = c.register_broker(
        broker_id=1, incarnation_id="x", host="a" * 63 + ".example", port=9092, now_ms=1
    )
    assert code == ErrorCode.NONE


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "broker_1.local.", "x-1.y"])
def test_register_accepts_ip_literals_and_host_names(host):
    code, _, _ = make().register_broker(
        broker_id=1, incarnation_id="x", host=host, port=1, now_ms=0
    )
    assert code == ErrorCode.NONE


# ---------------------------------------------------------------------------- Kafka listener


def test_a_brokers_kafka_listener_is_kept_advertised_and_restored():
    c = make()
    code, _, _ = c.register_broker(
        broker_id=1, incarnation_id="a", host="h1", port=1, kafka_host="h1", kafka_port=9092,
        now_ms=0,
    )  # fmt: skip
    assert code == ErrorCode.NONE
    c.register_broker(broker_id=2, incarnation_id="b", host="h2", port=2, now_ms=0)
    assert c.live_brokers() == [
        BrokerInfo(node_id=1, host="h1", port=1, kafka_host="h1", kafka_port=9092),
        BrokerInfo(node_id=2, host="h2", port=2),  # no Kafka listener: port -1
    ]
    restored = type(c).from_doc(
        c.to_doc(), controller_id=c.controller_id, config=c.config, rng=c.rng
    )
    assert restored.broker_info(1) == c.broker_info(1)
    # a doc saved before the Kafka listener existed reads back with none
    old = c.to_doc()
    for broker in old["brokers"]:
        del broker["kafka_host"], broker["kafka_port"]
    legacy = type(c).from_doc(old, controller_id=c.controller_id, config=c.config, rng=c.rng)
    assert legacy.broker_info(1) == BrokerInfo(node_id=1, host="h1", port=1)


def test_an_unusable_kafka_listener_address_refuses_the_registration():
    c = make()
    code, epoch, effects = c.register_broker(
        broker_id=1, incarnation_id="a", host="h1", port=1, kafka_host="bad host", kafka_port=9092,
        now_ms=0,
    )  # fmt: skip
    assert (code, epoch) == (ErrorCode.INVALID_REQUEST, -1)
    assert "bad host" in events(effects)[0].fields["error"]
    assert c.broker_info(1) is None
