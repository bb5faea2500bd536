"""The producer: record batches to partition leaders, with acks, retries and metadata refresh.

`send_batches` takes ready batches (one per partition or several), groups them by leader into
one Produce request per broker, sends those concurrently, and retries the partitions whose error
is retriable (Kafka's RetriableException codes: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a
broken connection ...) after refreshing metadata, with a backoff, until `delivery_timeout_s`.
Non-retriable errors fail at once. Callers pipeline by running several sends concurrently
(tools/perf.py keeps a window of them in flight).

Idempotence (KIP-98; Kafka's `enable.idempotence`, on by default since Kafka 3.0): the producer
gets a producer id (InitProducerId, from any broker) and gives each batch a per-partition
sequence number when it is first sent; every retry carries the same id, epoch and sequence, so a
leader that already has the batch (its first answer was lost, or it was written under the
previous leader) answers with the original offset instead of storing it twice. A batch is
first sent only while fewer than `max_in_flight_per_partition` (5, the broker's window of
remembered batches) batches of its partition were sequenced since the oldest unresolved one:
so every retry is still one of the last 5 the leader remembers (Kafka gets the same from
max.in.flight.requests.per.connection <= 5 and a broker answering a connection in order). As in Kafka 3.x, idempotence needs
acks=all: by default (`enable_idempotence=None`) it is on exactly when acks=-1; True with other
acks is refused; False turns it off.

Sequence errors, handled as Kafka's TransactionManager.canRetry does for an idempotent producer:
- OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID for a batch that is NOT the oldest
  unresolved one of its partition: an earlier batch has not landed yet (requests overtook each
  other, a retry is on its way): retried as is.
- the same for the oldest unresolved batch: the broker really lacks what came before (an
  unclean failover lost acknowledged batches, or an earlier batch failed for good). The producer
  bumps the partition's epoch and renumbers its unresolved batches from 0 (KIP-360's
  bumpIdempotentProducerEpoch; the broker accepts a newer epoch starting at 0), then retries.
  Epochs are per partition here (the broker keeps them per partition anyway); Kafka bumps one
  producer-wide epoch.
- INVALID_PRODUCER_EPOCH for an attempt made before such a renumbering: retried with the new
  numbers. Any other refusal is an error for the caller.

`retries` (Kafka's `retries`; None = until the delivery timeout, Kafka's default) bounds the
rounds a batch is sent again; past it the send raises `DeliveryError`: the last attempt's error
code and whether that attempt reached a broker (`sent`; if not, it was certainly not written).
With retries=0 a send is one attempt, as the experiment's non-retrying producers want.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from minikafka.client.cluster_client import ClusterClient
from minikafka.client.connection import Connection
from minikafka.common import TopicPartition
from minikafka.core.producer_state import MAX_EPOCH, increment_sequence
from minikafka.core.records import make_batch
from minikafka.errors import BrokerError, ConfigError, ErrorCode, MiniKafkaError, error_name
from minikafka.wire.messages import (
    InitProducerIdRequest,
    ProducePartition,
    ProduceRequest,
)

SEQUENCE_ERRORS = (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID)
_NO_LEADER = BrokerError(ErrorCode.LEADER_NOT_AVAILABLE, "no leader known")


class DeliveryError(BrokerError):
    """A batch still not delivered after `retries` resends: its last attempt's error, and
    whether that attempt reached a broker (`sent`: False = no leader, no connection)."""

    def __init__(self, last: BrokerError, *, tp: TopicPartition, sent: bool) -> None:
        super().__init__(last.code, f"{tp}, {'sent' if sent else 'never sent'}; last: {last}")
        self.tp, self.sent = tp, sent


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResult:
    tp: TopicPartition
    base_offset: int  # -1 for acks=0
    record_count: int
    retries: int  # rounds it was not done in (sent again, or held back for its window)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    acks: int = -1
    request_timeout_ms: int = 30_000
    delivery_timeout_s: float = 120.0
    retry_backoff_ms: int = 100
    # Kafka's enable.idempotence: None = on when acks=-1 (Kafka 3.x's default), else off.
    enable_idempotence: bool | None = None
    # Kafka's max.in.flight.requests.per.connection, per partition (<= 5 with idempotence).
    max_in_flight_per_partition: int = 5
    # Kafka's retries: resends of a batch after a retriable error; None = until the delivery
    # timeout (Kafka's default), 0 = one attempt.
    retries: int | None = None


@dataclass(slots=True, eq=False)  # compared by identity
class _Batch:
    """One item of a send: its producer sequence is given when it is first sent."""

    tp: TopicPartition
    records: bytes
    count: int
    epoch: int = -1
    seq: int = -1
    done: bool = False  # acknowledged or given up


@dataclass(slots=True)
class _Partition:
    """A partition's sequence state (Kafka's TxnPartitionEntry)."""

    max_window: int
    epoch: int = 0
    next_seq: int = 0
    # Sequenced batches from the oldest unresolved one on, in sequence order (resolved ones
    # behind it stay: the leader's window of 5 counts them too).
    window: deque[_Batch] = field(default_factory=deque)
    changed: trio.Event = field(default_factory=trio.Event)  # set when the window moves

    def _changed(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    @property
    def head(self) -> _Batch | None:
        return self.window[0] if self.window else None

    def may_resend(self, b: _Batch) -> bool:
        """A batch refused as out of order goes again once the batch before it is done (the
        leader then has everything up to it), or once it is the oldest (then nothing will
        fill the gap: it bumps the epoch); an unsequenced one once the window has room."""
        if b.seq < 0:
            return self.can_assign()
        if not self.window or self.window[0] is b:
            return True
        window = list(self.window)
        for i in range(1, len(window)):
            if window[i] is b:
                return window[i - 1].done
        return True  # renumbered away or resolved meanwhile

    def can_assign(self) -> bool:
        return len(self.window) < self.max_window

    def assign(self, b: _Batch) -> None:
        b.epoch, b.seq = self.epoch, self.next_seq
        self.next_seq = increment_sequence(self.next_seq, b.count)
        self.window.append(b)

    def bump_epoch(self) -> None:
        """Renumber the unresolved batches from 0 under a new epoch (KIP-360)."""
        if self.epoch >= MAX_EPOCH:
            raise MiniKafkaError("producer epoch exhausted: create a new producer")
        self.epoch += 1
        pending = [b for b in self.window if not b.done]
        self.window.clear()
        self.next_seq = 0
        for b in pending:
            self.assign(b)
        self._changed()

    def resolve(self, b: _Batch) -> None:
        if b.done or b.seq < 0:
            return
        b.done = True
        while self.window and self.window[0].done:
            self.window.popleft()
        self._changed()


class Producer:
    def __init__(self, client: ClusterClient, config: ProducerConfig = ProducerConfig()) -> None:
        if config.acks not in (0, 1, -1):
            raise MiniKafkaError(f"acks={config.acks}: expected 0, 1 or -1 (all)")
        if config.enable_idempotence and config.acks != -1:
            raise ConfigError(
                f"enable_idempotence needs acks=-1 (all), not acks={config.acks}"
                " (as Kafka's enable.idempotence does)"
            )
        self.idempotent = config.acks == -1 and config.enable_idempotence is not False
        if self.idempotent and not 1 <= config.max_in_flight_per_partition <= 5:
            raise ConfigError(
                f"max_in_flight_per_partition={config.max_in_flight_per_partition}: expected 1"
                " to 5 with idempotence (the leader remembers a producer's last 5 batches)"
            )
        self.client = client
        self.config = config
        self.producer_id = -1
        self._pid_lock = trio.Lock()
        self._partitions: dict[TopicPartition, _Partition] = {}
        self.retries = 0  # batches sent again
        self.deferred = 0  # times a batch waited for its partition's window (idempotence)
        self.epoch_bumps = 0
        # Client quotas: the throttle times the brokers reported (KIP-13). The connection to that
        # broker waited each one out before its next request (KIP-219, client/connection.py).
        self.throttle_time_ms_total = 0
        self.last_throttle_time_ms = 0

    async def send_batches(
        self, batches: Sequence[tuple[TopicPartition, bytes, int]]
    ) -> list[ProduceResult]:
        """Send (tp, batch bytes, record count) items; returns one result per item, in order.
        Raises BrokerError when an item fails for good."""
        items = [_Batch(tp=tp, records=raw, count=n) for tp, raw, n in batches]
        results: dict[int, ProduceResult] = {}
        try:
            with trio.fail_after(self.config.delivery_timeout_s):
                if self.idempotent:
                    await self._init_producer_id()
                await self._deliver(items, results)
        finally:
            if self.idempotent:  # given up (or done): the window moves on
                for b in items:
                    self._partition(b.tp).resolve(b)
        return [results[i] for i in range(len(items))]

    async def _deliver(self, items: list[_Batch], results: dict[int, ProduceResult]) -> None:
        todo = list(range(len(items)))
        attempts = 0
        # Not done only because an earlier batch of theirs has not landed yet (True: not even
        # sent, its partition's window being full).
        behind: dict[int, bool] = {}
        errors: dict[int, tuple[BrokerError, bool]] = {}  # last attempt's error, was it sent
        while todo:
            if self.config.retries is not None and attempts > self.config.retries:
                last, sent = errors.get(todo[0], (_NO_LEADER, False))
                raise DeliveryError(last, tp=items[todo[0]].tp, sent=sent)
            topics = sorted({items[i].tp.topic for i in todo})
            if attempts and all(i in behind for i in todo):
                await self._await_earlier([items[i] for i in todo])
            elif attempts:
                await trio.sleep(self.config.retry_backoff_ms / 1000)
                await self.client.refresh_metadata(topics)
            elif any(self.client.leader_of(items[i].tp) < 0 for i in todo):
                await self.client.refresh_metadata(topics)
            behind, errors = {}, {}
            todo = await self._send_round(items, todo, results, attempts, behind, errors)
            attempts += 1
            self.retries += sum(1 for i in todo if not behind.get(i))
            self.deferred += sum(1 for i in todo if behind.get(i))

    async def _await_earlier(self, batches: list[_Batch]) -> None:
        """Batches refused as out of order (or not sent: their partition's window is full) wait
        until one of them may go (`_Partition.may_resend`), and go at once: retries then land in
        sequence order instead of a random one, as Kafka's Sender resends a partition's
        batches in order. The delivery timeout bounds the wait."""
        parts = {b.tp: self._partition(b.tp) for b in batches}
        while not any(parts[b.tp].may_resend(b) for b in batches):
            async with trio.open_nursery() as nursery:

                async def wake(event: trio.Event) -> None:
                    await event.wait()
                    nursery.cancel_scope.cancel()

                for part in parts.values():
                    nursery.start_soon(wake, part.changed)

    def _partition(self, tp: TopicPartition) -> _Partition:
        part = self._partitions.get(tp)
        if part is None:
            part = _Partition(max_window=self.config.max_in_flight_per_partition)
            self._partitions[tp] = part
        return part

    async def _init_producer_id(self) -> None:
        """InitProducerId from any broker, retried while the answer is retriable."""
        async with self._pid_lock:
            while self.producer_id < 0:
                try:
                    resp = await self.client.request_any(InitProducerIdRequest())
                except BrokerError as exc:
                    if not exc.retriable:
                        raise
                else:
                    if resp.error_code == ErrorCode.NONE:
                        self.producer_id = resp.producer_id
                        return
                    if not BrokerError(resp.error_code).retriable:
                        raise BrokerError(resp.error_code, "InitProducerId refused")
                await trio.sleep(self.config.retry_backoff_ms / 1000)

    async def _send_round(
        self,
        items: list[_Batch],
        todo: list[int],
        results: dict[int, ProduceResult],
        attempt: int,
        behind: dict[int, bool],
        errors: dict[int, tuple[BrokerError, bool]],
    ) -> list[int]:
        by_leader: dict[int, list[int]] = {}
        retry: list[int] = []
        for i in todo:
            leader = self.client.leader_of(items[i].tp)
            if leader < 0:
                retry.append(i)
            else:
                by_leader.setdefault(leader, []).append(i)

        async def one(leader: int, chosen: list[int]) -> None:
            try:
                conn = await self.client.node_connection(leader)
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                errors.update(dict.fromkeys(chosen, (exc, False)))
                retry.extend(chosen)
                return
            try:
                failed = await self._send_to(conn, items, chosen, results, attempt, behind, errors)
            except BrokerError as exc:
                if not exc.retriable:
                    raise
                errors.update(dict.fromkeys(chosen, (exc, True)))
                failed = chosen
            retry.extend(failed)

        async with trio.open_nursery() as nursery:
            for leader, chosen in by_leader.items():
                nursery.start_soon(one, leader, chosen)
        return retry

    async def _send_to(
        self,
        conn: Connection,
        items: list[_Batch],
        chosen: list[int],
        results: dict[int, ProduceResult],
        attempt: int,
        behind: dict[int, bool],
        errors: dict[int, tuple[BrokerError, bool]],
    ) -> list[int]:
        # Sequences are given here, with no await before the request is queued on the
        # connection: batches of one partition leave in sequence order (Kafka's Sender drains
        # a partition's batches in order).
        if self.idempotent:
            ready = []
            for i in chosen:
                part = self._partition(items[i].tp)
                if items[i].seq < 0 and not part.can_assign():
                    behind[i] = True  # its partition's window is full: wait for it to move
                    continue
                if items[i].seq < 0:
                    part.assign(items[i])
                ready.append(i)
            deferred = [i for i in chosen if i not in ready]
            chosen = ready
            if not chosen:
                return deferred
        else:
            deferred = []
        sent = [(items[i].epoch, items[i].seq) for i in chosen]
        req = ProduceRequest(
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            partitions=[
                ProducePartition(
                    topic=items[i].tp.topic,
                    partition=items[i].tp.partition,
                    records=items[i].records,
                    producer_id=self.producer_id if self.idempotent else -1,
                    producer_epoch=items[i].epoch,
                    base_sequence=items[i].seq,
                )
                for i in chosen
            ],
        )
        if self.config.acks == 0:
            await conn.send_oneway(req)
            for i in chosen:
                results[i] = ProduceResult(
                    tp=items[i].tp, base_offset=-1, record_count=items[i].count, retries=attempt
                )
            return []
        resp = await conn.request(req, timeout_s=self.config.request_timeout_ms / 1000 + 5)
        self.last_throttle_time_ms = resp.throttle_time_ms
        self.throttle_time_ms_total += resp.throttle_time_ms
        failed = []
        for i, identity, pr in zip(chosen, sent, resp.partitions, strict=True):
            b = items[i]
            if pr.error_code == ErrorCode.NONE:
                results[i] = ProduceResult(
                    tp=b.tp, base_offset=pr.base_offset, record_count=b.count, retries=attempt
                )
                if self.idempotent:
                    self._partition(b.tp).resolve(b)
            elif BrokerError(pr.error_code).retriable:
                failed.append(i)
                errors[i] = (BrokerError(pr.error_code, pr.error_message or ""), True)
            elif (how := self._sequence_retry(b, identity, pr)) is not None:
                failed.append(i)
                errors[i] = (BrokerError(pr.error_code, pr.error_message or ""), True)
                if how == "behind":
                    behind[i] = False
            else:
                raise BrokerError(
                    pr.error_code, f"{b.tp}: {pr.error_message or error_name(pr.error_code)}"
                )
        return failed + deferred

    def _sequence_retry(self, b: _Batch, identity: tuple[int, int], pr) -> str | None:  # noqa: ANN001
        """How to retry this idempotence error (see the module docstring): "behind" (an
        earlier batch has not landed), "again" (renumbered since it was sent, or just now
        because the broker lacks what precedes the oldest unresolved batch), None: don't."""
        if not self.idempotent:
            return None
        renumbered = identity != (b.epoch, b.seq)
        if pr.error_code == ErrorCode.INVALID_PRODUCER_EPOCH:
            return "again" if renumbered else None
        if pr.error_code not in SEQUENCE_ERRORS:
            return None
        if renumbered:
            return "again"
        part = self._partition(b.tp)
        if part.head is b:
            part.bump_epoch()
            self.epoch_bumps += 1
            return "again"
        return "behind"

    async def send_records(
        self, tp: TopicPartition, records: Sequence[tuple[int, bytes | None, bytes]]
    ) -> ProduceResult:
        """One batch of (timestamp_ms, key, value) records to one partition."""
        (result,) = await self.send_batches([(tp, make_batch(records), len(records))])
        return result
