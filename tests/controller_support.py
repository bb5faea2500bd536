"""Factories for the controller state machine tests (test_core_controller_*.py): a seeded
controller, brokers registered, topics created, and the effects picked apart by type.

Times are ms; the session timeout is the default 9000 ms (`TIMEOUT`), so a broker last heard
from at t is still live at t + 9000 and fenced at t + 9001.

`tests/` is not a package: pytest's default (prepend) import mode puts this directory on
sys.path, so the test files import this module by its bare name.
"""

from __future__ import annotations

import random

from minikafka.core.controller import (
    ControllerConfig,
    ControllerState,
    Event,
    SendLeaderAndIsr,
    SendUpdateMetadata,
)
from minikafka.errors import ErrorCode
from minikafka.wire.messages import AlterPartitionItem, CreatableTopic, PartitionState

SEED = 20240611
TIMEOUT = 9000


def make(seed: int = SEED, **config) -> ControllerState:
    return ControllerState(
        controller_id=100, config=ControllerConfig(**config), rng=random.Random(seed)
    )


def register(c: ControllerState, ids=(1, 2, 3), now: int = 0) -> dict[int, int]:
    epochs = {}
    for b in ids:
        code, epoch, _ = c.register_broker(
            broker_id=b, incarnation_id=f"inc-{b}", host="127.0.0.1", port=9000 + b, now_ms=now
        )
        assert code == ErrorCode.NONE
        epochs[b] = epoch
    return epochs


def create(c: ControllerState, name="t", now=0, **kw):
    results, effects = c.create_topics([CreatableTopic(name=name, **kw)], now)
    assert results[0].error_code == ErrorCode.NONE, results[0].error_message
    return effects


def states(c: ControllerState, topic=None) -> dict[int, PartitionState]:
    return {s.partition: s for s in c.partition_states(None if topic is None else [topic])}


def lai(effects) -> dict[int, SendLeaderAndIsr]:
    sends = [e for e in effects if isinstance(e, SendLeaderAndIsr)]
    assert len({s.broker_id for s in sends}) == len(sends)  # one request per broker
    return {s.broker_id: s for s in sends}


def updates(effects) -> list[SendUpdateMetadata]:
    return [e for e in effects if isinstance(e, SendUpdateMetadata)]


def events(effects, name=None) -> list[Event]:
    return [e for e in effects if isinstance(e, Event) and (name is None or e.name == name)]


def keep_alive(c: ControllerState, epochs: dict[int, int], ids, now: int) -> None:
    for b in ids:
        code, fenced, _ = c.heartbeat(broker_id=b, broker_epoch=epochs[b], now_ms=now)
        assert (code, fenced) == (ErrorCode.NONE, False)


def alter(c, broker, epoch, *items):
    return c.alter_partition(broker_id=broker, broker_epoch=epoch, items=list(items))


def item(s: PartitionState, new_isr, **over) -> AlterPartitionItem:
    fields = dict(
        topic=s.topic,
        partition=s.partition,
        leader_epoch=s.leader_epoch,
        new_isr=new_isr,
        partition_epoch=s.partition_epoch,
    )
    fields.update(over)
    return AlterPartitionItem(**fields)
