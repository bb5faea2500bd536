"""The leader's reads for follower and consumer fetches, shared by the sessionless fetch
(server/fetch_serve.py) and the session fetch (server/fetch_sessions.py): each partition's
checks, one KIP-74-capped read in a worker thread, and the leader side of KIP-73 carried out:
its decisions and charges are core/quota/planner.py's `LeaderFetchPlan`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import trio

from minikafka.clock import RunSync, now_ms
from minikafka.common import TopicPartition
from minikafka.core.log import check_follower_fetch
from minikafka.core.quota.charge import ChargedPartition
from minikafka.core.quota.planner import (
    LeaderFetchPlan,
    leader_recheck_ms,
    leader_view,
)
from minikafka.core.quota.sensors import ReplicationQuotas
from minikafka.core.replica_effects import Effect
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.local_partition import LocalPartition, leader_error
from minikafka.server.metrics import Metrics
from minikafka.storage import LogStore, ReadSpec
from minikafka.wire.messages import EpochEndOffset, FetchPartition, FetchPartitionResponse


class FetchHost(Protocol):
    """What a fetch reads of the broker's replica manager (server/replica_manager.py, which
    builds the fetch sessions: a Protocol keeps the fetch paths from importing it back)."""

    config: NodeConfig
    store: LogStore
    metrics: Metrics
    dynamic: DynamicConfigs
    run_sync: RunSync
    partitions: dict[TopicPartition, LocalPartition]
    replication_quotas: ReplicationQuotas

    def execute(self, p: LocalPartition, effects: Iterable[Effect]) -> None: ...


def check_partition(
    rm: FetchHost,
    fp: FetchPartition,
    replica_id: int,
    known_topic: frozenset[str] | set[str],
    t: int,
    *,
    record_fetch: bool,
) -> FetchPartitionResponse | LocalPartition:
    """The partition to read, or the answer it gets at once (an error, a divergence). With
    `record_fetch`, a follower's fetch offset is recorded as its LEO (HW, ISR)."""
    is_follower = replica_id >= 0
    p = rm.partitions.get(TopicPartition(fp.topic, fp.partition))
    code = leader_error(p, fp.topic, known_topic)
    if code != ErrorCode.NONE:
        return FetchPartitionResponse(topic=fp.topic, partition=fp.partition, error_code=code)
    assert p is not None and p.leader is not None
    check = check_follower_fetch(
        epochs=p.epochs,
        log_start_offset=p.log_start_offset,
        log_end_offset=p.log_end_offset,
        leader_epoch=p.leader_epoch,
        fetch_offset=fp.fetch_offset,
        current_leader_epoch=fp.current_leader_epoch,
        last_fetched_epoch=fp.last_fetched_epoch if is_follower else -1,
    )
    if check.error_code != ErrorCode.NONE or check.diverging_epoch is not None:
        div = check.diverging_epoch
        return FetchPartitionResponse(
            topic=fp.topic,
            partition=fp.partition,
            error_code=check.error_code,
            high_watermark=p.high_watermark,
            log_start_offset=p.log_start_offset,
            diverging_epoch=EpochEndOffset(epoch=div[0], end_offset=div[1]) if div else None,
        )
    if is_follower:
        code = p.replica.follower_fetch_error(replica_id)
        if code != ErrorCode.NONE:
            return FetchPartitionResponse(topic=fp.topic, partition=fp.partition, error_code=code)
        if record_fetch:
            rm.execute(
                p, p.replica.on_follower_fetch(replica_id, fp.fetch_offset, t, fp.log_start_offset)
            )
    return p


def answer(fp: FetchPartition, p: LocalPartition, records: bytes) -> FetchPartitionResponse:
    """A read partition's answer (NOT_LEADER if it stepped down during the long poll)."""
    return FetchPartitionResponse(
        topic=fp.topic,
        partition=fp.partition,
        error_code=ErrorCode.NONE if p.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER,
        high_watermark=p.high_watermark,
        log_start_offset=p.log_start_offset,
        records=records if p.is_leader else b"",
    )


async def read_once(
    rm: FetchHost,
    readable: list[tuple[int, FetchPartition, LocalPartition]],
    limits: list[int | None],
    *,
    is_follower: bool,
    max_bytes: int,
) -> list[bytes]:
    """One read of `readable` in order, under the KIP-74 caps; a partition whose limit is 0
    (throttled) is not read and gets b"". A follower reads up to the LEO, a consumer the HW."""
    wanted = [k for k, limit in enumerate(limits) if limit != 0]
    specs = []
    for k in wanted:
        _i, fp, p = readable[k]
        limit = limits[k]
        specs.append(
            ReadSpec(
                tp=p.tp,
                fetch_offset=fp.fetch_offset,
                max_offset=p.log_end_offset if is_follower else p.high_watermark,
                partition_max_bytes=fp.partition_max_bytes
                if limit is None
                else min(fp.partition_max_bytes, limit),
            )
        )
    got = await rm.run_sync(rm.store.read, specs, max_bytes) if specs else []
    data = [b""] * len(readable)
    for k, records in zip(wanted, got, strict=True):
        # Precise mode: a partition read with a positive share may still come back with one
        # batch larger than it, KIP-74's first batch of the first non-empty partition (at
        # most one per response). It is sent and charged, so a batch larger than any share
        # still moves (`LeaderFetchPlan` states the bound); dropping it stalled such moves.
        data[k] = records
    return data


def leader_plan(
    rm: FetchHost, replica_id: int, partitions: list[FetchPartition]
) -> LeaderFetchPlan:
    """The leader side of KIP-73 for one follower fetch (core/quota/planner.py): each
    partition's classes and whether the follower is in its ISR, from one read of the configs."""
    dynamic, local = rm.dynamic, rm.config.node_id
    config = dynamic.broker_config(local)
    views = []
    for fp in partitions:
        p = rm.partitions.get(TopicPartition(fp.topic, fp.partition))
        state = p.state if p is not None else None
        views.append(
            leader_view(
                partition=fp.partition,
                local_id=local,
                follower_id=replica_id,
                adding_replicas=None if state is None else state.adding_replicas,
                leader_list=dynamic.topic_throttled_replicas(fp.topic)[0],
                config=config,
                in_sync=p is not None and p.leader is not None and p.leader.is_in_sync(replica_id),
            )
        )
    return LeaderFetchPlan(views, rm.config.throttle_settings)


def read_limits(
    rm: FetchHost,
    plan: LeaderFetchPlan | None,
    readable: list[tuple[int, FetchPartition, LocalPartition]],
) -> list[int | None]:
    """What each readable partition may carry now (None: a consumer's fetch, unthrottled)."""
    if plan is None:
        return [None] * len(readable)
    return plan.limits(rm.replication_quotas, now_ms(), [i for i, _fp, _p in readable])


def recheck_at(plan: LeaderFetchPlan | None, limits: list[int | None], deadline: float) -> float:
    """When a long poll looks again at the latest: its deadline, or sooner while the plan holds
    a partition back (`leader_recheck_ms`)."""
    soon = None if plan is None else leader_recheck_ms(plan.settings, limits)
    return deadline if soon is None else min(deadline, trio.current_time() + soon / 1000)


def charge_response(
    rm: FetchHost, plan: LeaderFetchPlan, parts: list[FetchPartitionResponse | None]
) -> None:
    """Record what the built response costs the leader's sensors and count it (`parts` in
    request order, None for a partition a session's incremental response leaves out)."""
    now = now_ms()
    sent = [
        None
        if part is None
        else ChargedPartition(
            topic=part.topic,
            partition=part.partition,
            records_bytes=len(part.records),
            diverging=part.diverging_epoch is not None,
        )
        for part in parts
    ]
    for charge in plan.charges(sent):
        rm.replication_quotas.charge(charge, now)
        rm.metrics.inc_all(charge.counters())
