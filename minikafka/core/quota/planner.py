"""The replication throttle of one fetch, both sides, as plain decisions (KIP-73, KAFKA-4313,
KIP-542, KIP-1009): what each partition may carry and what the fetch costs the quota.

The shell describes the fetch (per partition: its throttle class, its charge class, whether
the replica is in sync) and later what was sent or appended; a plan answers with limits and
`Charge`s, which the shell records into the sensors and the metrics. It reads the sensors
(`ReplicationQuotas`, pure) at the `now_ms` it is given and changes nothing itself.

- Leader (Kafka's `ReplicaManager.shouldLeaderThrottle` and the leader's
  `ReplicationQuotaManager.record` in `KafkaApis.handleFetchRequest`): `LeaderFetchPlan`.
- Follower (`ReplicaFetcherThread.shouldFollowerThrottle` and `processPartitionData`'s record):
  `FollowerFetchPlan`.
- When to look again: `leader_recheck_ms` (the long poll of a throttled fetch) and
  `follower_backoff_ms` (a fetcher whose partitions were all held back).

Kafka's mode throttles a partition when `should_throttle` holds and charges the leader the wire
size of the response's throttled partitions, headers included (core/quota/charge.py). The
precise mode (beyond Kafka) gives each partition of a class its share of the allowance left and
charges record bytes; its bound is stated at `LeaderFetchPlan`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from minikafka.core.dynamic_config import BrokerThrottleConfig, ThrottledReplicas
from minikafka.core.quota.charge import Charge, ChargedPartition, kafka_fetch_response_size
from minikafka.core.quota.classes import (
    QuotaSide,
    ThrottleClass,
    follower_charge_class,
    follower_throttle_class,
    leader_charge_class,
    leader_throttle_class,
    should_throttle,
)
from minikafka.core.quota.sensors import ReplicationQuotas

# A precise-mode long poll with a throttled partition looks again this soon: the allowance grows
# with time, not with log changes, so sleeping out the whole long poll would waste it.
PRECISE_RECHECK_MS = 50


@dataclass(frozen=True, slots=True)
class ThrottleSettings:
    """The node configs a plan follows: `replication.quota.precise` (beyond Kafka) and
    `replication.throttle.in.sync.exempt` (KAFKA-4313; off reproduces ISR thrashing)."""

    precise: bool = False
    exempt_in_sync: bool = True


@dataclass(frozen=True, slots=True)
class FetchThrottle:
    """What one partition of a fetch may carry: `limit` 0 = nothing (throttled), None = no
    limit, n = the precise mode's byte budget; `exempt`: in sync, in a throttle class and
    exempt (KAFKA-4313), so its bytes count against the quota but are never held back."""

    limit: int | None
    exempt: bool = False


UNLIMITED = FetchThrottle(limit=None)
THROTTLED = FetchThrottle(limit=0)


@dataclass(frozen=True, slots=True)
class ThrottleView:
    """One partition of a fetch as a plan sees it: the class that may hold it back (None:
    never), the sensor its bytes are recorded into (None: none), and whether its replica is in
    sync (leader: the follower is in the ISR; follower: caught up, `follower_caught_up`)."""

    throttle_class: ThrottleClass | None
    charge_class: ThrottleClass | None
    in_sync: bool


NOT_THROTTLED = ThrottleView(throttle_class=None, charge_class=None, in_sync=False)


def exempt(view: ThrottleView, settings: ThrottleSettings) -> bool:
    """In sync and of a throttle class, so never held back though its bytes count (KAFKA-4313);
    what `decide_fetch_throttles` marks `exempt`."""
    return view.throttle_class is not None and view.in_sync and settings.exempt_in_sync


def follower_caught_up(lag: int | None) -> bool:
    """Kafka PartitionFetchState.isReplicaInSync: the lag is known and not positive."""
    return lag is not None and lag <= 0


def decide_fetch_throttles(
    parts: Sequence[tuple[ThrottleClass | None, bool]],
    *,
    exceeded: Callable[[ThrottleClass], bool],
    remaining: Callable[[ThrottleClass], float],
    precise: bool,
    exempt_in_sync: bool = True,
) -> list[FetchThrottle]:
    """One fetch's throttling, for either side: `parts` is (throttle class, in sync) per
    partition, `exceeded` and `remaining` read this side's sensor of a class.

    Kafka's mode: a partition is throttled when `should_throttle` holds (shouldLeaderThrottle,
    shouldFollowerThrottle), else unlimited. Precise mode: each partition of a class that is
    not exempt may take an equal share of that class's allowance left, floored at nothing."""
    eligible = Counter(
        cls for cls, in_sync in parts if cls is not None and not (in_sync and exempt_in_sync)
    )
    over = {cls: exceeded(cls) for cls in {cls for cls, _ in parts if cls is not None}}
    out: list[FetchThrottle] = []
    for cls, in_sync in parts:
        if cls is None:
            out.append(UNLIMITED)
        elif should_throttle(
            in_sync=in_sync,
            throttle_class=cls,
            quota_exceeded=over[cls],
            exempt_in_sync=exempt_in_sync,
        ):
            out.append(THROTTLED)
        elif in_sync and exempt_in_sync:
            out.append(FetchThrottle(limit=None, exempt=True))
        elif precise:
            out.append(FetchThrottle(limit=max(int(remaining(cls) // eligible[cls]), 0)))
        else:
            out.append(UNLIMITED)
    return out


class _FetchPlan:
    """What both sides share: the decisions of one fetch against one side's sensors."""

    side: QuotaSide

    def __init__(self, views: Sequence[ThrottleView], settings: ThrottleSettings) -> None:
        self.views = list(views)
        self.settings = settings

    def decisions(self, quotas: ReplicationQuotas, now_ms: int) -> list[FetchThrottle]:
        """Per view: what it may carry now (`decide_fetch_throttles` on this side's sensors)."""
        side = self.side
        return decide_fetch_throttles(
            [(v.throttle_class, v.in_sync) for v in self.views],
            exceeded=lambda cls: quotas.exceeded(side, cls, now_ms),
            remaining=lambda cls: quotas.remaining(side, cls, now_ms),
            precise=self.settings.precise,
            exempt_in_sync=self.settings.exempt_in_sync,
        )


def leader_view(
    *,
    partition: int,
    local_id: int,
    follower_id: int,
    adding_replicas: Collection[int] | None,
    leader_list: ThrottledReplicas,
    config: BrokerThrottleConfig,
    in_sync: bool,
) -> ThrottleView:
    """One partition of a follower's fetch on its leader (`leader_throttle_class`,
    `leader_charge_class`). `adding_replicas` None: the partition is not hosted here, so it is
    never held back (it is answered with an error), yet charged by the leader list as Kafka's
    `isThrottled` would."""
    cls = None
    if adding_replicas is not None:
        cls = leader_throttle_class(
            partition=partition,
            local_id=local_id,
            follower_id=follower_id,
            adding_replicas=adding_replicas,
            topic_leader_list=leader_list,
            config=config,
        )
    charge = leader_charge_class(
        cls, partition=partition, local_id=local_id, topic_leader_list=leader_list, config=config
    )
    return ThrottleView(throttle_class=cls, charge_class=charge, in_sync=in_sync)


def follower_view(
    *,
    partition: int,
    local_id: int,
    adding_replicas: Collection[int],
    follower_list: ThrottledReplicas,
    config: BrokerThrottleConfig,
    lag: int | None,
) -> ThrottleView:
    """One partition a follower fetches (`follower_throttle_class`, `follower_charge_class`)."""
    cls = follower_throttle_class(
        partition=partition,
        local_id=local_id,
        adding_replicas=adding_replicas,
        topic_follower_list=follower_list,
        config=config,
    )
    charge = follower_charge_class(
        cls,
        partition=partition,
        local_id=local_id,
        topic_follower_list=follower_list,
        config=config,
    )
    return ThrottleView(throttle_class=cls, charge_class=charge, in_sync=follower_caught_up(lag))


class LeaderFetchPlan(_FetchPlan):
    """The leader side of KIP-73 for one follower fetch, `views` in the request's order.

    Kafka's mode: a throttled partition (not in sync, in a throttle class, quota exceeded at the
    read) returns nothing; the response is charged afterwards, per sensor, the Kafka wire size
    of the response's partitions charged to it, empty and in-sync ones included. The
    REPLICATION sensor is charged on every fetch, as Kafka records `sizeOfThrottledPartitions`
    unconditionally (an empty one is 16 bytes).

    Precise mode: each eligible partition of a class may take its share of the allowance left
    (`Sensor.precise_remaining_bytes` / eligible partitions), and only its record bytes are
    charged. A response exceeds its allowance by at most one batch, the oversized first batch
    KIP-74 returns whole, and only when that partition's share was positive. The excess is
    charged, so the allowance goes negative and later responses wait until it is paid back:
    over any D seconds a sensor admits at most T * max(D, W) + B bytes (B the largest batch),
    and a batch of any size moves once the allowance is positive.
    """

    side = QuotaSide.LEADER

    def limits(
        self, quotas: ReplicationQuotas, now_ms: int, read: Sequence[int]
    ) -> list[int | None]:
        """Per partition of `read` (indexes into the views, the partitions actually read): 0 =
        return nothing, None = unlimited, n = the precise budget. Only the read partitions
        share the allowance, as only they can take from it."""
        sub = LeaderFetchPlan([self.views[i] for i in read], self.settings)
        return [d.limit for d in sub.decisions(quotas, now_ms)]

    def charges(self, sent: Sequence[ChargedPartition | None]) -> list[Charge]:
        """What the built response costs, `sent` in the views' order (None: a partition a
        session's incremental response leaves out)."""
        precise, exempt_in_sync = self.settings.precise, self.settings.exempt_in_sync
        records: dict[ThrottleClass, int] = {}
        exempt: dict[ThrottleClass, int] = {}
        charged: dict[ThrottleClass, list[ChargedPartition]] = {}
        for view, part in zip(self.views, sent, strict=True):
            cls = view.charge_class
            if cls is None or part is None:
                continue
            records[cls] = records.get(cls, 0) + part.records_bytes
            if view.in_sync and exempt_in_sync:
                exempt[cls] = exempt.get(cls, 0) + part.records_bytes
            charged.setdefault(cls, []).append(part)
        out: list[Charge] = []
        for cls in ThrottleClass:
            if precise:  # beyond Kafka: the record bytes of the charged partitions
                if cls not in charged:
                    continue
                size, overhead = records[cls], 0
            elif cls in charged or cls is ThrottleClass.REPLICATION:
                size = kafka_fetch_response_size(charged.get(cls, ()))
                overhead = size - records.get(cls, 0)
            else:
                continue
            out.append(Charge(self.side, cls, size, exempt.get(cls, 0), overhead))
        return out


class FollowerFetchPlan(_FetchPlan):
    """The follower side of KIP-73 for one fetch, `views` one per partition of the fetcher:
    leave out partitions that are not caught up, are throttled, and whose quota is exceeded;
    in precise mode, cap the others of a throttled class by their share of the allowance."""

    side = QuotaSide.FOLLOWER

    @staticmethod
    def needed(settings: ThrottleSettings, quotas: ReplicationQuotas) -> bool:
        """Whether a fetch can be held back at all: not without a follower bound, unless
        precise. When not, the shell may skip the views of every partition."""
        return settings.precise or quotas.bounded(QuotaSide.FOLLOWER)

    def decide(self, quotas: ReplicationQuotas, now_ms: int) -> tuple[set[int], dict[int, int]]:
        """(left out, byte caps), as indexes into the views."""
        excluded: set[int] = set()
        limits: dict[int, int] = {}
        for i, d in enumerate(self.decisions(quotas, now_ms)):
            if d.limit == 0:
                excluded.add(i)
            elif d.limit is not None:
                limits[i] = d.limit
        return excluded, limits

    def charges(self, appended: Sequence[tuple[int, int, bool]]) -> list[Charge]:
        """What the appended bytes cost: (view index, record bytes, exempt) per partition
        appended. Every throttled or listed partition's bytes count, caught up or not
        (ReplicaFetcherThread.processPartitionData records on list membership)."""
        total: dict[ThrottleClass, int] = {}
        exempt: dict[ThrottleClass, int] = {}
        for i, size, was_exempt in appended:
            cls = self.views[i].charge_class
            if cls is None or not size:
                continue
            total[cls] = total.get(cls, 0) + size
            if was_exempt:
                exempt[cls] = exempt.get(cls, 0) + size
        return [Charge(self.side, cls, n, exempt.get(cls, 0)) for cls, n in total.items()]


def leader_recheck_ms(settings: ThrottleSettings, limits: Sequence[int | None]) -> int | None:
    """How soon a long poll looks again while a partition is held back: PRECISE_RECHECK_MS in
    precise mode, None (at its deadline) otherwise."""
    return PRECISE_RECHECK_MS if settings.precise and 0 in limits else None


def follower_backoff_ms(
    *,
    ready_ms: int,
    now_ms: int,
    throttled: bool,
    backoff_ms: int,
    precise: bool,
    window_s: int,
) -> int:
    """How long a fetcher with nothing to fetch waits: until its next partition is ready
    (`ready_ms`), at least 1 ms. When the follower quota held everything back, Kafka waits
    replica.fetch.backoff.ms (AbstractFetcherThread.maybeFetch backs off when the request
    comes out empty); the precise mode looks again after a tenth of a quota window, so that no
    fetch carries a second's worth of allowance at once."""
    wait_ms = max(ready_ms - now_ms, 1)
    if not throttled:
        return wait_ms
    if precise:
        backoff_ms = min(backoff_ms, window_s * 100)
    return backoff_ms if ready_ms <= now_ms else min(wait_ms, backoff_ms)
