"""Seeded controller state machines for the controller's tests (tests/core/test_controller_*.py,
tests/server/test_metadata_cache.py): factories (a controller, brokers registered, topics
created), a reassignment `Cluster` of brokers 1..4 with topic t placed by hand, the throttle
config names, and the effects picked apart by type.

Times are ms; the session timeout is the default 9000 ms (`TIMEOUT`), so a broker last heard
from at t is still live at t + 9000 and fenced at t + 9001.
"""

from __future__ import annotations

import random

from minikafka.core.controller import (
    ControllerConfig,
    ControllerState,
    Event,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from minikafka.errors import ErrorCode
from minikafka.wire.messages import (
    AlterableConfig,
    AlterConfigsResource,
    AlterPartitionItem,
    CreatableTopic,
    PartitionState,
    ReassignablePartition,
)

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


# -- reassignment: a cluster placed by hand, the throttle configs ---------------------------------

LR = "leader.replication.throttled.rate"
FR = "follower.replication.throttled.rate"
LREP = "leader.replication.throttled.replicas"
FREP = "follower.replication.throttled.replicas"


class Cluster:
    """A controller with brokers 1..4 and topic t (t-0 = [1, 2], t-1 = [2, 3])."""

    def __init__(self, assignments=((1, 2), (2, 3)), seed: int = 11) -> None:
        self.c = ControllerState(
            controller_id=100, config=ControllerConfig(), rng=random.Random(seed)
        )
        self.now = 0
        self.epochs: dict[int, int] = {}
        for b in (1, 2, 3, 4):
            self.register(b)
        results, _ = self.c.create_topics(
            [CreatableTopic(name="t", assignments=[list(a) for a in assignments])], 0
        )
        assert results[0].error_code == ErrorCode.NONE, results[0].error_message

    def register(self, b: int, incarnation: str = "a") -> list:
        code, epoch, effects = self.c.register_broker(
            broker_id=b, incarnation_id=f"{b}-{incarnation}", host="h", port=b, now_ms=self.now
        )
        assert code == ErrorCode.NONE
        self.epochs[b] = epoch
        return effects

    def state(self, partition: int) -> PartitionState:
        return {s.partition: s for s in self.c.partition_states()}[partition]

    def move(self, moves: dict, throttles=()) -> tuple[list, list]:
        code, message, responses, effects = self.c.alter_partition_reassignments(
            [ReassignablePartition(topic="t", partition=p, replicas=r) for p, r in moves.items()],
            throttles,
        )
        assert (code, message) == (ErrorCode.NONE, None)
        return [(r.error_code, r.error_message) for r in responses], effects

    def moved(self, moves: dict, throttles=()) -> list:
        """`move`, every partition accepted."""
        responses, effects = self.move(moves, throttles)
        assert responses == [(ErrorCode.NONE, None)] * len(moves)
        return effects

    def isr(self, partition: int, isr: list[int]) -> list:
        """The leader asks for `isr` (AlterPartition), and it is accepted."""
        s = self.state(partition)
        item = AlterPartitionItem(
            topic="t",
            partition=partition,
            leader_epoch=s.leader_epoch,
            new_isr=isr,
            partition_epoch=s.partition_epoch,
        )
        code, [response], effects = self.c.alter_partition(
            broker_id=s.leader, broker_epoch=self.epochs[s.leader], items=[item]
        )
        assert (code, response.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
        assert response.isr == isr  # the answer is the accepted ISR, before any completion
        return effects

    def fence(self, victim: int) -> list:
        """Everybody live but `victim` heartbeats 10 s later; `victim` times out."""
        self.now += 10_000
        for b in (1, 2, 3, 4):
            if b != victim and not self.c.is_fenced(b):
                code, _, _ = self.c.heartbeat(
                    broker_id=b, broker_epoch=self.epochs[b], now_ms=self.now
                )
                assert code == ErrorCode.NONE
        effects = self.c.on_deadline(self.now)
        assert self.c.is_fenced(victim)
        return effects

    def set_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        ops = [AlterableConfig(name=k, op="set", value=v) for k, v in configs.items()]
        [response], _ = self.c.alter_configs(
            [AlterConfigsResource(resource_type=entity_type, resource_name=name, configs=ops)]
        )
        assert response.error_code == ErrorCode.NONE, response.error_message


def stops(effects) -> dict[int, SendStopReplica]:
    sends = [e for e in effects if isinstance(e, SendStopReplica)]
    assert len({s.broker_id for s in sends}) == len(sends)
    return {s.broker_id: s for s in sends}


def names(effects) -> list[str]:
    return [e.name for e in effects if isinstance(e, Event)]


def event(effects, name: str) -> Event:
    [found] = [e for e in effects if isinstance(e, Event) and e.name == name]
    return found


def shape(s: PartitionState) -> tuple:
    return s.replicas, s.adding_replicas, s.removing_replicas, s.isr, s.leader


def config_pushes(effects) -> list[SendUpdateMetadata]:
    return [e for e in effects if isinstance(e, SendUpdateMetadata) and e.configs is not None]
