"""The reassign tool's cluster side: what `minikafka reassign` reads from and does to a cluster.

Owns: the view of the cluster the tool works from (assignment, leaders, live brokers, ongoing
moves), executing a reassignment with its throttles, per-partition status, cancelling, and
clearing leftover throttles. The arithmetic is in `moves` and `plan`, the estimated size of a
move in `move_size`; the progress of a running move is in `progress`; printing is the CLI's
(minikafka/cli/reassign.py).

Rules:
- `--execute` changes nothing unless everything is accepted: the throttle configs are checked
  by the controller first (validate_only), then set, then the reassignment starts with the same
  configs recorded as its `throttle_configs`, so the controller removes them when its last
  partition completes or is cancelled (beyond Kafka). If the start is refused as a whole, the
  configs are put back as they were.
- Clearing throttles (`--verify`, `--cancel`, only when nothing moves anywhere) removes the
  topic lists of the file's topics and the per-broker throttle rates of EVERY broker, as
  Kafka's `clearAllThrottles` does: the sources of a finished move are no longer in any replica
  list, so the file cannot name them all. Cluster-wide defaults (`--entity-default`) are left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import trio

from minikafka.client.admin import Admin
from minikafka.common import TopicPartition
from minikafka.core.dynamic_config import (
    BROKERS,
    DEFAULT,
    FOLLOWER_RATE,
    FOLLOWER_REASSIGNMENT_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REASSIGNMENT_RATE,
    LEADER_REPLICAS,
    SOURCE_ENTITY,
    TOPICS,
)
from minikafka.errors import BrokerError, ConfigError, ErrorCode
from minikafka.tools.reassign.assignment_files import (
    format_reassignment_json,
    validate_reassignment,
)
from minikafka.tools.reassign.moves import (
    ConfigChange,
    OngoingReassignment,
    PartitionMove,
    changes_by_entity,
    move_map,
    reassignment_throttle_configs,
)
from minikafka.wire.messages import AlterableConfig, AlterConfigsResource, ConfigEntity

VALUE = dict(frozen=True, slots=True, kw_only=True)

RATE_NAMES = (LEADER_RATE, FOLLOWER_RATE, LEADER_REASSIGNMENT_RATE, FOLLOWER_REASSIGNMENT_RATE)
LIST_NAMES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
# Per-resource refusals that mean the input was wrong (exit 2, nothing changed; the CLI's
# cli/in_process.py `finish` turns them into a ConfigError).
BAD_INPUT_CODES = frozenset(
    {
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    }
)


# ---------------------------------------------------------------------------- cluster view


@dataclass(**VALUE)
class ClusterView:
    """What the tool knows of the cluster at one moment (metadata + ListPartitionReassignments).

    `assignment` holds the metadata replicas: during a move, the target plus the replicas being
    removed. `original` gives a partition's replicas before its move (for rollback files).
    """

    assignment: Mapping[TopicPartition, tuple[int, ...]]
    leaders: Mapping[TopicPartition, int]
    live_brokers: tuple[int, ...]
    ongoing: Mapping[TopicPartition, OngoingReassignment]

    def original(self, tp: TopicPartition) -> tuple[int, ...]:
        move = self.ongoing.get(tp)
        if move is None:
            return tuple(self.assignment[tp])
        return tuple(r for r in move.replicas if r not in move.adding)


async def read_cluster(admin: Admin) -> ClusterView:
    md = await admin.describe(None)
    listed = await admin.list_partition_reassignments()
    assignment: dict[TopicPartition, tuple[int, ...]] = {}
    leaders: dict[TopicPartition, int] = {}
    for topic in md.topics:
        if topic.error_code != ErrorCode.NONE:
            continue
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            assignment[tp] = tuple(p.replicas)
            leaders[tp] = p.leader
    ongoing = {
        tp: OngoingReassignment(
            replicas=tuple(r.replicas),
            adding=tuple(r.adding_replicas),
            removing=tuple(r.removing_replicas),
        )
        for tp, r in listed.items()
    }
    return ClusterView(
        assignment=dict(sorted(assignment.items())),
        leaders=leaders,
        live_brokers=tuple(sorted(b.node_id for b in md.brokers)),
        ongoing=dict(sorted(ongoing.items())),
    )


# ---------------------------------------------------------------------------- --execute


@dataclass(**VALUE)
class ExecutePlan:
    """Everything `--execute` will do, decided before anything is sent."""

    proposed: Mapping[TopicPartition, Sequence[int]]
    rollback_json: str  # the proposed partitions' replicas before any move
    moves: Mapping[TopicPartition, PartitionMove]
    changes: tuple[ConfigChange, ...]
    throttle: int | None
    mode: str

    @property
    def throttle_entities(self) -> list[ConfigEntity]:
        return [
            ConfigEntity(entity_type=etype, entity_name=name, configs=dict(configs))
            for (etype, name), configs in changes_by_entity(self.changes).items()
        ]


def plan_execute(
    view: ClusterView,
    proposed: Mapping[TopicPartition, Sequence[int]],
    *,
    throttle: int | None,
    mode: str,
    additional: bool,
) -> ExecutePlan:
    """Validate a reassignment file against the cluster and decide the throttle configs.

    Refuses (ConfigError) unknown topics or partitions, brokers that are not live, more replicas
    than live brokers, and a new move while one is in progress without `additional` (Kafka's
    rule: extending a move, or changing its throttle, is explicit).
    """
    validate_reassignment(proposed, current=view.assignment, live_brokers=view.live_brokers)
    if view.ongoing and not additional:
        names = ", ".join(str(tp) for tp in list(view.ongoing)[:5])
        more = "" if len(view.ongoing) <= 5 else f" and {len(view.ongoing) - 5} more"
        raise ConfigError(
            f"a reassignment is in progress ({names}{more}): expected --additional to add to it "
            "or change its throttle, or wait until --verify reports it complete"
        )
    moves = move_map(view.assignment, proposed, view.ongoing if additional else {})
    changes = (
        () if throttle is None else tuple(reassignment_throttle_configs(moves, throttle, mode))
    )
    rollback = format_reassignment_json({tp: view.original(tp) for tp in proposed})
    return ExecutePlan(
        proposed=proposed,
        rollback_json=rollback,
        moves=moves,
        changes=changes,
        throttle=throttle,
        mode=mode,
    )


def _resources(entities: Mapping[tuple[str, str], Mapping[str, str | None]]) -> list:
    """IncrementalAlterConfigs resources: a value sets, None deletes."""
    return [
        AlterConfigsResource(
            resource_type=etype,
            resource_name=name,
            configs=[
                AlterableConfig(name=k, op="set", value=v)
                if v is not None
                else AlterableConfig(name=k, op="delete")
                for k, v in configs.items()
            ],
        )
        for (etype, name), configs in entities.items()
    ]


async def _alter_all(
    admin: Admin,
    entities: Mapping[tuple[str, str], Mapping[str, str | None]],
    *,
    validate_only: bool = False,
) -> None:
    if not entities:
        return
    results = await admin.alter_configs_many(_resources(entities), validate_only=validate_only)
    for r in results:
        if r.error_code != ErrorCode.NONE:
            raise BrokerError(
                r.error_code,
                f"{r.resource_type} {r.resource_name or '<default>'}: "
                f"{r.error_message or 'refused'}",
            )


async def own_configs(admin: Admin, entity_type: str, entity_name: str) -> dict[str, str]:
    """An entity's own dynamic configs (not the defaults it inherits)."""
    results = await admin.describe_configs(entity_type, entity_name)
    return {
        e.name: e.value
        for r in results
        for e in r.entries
        if e.source == SOURCE_ENTITY and e.value is not None
    }


@dataclass(**VALUE)
class StartResult:
    started: tuple[TopicPartition, ...]
    errors: Mapping[TopicPartition, str]


async def check_throttles(admin: Admin, plan: ExecutePlan) -> None:
    """Have the controller check the throttle configs against the cluster (KIP-542's rule)
    without setting them: BrokerError (INVALID_CONFIG) if any entity would be refused."""
    await _alter_all(admin, changes_by_entity(plan.changes), validate_only=True)


async def execute(admin: Admin, plan: ExecutePlan) -> StartResult:
    """Set the throttles (all checked first), then start the moves with them recorded."""
    wanted = changes_by_entity(plan.changes)
    before = {key: await own_configs(admin, *key) for key in wanted}
    await check_throttles(admin, plan)  # one bad entity: nothing is set
    await _alter_all(admin, wanted)
    try:
        responses = await admin.alter_partition_reassignments(
            plan.proposed, throttle_configs=plan.throttle_entities
        )
    except BaseException:
        with trio.CancelScope(shield=True):
            restore = {
                key: {k: before[key].get(k) for k in configs} for key, configs in wanted.items()
            }
            await _alter_all(admin, restore)
        raise
    errors = {
        tp: r.error_message or f"error {r.error_code}"
        for tp, r in responses.items()
        if r.error_code != ErrorCode.NONE
    }
    started = tuple(tp for tp in plan.proposed if tp not in errors)
    return StartResult(started=started, errors=errors)


# ---------------------------------------------------------------------------- --verify


COMPLETE = "complete"
IN_PROGRESS = "in_progress"
MISMATCH = "mismatch"


@dataclass(**VALUE)
class PartitionStatus:
    tp: TopicPartition
    status: str  # COMPLETE, IN_PROGRESS or MISMATCH
    replicas: tuple[int, ...]  # now (during a move: target + the ones being removed)
    target: tuple[int, ...]

    def line(self) -> str:
        """Kafka's `--verify` wording."""
        if self.status == COMPLETE:
            return f"Reassignment of partition {self.tp} is complete."
        if self.status == IN_PROGRESS:
            return f"Reassignment of partition {self.tp} is still in progress."
        return (
            f"There is no active reassignment of partition {self.tp}, but replica set is "
            f"{list(self.replicas)} rather than {list(self.target)}."
        )

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "status": self.status,
            "replicas": list(self.replicas),
            "target": list(self.target),
        }


def statuses(
    view: ClusterView, proposed: Mapping[TopicPartition, Sequence[int]]
) -> list[PartitionStatus]:
    """Per partition of the file: in progress (moving now), complete (replicas == target, in
    order), or a mismatch (not moving, other replicas: cancelled or replaced)."""
    out = []
    for tp in sorted(proposed):
        target = tuple(proposed[tp])
        if tp not in view.assignment:
            raise ConfigError(f"unknown partition {tp} in the reassignment file")
        replicas = tuple(view.assignment[tp])
        if tp in view.ongoing:
            status = IN_PROGRESS
        elif replicas == target:
            status = COMPLETE
        else:
            status = MISMATCH
        out.append(PartitionStatus(tp=tp, status=status, replicas=replicas, target=target))
    return out


@dataclass(**VALUE)
class ClearedThrottle:
    entity_type: str
    entity_name: str
    name: str
    value: str

    def to_json(self) -> dict[str, str]:
        return {
            "entity_type": self.entity_type,
            "entity": self.entity_name,
            "name": self.name,
            "value": self.value,
        }


async def clear_throttles(admin: Admin, topics: Iterable[str]) -> list[ClearedThrottle]:
    """Remove the throttle lists of `topics` and every broker's own throttle rates (see the
    module docstring); only what is set, in one request. -> what was removed."""
    found: list[ClearedThrottle] = []
    for r in await admin.describe_configs(BROKERS, None):
        if r.resource_name == DEFAULT:
            continue
        found += [
            ClearedThrottle(
                entity_type=BROKERS, entity_name=r.resource_name, name=e.name, value=e.value
            )
            for e in r.entries
            if e.name in RATE_NAMES and e.source == SOURCE_ENTITY and e.value is not None
        ]
    wanted = set(topics)
    for r in await admin.describe_configs(TOPICS, None):
        if r.resource_name not in wanted:
            continue
        found += [
            ClearedThrottle(
                entity_type=TOPICS, entity_name=r.resource_name, name=e.name, value=e.value
            )
            for e in r.entries
            if e.name in LIST_NAMES and e.source == SOURCE_ENTITY and e.value is not None
        ]
    deletes: dict[tuple[str, str], dict[str, str | None]] = {}
    for c in found:
        deletes.setdefault((c.entity_type, c.entity_name), {})[c.name] = None
    await _alter_all(admin, deletes)
    return sorted(found, key=lambda c: (c.entity_type != TOPICS, c.entity_name, c.name))


# ---------------------------------------------------------------------------- --cancel


@dataclass(**VALUE)
class CancelResult:
    cancelled: tuple[TopicPartition, ...]
    not_active: tuple[TopicPartition, ...]
    errors: Mapping[TopicPartition, str]


async def cancel(
    admin: Admin, view: ClusterView, proposed: Mapping[TopicPartition, Sequence[int]]
) -> CancelResult:
    """Cancel the moves of the file's partitions that are in progress (the others are listed
    as not active, as Kafka does)."""
    active = [tp for tp in sorted(proposed) if tp in view.ongoing]
    not_active = tuple(tp for tp in sorted(proposed) if tp not in view.ongoing)
    if not active:
        return CancelResult(cancelled=(), not_active=not_active, errors={})
    responses = await admin.alter_partition_reassignments(dict.fromkeys(active))
    errors = {
        tp: r.error_message or f"error {r.error_code}"
        for tp, r in responses.items()
        if r.error_code != ErrorCode.NONE
    }
    cancelled = tuple(tp for tp in active if tp not in errors)
    return CancelResult(cancelled=cancelled, not_active=not_active, errors=errors)
