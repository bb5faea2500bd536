"""Fetch and ListOffsets on the leader (Kafka's ReplicaManager.fetchMessages + DelayedFetch).

- Each partition is checked first (leader here, epochs, divergence, offset range: core/log.py).
  For a follower (replica_id >= 0) the fetch offset is its log end offset: the leader records it
  at once (HW advance, ISR tracking: core/partition.py) even if nothing is returned.
- Followers read up to the log end offset, consumers up to the high watermark.
- Reads run in one LMDB read transaction in a worker thread with the KIP-74 caps: partitions
  filled in request order, `partition_max_bytes` each, `max_bytes` in all, the first batch of
  the first non-empty partition always whole (core/fetch_limits.py), for followers and consumers
  alike, so a batch up to `message.max.bytes` always moves. A consumer's `max_bytes` is first
  capped by the broker's `fetch.max.bytes` (Kafka's KafkaApis does the same); a follower's is
  its own `replica.fetch.response.max.bytes`.
- Long poll: while fewer than `min_bytes` are available and `max_wait_ms` has not passed, the
  request waits for any of its partitions to change, then reads again.
- Leader throttle (KIP-73, `_LeaderThrottle`): decided per partition at each read, charged once
  the response is built. Kafka's mode (the default) charges what Kafka's leader records: the
  size of a Kafka Fetch response made of the throttled partitions, headers included
  (core/quota_charge.py). The precise mode (`replication.quota.precise`, beyond Kafka) charges
  record bytes and budgets each response against the allowance left.
- Client quota (`consumer_byte_rate`, KIP-13) for consumer fetches only: the bytes of the
  response are recorded for its client id and the answer goes out at once with its
  `throttle_time_ms`; the connection is then muted for that time (KIP-219: the returned
  `Reply`). Follower fetches (replica_id >= 0) are exempt: never recorded, never muted.
  (Kafka's KafkaApis goes one step further: a throttled fetch is answered empty and its bytes
  are un-recorded. Here the data goes out with the throttle, as REFERENCE.md section 3 says.)
"""

from __future__ import annotations

import trio

from minikafka.core.log import check_follower_fetch
from minikafka.core.quota_charge import ChargedPartition, kafka_fetch_response_size
from minikafka.core.replication_quota import (
    QuotaSide,
    ThrottleClass,
    decide_fetch_throttles,
    leader_charge_class,
    leader_throttle_class,
)
from minikafka.core.types import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.server.clock import now_ms
from minikafka.server.listener import Reply
from minikafka.server.local_partition import LocalPartition, leader_error, wait_for_change
from minikafka.server.replica_manager import ReplicaManager
from minikafka.storage import ReadSpec
from minikafka.wire.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)


async def handle_fetch(
    rm: ReplicaManager,
    req: FetchRequest,
    known_topic: frozenset[str] | set[str],
    client_id: str = "",
) -> Reply:
    """The FetchResponse and, for a consumer over its quota, the throttle time."""
    is_follower = req.replica_id >= 0
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    answers: dict[int, FetchPartitionResponse] = {}
    readable: list[tuple[int, FetchPartition, LocalPartition]] = []
    t = now_ms()
    for i, fp in enumerate(req.partitions):
        p = rm.partitions.get(TopicPartition(fp.topic, fp.partition))
        code = leader_error(p, fp.topic, known_topic)
        if code != ErrorCode.NONE:
            answers[i] = FetchPartitionResponse(
                topic=fp.topic, partition=fp.partition, error_code=code
            )
            continue
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
            answers[i] = FetchPartitionResponse(
                topic=fp.topic,
                partition=fp.partition,
                error_code=check.error_code,
                high_watermark=p.high_watermark,
                log_start_offset=p.log_start_offset,
                diverging_epoch=EpochEndOffset(epoch=div[0], end_offset=div[1]) if div else None,
            )
            continue
        if is_follower:
            code = p.replica.follower_fetch_error(req.replica_id)
            if code != ErrorCode.NONE:
                answers[i] = FetchPartitionResponse(
                    topic=fp.topic, partition=fp.partition, error_code=code
                )
                continue
            rm.execute(p, p.replica.on_follower_fetch(req.replica_id, fp.fetch_offset, t))
        readable.append((i, fp, p))

    throttle = _LeaderThrottle(rm, req, readable) if is_follower else None
    data = await _read_until_enough(rm, req, readable, throttle, deadline, early=bool(answers))
    for (i, fp, p), records in zip(readable, data, strict=True):
        answers[i] = FetchPartitionResponse(
            topic=fp.topic,
            partition=fp.partition,
            error_code=ErrorCode.NONE if p.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER,
            high_watermark=p.high_watermark,
            log_start_offset=p.log_start_offset,
            records=records if p.is_leader else b"",
        )
    parts = [answers[i] for i in range(len(req.partitions))]
    if throttle is not None:  # after the response is built, as KafkaApis records it
        throttle.record(parts)
    sent = sum(len(a.records) for a in parts)
    rm.metrics.inc("replication_bytes_out" if is_follower else "bytes_out", sent)
    throttle_ms = 0
    if not is_follower:  # KIP-13 for consumers only; replicas are never client-throttled
        bound = rm.dynamic.client_quota(client_id)[1]
        throttle_ms = rm.fetch_quotas.record_and_throttle(client_id, sent, bound, now_ms())
    response = FetchResponse(partitions=parts, throttle_time_ms=throttle_ms)
    return Reply(response=response, throttle_ms=throttle_ms)


async def _read_until_enough(
    rm: ReplicaManager,
    req: FetchRequest,
    readable: list[tuple[int, FetchPartition, LocalPartition]],
    throttle: _LeaderThrottle | None,
    deadline: float,
    early: bool,
) -> list[bytes]:
    """Read; while below min_bytes and before the deadline, wait for a change and read again.
    A response that already carries an error or a divergence is answered at once (early).
    Throttled partitions are not read, so their bytes never complete a delayed fetch."""
    is_follower = throttle is not None
    while True:
        limits = throttle.limits(now_ms()) if throttle is not None else [None] * len(readable)
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
        max_bytes = req.max_bytes if is_follower else min(req.max_bytes, rm.config.fetch_max_bytes)
        got = await rm.run_sync(rm.store.read, specs, max_bytes) if specs else []
        data = [b""] * len(readable)
        for k, records in zip(wanted, got, strict=True):
            # Precise mode: a partition read with a positive share may still come back with one
            # batch larger than it, KIP-74's first batch of the first non-empty partition (at
            # most one per response). It is sent and charged, so a batch larger than any share
            # still moves (`_LeaderThrottle` states the bound); dropping it stalled such moves.
            data[k] = records
        total = sum(len(d) for d in data)
        if early or total >= req.min_bytes or trio.current_time() >= deadline or not readable:
            return data
        if any(not p.is_leader for _i, _fp, p in readable):
            return data
        wake = deadline
        if throttle is not None and throttle.precise and 0 in limits:
            # Precise mode: the allowance grows with time, not with log changes: look again
            # soon instead of sleeping out the whole long poll on a throttled partition.
            wake = min(deadline, trio.current_time() + PRECISE_RECHECK_S)
        await wait_for_change([p for _i, _fp, p in readable], wake)


PRECISE_RECHECK_S = 0.05


class _LeaderThrottle:
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
        rm: ReplicaManager,
        req: FetchRequest,
        readable: list[tuple[int, FetchPartition, LocalPartition]],
    ) -> None:
        self.replica_manager = rm
        self.quotas = rm.replication_quotas
        self.precise = rm.config.replication_quota_precise
        self.exempt_in_sync = rm.config.replication_throttle_in_sync_exempt
        self.classes: list[ThrottleClass | None] = []  # per readable partition
        self.in_sync: list[bool] = []
        # Per request partition: the sensor its part of the response is charged to, in sync.
        self.charged: list[ThrottleClass | None] = [None] * len(req.partitions)
        self.charged_in_sync: list[bool] = [False] * len(req.partitions)
        dynamic = rm.dynamic
        config = dynamic.broker_config(rm.config.node_id)
        follower, local = req.replica_id, rm.config.node_id
        classes: list[ThrottleClass | None] = []
        for i, fp in enumerate(req.partitions):
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

    def record(self, parts: list[FetchPartitionResponse]) -> None:
        """Charge the built response (`parts` in request order) to the leader sensors, and
        count it: `leader_<class>_throttled_bytes` is what the sensor was charged, of which
        `_exempt_bytes` the records of in-sync replicas (KAFKA-4313: counted, never held back)
        and `_overhead_bytes` the Kafka headers (Kafka's mode only; never held back either)."""
        now = now_ms()
        records: dict[ThrottleClass, int] = {}
        exempt: dict[ThrottleClass, int] = {}
        charged: dict[ThrottleClass, list[ChargedPartition]] = {}
        for cls, in_sync, part in zip(self.charged, self.charged_in_sync, parts, strict=True):
            if cls is None:
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


def handle_list_offsets(
    rm: ReplicaManager, req: ListOffsetsRequest, known_topic: frozenset[str] | set[str]
) -> ListOffsetsResponse:
    out = []
    for lp in req.partitions:
        p = rm.partitions.get(TopicPartition(lp.topic, lp.partition))
        code = leader_error(p, lp.topic, known_topic)
        if code == ErrorCode.NONE and lp.timestamp not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
            code = ErrorCode.INVALID_REQUEST
        if code != ErrorCode.NONE:
            out.append(
                ListOffsetsPartitionResponse(
                    topic=lp.topic, partition=lp.partition, error_code=code
                )
            )
            continue
        assert p is not None
        if lp.timestamp == EARLIEST_TIMESTAMP:
            offset = p.log_start_offset
        else:  # consumers see up to the HW, replicas up to the LEO
            offset = p.log_end_offset if req.replica_id >= 0 else p.high_watermark
        out.append(
            ListOffsetsPartitionResponse(
                topic=lp.topic,
                partition=lp.partition,
                error_code=ErrorCode.NONE,
                offset=offset,
                leader_epoch=p.leader_epoch,
            )
        )
    return ListOffsetsResponse(partitions=out)
