"""The controller state machine: its document (to_doc / from_doc), what a restored controller
does, and describe().

Seeded and deterministic; the factories are in controller_support.py. Times are ms; the
session timeout is the default 9000 ms, so a broker last heard from at t is still live at
t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random

import msgpack
import pytest
from controller_support import TIMEOUT, create, events, keep_alive, lai, make, register, states

from minikafka.core.controller import ControllerConfig, ControllerState
from minikafka.errors import ConfigError, ErrorCode

# ---------------------------------------------------------------------------- persistence


def busy_controller() -> tuple[ControllerState, dict[int, int]]:
    c = make()
    epochs = register(c)
    create(c, num_partitions=10, replication_factor=3, configs={"max.message.bytes": "2048"})
    keep_alive(c, epochs, [1, 2], 5000)
    c.on_deadline(TIMEOUT + 1)  # 3 fenced: epochs and ISRs move
    return c, epochs


def test_doc_round_trip_bumps_controller_epoch_and_keeps_partitions():
    c, epochs = busy_controller()
    doc = c.to_doc()
    packed = msgpack.unpackb(msgpack.packb(doc))
    assert packed == doc  # msgpack-able as is
    restored = ControllerState.from_doc(
        packed, controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    assert restored.controller_epoch == c.controller_epoch + 1 == 2
    assert restored.partition_states() == c.partition_states()
    assert any(s.leader_epoch > 0 for s in restored.partition_states())
    assert restored.config_snapshot().configs("topics", "t") == {"max.message.bytes": "2048"}
    assert restored.live_brokers() == []
    assert all(restored.is_fenced(b) for b in (1, 2, 3))
    assert restored.next_deadline_ms() is None  # last contact unknown
    again = restored.to_doc()
    assert again == {**doc, "controller_epoch": doc["controller_epoch"] + 1}
    # Brokers come back with their persisted epochs; the epoch counter is not reused.
    code, fenced, effects = restored.heartbeat(broker_id=1, broker_epoch=epochs[1], now_ms=50)
    assert (code, fenced) == (ErrorCode.NONE, False)
    assert len(lai(effects)[1].partitions) == 10
    _, new_epoch, _ = restored.register_broker(
        broker_id=4, incarnation_id="inc-4", host="h", port=4, now_ms=60
    )
    assert new_epoch == 4


def test_restored_broker_that_never_returns_is_fenced_for_real():
    c = make()
    epochs = register(c, ids=(1, 2))
    create(c, num_partitions=4, replication_factor=2)
    restored = ControllerState.from_doc(
        c.to_doc(), controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    before = states(restored)
    assert restored.on_deadline(1000) == []  # starts the clocks of the restored brokers
    assert restored.next_deadline_ms() == 1000 + TIMEOUT + 1
    keep_alive(restored, epochs, [1], 5000)
    assert restored.on_deadline(1000 + TIMEOUT) == []
    effects = restored.on_deadline(1000 + TIMEOUT + 1)
    [fenced] = events(effects, "broker_fenced")
    assert fenced.fields == {
        "broker_id": 2,
        "broker_epoch": 2,
        "reason": "controller_restart_timeout",
    }
    for p, s in states(restored).items():
        assert s.leader == 1 and s.isr == [1]
        assert s.leader_epoch == before[p].leader_epoch + (1 if before[p].leader == 2 else 0)
    assert set(lai(effects)) == {1}


def test_from_doc_rejects_malformed_doc():
    with pytest.raises(ConfigError, match="malformed"):
        ControllerState.from_doc(
            {"version": 1}, controller_id=1, config=ControllerConfig(), rng=random.Random(0)
        )
    with pytest.raises(ConfigError, match="version"):
        ControllerState.from_doc(
            {**make().to_doc(), "version": 99},
            controller_id=1,
            config=ControllerConfig(),
            rng=random.Random(0),
        )


def test_describe_summarises():
    c, _ = busy_controller()
    d = c.describe()
    assert d["controller_epoch"] == 1
    assert [(b["broker_id"], b["fenced"]) for b in d["brokers"]] == [
        (1, False),
        (2, False),
        (3, True),
    ]
    assert d["topics"] == {"t": {"configs": {"max.message.bytes": "2048"}, "partitions": 10}}
    assert d["partitions"] == 10
    assert d["under_replicated_partitions"] == 10 and d["offline_partitions"] == 0
    assert msgpack.unpackb(msgpack.packb(d)) == d
