"""This broker's replica of one partition: role, epochs, offsets, high watermark, ISR proposals.

Mirrors Kafka's ``kafka.cluster.Partition`` (makeLeader / makeFollower, the ISR checks,
maybeIncrementLeaderHW) together with the offsets of its ``UnifiedLog``. One machine per hosted
partition. The shell (server/replica_manager.py and the request handlers) feeds it what happened
and carries out the effects it returns (core/replica_effects.py); nothing else moves an offset.

Offsets, and the only calls that move them:

* ``log_end_offset``: what is durable. ``on_append_committed`` (the writer committed) moves it
  forward, ``on_truncated`` back.
* ``next_offset``: where the leader's next append starts. ``reserve`` hands offsets out ahead
  of the LEO while appends wait in the writer's queue, ``on_append_failed`` gives back what a
  failed write had reserved, and every role change restarts it at the LEO.
* ``high_watermark`` has one owner at a time. While leading, the leader's
  ``PartitionLeaderState`` (core/partition.py) owns it: min LEO over the effective ISR, never
  moving back. Otherwise this object owns it: the leader's HW as of the last fetch answer,
  capped by our LEO (ReplicaFetcherThread.processPartitionData); only truncation moves it back.
  It is handed over whole at every role change, never copied back and forth.
* ``epochs``: the leader-epoch cache as durable. A change is returned as ``PersistEpochs`` (or
  carried by an append) and adopted by ``on_append_committed`` once written, as Kafka's
  LeaderEpochFileCache writes its checkpoint before it is used.

LeaderAndIsr (Kafka ReplicaManager.becomeLeaderOrFollower): core/leader_and_isr.py says what a
request does to a partition. A role change takes two steps around the shell's writer
barrier: ``begin_leading`` / ``begin_following`` stop stamping and serving at once (so nothing of
the old role is queued behind the barrier), ``become_leader`` / ``become_follower`` take the new
role at the LEO once every queued append is committed.

ISR (leader only, KIP-497): a follower's fetch may propose an expansion; ``on_deadline``
proposes a shrink once a follower of the ISR has been out of sync for longer than
``replica.lag.time.max.ms`` (``next_deadline_ms`` says when). One proposal at a time, in flight
until ``on_alter_partition_result``.

``on_change`` is called whenever what the shell reports (role, epoch, LEO, HW, ISR, a follower's
lag) may have changed, and not for calls that change none (an idle fetch: nearly all of them),
so the broker's periodic tasks visit only the partitions that moved (an idle one costs nothing).

Time comes in as ``now_ms``; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence

from minikafka.common import NO_LEADER, UNDEFINED_EPOCH, EpochEntry, TopicPartition
from minikafka.core.log import (
    assign_epoch,
    epochs_after_batches,
    follower_high_watermark,
    follower_truncation_offset,
    latest_epoch,
    truncate_epochs_from_end,
)
from minikafka.core.partition import PartitionLeaderState
from minikafka.core.producer_state import ProducerBatch, ProducerStateManager
from minikafka.core.records import BatchView
from minikafka.core.replica_effects import (
    Effect,
    PersistEpochs,
    ProposeIsr,
    ReplicaEvent,
    StartFetching,
    StopFetching,
    WakeWaiters,
    adoption_events,
)
from minikafka.errors import ErrorCode
from minikafka.wire.messages import PartitionState

__all__ = ["LocalReplica"]


class LocalReplica:
    """One hosted partition replica as this broker sees it (Kafka's Partition + its log offsets)."""

    def __init__(
        self,
        *,
        tp: TopicPartition,
        local_id: int,
        lag_max_ms: int,
        log_start_offset: int,
        log_end_offset: int,
        high_watermark: int,
        epochs: Sequence[EpochEntry],
        producers: ProducerStateManager,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.tp = tp
        self._on_change = on_change  # the change notice (module docstring)
        self.local_id = local_id
        self.lag_max_ms = lag_max_ms  # replica.lag.time.max.ms
        self._log_start_offset = log_start_offset
        self._leo = log_end_offset
        self._next_offset = log_end_offset
        self._hw = high_watermark  # the HW while not leading (the leader role owns it otherwise)
        self._epochs: tuple[EpochEntry, ...] = tuple(epochs)
        # Idempotent producers (KIP-98, core/producer_state.py): changed when an append is queued
        # (a leader's check and stamp, a follower's fetched batch), undone if its write fails.
        self.producers = producers
        self._state: PartitionState | None = None  # the controller's last word on it
        self._leader: PartitionLeaderState | None = None  # while this broker leads it
        self._offline = False  # its log failed: served no more (server/offline_replicas.py)

    # ------------------------------------------------------------------------ reads

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._leader.high_watermark if self._leader is not None else self._hw

    @property
    def epochs(self) -> list[EpochEntry]:
        return list(self._epochs)  # a copy: the cache changes only through this machine

    @property
    def state(self) -> PartitionState | None:
        return self._state

    @property
    def leader(self) -> PartitionLeaderState | None:
        """The leader's bookkeeping (ISR, followers) while this broker leads; read it only:
        every change goes through this machine."""
        return self._leader

    @property
    def offline(self) -> bool:
        return self._offline

    @property
    def is_leader(self) -> bool:
        return self._leader is not None

    @property
    def leader_id(self) -> int:
        return self._state.leader if self._state is not None else NO_LEADER

    @property
    def leader_epoch(self) -> int:
        return self._state.leader_epoch if self._state is not None else UNDEFINED_EPOCH

    # ------------------------------------------------------------------------ LeaderAndIsr

    def begin_leading(self, st: PartitionState) -> list[Effect]:
        """Step one of leading `st`: stop fetching. Already leader of another epoch (a
        LeaderAndIsr skipped an intermediate leader): stop stamping now, or a produce stamped
        with the old epoch during the barrier would be queued behind it and get offsets handed
        out again by `become_leader` (Kafka holds leaderIsrUpdateLock through makeLeader)."""
        effects: list[Effect] = [StopFetching()]
        if self._leader is not None and self._leader.leader_epoch != st.leader_epoch:
            self._step_down()
            effects.append(WakeWaiters())
            self._on_change()
        return effects

    def become_leader(self, st: PartitionState, now_ms: int) -> list[Effect]:
        """Step two, every queued append committed: lead `st` from the LEO (Partition.makeLeader).
        The leader epoch starts at the LEO (LeaderEpochFileCache.assign, persisted through
        `PersistEpochs`); the HW starts at ours, capped by the LEO. The same leader epoch again
        is the controller changing the ISR or the replicas: adopted (`on_controller_state`)."""
        if self._leader is not None and self._leader.leader_epoch == st.leader_epoch:
            self._state = st
            return self._adopt(st, now_ms)
        self._state = st
        self._on_change()
        self._next_offset = self._leo
        epochs = assign_epoch(self._epochs, st.leader_epoch, self._leo)
        self._leader = PartitionLeaderState(
            tp=self.tp,
            local_id=self.local_id,
            replicas=list(st.replicas),
            isr=list(st.isr),
            leader_epoch=st.leader_epoch,
            partition_epoch=st.partition_epoch,
            leader_epoch_start_offset=self._leo,
            log_end_offset=self._leo,
            high_watermark=min(self._hw, self._leo),
            now_ms=now_ms,
        )
        self._leader.maybe_advance_hw()  # a leader-only ISR: the HW is the LEO at once
        return [
            PersistEpochs(epochs=tuple(epochs)),
            ReplicaEvent(
                name="become_leader",
                fields={
                    "leader_epoch": st.leader_epoch,
                    "isr": list(st.isr),
                    "log_end_offset": self._leo,
                },
            ),
            WakeWaiters(),
        ]

    def begin_following(self, st: PartitionState) -> list[Effect]:
        """Step one of following `st`: stop leading at once (waiting produces and fetches learn
        it). A new leader or epoch, or a former leader, also stops its fetcher and needs
        `become_follower` after the barrier (StopFetching among the effects says so)."""
        restart = (
            self._leader is not None
            or self._state is None
            or self._state.leader != st.leader
            or self._state.leader_epoch != st.leader_epoch
        )
        self._state = st
        self._step_down()
        self._on_change()
        return [StopFetching(), WakeWaiters()] if restart else [WakeWaiters()]

    def become_follower(self) -> list[Effect]:
        """Step two, every queued append of the old role committed: fetch from the leader at the
        LEO and let it report a divergence (KIP-320; Partition.makeFollower)."""
        st = self._state
        if st is None:
            raise ValueError(f"{self.tp}: become_follower without a LeaderAndIsr")
        self._next_offset = self._leo
        return [
            ReplicaEvent(
                name="become_follower",
                fields={
                    "leader": st.leader,
                    "leader_epoch": st.leader_epoch,
                    "log_end_offset": self._leo,
                },
            ),
            StartFetching(
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                fetch_offset=self._leo,
                last_fetched_epoch=latest_epoch(self._epochs),
            ),
        ]

    def on_controller_state(self, st: PartitionState, now_ms: int) -> list[Effect]:
        """UpdateMetadata: a leader adopts ISR or replica changes the controller made within its
        leader epoch (it fenced a follower; a reassignment, KIP-455). Others ignore it."""
        if self._leader is None or self._state is None:
            return []
        if self._state.leader_epoch != st.leader_epoch:
            return []
        return self._adopt(st, now_ms)

    def _adopt(self, st: PartitionState, now_ms: int) -> list[Effect]:
        assert self._leader is not None
        self._on_change()
        old_isr = sorted(self._leader.isr)
        old_replicas = list(self._leader.replicas)
        self._leader.apply_controller_state(
            replicas=list(st.replicas),
            isr=list(st.isr),
            partition_epoch=st.partition_epoch,
            now_ms=now_ms,
        )
        if self._leader.partition_epoch == st.partition_epoch:
            self._state = st  # adopted: adding_replicas (KIP-542) and the rest are current
        changed = adoption_events(
            st,
            old_replicas=old_replicas,
            replicas=list(self._leader.replicas),
            old_isr=old_isr,
            isr=sorted(self._leader.isr),
        )
        return [*changed, WakeWaiters()]

    def stop(self) -> list[Effect]:
        """StopReplica, or a LeaderAndIsr that leaves this broker out: serve and fetch no more."""
        self._step_down()
        self._state = None
        self._on_change()
        return [StopFetching(), WakeWaiters()]

    def go_offline(self) -> list[Effect]:
        """Its log failed (Kafka's HostedPartition.Offline): served no more, for good."""
        self._offline = True
        self._step_down()
        self._on_change()
        return [StopFetching(), WakeWaiters()]

    def _step_down(self) -> None:
        if self._leader is not None:
            self._hw = self._leader.high_watermark  # the HW changes owner, not value
            self._leader = None

    # ------------------------------------------------------------------------ appends

    def reserve(self, count: int) -> int:
        """The leader hands out `count` offsets for an append it queues; returns the first."""
        if self._leader is None:
            raise ValueError(f"{self.tp}: only the leader assigns offsets")
        if count < 0:
            raise ValueError(f"{self.tp}: cannot reserve {count} offsets")
        base = self._next_offset
        self._next_offset += count
        return base

    def epochs_for_append(self) -> list[EpochEntry]:
        """The epoch cache a leader's append carries: until the entry of this leader epoch is
        durable (its PersistEpochs may have failed), every append writes it."""
        assert self._leader is not None
        return assign_epoch(
            self._epochs, self._leader.leader_epoch, self._leader.leader_epoch_start_offset
        )

    def on_append_committed(
        self, *, end_offset: int | None, epochs: Sequence[EpochEntry] | None = None
    ) -> list[Effect]:
        """The writer committed: the epoch cache it carried and the batches up to `end_offset`
        are durable and visible (None: no batches). The leader's HW may follow; producers' state
        below the HW is trimmed (no rollback is ever asked below it)."""
        if epochs is not None:
            self._epochs = tuple(epochs)
        if end_offset is None:
            return []
        self._on_change()
        self._leo = max(self._leo, end_offset)
        self._next_offset = max(self._next_offset, self._leo)
        if self._leader is not None:
            self._leader.on_leader_append(self._leo)
        self.producers.trim(self.high_watermark)
        return [WakeWaiters()]

    def on_append_failed(self, base_offset: int) -> None:
        """A write from `base_offset` on failed and wrote nothing: give back the offsets reserved
        for it, or every later append would start past the log end and fail too; the producers'
        batches from there on were not written either."""
        self._next_offset = max(self._leo, min(self._next_offset, base_offset))
        self.producers.rollback(base_offset)

    # ------------------------------------------------------------------------ leader: followers

    def follower_fetch_error(self, replica_id: int) -> ErrorCode:
        """A fetch from a broker that is not a follower of this partition is refused."""
        leader = self._leader
        if leader is None or replica_id not in leader.replicas or replica_id == self.local_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> list[Effect]:
        """A follower fetched from `fetch_offset`, its LEO, reporting its log start offset
        (Partition.updateFollowerFetchState): the HW may advance, the low watermark move
        (either wakes the waiters), and the follower may be proposed back into the ISR."""
        assert self._leader is not None
        effects: list[Effect] = []
        lag = self._leader.replica_lag(replica_id)
        moved_start = self._leader.on_follower_log_start(replica_id, log_start_offset)
        if self._leader.on_follower_fetch(replica_id, fetch_offset, now_ms):
            effects.append(WakeWaiters())
            self._on_change()  # the HW advanced
        elif self._leader.replica_lag(replica_id) != lag:
            self._on_change()
        if moved_start and not effects:
            effects.append(WakeWaiters())  # a DeleteRecords waits on the low watermark
        return effects + self._propose(self._leader.expand_proposal(), "expand")

    def low_watermark(self, alive: Container[int]) -> int:
        """The leader's low watermark over the followers on `alive` brokers (KIP-107)."""
        assert self._leader is not None
        return self._leader.low_watermark(self._log_start_offset, alive)

    def next_deadline_ms(self) -> int | None:
        """When a follower of the ISR falls out of it if nothing else happens (None: never)."""
        if self._leader is None:
            return None
        return self._leader.next_deadline_ms(self.lag_max_ms)

    def on_deadline(self, now_ms: int) -> list[Effect]:
        """Kafka's maybeShrinkIsr: propose the ISR without the followers out of sync."""
        due = self.next_deadline_ms()
        if self._leader is None or due is None or due > now_ms:
            return []
        return self._propose(self._leader.shrink_proposal(now_ms, self.lag_max_ms), "shrink")

    def _propose(self, proposal: list[int] | None, why: str) -> list[Effect]:
        if proposal is None or self._leader is None:
            return []
        self._leader.propose_isr(proposal)
        self._on_change()
        return [
            ReplicaEvent(
                name="isr_change_proposed",
                fields={"why": why, "isr": sorted(self._leader.isr), "proposed": sorted(proposal)},
            ),
            ProposeIsr(isr=tuple(proposal), why=why),
        ]

    def on_alter_partition_result(
        self,
        *,
        leader_epoch: int,
        accepted: bool,
        isr: Iterable[int] = (),
        partition_epoch: int = -1,
        error_code: int = 0,
    ) -> list[Effect]:
        """The controller answered the proposal made in `leader_epoch` (ignored if we no longer
        lead in it). Accepted: the ISR is committed and the HW may advance (a shrink can let it);
        refused or lost: the proposal is dropped, and the next check proposes again."""
        leader = self._leader
        if leader is None or leader.leader_epoch != leader_epoch:
            return []
        self._on_change()
        if not accepted:
            advanced = leader.on_alter_partition_result(accepted=False)
            refused: list[Effect] = [
                ReplicaEvent(name="isr_change_rejected", fields={"error_code": int(error_code)})
            ]
            return refused + ([WakeWaiters()] if advanced else [])
        old_isr = sorted(leader.isr)
        new_isr = list(isr)
        leader.on_alter_partition_result(
            accepted=True, isr=new_isr, partition_epoch=partition_epoch
        )
        shrink = len(new_isr) < len(old_isr)
        return [
            ReplicaEvent(
                name="isr_shrink" if shrink else "isr_expand",
                fields={
                    "old_isr": old_isr,
                    "isr": sorted(new_isr),
                    "partition_epoch": partition_epoch,
                },
            ),
            WakeWaiters(),
        ]

    def on_proposal_dropped(self) -> list[Effect]:
        """The proposal never left this broker (the shell's queue was full): forget it."""
        if self._leader is None or self._leader.pending_isr is None:
            return []
        self._on_change()
        return [WakeWaiters()] if self._leader.on_alter_partition_result(accepted=False) else []

    # ------------------------------------------------------------------------ follower

    def on_leader_high_watermark(self, leader_hw: int) -> None:
        """A fetch answer carried the leader's HW: ours follows it, capped by what we have."""
        hw = max(self._hw, follower_high_watermark(leader_hw, self._leo))
        if self._leader is None and hw != self._hw:
            self._hw = hw
            self._on_change()

    def stage_fetched(
        self, batches: Sequence[BatchView], leader_high_watermark: int
    ) -> tuple[list[EpochEntry] | None, int]:
        """Fetched batches are about to be appended: the epoch cache they need (None: unchanged;
        adopted at the commit, so a failed append is retried with it) and the HW to store with
        them (the leader's, capped by their end). The producers' state follows the log without
        checks (Kafka's replication-origin ProducerAppendInfo; `on_append_failed` undoes it)."""
        epochs = epochs_after_batches(self._epochs, batches)
        for b in batches:
            if b.producer_id >= 0:
                self.producers.apply(ProducerBatch.of(b))
        end = batches[-1].next_offset if batches else self._leo
        changed = tuple(epochs) != self._epochs
        return (epochs if changed else None), follower_high_watermark(leader_high_watermark, end)

    def truncation(
        self, diverging_epoch: int, diverging_end_offset: int
    ) -> tuple[int, list[EpochEntry]]:
        """Where to truncate after the leader reported a divergence, and the epoch cache after
        it (core/log.py `follower_truncation_offset`)."""
        offset = follower_truncation_offset(
            local_epochs=self._epochs,
            local_log_end_offset=self._leo,
            diverging_epoch=diverging_epoch,
            diverging_end_offset=diverging_end_offset,
            high_watermark=self.high_watermark,
        )
        return offset, truncate_epochs_from_end(self._epochs, offset)

    def on_log_start_offset_moved(self, log_start_offset: int) -> list[Effect]:
        """The log start offset moved on disk (retention, DeleteRecords, the leader's log start
        taken by a follower): forward only, as UnifiedLog.maybeIncrementLogStartOffset moves
        it; fetches below it are out of range from now on. Waiters wake: a DeleteRecords waits
        on the low watermark, which this replica's log start is part of."""
        if log_start_offset <= self._log_start_offset:
            return []
        self._log_start_offset = log_start_offset
        self._on_change()
        return [WakeWaiters()]

    def on_truncated(
        self,
        new_log_end_offset: int,
        epochs: Sequence[EpochEntry],
        reloaded: ProducerStateManager | None = None,
    ) -> None:
        """The log was truncated to `new_log_end_offset`: the producers' state is rolled back
        in memory, or replaced by `reloaded` when it cannot go back that far
        (ProducerStateManager.truncateAndReload); the HW never exceeds the LEO."""
        self._on_change()
        self._epochs = tuple(epochs)
        self._leo = self._next_offset = new_log_end_offset
        if reloaded is not None:
            self.producers = reloaded
        else:
            self.producers.rollback(new_log_end_offset)
        self._hw = min(self._hw, new_log_end_offset)

    def on_truncated_fully(self, new_start_offset: int) -> None:
        """The log was emptied and starts again at `new_start_offset` (a follower behind the
        leader's log start: UnifiedLog.truncateFullyAndStartAt): log start, end and high
        watermark all there, no epochs, no producers' state."""
        self._on_change()
        self._log_start_offset = self._leo = self._next_offset = new_start_offset
        self._hw = new_start_offset
        self._epochs = ()
        self.producers = ProducerStateManager()
