"""The leader's view of one partition: follower fetch state, ISR shrink/expand, high watermark.

Mirrors Kafka's ``kafka.cluster.Partition`` (leader side) and ``kafka.cluster.Replica``, with
KRaft's AlterPartition flow and KIP-497's pending ("maximal") ISR:

* The committed ISR is what the controller last accepted. While an AlterPartition proposal is
  in flight, the *effective* ISR is committed ∪ pending: a follower being added already holds
  the HW back, and a follower being removed still does until the controller confirms, so the
  HW is never advanced on the strength of an ISR the controller may refuse.
* HW = min LEO over the effective ISR, the leader's own LEO included; it never moves back.
* A follower is caught up when its LEO equals the leader's LEO or it was caught up within
  ``replica.lag.time.max.ms`` (Kafka ReplicaState.isCaughtUp). "Caught up at t" is Kafka's
  Replica.updateFetchState rule: a fetch at or beyond the leader's LEO catches up *now*; a fetch
  at or beyond the leader's LEO *as of this follower's previous fetch* proves the follower was
  caught up at that previous fetch time.
* At most one proposal is in flight (Kafka's ``isInflight``); shrink and expand are refused
  while one is, and the leader never removes itself.

Time comes in as ``now_ms`` (monotonic); nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from minikafka.common import TopicPartition
from minikafka.core.log_retention import low_watermark

__all__ = ["PartitionLeaderState"]


class _FollowerState:
    """Kafka Replica.ReplicaState for one follower (the leader's bookkeeping of it)."""

    __slots__ = (
        "log_end_offset",
        "log_start_offset",
        "last_caught_up_ms",
        "last_fetch_ms",
        "last_fetch_leader_leo",
    )

    def __init__(self, *, last_caught_up_ms: int | None) -> None:
        # Kafka Replica.resetReplicaState(isNewLeader = true): LEO unknown, no previous fetch.
        self.log_end_offset = -1
        self.log_start_offset = -1  # as its fetches report it (UnifiedLog.UnknownOffset until then)
        self.last_caught_up_ms = last_caught_up_ms  # None: never caught up (Kafka's 0L)
        self.last_fetch_ms: int | None = None
        self.last_fetch_leader_leo = -1


class PartitionLeaderState:
    """Leader-side replica state of one partition for one leader epoch (Kafka Partition)."""

    def __init__(
        self,
        *,
        tp: TopicPartition,
        local_id: int,
        replicas: list[int],
        isr: list[int],
        leader_epoch: int,
        partition_epoch: int,
        leader_epoch_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
        now_ms: int,
    ) -> None:
        if local_id not in replicas:
            raise ValueError(f"{tp}: leader {local_id} is not a replica of {replicas}")
        if local_id not in isr:
            raise ValueError(f"{tp}: leader {local_id} is not in the ISR {isr}")
        if not set(isr) <= set(replicas):
            raise ValueError(f"{tp}: ISR {isr} is not a subset of the replicas {replicas}")
        if not 0 <= high_watermark <= log_end_offset:
            raise ValueError(f"{tp}: need 0 <= HW {high_watermark} <= LEO {log_end_offset}")
        self.tp = tp
        self.local_id = local_id
        self.replicas: tuple[int, ...] = tuple(replicas)
        self.isr: tuple[int, ...] = tuple(isr)
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self._leo = log_end_offset
        self._hw = high_watermark
        self._clock_ms = now_ms  # the latest now_ms seen, for never-caught-up deadlines
        # Kafka Partition.makeLeader: followers in the ISR start caught up at now, others never.
        self._followers: dict[int, _FollowerState] = {
            r: _FollowerState(last_caught_up_ms=now_ms if r in isr else None)
            for r in replicas
            if r != local_id
        }

    # ------------------------------------------------------------------------ plain reads

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    def effective_isr(self) -> frozenset[int]:
        """Committed ∪ pending: KIP-497's maximal ISR, the set the HW waits for."""
        return frozenset(self.isr) | frozenset(self.pending_isr or ())

    def is_in_sync(self, replica_id: int) -> bool:
        """True when `replica_id` is in the committed ISR (what the KAFKA-4313 exemption tests)."""
        return replica_id in self.isr

    def follower_log_end_offset(self, replica_id: int) -> int:
        """The LEO the follower last fetched from, -1 if it has not fetched (the leader's own LEO
        for the leader). ValueError for an id that is not a replica."""
        if replica_id == self.local_id:
            return self._leo
        return self._follower(replica_id).log_end_offset

    def replica_lag(self, replica_id: int) -> int:
        """Messages the replica is behind the leader's LEO (Kafka's per-replica lag, summed into
        SumReplicaLag); a follower that has not fetched yet counts as having nothing."""
        if replica_id == self.local_id:
            return 0
        return max(0, self._leo - max(0, self._follower(replica_id).log_end_offset))

    # ------------------------------------------------------------------------ events

    def on_leader_append(self, new_log_end_offset: int) -> bool:
        """The leader appended up to `new_log_end_offset`; True if the HW advanced
        (with a leader-only ISR it follows the LEO at once)."""
        if new_log_end_offset < self._leo:
            raise ValueError(
                f"{self.tp}: leader LEO cannot move back from {self._leo} to {new_log_end_offset}"
            )
        self._leo = new_log_end_offset
        return self.maybe_advance_hw()

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from `fetch_offset` (Kafka Replica.updateFetchStateOrThrow).

        The fetch offset is the follower's LEO. last_caught_up becomes
        * now, if fetch_offset >= the leader's LEO;
        * the previous fetch time, if fetch_offset >= the leader's LEO at that previous fetch;
        * otherwise unchanged;
        never moving back (Kafka takes the max). (now, leader LEO) is remembered for the next
        fetch, the LEO as a max like Kafka's lastFetchLeaderLogEndOffset. Then the HW may move;
        True if it advanced. Call it only for fetches `check_follower_fetch` accepted without a
        divergence: a fetch beyond the leader's LEO is a ValueError.
        """
        if replica_id == self.local_id:
            raise ValueError(f"{self.tp}: the leader {replica_id} does not fetch from itself")
        f = self._follower(replica_id)
        if not 0 <= fetch_offset <= self._leo:
            raise ValueError(
                f"{self.tp}: fetch offset {fetch_offset} of {replica_id} "
                f"outside [0, leader LEO {self._leo}]"
            )
        self._clock_ms = max(self._clock_ms, now_ms)
        caught_up_at: int | None = None
        if fetch_offset >= self._leo:
            caught_up_at = now_ms
        elif f.last_fetch_ms is not None and fetch_offset >= f.last_fetch_leader_leo:
            caught_up_at = f.last_fetch_ms
        if caught_up_at is not None and (
            f.last_caught_up_ms is None or caught_up_at > f.last_caught_up_ms
        ):
            f.last_caught_up_ms = caught_up_at
        f.log_end_offset = fetch_offset
        f.last_fetch_ms = now_ms
        f.last_fetch_leader_leo = max(f.last_fetch_leader_leo, self._leo)
        return self.maybe_advance_hw()

    def on_follower_log_start(self, replica_id: int, log_start_offset: int) -> bool:
        """A follower's fetch reported its log start offset (Replica.updateFetchStateOrThrow
        keeps it for the low watermark); True if it changed. -1 (not reported) keeps it."""
        f = self._follower(replica_id)
        if log_start_offset < 0 or log_start_offset == f.log_start_offset:
            return False
        f.log_start_offset = log_start_offset
        return True

    def low_watermark(self, leader_log_start_offset: int, alive: Container[int]) -> int:
        """Partition.lowWatermarkIfLeader: the smallest log start offset of the leader and of
        the followers on live brokers; a live follower that has not reported one counts as -1,
        so a DeleteRecords waits for it."""
        return low_watermark(
            leader_log_start_offset,
            (
                self._follower(r).log_start_offset
                for r in self.replicas
                if r != self.local_id and r in alive
            ),
        )

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the effective ISR (Kafka Partition.maybeIncrementLeaderHW with
        KIP-497's maximal ISR); a member that has not fetched (-1) holds it where it is. The HW
        never moves back. True if it advanced."""
        candidate = min(self.follower_log_end_offset(r) for r in self.effective_isr())
        if candidate > self._hw:
            self._hw = candidate
            return True
        return False

    # ------------------------------------------------------------------------ ISR changes

    def _is_caught_up(self, replica_id: int, now_ms: int, lag_max_ms: int) -> bool:
        # Kafka ReplicaState.isCaughtUp: leaderEndOffset == logEndOffset
        #   || currentTimeMs - lastCaughtUpTimeMs <= replicaMaxLagMs
        f = self._followers[replica_id]
        if f.log_end_offset == self._leo:
            return True
        return f.last_caught_up_ms is not None and now_ms - f.last_caught_up_ms <= lag_max_ms

    def shrink_proposal(self, now_ms: int, lag_max_ms: int) -> list[int] | None:
        """The ISR to propose without its out-of-sync followers, or None.

        Kafka Partition.getOutOfSyncReplicas: followers of the committed ISR that are not caught
        up, i.e. not at the leader's LEO and ``now - last_caught_up > lag_max_ms`` (exactly
        lag_max_ms behind is still in sync). None when nobody is out of sync or a proposal is in
        flight. The leader never removes itself. The result keeps the committed ISR's order.
        """
        self._clock_ms = max(self._clock_ms, now_ms)
        if self.pending_isr is not None:
            return None
        out = {
            r
            for r in self.isr
            if r != self.local_id and not self._is_caught_up(r, now_ms, lag_max_ms)
        }
        if not out:
            return None
        return [r for r in self.isr if r not in out]

    def expand_proposal(self) -> list[int] | None:
        """The ISR to propose with every follower that has caught up, or None.

        Kafka Partition.isFollowerInSync: a follower outside the ISR whose LEO >= HW and
        >= the leader-epoch start offset (it has everything the leader wrote before this epoch).
        None when nobody qualifies or a proposal is in flight. The result is the committed ISR
        followed by the newcomers in replica order.
        """
        if self.pending_isr is not None:
            return None
        new = [
            r
            for r, f in self._followers.items()
            if r not in self.isr
            and f.log_end_offset >= self._hw
            and f.log_end_offset >= self.leader_epoch_start_offset
        ]
        if not new:
            return None
        return [*self.isr, *new]

    def propose_isr(self, new_isr: Iterable[int]) -> None:
        """Mark `new_isr` as the AlterPartition proposal in flight (Kafka PendingShrinkIsr /
        PendingExpandIsr). ValueError if one is already in flight, the leader is missing, or an
        id is not a replica."""
        proposal = tuple(new_isr)
        if self.pending_isr is not None:
            raise ValueError(f"{self.tp}: proposal {self.pending_isr} already in flight")
        if self.local_id not in proposal:
            raise ValueError(f"{self.tp}: the leader {self.local_id} must stay in the ISR")
        strangers = set(proposal) - set(self.replicas)
        if strangers:
            raise ValueError(f"{self.tp}: {sorted(strangers)} are not replicas of {self.replicas}")
        self.pending_isr = proposal

    def on_alter_partition_result(
        self,
        *,
        accepted: bool,
        isr: list[int] | None = None,
        partition_epoch: int | None = None,
    ) -> bool:
        """The controller answered the proposal in flight; True if the HW advanced.

        Clears the proposal. When accepted, commits the controller's `isr` and
        `partition_epoch` (both required) -- unless that partition epoch is older than ours,
        which Kafka's handleAlterPartitionUpdate ignores ("we have a newer version"). A shrink
        committed this way can let the HW advance at once. An answer with nothing in flight is
        ignored (stale).
        """
        if self.pending_isr is None:
            return False
        if accepted and (isr is None or partition_epoch is None):
            raise ValueError(f"{self.tp}: an accepted AlterPartition needs isr and partition_epoch")
        self.pending_isr = None
        if accepted and isr is not None and partition_epoch is not None:
            if partition_epoch >= self.partition_epoch:
                if self.local_id not in isr or not set(isr) <= set(self.replicas):
                    raise ValueError(f"{self.tp}: controller ISR {isr} is not valid here")
                self.isr = tuple(isr)
                self.partition_epoch = partition_epoch
        return self.maybe_advance_hw()

    def apply_controller_state(
        self, *, replicas: list[int], isr: list[int], partition_epoch: int, now_ms: int
    ) -> bool:
        """A newer registration for this leader epoch (the controller changed the ISR itself,
        e.g. it fenced a follower, or the replica set changed): adopt it and drop any proposal
        in flight, which the controller would refuse by partition epoch anyway (Kafka's
        Partition.makeLeader on a LeaderAndIsr with the same leader epoch). Followers that are
        new get fresh state; ones that stay keep theirs. True if the HW advanced. An older or
        equal partition epoch changes nothing.
        """
        if partition_epoch <= self.partition_epoch:
            return False
        if self.local_id not in isr or not set(isr) <= set(replicas):
            raise ValueError(
                f"{self.tp}: controller ISR {isr} / replicas {replicas} not valid here"
            )
        self._followers = {
            r: self._followers.get(r)
            or _FollowerState(last_caught_up_ms=now_ms if r in isr else None)
            for r in replicas
            if r != self.local_id
        }
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.pending_isr = None
        self.partition_epoch = partition_epoch
        return self.maybe_advance_hw()

    # ------------------------------------------------------------------------ deadlines

    def next_deadline_ms(self, lag_max_ms: int) -> int | None:
        """The earliest now_ms at which `shrink_proposal(now_ms, lag_max_ms)` would drop a
        follower of the committed ISR, if nothing else happens: last_caught_up + lag_max + 1
        (the first instant with ``now - last_caught_up > lag_max``). Followers at the leader's
        LEO have no deadline; one that never caught up is due at once (the latest now_ms seen).
        None when no follower can fall out, or while a proposal is in flight (shrink_proposal
        refuses then; ask again after the answer)."""
        if self.pending_isr is not None:
            return None
        deadlines = []
        for r in self.isr:
            if r == self.local_id:
                continue
            f = self._followers[r]
            if f.log_end_offset == self._leo:
                continue
            if f.last_caught_up_ms is None:
                deadlines.append(self._clock_ms)
            else:
                deadlines.append(f.last_caught_up_ms + lag_max_ms + 1)
        return min(deadlines, default=None)

    # ------------------------------------------------------------------------ reporting

    def snapshot(self) -> dict:
        """Plain values for event logs and metrics (JSON-ready)."""
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "leader": self.local_id,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "pending_isr": None if self.pending_isr is None else list(self.pending_isr),
            "log_end_offset": self._leo,
            "high_watermark": self._hw,
            "leader_epoch_start_offset": self.leader_epoch_start_offset,
            "followers": [
                {
                    "replica": r,
                    "log_end_offset": f.log_end_offset,
                    "lag": self.replica_lag(r),
                    "last_caught_up_ms": f.last_caught_up_ms,
                    "last_fetch_ms": f.last_fetch_ms,
                    "in_sync": r in self.isr,
                }
                for r, f in self._followers.items()
            ],
        }

    def _follower(self, replica_id: int) -> _FollowerState:
        try:
            return self._followers[replica_id]
        except KeyError:
            raise ValueError(
                f"{self.tp}: {replica_id} is not a replica of {self.replicas}"
            ) from None
