"""The controller state machine: its document (to_doc / from_doc) and its records (take_changes /
from_records), what a restored controller does, and describe().

Seeded and deterministic; the factories are in minikafka/testing/controller_state.py. Times
are ms; the session timeout is the default 9000 ms, so a broker last heard from at t is still
live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random

import msgpack
import pytest

from minikafka.core.controller import ControllerConfig, ControllerState
from minikafka.core.controller.records import doc_from_records
from minikafka.errors import ConfigError, ErrorCode
from minikafka.testing.controller_state import (
    TIMEOUT,
    alter,
    create,
    events,
    item,
    keep_alive,
    lai,
    make,
    register,
    states,
)

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


# ---------------------------------------------------------------------------- records


def saved(records: dict, changes) -> dict:
    """A metadata store's records after one save of `changes`."""
    for key in changes.deletes:
        records.pop(key, None)
    records.update(changes.puts)
    return records


def restore(records: dict, seed: int = 1) -> ControllerState:
    packed = msgpack.unpackb(msgpack.packb(records), strict_map_key=False)
    return ControllerState.from_records(
        packed, controller_id=100, config=ControllerConfig(), rng=random.Random(seed)
    )


def test_records_restore_what_the_document_restores():
    c, _ = busy_controller()
    records = saved({}, c.take_changes())
    assert records == c.to_records()  # the first save writes everything
    assert doc_from_records(records) == c.to_doc()
    from_records = restore(records)
    from_doc = ControllerState.from_doc(
        c.to_doc(), controller_id=100, config=ControllerConfig(), rng=random.Random(1)
    )
    assert from_records.to_doc() == from_doc.to_doc()
    assert from_records.controller_epoch == c.controller_epoch + 1
    assert all(from_records.is_fenced(b) for b in (1, 2, 3))
    # What the records hold is clean: the next save is the header with the new epoch.
    changes = from_records.take_changes()
    assert changes.puts == {"header": from_records.to_records()["header"]} and not changes.deletes
    assert changes.puts["header"]["controller_epoch"] == c.controller_epoch + 1


def test_an_isr_change_saves_one_partition_not_the_cluster():
    """Every save used to pack and wrote the whole document, so one ISR change on a big
    cluster cost all its partitions. Now it writes the header and the partition it changed."""
    c = make()
    epochs = register(c)
    create(c, num_partitions=1000, replication_factor=2)
    records = saved({}, c.take_changes())
    assert sum(key.startswith("partition/") for key in records) == 1000
    s = states(c)[7]
    code, items, effects = alter(c, s.leader, epochs[s.leader], item(s, [s.leader]))
    assert code == ErrorCode.NONE and items[0].error_code == ErrorCode.NONE and effects
    changes = c.take_changes()
    assert set(changes.puts) == {"header", "partition/t/7"}
    assert changes.puts["partition/t/7"]["isr"] == [s.leader]
    assert doc_from_records(saved(records, changes)) == c.to_doc()
    assert restore(records).partition_states() == c.partition_states()
    assert set(c.take_changes().puts) == {"header"}  # nothing changed since


def test_a_store_written_before_records_is_rewritten_as_records():
    c, _ = busy_controller()
    legacy = {"doc": c.to_doc()}
    restored = restore(legacy)
    assert restored.partition_states() == c.partition_states()
    records = saved(dict(legacy), restored.take_changes())
    assert "doc" not in records and records == restored.to_records()


def test_malformed_records_are_refused():
    c, _ = busy_controller()
    records = c.to_records()
    with pytest.raises(ConfigError, match="malformed"):
        restore({k: v for k, v in records.items() if k != "partition/t/3"})  # a gap
    with pytest.raises(ConfigError, match="malformed"):
        restore({k: v for k, v in records.items() if k != "topic/t"})  # partitions, no topic
    with pytest.raises(ConfigError, match="malformed"):
        restore({"header": {"version": 1}})


def test_the_tracked_tables_refuse_bulk_writes_they_could_not_report():
    c = make()
    with pytest.raises(TypeError):
        c._partitions.update({})
    with pytest.raises(TypeError):
        c._topics.setdefault("t", {})


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
