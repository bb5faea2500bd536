"""Follower fetch planning: which partitions one replica fetcher asks its leader for, in what
order, and how each partition's fetch state moves (Kafka's AbstractFetcherThread, sans IO).

Rules:
- A fetcher serves the partitions of one source broker; with `num.replica.fetchers` > 1 they are
  spread by Kafka's `AbstractFetcherManager.getFetcherId` hash (`fetcher_index`).
- The leader fills a response in request order up to `replica.fetch.response.max.bytes` (KIP-74),
  so a fixed order would starve the partitions at the end. Two remedies, by
  `replica.fetch.partition.order`:
  - `random` (the default, KIP-73's text): each request lists the ready partitions in a fresh
    random order from the node's seeded RNG (with a fetch session, each full request; the
    leader then orders the partitions with news the same way, server/fetch_sessions.py);
  - `rotate` (what Kafka's code does): partitions keep an order, as in AbstractFetcherThread's
    `PartitionStates` linked map; new ones join at the end, and a partition moves to the end
    when a response returned data for it, when its first response arrives (lag unknown until
    then), or when it is delayed after an error (`updateAndMoveToEnd` in processFetchRequest
    and delayPartitions). So the partitions that got data go to the back of the next request
    and the ones the response cap left out come first.
- A partition whose fetch failed with a retriable error is delayed by `replica.fetch.backoff.ms`
  (Kafka's `delayPartitions`); when no partition is ready, the fetcher backs off until the
  earliest one is (`next_deadline_ms`).
- `last_fetched_epoch` travels with every fetch so that the leader can answer with a diverging
  epoch (KIP-320), after which the follower truncates (core/log.py) before fetching on.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from minikafka.common import UNDEFINED_EPOCH, TopicPartition
from minikafka.core.partitioner import java_string_hash
from minikafka.wire.messages import FetchPartition, FetchRequest

RANDOM = "random"
ROTATE = "rotate"
PARTITION_ORDERS = (RANDOM, ROTATE)  # replica.fetch.partition.order


@dataclass(slots=True, kw_only=True)
class FollowerFetchState:
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int = UNDEFINED_EPOCH
    # This replica's log start offset, reported in each fetch so that the leader's low
    # watermark (DeleteRecords, KIP-107) sees it.
    log_start_offset: int = -1
    delayed_until_ms: int = 0
    # max(0, leader HW - next fetch offset) as of the last response; None until one arrives
    # (Kafka PartitionFetchState.lag: a follower is caught up when it is known and <= 0).
    lag: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSettings:
    replica_id: int
    max_wait_ms: int  # replica.fetch.wait.max.ms
    min_bytes: int  # replica.fetch.min.bytes
    response_max_bytes: int  # replica.fetch.response.max.bytes
    partition_max_bytes: int  # replica.fetch.max.bytes
    backoff_ms: int  # replica.fetch.backoff.ms
    partition_order: str = RANDOM  # replica.fetch.partition.order (module docstring)

    def __post_init__(self) -> None:
        if self.partition_order not in PARTITION_ORDERS:
            raise ValueError(
                f"partition_order {self.partition_order!r}: expected one of "
                f"{', '.join(PARTITION_ORDERS)}"
            )


class FetchPlanner:
    def __init__(self, settings: FetchSettings, rng: random.Random) -> None:
        self.settings = settings
        self._rng = rng
        # Insertion-ordered: with `rotate`, this order is the request order (PartitionStates).
        self.partitions: dict[TopicPartition, FollowerFetchState] = {}
        # Each partition's request entry, built again only when its fetch state moves: an idle
        # fetcher of thousands of partitions reuses them (and a fetch session compares them by
        # identity first, core/fetch_session_handler.py).
        self._entries: dict[TopicPartition, FetchPartition] = {}
        # For fetch sessions (`take_changed`): the partitions whose entry or readiness may have
        # changed since last asked, and those delayed, which become ready with time alone.
        self._changed: set[TopicPartition] = set()
        self._delayed: set[TopicPartition] = set()

    def add(self, tp: TopicPartition, state: FollowerFetchState) -> None:
        self.partitions[tp] = state
        self._entries.pop(tp, None)
        self._changed.add(tp)
        if state.delayed_until_ms:
            self._delayed.add(tp)

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)
            self._entries.pop(tp, None)
            self._changed.add(tp)

    def take_changed(self, now_ms: int) -> set[TopicPartition]:
        """The partitions whose request entry or readiness may differ from when this was last
        called (added, removed, advanced, delayed, or whose delay ran out by `now_ms`)."""
        changed, self._changed = self._changed, set()
        for tp in list(self._delayed):
            st = self.partitions.get(tp)
            if st is None or st.delayed_until_ms <= now_ms:
                self._delayed.discard(tp)
                changed.add(tp)
        return changed

    def entry(
        self,
        tp: TopicPartition,
        now_ms: int,
        *,
        exclude: frozenset[TopicPartition] = frozenset(),
        limits: Mapping[TopicPartition, int] | None = None,
    ) -> FetchPartition | None:
        """`tp`'s request entry as `build_request` would list it, or None if it would not."""
        st = self.partitions.get(tp)
        if st is None or st.delayed_until_ms > now_ms or tp in exclude:
            return None
        return self._entry(tp, st, limits)

    def _entry(
        self,
        tp: TopicPartition,
        st: FollowerFetchState,
        limits: Mapping[TopicPartition, int] | None,
    ) -> FetchPartition:
        s = self.settings
        entry = self._entries.get(tp)
        if entry is None:
            entry = self._entries[tp] = FetchPartition(
                topic=tp.topic,
                partition=tp.partition,
                fetch_offset=st.fetch_offset,
                partition_max_bytes=s.partition_max_bytes,
                current_leader_epoch=st.current_leader_epoch,
                last_fetched_epoch=st.last_fetched_epoch,
                log_start_offset=st.log_start_offset,
            )
        if limits and limits.get(tp, s.partition_max_bytes) < s.partition_max_bytes:
            entry = replace(entry, partition_max_bytes=limits[tp])
        return entry

    def ready(self, now_ms: int) -> list[TopicPartition]:
        return [tp for tp, st in self.partitions.items() if st.delayed_until_ms <= now_ms]

    def build_request(
        self,
        now_ms: int,
        *,
        exclude: frozenset[TopicPartition] = frozenset(),
        limits: Mapping[TopicPartition, int] | None = None,
    ) -> FetchRequest | None:
        """The next fetch, partitions shuffled (KIP-73) or in rotation order (Kafka); None when
        nothing is ready to fetch.

        `exclude` leaves partitions out of this request (the follower-side throttle); `limits`
        lowers some partitions' `partition_max_bytes` (the precise throttle mode)."""
        chosen = [tp for tp in self.ready(now_ms) if tp not in exclude]
        if not chosen:
            return None
        s = self.settings
        if s.partition_order == RANDOM:
            self._rng.shuffle(chosen)
        parts = [self._entry(tp, self.partitions[tp], limits) for tp in chosen]
        return FetchRequest(
            replica_id=s.replica_id,
            max_wait_ms=s.max_wait_ms,
            min_bytes=s.min_bytes,
            max_bytes=s.response_max_bytes,
            partitions=parts,
        )

    def next_deadline_ms(self) -> int | None:
        """When the earliest delayed partition becomes ready again (None if no partitions)."""
        if not self.partitions:
            return None
        return min(st.delayed_until_ms for st in self.partitions.values())

    def advance(
        self,
        tp: TopicPartition,
        *,
        fetch_offset: int,
        last_fetched_epoch: int,
        returned_data: bool = False,
    ) -> None:
        """After an append or a truncation: fetch on from the new log end offset.

        `returned_data`: a response brought records for `tp` and they were appended; with
        `rotate` it moves to the end (Kafka moves a partition when validBytes > 0)."""
        st = self.partitions.get(tp)
        if st is not None:
            st.fetch_offset = fetch_offset
            st.last_fetched_epoch = last_fetched_epoch
            self._entries.pop(tp, None)
            self._changed.add(tp)
            if returned_data:
                self._move_to_end(tp)

    def set_log_start(self, tp: TopicPartition, log_start_offset: int) -> None:
        """Our log start moved (retention, the leader's taken): the next request reports it
        (a session sends the partition again: its entry changed)."""
        st = self.partitions.get(tp)
        if st is not None and st.log_start_offset != log_start_offset:
            st.log_start_offset = log_start_offset
            self._entries.pop(tp, None)
            self._changed.add(tp)

    def observe_leader(self, tp: TopicPartition, leader_high_watermark: int) -> None:
        """A response told us the leader's HW: how far behind we are (Kafka's fetch lag).

        With `rotate`, a partition's first response moves it to the end even without data
        (Kafka: `validBytes > 0 || currentFetchState.lag.isEmpty`)."""
        st = self.partitions.get(tp)
        if st is not None and leader_high_watermark >= 0:
            if st.lag is None:
                self._move_to_end(tp)
            st.lag = max(0, leader_high_watermark - st.fetch_offset)

    def delay(self, tp: TopicPartition, now_ms: int) -> None:
        st = self.partitions.get(tp)
        if st is not None:
            if st.delayed_until_ms <= now_ms:  # delayPartitions moves only the not yet delayed
                self._move_to_end(tp)
            st.delayed_until_ms = now_ms + self.settings.backoff_ms
            self._changed.add(tp)
            self._delayed.add(tp)

    def total_lag(self) -> int:
        """The sum of the known lags (leader HW minus our fetch offset, as of each partition's
        last response): this fetcher's part of the follower-side SumReplicaLag."""
        return sum(st.lag for st in self.partitions.values() if st.lag is not None)

    def _move_to_end(self, tp: TopicPartition) -> None:
        """PartitionStates.updateAndMoveToEnd, in `rotate` mode only: the random mode shuffles
        anyway, and leaving its order alone keeps its draws what they were for a given seed."""
        if self.settings.partition_order == ROTATE and tp in self.partitions:
            self.partitions[tp] = self.partitions.pop(tp)


def fetcher_index(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka AbstractFetcherManager.getFetcherId: abs(31 * topic.hashCode + partition) % n."""
    value = (31 * java_string_hash(tp.topic) + tp.partition) & 0xFFFFFFFF
    if value >= 1 << 31:
        value -= 1 << 32
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    value = 0 if value == -(1 << 31) else abs(value)
    return value % num_fetchers
