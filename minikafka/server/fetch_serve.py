"""Fetch on the leader (Kafka's ReplicaManager.fetchMessages + DelayedFetch); ListOffsets is
server/list_offsets.py, re-exported here for the dispatchers.

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
- A follower's fetch in a KIP-227 session (any `session_epoch` but FINAL, or a session id) is
  served by server/fetch_sessions.py: a full one as here, an incremental one with only the
  partitions that moved. The reads and the leader throttle are shared (server/fetch_read.py).
- Leader throttle (KIP-73, `LeaderFetchPlan` in core/quota/planner.py): decided per partition at
  each read, charged once the response is built. Kafka's mode (the default) charges what Kafka's leader records: the
  size of a Kafka Fetch response made of the throttled partitions, headers included
  (core/quota/charge.py). The precise mode (`replication.quota.precise`, beyond Kafka) charges
  record bytes and budgets each response against the allowance left.
- Client quota (`consumer_byte_rate`, KIP-13) for consumer fetches only, as Kafka's
  KafkaApis.handleFetchRequest applies it since KIP-219: the fetch's `max_bytes` is first capped
  by what the quota window admits (KAFKA-9677, `ClientQuotas.max_value_in_quota_window`); the
  bytes of the response are recorded for its client id; if that yields a throttle time, the
  bytes are un-recorded and the answer is EMPTY (no partitions, `fetchContext.
  getThrottledResponse`) with its `throttle_time_ms`, and the connection is muted for that time
  (the returned `Reply`). The consumer's position does not move; it fetches the same offsets
  once the throttle is over, and the data goes out then. Follower fetches (replica_id >= 0) are
  exempt: never recorded, never muted.
  (docs/throttling.md#client-quotas-kip-13-and-throttle-time-kip-219)
"""

from __future__ import annotations

import trio

from minikafka.clock import now_ms
from minikafka.core.fetch_session import FINAL_EPOCH
from minikafka.core.quota.planner import LeaderFetchPlan
from minikafka.server.fetch_read import (
    answer,
    charge_response,
    check_partition,
    leader_plan,
    read_limits,
    read_once,
    recheck_at,
)
from minikafka.server.fetch_sessions import handle_session_fetch
from minikafka.server.list_offsets import handle_list_offsets  # noqa: F401 - re-exported
from minikafka.server.listener import Reply
from minikafka.server.local_partition import LocalPartition, wait_for_change
from minikafka.server.replica_manager import ReplicaManager
from minikafka.wire.messages import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
)

CHECKS_PER_TURN = 1000  # partitions of a consumer's fetch checked between two checkpoints


async def handle_fetch(
    rm: ReplicaManager,
    req: FetchRequest,
    known_topic: frozenset[str] | set[str],
    client_id: str = "",
) -> Reply:
    """The FetchResponse and, for a consumer over its quota, the throttle time. A follower's
    fetch with a session (KIP-227) goes to server/fetch_sessions.py."""
    if req.replica_id >= 0 and (req.session_epoch != FINAL_EPOCH or req.session_id):
        return await handle_session_fetch(rm, req, known_topic, full=fetch_partitions)
    return await fetch_partitions(rm, req, known_topic, client_id)


async def fetch_partitions(
    rm: ReplicaManager,
    req: FetchRequest,
    known_topic: frozenset[str] | set[str],
    client_id: str = "",
) -> Reply:
    """A fetch of exactly the request's partitions, in request order (sessionless, or a
    session's full fetch)."""
    is_follower = req.replica_id >= 0
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    answers: dict[int, FetchPartitionResponse] = {}
    readable: list[tuple[int, FetchPartition, LocalPartition]] = []
    t = now_ms()
    for i, fp in enumerate(req.partitions):
        if not is_follower and i % CHECKS_PER_TURN == CHECKS_PER_TURN - 1:
            # A consumer may name 100,000 partitions (docs/front-door.md): let the loop's other tasks
            # run between slices of its checks. A follower's fetch (a node's, bounded by the
            # partitions it follows) is checked in one go, as before.
            await trio.lowlevel.checkpoint()
        checked = check_partition(rm, fp, req.replica_id, known_topic, t, record_fetch=True)
        if isinstance(checked, FetchPartitionResponse):
            answers[i] = checked
        else:
            readable.append((i, fp, checked))
    plan = leader_plan(rm, req.replica_id, req.partitions) if is_follower else None
    bound: float | None = None
    if is_follower:  # its own replica.fetch.response.max.bytes
        max_bytes = req.max_bytes
    else:  # KafkaApis: capped by fetch.max.bytes and by the client's quota window (KAFKA-9677)
        bound = rm.dynamic.client_quota(client_id)[1]
        window_cap = rm.fetch_quotas.max_value_in_quota_window(bound)
        max_bytes = min(req.max_bytes, rm.config.fetch_max_bytes)
        max_bytes = max_bytes if window_cap is None else min(max_bytes, window_cap)
    data = await _read_until_enough(
        rm, req, readable, plan, deadline, max_bytes=max_bytes, early=bool(answers)
    )
    for (i, fp, p), records in zip(readable, data, strict=True):
        answers[i] = answer(fp, p, records)
    parts = [answers[i] for i in range(len(req.partitions))]
    sent = sum(len(a.records) for a in parts)
    if plan is not None:  # after the response is built, as KafkaApis records it
        charge_response(rm, plan, parts)
        rm.metrics.inc("replication_bytes_out", sent)
        return Reply(response=FetchResponse(partitions=parts))
    # KIP-13 for consumers only; replicas are never client-throttled.
    throttle_ms = rm.fetch_quotas.record_and_throttle_fetch(client_id, sent, bound, now_ms())
    if throttle_ms > 0:  # KIP-219: empty, the bytes un-recorded (module docstring)
        response = FetchResponse(partitions=[], throttle_time_ms=throttle_ms)
        return Reply(response=response, throttle_ms=throttle_ms)
    rm.metrics.inc("bytes_out", sent)  # only what is sent (KafkaApis.recordBytesOutMetric)
    return Reply(response=FetchResponse(partitions=parts), throttle_ms=0)


async def _read_until_enough(
    rm: ReplicaManager,
    req: FetchRequest,
    readable: list[tuple[int, FetchPartition, LocalPartition]],
    plan: LeaderFetchPlan | None,
    deadline: float,
    *,
    max_bytes: int,
    early: bool,
) -> list[bytes]:
    """Read; while below min_bytes and before the deadline, wait for a change and read again.
    A response that already carries an error or a divergence is answered at once (early).
    Throttled partitions are not read, so their bytes never complete a delayed fetch.
    `min_bytes` is capped by `max_bytes`, as KafkaApis caps fetchMinBytes."""
    is_follower = plan is not None
    min_bytes = min(req.min_bytes, max_bytes)
    while True:
        limits = read_limits(rm, plan, readable)
        data = await read_once(rm, readable, limits, is_follower=is_follower, max_bytes=max_bytes)
        total = sum(len(d) for d in data)
        if early or total >= min_bytes or trio.current_time() >= deadline or not readable:
            return data
        if any(not p.is_leader for _i, _fp, p in readable):
            return data
        await wait_for_change([p for _i, _fp, p in readable], recheck_at(plan, limits, deadline))
