"""The leader's reads for follower and consumer fetches, shared by the sessionless fetch
(server/fetch_serve.py) and the session fetch (server/fetch_sessions.py): each partition's
checks, one KIP-74-capped read in a worker thread, and the leader side of KIP-73
(`LeaderThrottle`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import trio

from minikafka.clock import RunSync, now_ms
from minikafka.common import TopicPartition
from minikafka.core.log import check_follower_fetch
from minikafka.core.quota_charge import ChargedPartition, kafka_fetch_response_size
from minikafka.core.replica_effects import Effect
from minikafka.core.replication_quota import (
    QuotaSide,
    ThrottleClass,
    decide_fetch_throttles,
    leader_charge_class,
    leader_throttle_class,
)
from minikafka.errors import ErrorCode
from minikafka.server.config import NodeConfig
from minikafka.server.dynamic_configs import DynamicConfigs
from minikafka.server.local_partition import LocalPartition, leader_error
from minikafka.server.metrics import Metrics
from minikafka.server.quotas import ReplicationQuotas
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
            rm.execute(p, p.replica.on_follower_fetch(replica_id, fp.fetch_offset, t))
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
        # still moves (`LeaderThrottle` states the bound); dropping it stalled such moves.
        data[k] = records
    return data


def recheck_at(throttle: LeaderThrottle | None, limits: list[int | None], deadline: float) -> float:
    """When a long poll looks again at the latest: its deadline, or soon in precise mode while
    a partition is throttled (the allowance grows with time, not with log changes, so sleeping
    out the whole long poll on a throttled partition would waste it)."""
    if throttle is not None and throttle.precise and 0 in limits:
        return min(deadline, trio.current_time() + PRECISE_RECHECK_S)
    return deadline


PRECISE_RECHECK_S = 0.05


class LeaderThrottle:
    """The leader side of KIP-73 for one follower fetch (Kafka's shouldLeaderThrottle), and what
    the response costs the leader's quota.

    Kafka's mode: a throttled partition (not in sync, in a throttle class, quota exceeded at the
    read) returns nothing; the response is charged afterwards, per sensor, the Kafka wire size
    of the response's partitions charged to it (`leader_charge_class`), empty and in-sync ones
    included (core/quota_charge.py). The REPLICATION sensor is charged on every fetch, as Kafka
    records `sizeOfThrottledPartitions` unconditionally (an empty one is 16 bytes).

    Precise mode (beyond Kafka): each eligible partition of a class may take its share of the
    allowance left (`Sensor.precise_remaining_bytes` / eligible partitions), and only its record
    bytes are charged. The bound: a response exceeds its allowance by at most one batch, the
    oversized first batch KIP-74 returns whole, and only when that partition's share was
    positive. The excess is charged, so the allowance goes negative and later responses wait
    until it is paid back: over any D seconds a sensor admits at most T * max(D, W) + B bytes
    (B the largest batch), and a batch of any size moves once the allowance is positive.
    """

    def __init__(
        self,
        rm: FetchHost,
        replica_id: int,
        partitions: list[FetchPartition],
        readable: list[tuple[int, FetchPartition, LocalPartition]],
    ) -> None:
        """`partitions`: the response's partitions in order; `readable`: those read, with their
        index in `partitions`."""
        self.replica_manager = rm
        self.quotas = rm.replication_quotas
        self.precise = rm.config.replication_quota_precise
        self.exempt_in_sync = rm.config.replication_throttle_in_sync_exempt
        self.classes: list[ThrottleClass | None] = []  # per readable partition
        self.in_sync: list[bool] = []
        # Per request partition: the sensor its part of the response is charged to, in sync.
        self.charged: list[ThrottleClass | None] = [None] * len(partitions)
        self.charged_in_sync: list[bool] = [False] * len(partitions)
        dynamic = rm.dynamic
        config = dynamic.broker_config(rm.config.node_id)
        follower, local = replica_id, rm.config.node_id
        classes: list[ThrottleClass | None] = []
        for i, fp in enumerate(partitions):
            p = rm.partitions.get(TopicPartition(fp.topic, fp.partition))
            leader_list, _follower_list = dynamic.topic_throttled_replicas(fp.topic)
            state = p.state if p is not None else None
            cls = None
            if state is not None:
                cls = leader_throttle_class(
                    partition=fp.partition,
                    local_id=local,
                    follower_id=follower,
                    adding_replicas=state.adding_replicas,
                    topic_leader_list=leader_list,
                    config=config,
                )
            classes.append(cls)
            self.charged[i] = leader_charge_class(
                cls,
                partition=fp.partition,
                local_id=local,
                topic_leader_list=leader_list,
                config=config,
            )
        for i, _fp, p in readable:
            in_sync = p.leader is not None and p.leader.is_in_sync(follower)
            self.classes.append(classes[i])
            self.in_sync.append(in_sync)
            self.charged_in_sync[i] = in_sync

    def limits(self, now: int) -> list[int | None]:
        """Per partition: 0 = throttled (return nothing), None = unlimited, n = precise budget
        (core/replication_quota.py `decide_fetch_throttles`, the follower side's decision too)."""
        decisions = decide_fetch_throttles(
            list(zip(self.classes, self.in_sync, strict=True)),
            exceeded=lambda cls: self.quotas.exceeded(QuotaSide.LEADER, cls, now),
            remaining=lambda cls: self.quotas.remaining(QuotaSide.LEADER, cls, now),
            precise=self.precise,
            exempt_in_sync=self.exempt_in_sync,
        )
        return [d.limit for d in decisions]

    def record(self, parts: list[FetchPartitionResponse | None]) -> None:
        """Charge the built response (`parts` in request order, None for a partition a session's
        incremental response leaves out) to the leader sensors, and
        count it: `leader_<class>_throttled_bytes` is what the sensor was charged, of which
        `_exempt_bytes` the records of in-sync replicas (KAFKA-4313: counted, never held back)
        and `_overhead_bytes` the Kafka headers (Kafka's mode only; never held back either)."""
        now = now_ms()
        records: dict[ThrottleClass, int] = {}
        exempt: dict[ThrottleClass, int] = {}
        charged: dict[ThrottleClass, list[ChargedPartition]] = {}
        for cls, in_sync, part in zip(self.charged, self.charged_in_sync, parts, strict=True):
            if cls is None or part is None:  # None: left out of a session's response
                continue
            size = len(part.records)
            records[cls] = records.get(cls, 0) + size
            if in_sync and self.exempt_in_sync:
                exempt[cls] = exempt.get(cls, 0) + size
            charged.setdefault(cls, []).append(
                ChargedPartition(
                    topic=part.topic,
                    records_bytes=size,
                    diverging=part.diverging_epoch is not None,
                )
            )
        for cls in ThrottleClass:
            if self.precise:  # beyond Kafka: the record bytes of the charged partitions
                if cls not in charged:
                    continue
                charge, overhead = records[cls], 0
            elif cls in charged or cls is ThrottleClass.REPLICATION:
                charge = kafka_fetch_response_size(charged.get(cls, ()))
                overhead = charge - records.get(cls, 0)
            else:
                continue
            self.quotas.record(QuotaSide.LEADER, cls, charge, now)
            metrics = self.replica_manager.metrics
            if charge:
                metrics.inc(f"leader_{cls.value}_throttled_bytes", charge)
            if exempt.get(cls):
                metrics.inc(f"leader_{cls.value}_exempt_bytes", exempt[cls])
            if overhead:
                metrics.inc(f"leader_{cls.value}_overhead_bytes", overhead)
