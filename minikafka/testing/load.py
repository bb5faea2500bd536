"""The load kit: bounded, paced produce load on the library's Producer (client/producer.py).

Every load generator of the project sends through it: the experiment's producers
(experiment/workload.py), the system tests' fill and steady load (systemtests/harness/
clients.py), the perf tool and the benchmarks on it (tools/perf.py), the client-quota benchmark
and the demo. None builds a Produce request itself: whatever the client library does (leaders,
idempotence, quotas, retries) is what the load exercises. What they share:

- `load_producer`: the Producer configured from the knobs load varies (acks, idempotence,
  timeouts, attempts); `attempts=1` is one attempt per send (Kafka's retries=0).
- `batch_of`: one record batch of values (with keys, for a compacted topic), stamped now, with
  its record count.
- `run_senders`: n concurrent senders, each awaiting its `send(k)` until that says it is done.
  Every load is bounded in count AND time (`Bounds`): all senders stop at the first of
  `max_sends` sends started and the `until` deadline (trio clock). A send running at `until`
  finishes (a history wants every invoke completed) unless `cut`, for measured spans.
- `Turns` (fixed turns, missed ones skipped: a stall never turns into a flood) and `Rate` (a
  count due by now, caught up after a stall): the two pacings the callers use.
- `attempt_once`: one attempt's outcome in Jepsen's terms (checker/history.py): `ok`,
  `fail` (certainly not written) or `info` (indeterminate).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.client.consumer import Consumer
from minikafka.client.producer import DeliveryError, Producer, ProducerConfig
from minikafka.common import TopicPartition
from minikafka.core.records import make_batch
from minikafka.errors import BrokerError, ErrorCode, MiniKafkaError, error_name

# Refused before any append (see server/produce.py): a send answered with one of these was
# certainly not written. NOT_LEADER_OR_FOLLOWER is not one: a leader that appended and then lost
# the partition answers it too (Kafka's DelayedProduce).
DEFINITE_FAILURES = frozenset(
    {
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.CORRUPT_MESSAGE,
    }
)
ONE_ATTEMPT_SLACK_S = 6.0  # past the request timeout: its connection gives up 5 s after it, first


def load_producer(
    client: ClusterClient,
    *,
    acks: int = -1,
    idempotence: bool | None = None,
    request_timeout_s: float = 30.0,
    delivery_timeout_s: float = 120.0,
    attempts: int | None = None,
    retry_backoff_ms: int = 100,
) -> Producer:
    """The Producer of a load: `idempotence` None = the library's default (on with acks=all);
    `attempts` None = retry until `delivery_timeout_s`, 1 = one attempt (idempotence off: no
    retry to deduplicate), whose send is bounded by the request timeout plus slack."""
    if attempts is not None and attempts < 1:
        raise ValueError(f"attempts={attempts}: expected at least 1, or None")
    if attempts == 1:
        idempotence = False
        delivery_timeout_s = min(delivery_timeout_s, request_timeout_s + ONE_ATTEMPT_SLACK_S)
    return Producer(
        client,
        ProducerConfig(
            acks=acks,
            request_timeout_ms=int(request_timeout_s * 1000),
            delivery_timeout_s=delivery_timeout_s,
            retry_backoff_ms=retry_backoff_ms,
            enable_idempotence=idempotence,
            retries=None if attempts is None else attempts - 1,
        ),
    )


def batch_of(
    values: Sequence[bytes],
    *,
    now_ms: int | None = None,
    keys: Sequence[bytes | None] | None = None,
) -> tuple[bytes, int]:
    """One batch of `values`, stamped `now_ms` (default: now): (bytes, count). `keys`, one per
    value, or None for none (a compacted topic refuses records without one, INVALID_RECORD)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if keys is None:
        return make_batch([(now, None, v) for v in values]), len(values)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values: expected one per value")
    return make_batch([(now, k, v) for k, v in zip(keys, values, strict=True)]), len(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    """No load runs on: at most `max_sends` sends started, none after `until` (trio clock); with
    `cut`, the sends still running at `until` are cancelled too."""

    until: float
    max_sends: int
    cut: bool = False


async def run_senders(n: int, send: Callable[[int], Awaitable[bool]], bounds: Bounds) -> int:
    """Senders k = 0 .. n-1, each awaiting `send(k)` (False: nothing more to send) within
    `bounds`; -> the sends started."""
    started = 0

    async def sender(k: int) -> None:
        nonlocal started
        while started < bounds.max_sends and trio.current_time() < bounds.until:
            started += 1
            if not await send(k):
                return

    with trio.move_on_at(bounds.until) if bounds.cut else nullcontext():
        async with trio.open_nursery() as nursery:
            for k in range(n):
                nursery.start_soon(sender, k)
    return started


class Turns:
    """Turns `period_s` apart from `first` (trio clock). A sender that missed turns (its send
    took longer) goes at once, once, for all of them, then waits for the next turn: a stall
    never turns into a burst."""

    def __init__(self, period_s: float, first: float) -> None:
        self.period_s = period_s
        self.next = first

    async def wait(self, until: float) -> bool:
        """Sleep to the next turn; False if `until` passed by then (the load is over)."""
        now = trio.current_time()
        if now < self.next:
            await trio.sleep(self.next - now)
        now = trio.current_time()
        if now >= until:
            return False
        self.next += self.period_s * (1 + int((now - self.next) // self.period_s))
        return True


@dataclass(frozen=True, slots=True)
class Rate:
    """`per_s` units (records, batches) due per second from `start` (trio clock); behind
    schedule, the units due are sent at once (the average rate holds)."""

    per_s: float
    start: float

    def due(self, now: float) -> int:
        return math.floor(self.per_s * (now - self.start))

    async def wait_for(self, count: int) -> None:
        """Sleep until `count` units are due."""
        await trio.sleep_until(self.start + count / self.per_s)


async def attempt_once(
    producer: Producer, tp: TopicPartition, batch: bytes, count: int
) -> tuple[str, dict[str, Any]]:
    """One send of a `load_producer(attempts=1)` -> (type, fields) of its completion op: `ok`
    with the offset; `fail` when it never reached a broker (no leader, no connection) or was
    refused before any append (`DEFINITE_FAILURES`); `info` otherwise (timeouts, broken
    connections, NOT_LEADER_OR_FOLLOWER ...: it may have been written)."""
    node = producer.client.leader_of(tp)
    where = {"node": node} if node >= 0 else {}
    try:
        (result,) = await producer.send_batches([(tp, batch, count)])
    except DeliveryError as exc:
        if not exc.sent:
            return "fail", {"error": str(exc), **where}
        kind = "fail" if exc.code in DEFINITE_FAILURES else "info"
        return kind, {"error": error_name(exc.code), **where}
    except BrokerError as exc:  # refused for good (not retriable)
        kind = "fail" if exc.code in DEFINITE_FAILURES else "info"
        return kind, {"error": error_name(exc.code), **where}
    except (MiniKafkaError, trio.TooSlowError) as exc:
        return "info", {"error": str(exc) or type(exc).__name__, **where}
    if producer.config.acks == 0:  # nothing acknowledged: it may or may not be written
        return "info", {"error": "acks=0: no acknowledgement", **where}
    return "ok", {"offset": result.base_offset, **where}


async def read_to_end(
    client: ClusterClient,
    tps: Sequence[TopicPartition],
    *,
    timeout_s: float,
    max_wait_ms: int = 100,
    positions: dict[TopicPartition, int] | None = None,
    ends: dict[TopicPartition, int] | None = None,
) -> list[tuple[TopicPartition, int, bytes | None]]:
    """Every record of `tps` from the log start (or `positions`) to the high watermark as of the
    call (or `ends`): (partition, offset, value) in fetch order. trio.TooSlowError after
    `timeout_s`. The read-back half of the kit: what the demo and the checkers' callers read."""
    consumer = Consumer(client, max_wait_ms=max_wait_ms)
    if positions is None:
        positions = await consumer.list_offsets(list(tps), earliest=True)
    if ends is None:
        ends = await consumer.list_offsets(list(tps), earliest=False)
    out: list[tuple[TopicPartition, int, bytes | None]] = []
    with trio.fail_after(timeout_s):
        while any(positions[tp] < ends[tp] for tp in tps):
            got = await consumer.fetch_once({tp: o for tp, o in positions.items() if o < ends[tp]})
            for tp, recs in got.items():
                out.extend((tp, r.offset, r.value) for r in recs)
                if recs:
                    positions[tp] = recs[-1].offset + 1
    return out
