"""The experiments that ship: each a name, a question, and one or more variants to compare.

`minikafka experiment run NAME` runs every variant of NAME in turn (each its own run folder) and
prints them side by side. The sizes are chosen so one variant takes about a minute on a 2-core
machine; `duration_s` and `seed` can be overridden for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from minikafka.errors import ConfigError
from minikafka.experiment.schedule import Fault, Target, plan_schedule
from minikafka.experiment.spec import Expectation, ExperimentSpec, Reassign

# The precise quota mode and small fetches of the system tests (systemtests/harness/runner.py
# says why): throttled rates then hold within ~1.1x of the throttle.
THROTTLE_NODE_CONFIGS = {
    "replication.quota.precise": "true",
    "replica.fetch.max.bytes": str(64 * 1024),
    "replica.fetch.response.max.bytes": str(1024 * 1024),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    name: str
    question: str
    build: Callable[[int, float | None], list[ExperimentSpec]]  # (seed, duration) -> variants


def _leader_kill(seed: int, duration: float | None) -> list[ExperimentSpec]:
    d = duration or 30.0
    faults = plan_schedule(
        kinds=("kill",), targets=[Target("leader", p) for p in range(6)],
        duration_s=d, interval_s=5.0, seed=seed, brokers=(1, 2, 3),
    )  # fmt: skip
    return [ExperimentSpec(name="leader-kill", seed=seed, duration_s=d, faults=tuple(faults))]


def _leader_kill_retrying(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # leader-kill with producers that retry as applications do (the library's Producer): a
    # retry of a batch whose first attempt was written is stored twice unless the producer is
    # idempotent (KIP-98, Kafka's default since 3.0), so the run must be valid, `duplicated`
    # empty. `--no-idempotence` runs the same schedule without it: the checker then reports
    # `duplicated` (20-80 values per 60,000 when measured), an invalid run, which
    # is why it is not a variant here (the system tests expect every variant valid).
    (base,) = _leader_kill(seed, duration)
    return [replace(base, name="leader-kill-retrying", producer_retries=True, idempotence=True)]


def _follower_pause(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Broker 3 follows every partition and leads none, so pausing it is a pure follower stall.
    # Its session outlives the pause (20 s), so the controller does not fence it: the leaders
    # must shrink the ISR themselves after replica.lag.time.max.ms (3 s) and expand it again.
    d = duration or 30.0
    assignment = tuple((1, 2, 3) if p % 2 == 0 else (2, 1, 3) for p in range(6))
    pause = Fault(kind="pause", target=Target("broker", 3), start_s=5.0, end_s=min(13.0, d))
    return [
        ExperimentSpec(
            name="follower-pause", seed=seed, duration_s=d, assignment=assignment,
            faults=(pause,), node_configs={"broker.session.timeout.ms": "20000"},
            expect=(
                Expectation(counter="isr_shrinks", op=">=", value=1,
                            why="the leaders drop the silent follower after 3 s"),
                Expectation(counter="isr_expands", op=">=", value=1,
                            why="and take it back once it caught up"),
            ),
        )
    ]  # fmt: skip


def _partitioned_leader(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # The leader of a partition is cut off from every other node, the controller included, for
    # longer than its session: the controller fences it and elects another leader, while clients
    # (which do not go through the proxy) can still reach the old one.
    d = duration or 30.0
    faults = plan_schedule(
        kinds=("partition",), targets=[Target("leader", p) for p in range(6)],
        duration_s=d, interval_s=7.0, seed=seed, brokers=(1, 2, 3),
    )  # fmt: skip
    return [
        ExperimentSpec(name="partitioned-leader", seed=seed, duration_s=d, faults=tuple(faults))
    ]


def _wiped_broker(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # KIP-1009: every replica of every broker throttled at T, in-sync replicas exempt
    # (KAFKA-4313), so only the wiped broker's catch-up is held to T while clients produce.
    # The in-sync followers' bytes are counted too but never held back; the bound is checked on
    # the rest (minikafka/experiment/node_logs.py).
    d = duration or 30.0
    t = 400_000
    # Down for 4 s, twice the session timeout: it is fenced and out of every ISR before it comes
    # back empty. (Back inside the session, an in-sync replica would hold less than the HW, a
    # lost disk the HW invariant rightly flags: Kafka's unclean-recovery case, KIP-966.)
    wipe = Fault(kind="wipe", target=Target("broker", 3), start_s=8.0, end_s=12.0)
    return [
        ExperimentSpec(
            name="wiped-broker-kip1009", seed=seed, duration_s=d, faults=(wipe,),
            node_configs=THROTTLE_NODE_CONFIGS,
            broker_configs={
                "leader.replication.throttled": "true",
                "follower.replication.throttled": "true",
                "leader.replication.throttled.rate": str(t),
                "follower.replication.throttled.rate": str(t),
            },
            throttle_bytes_per_s=t,
        )
    ]  # fmt: skip


def _reassign_leader_fails(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Broker 3's replicas move to broker 4 at 300 kB/s; at 10 s the leader of partition 0 is
    # killed mid-move and restarted 4 s later. KIP-73's lists name the replicas as they were at
    # the start; KIP-542's mode throttles whatever is being added, wherever the leader now is.
    d = duration or 30.0
    t = 300_000
    assignment = tuple(tuple((p + i) % 3 + 1 for i in range(3)) for p in range(6))
    moves = {p: tuple(4 if b == 3 else b for b in rs) for p, rs in enumerate(assignment)}
    kill = Fault(kind="kill", target=Target("leader", 0), start_s=10.0, end_s=14.0)
    return [
        ExperimentSpec(
            name=f"reassign-leader-fails-{mode}", seed=seed, duration_s=d, brokers=4,
            assignment=assignment, faults=(kill,), node_configs=THROTTLE_NODE_CONFIGS,
            reassign=Reassign(at_s=6.0, moves=moves, throttle=t, mode=mode),
            throttle_bytes_per_s=t,
        )
        for mode in ("lists", "kip542")
    ]  # fmt: skip


def _isr_thrash(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Every replica throttled (KIP-1009) below the produce rate. Without KAFKA-4313's exemption
    # the in-sync followers are throttled too, fall behind and leave the ISR; with it they keep
    # up and nothing moves. The producers use acks=1: with acks=all each producer waits for the
    # throttled followers, so the load shrinks to the throttle and nobody falls behind (measured:
    # no shrink, a third less throughput).
    d = duration or 30.0
    t = 100_000
    variants = []
    for exempt in ("false", "true"):
        expect = Expectation(
            counter="isr_shrinks", op=">=" if exempt == "false" else "==",
            value=1 if exempt == "false" else 0,
            why="throttled in-sync followers fall out" if exempt == "false" else "exempt: none",
        )  # fmt: skip
        variants.append(
            ExperimentSpec(
                name=f"isr-thrash-exempt-{'off' if exempt == 'false' else 'on'}", seed=seed,
                duration_s=d, records_per_s=2000.0, acks=1,
                node_configs={**THROTTLE_NODE_CONFIGS,
                              "replication.throttle.in.sync.exempt": exempt},
                broker_configs={
                    "leader.replication.throttled": "true",
                    "follower.replication.throttled": "true",
                    "leader.replication.throttled.rate": str(t),
                    "follower.replication.throttled.rate": str(t),
                },
                expect=(expect,),
                # Checked on the bytes the throttle could hold back: the exempt in-sync traffic
                # (counted by KAFKA-4313, here twice T by itself) is left out of the bound.
                throttle_bytes_per_s=t,
            )
        )  # fmt: skip
    return variants


def _follower_behind_retention(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Broker 3 of 3 is wiped at 8 s and back at 12 s with an empty disk, while producers write
    # 200 kB/s into each of 6 partitions and every log keeps about retention.bytes (2 MiB) in
    # 1 MiB segments, checked every 500 ms: each leader's log start moves about once per 5 s. A
    # follower-only throttle (KIP-1009) holds broker 3's catch-up to 600 kB/s, half the inbound
    # rate: it starts at each leader's log start (the data below it is gone), falls behind it
    # again as retention moves it, and gets OFFSET_OUT_OF_RANGE and starts over each time
    # (AbstractFetcherThread.fetchOffsetAndTruncate). Producers stop at 24 s and the throttle is
    # lifted at 30 s, as an operator would: it then catches up, and everything acknowledged that
    # retention kept is read back and checked; what retention took counts as `deleted`.
    d = duration or 30.0
    t = 600_000
    wipe = Fault(kind="wipe", target=Target("broker", 3), start_s=8.0, end_s=12.0)
    out_of_range = Expectation(
        counter="fetch_offset_out_of_range", op=">=", value=1,
        why="the throttled follower falls behind the leaders' log start and starts over",
    )  # fmt: skip
    return [
        ExperimentSpec(
            name="follower-behind-retention", seed=seed, duration_s=d, faults=(wipe,),
            records_per_s=1200.0, record_bytes=1000, produce_s=d * 0.8,
            node_configs={
                **THROTTLE_NODE_CONFIGS,
                "log.segment.bytes": str(1 << 20),
                "log.retention.bytes": str(2 << 20),
                "log.retention.check.interval.ms": "500",
            },
            broker_configs={
                "follower.replication.throttled": "true",
                "follower.replication.throttled.rate": str(t),
            },
            lift_broker_configs=True,
            expect=(out_of_range,),
        )
    ]  # fmt: skip


def _compaction(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # A compacted topic (cleanup.policy=compact, set as the node default log.cleanup.policy),
    # 3 partitions on 3 brokers, r = 3, every record keyed by its value (47 keys,
    # experiment/workload.py): each key is rewritten many times a second. 47, not 50: a batch
    # holds 10 consecutive values, so with 50 keys every batch would be superseded whole or
    # not at all; with a prime number of keys the last record of a key often shares its batch
    # with superseded ones, and passes rewrite batches with gaps inside (and at their end). Segments roll every
    # second of record time (log.roll.ms: Kafka never cleans the active segment), any dirty
    # share is worth a pass (min.cleanable.dirty.ratio 0.01) and every broker's cleaner looks
    # for work every 500 ms (Kafka: 15 s), leader and followers alike, each on its own log. The
    # leader of partition 0 is SIGKILLed at 30% of the run and restarted at 50%. Producers stop
    # at 80%: the quiet end, the settle and the consumers' catch-up are several backoffs, so
    # every log is cleaned up to its active segment before the final read. The checker
    # (checker/compaction.py) then holds the run to compaction's promises: values removed are
    # `compacted` (superseded by a later record of their key), never lost; the latest value
    # of every key survives; below the final read leader's reported first dirty offset no key
    # appears twice; and the replicas, brought to one clean point, hold the same records.
    d = duration or 25.0
    kill = Fault(kind="kill", target=Target("leader", 0), start_s=round(d * 0.3, 1),
                 end_s=round(d * 0.5, 1))  # fmt: skip
    return [
        ExperimentSpec(
            name="compaction", seed=seed, duration_s=d, partitions=3, faults=(kill,), keys=47,
            produce_s=d * 0.8,
            node_configs={
                "log.cleanup.policy": "compact",
                "log.roll.ms": "1000",
                "log.cleaner.min.cleanable.ratio": "0.01",
                "log.cleaner.backoff.ms": "500",
            },
            expect=(
                Expectation(counter="log_cleaner_passes", op=">=", value=1,
                            why="the brokers' cleaners made passes"),
                Expectation(counter="log_cleaner_records_removed", op=">=", value=1,
                            why="and removed superseded records"),
                Expectation(figure="compaction.values_compacted", op=">=", value=1,
                            why="acknowledged values gone from the final read, each superseded"),
            ),
        )
    ]  # fmt: skip


def _partition_order(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Broker 3 of 3 is wiped at 10 s and back at 14 s with an empty disk: it re-replicates all
    # 24 partitions (r = 3) from the two others while clients go on producing, held to T by a
    # follower throttle on every not-caught-up replica (KIP-1009; in-sync ones are exempt, so
    # only broker 3's catch-up is throttled). Kafka's own quota mode (not the precise one) and
    # a response cap of two partitions' worth (64 KiB, 32 KiB per partition) make the request
    # order decide which partitions a response carries (KIP-74). Per partition, the catch-up
    # time is how long after its return broker 3 rejoined that partition's ISR.
    d = duration or 30.0
    t = 500_000
    wipe = Fault(kind="wipe", target=Target("broker", 3), start_s=10.0, end_s=14.0)
    return [
        ExperimentSpec(
            name=f"partition-order-{order}", seed=seed, duration_s=d, partitions=24,
            faults=(wipe,), catch_up_broker=3, throttle_bytes_per_s=t,
            node_configs={
                # The order of full fetches, as KIP-73 and Kafka's fetcher define it: sessionless
                # (with KIP-227 sessions the leader picks the order of partitions with news).
                "replica.fetch.session.enable": "false",
                "replica.fetch.partition.order": order,
                "replica.fetch.max.bytes": str(32 * 1024),
                "replica.fetch.response.max.bytes": str(64 * 1024),
            },
            broker_configs={
                "follower.replication.throttled": "true",
                "follower.replication.throttled.rate": str(t),
            },
        )
        for order in ("random", "rotate")
    ]  # fmt: skip


def _throttle_of_one(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # The seed article's "set the throttle to 1: will the reassignment never complete? Not
    # exactly", in its own setup: every partition led by broker 1 with one replica (no follower
    # fetches from broker 1 before the move, so its leader sensor is fresh when the move
    # starts), all moved to broker 2 under a throttle of 1 B/s on one side only (KIP-1009's
    # broker-wide flags: every replica of every broker on that side). Kafka's own quota mode,
    # which charges the leader the Kafka wire size of a Fetch response of the throttled
    # partitions, 37 B per partition even when empty (core/quota/charge.py, KafkaApis
    # sizeOfThrottledPartitions), and the follower the record bytes alone
    # (ReplicaFetcherThread). Both sides let the fresh sensor's first response through; then:
    # - leader: every fetch of broker 2, throttled and empty, still costs its headers, 37 B per
    #   partition still moving (18.5 kB for all 500), about twice a second at
    #   replica.fetch.wait.max.ms = 500, so the leader's rate never falls to 1 B/s again and no
    #   record byte moves after that response (the partitions it completed join the ISR);
    # - follower: broker 2 counts record bytes only; with nothing fetched its sensor's samples
    #   expire after replication.quota.window.num x 1 s = 11 s, the rate reads 0 and one more
    #   response goes through (+ up to a replica.fetch.backoff.ms of 1 s): the move creeps on,
    #   a response every ~11-12 s, and completes.
    # The producers fill the partitions for 3 s and stop: the move runs on a quiet cluster, as
    # in the article (new records would count in both quotas and stall either side: the
    # article's "consider the daily traffic of the replica"). At the end of the load the
    # throttle is lifted like a fault, so the stalled move completes and every record is read
    # back and checked; the expectations are measured up to the lift.
    d = duration or 34.0
    partitions = 500
    moves = {p: (2,) for p in range(partitions)}
    variants = []
    for side in ("leader", "follower"):
        if side == "leader":
            expect = (
                Expectation(figure="move.completed", op="==", value=0,
                            why="the leader's headers keep its rate above 1 B/s for good"),
                Expectation(figure="move.copy_steps", op="==", value=1,
                            why="the fresh sensor's first response, then nothing"),
                Expectation(figure="move.leader_record_bytes_after_first_copy", op="==", value=0,
                            why="after it, the leader is charged headers only"),
                Expectation(figure="move.leader_overhead_bytes_per_s", op=">", value=1,
                            why="and the headers alone are above the 1 B/s throttle"),
            )  # fmt: skip
        else:
            expect = (
                Expectation(figure="move.completed", op="==", value=1,
                            why="not exactly never: the follower's sensor forgets"),
                Expectation(figure="move.copy_steps", op=">=", value=2,
                            why="one response, then more after the quota's span"),
                Expectation(figure="move.copy_gap_min_s", op=">=", value=10,
                            why="a response only once the 11 s of samples expired"),
                Expectation(figure="move.copy_gap_max_s", op="<=", value=13,
                            why="then at once (one 1 s backoff, 0.5 s metrics samples)"),
            )  # fmt: skip
        variants.append(
            ExperimentSpec(
                name=f"throttle-of-one-{side}", seed=seed, duration_s=d, brokers=2,
                partitions=partitions, replication_factor=1,
                assignment=tuple((1,) for _ in range(partitions)),
                # ~300 B in each partition, ~150 kB: between two and three responses.
                producers=4, records_per_s=400.0, batch_records=2, produce_s=3.0,
                # The final read checks every record; live consumers polling 500 partitions
                # would only load the 2-core machine while the timing is measured.
                consumers=0,
                node_configs={
                    "replication.quota.precise": "false",  # Kafka's mode (the default), said
                    # Kafka's timing: a long poll of 500 ms (two empty fetches a second, the
                    # article's "18k ... about 36k per second") and a 1 s backoff when every
                    # partition is throttled (AbstractFetcherThread).
                    "replica.fetch.wait.max.ms": "500",
                    "replica.fetch.backoff.ms": "1000",
                    # Responses of 64 KiB (Kafka: 10 MiB) so that ~150 kB take several: the
                    # creep shows as steps, with little to produce on a 2-core machine.
                    "replica.fetch.response.max.bytes": str(64 * 1024),
                    "min.insync.replicas": "1",  # one replica, as in the article's test
                },
                broker_configs={
                    f"{side}.replication.throttled": "true",
                    f"{side}.replication.throttled.rate": "1",
                },
                lift_broker_configs=True,
                reassign=Reassign(at_s=4.0, moves=moves, throttle=None),
                # Not a bound test: Kafka's quota admits a whole response whenever the measured
                # rate is under T, so a 64 KiB response against 1 B/s is thousands of times T
                # over any window, by design; the expectations check the behaviour instead.
                throttle_bytes_per_s=None,
                expect=expect,
            )
        )  # fmt: skip
    return variants


def _mixed_faults(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # The soak's run (systemtests/test_soak.py): every 3 s the seed picks a kill, a pause or a
    # network partition of a partition's leader, a follower, a random broker or the controller,
    # for 3 s, then quiet for 3 s. acks=all, producers that retry as applications do, and
    # idempotent (KIP-98): nothing acknowledged may be lost, nothing stored twice, whatever
    # the mix.
    d = duration or 24.0
    targets = [
        *(Target("leader", p) for p in range(6)),
        *(Target("follower", p) for p in range(6)),
        Target("random"),
        Target("controller"),
    ]
    faults = plan_schedule(
        kinds=("kill", "pause", "partition"), targets=targets, duration_s=d, interval_s=3.0,
        seed=seed, brokers=(1, 2, 3),
    )  # fmt: skip
    spec = ExperimentSpec(
        name="mixed-faults", seed=seed, duration_s=d, faults=tuple(faults), fault_proxy=True
    )
    return [replace(spec, producer_retries=True, idempotence=True)]


def _power_loss(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Kafka's flush policy (log.flush.interval.* unset: no fsync; durability comes from
    # replication), as log.sync=false: a broker whose machine loses power comes back with its
    # log as of the kernel's last writeback (sim/cluster.py). With acks=all and
    # min.insync.replicas=2, every acknowledged write is on two replicas, and one machine fails
    # at a time, so nothing acknowledged may be lost: the broker that lost its tail must truncate
    # and catch up before it counts as in sync again. Simulated time only.
    d = duration or 30.0
    targets = [*(Target("leader", p) for p in range(6)), *(Target("follower", p) for p in range(6))]
    faults = plan_schedule(
        kinds=("power-loss",), targets=targets, duration_s=d, interval_s=4.0, seed=seed,
        brokers=(1, 2, 3),
    )  # fmt: skip
    spec = ExperimentSpec(
        name="power-loss", seed=seed, duration_s=d, faults=tuple(faults),
        node_configs={"log.sync": "false", "min.insync.replicas": "2"},
    )  # fmt: skip
    return [replace(spec, producer_retries=True, idempotence=True)]


def _disk_full(seed: int, duration: float | None) -> list[ExperimentSpec]:
    # Every 4 s the disk of a partition's leader fills for 4 s (each write its log store
    # attempts fails with ENOSPC), or one write fails with EIO: the replicas it could not write
    # go offline and their leadership moves (Kafka's log-dir failure handling,
    # server/offline_replicas.py); then the space is freed and the broker restarted, as an
    # operator brings a failed log dir back. acks=all,
    # producers retry, idempotent: nothing acknowledged may be lost. Simulated time only.
    d = duration or 30.0
    faults = plan_schedule(
        kinds=("disk-full", "failed-write"), targets=[Target("leader", p) for p in range(6)],
        duration_s=d,
        interval_s=4.0, seed=seed, brokers=(1, 2, 3),
    )  # fmt: skip
    spec = ExperimentSpec(name="disk-full", seed=seed, duration_s=d, faults=tuple(faults))
    return [replace(spec, producer_retries=True, idempotence=True)]


CATALOG: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry(name="leader-kill", question="Does acks=all lose anything when leaders are SIGKILLed under load?", build=_leader_kill),
        Entry(name="leader-kill-retrying", question="Does a retrying producer store anything twice when leaders are SIGKILLed under load? (idempotent, KIP-98; --no-idempotence for without)", build=_leader_kill_retrying),
        Entry(name="follower-pause", question="Is a follower paused past replica.lag.time.max.ms dropped from the ISR and taken back?", build=_follower_pause),
        Entry(name="partitioned-leader", question="Is a leader cut off from the cluster fenced without losing acknowledged writes?", build=_partitioned_leader),
        Entry(name="wiped-broker-kip1009", question="Does a wiped broker re-replicate within a KIP-1009 broker-wide throttle while clients produce?", build=_wiped_broker),
        Entry(name="reassign-leader-fails", question="What happens to a throttled move whose leader fails mid-move: KIP-73 lists versus KIP-542?", build=_reassign_leader_fails),
        Entry(name="isr-thrash", question="Does throttling in-sync replicas make the ISR thrash, and does KAFKA-4313's exemption stop it?", build=_isr_thrash),
        Entry(name="follower-behind-retention", question="What does a throttled follower re-replicating slower than retention do, how much does it copy again, and is anything acknowledged and still retained lost?", build=_follower_behind_retention),
        Entry(name="compaction", question="Does log compaction (cleanup.policy=compact) keep the latest value of every key and drop only superseded ones, with a leader killed mid-run, and do the replicas, each cleaning its own log, agree?", build=_compaction),
        Entry(name="partition-order", question="How spread out are the per-partition catch-up times of a throttled re-replication under KIP-73's shuffled fetch order versus Kafka's rotation?", build=_partition_order),
        Entry(name="mixed-faults", question="Under a seeded mix of kills, pauses and network partitions of leaders, followers and the controller, is anything acknowledged lost or stored twice?", build=_mixed_faults),
        Entry(name="power-loss", question="Without fsync (Kafka's flush policy), does a broker whose machine loses power lose anything acknowledged with acks=all and min.insync.replicas=2? (simulated time only)", build=_power_loss),
        Entry(name="disk-full", question="When a leader's disk fills (ENOSPC) or a write fails (EIO), do its replicas go offline, leadership move, and nothing acknowledged get lost? (simulated time only)", build=_disk_full),
        Entry(name="throttle-of-one", question="Does a move under a throttle of 1 B/s ever finish, with the throttle on the leader side versus the follower side?", build=_throttle_of_one),
    )
}  # fmt: skip


def variants(name: str, *, seed: int, duration_s: float | None = None) -> list[ExperimentSpec]:
    entry = CATALOG.get(name)
    if entry is None:
        raise ConfigError(f"no experiment {name!r}; known: {', '.join(CATALOG)}")
    return [
        s if s.description else replace(s, description=entry.question)
        for s in entry.build(seed, duration_s)
    ]


def with_overrides(spec: ExperimentSpec, **changes: object) -> ExperimentSpec:
    """The spec with the given fields replaced (None values are ignored)."""
    return replace(spec, **{k: v for k, v in changes.items() if v is not None})
