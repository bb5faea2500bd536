"""Kafka's own quota algorithm on a move, simulated: the third prediction of
tools/reassign/model.py, for clusters that run it (`replication.quota.precise=false`), pure.

`kafka_prediction`: what Kafka's own quota does with the traffic of `MovingPartition`s,
simulated event by event with Kafka's SimpleRate and quota check (tools/reassign/kafka_rate.py,
written from Kafka's Java and tested on Kafka's own test numbers: not the brokers' core/quota/stats.py,
so a bug there cannot move the prediction with the run it judges): a throttle is
checked against the rate measured so far and charged after the response, so a response goes out
whole (up to `replica.fetch.response.max.bytes`) whenever the quota is not exceeded at the
check; a fresh sensor counts its first window as full, so the first responses are free; a leader
serving two destinations lets both their responses through before it records either; the leader
charges the Kafka wire size of the throttled partitions of every response, headers included
(tools/reassign/fetch_size.py, checked against kio's bytes, not the brokers'
core/quota/charge.py); the follower records the record bytes of every partition in its
throttled set, caught up or not (ReplicaFetcherThread.processPartitionData; in lists mode a
destination stays listed until the move ends, in KIP-542 it stays adding until its
partition's move completes); and checks happen only when a fetch is built or answered: a follower
whose quota is exceeded and has nothing else to fetch backs off `replica.fetch.backoff.ms`, a
leader whose quota is exceeded answers an idle follower after `replica.fetch.wait.max.ms`
(throttled bytes never complete a delayed fetch), but looks again at every write when the
partitions are being written to. The simulation returns the move time and, per sensor, the
largest rate over a window of the quota's span, to compare with `overshoot_bound`.

`step_alternatives`: the algorithm has steps. Whether one more whole response passes a check can
turn on a per cent of the bytes charged before it, finer than a simulation matches a real run,
and the move then ends a round of responses (or a wait for one to leave the quota's window)
earlier or later. So the move is simulated again with every charge `CHARGE_ERROR` and half of it
lighter and heavier, and a time outside the accepted band of the simulated one is what the
move may take instead. `reassign plan` shows these times, and the system tests accept a move
that fits one of them (systemtests/harness/quota_modes.py says why a run's own charges cannot
tell which side it will take).

Rates are bytes per second, sizes bytes, times seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from random import Random

from minikafka.server.config import NodeConfig
from minikafka.tools.reassign.fetch_size import EMPTY_RESPONSE_BYTES, fetch_response_v12_size
from minikafka.tools.reassign.kafka_rate import QuotaSensor, RateConfig
from minikafka.tools.reassign.model import VALUE, MovingPartition, check_mode

# How far the simulation's charges may be from a run's (`step_alternatives`): measured, KIP-73
# system-test moves without a step ran 0.96-1.10 x the simulation
# (systemtests/harness/quota_modes.py).
CHARGE_ERROR = 0.05
SIDES = ("leader", "follower")


@dataclass(**VALUE)
class KafkaSettings:
    """The node configs the simulation needs (Kafka's defaults), and two physical figures of
    the machine: how fast a response travels and is appended, and a fetch's round trip."""

    response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    wait_max_s: float = 0.5  # replica.fetch.wait.max.ms
    backoff_s: float = 1.0  # replica.fetch.backoff.ms
    window_num: int = 11  # replication.quota.window.num
    window_s: float = 1.0  # replication.quota.window.size.seconds
    transfer_bytes_per_s: float = 150e6
    round_trip_s: float = 0.005
    write_interval_s: float = 0.1  # under load, how often the producers write (a re-check)
    time_limit_s: float = 3600.0

    @property
    def span_s(self) -> float:
        """The quota's span: N windows plus the current one (SimpleRate keeps N + 1 samples)."""
        return (self.window_num + 1) * self.window_s


KAFKA_DEFAULTS = KafkaSettings()


def settings_from_configs(node_configs: Mapping[str, str]) -> KafkaSettings:
    """The simulation's settings from a cluster's node configs (Kafka's defaults for the rest),
    for `reassign plan` and the system tests alike."""
    c = NodeConfig(node_id=0).with_settings(node_configs)
    return KafkaSettings(
        response_max_bytes=c.replica_fetch_response_max_bytes,
        partition_max_bytes=c.replica_fetch_max_bytes,
        wait_max_s=c.replica_fetch_wait_max_ms / 1000,
        backoff_s=c.replica_fetch_backoff_ms / 1000,
        window_num=c.replication_quota_window_num,
        window_s=c.replication_quota_window_size_seconds,
    )


@dataclass(**VALUE)
class KafkaPrediction:
    seconds: float | None  # None: not done within the time limit
    responses: int
    # Per sensor (broker, side): the bytes it was charged over time, [(second, bytes)].
    charged: dict[tuple[int, str], list[tuple[float, int]]] = field(default_factory=dict)

    def max_window_rate(self, sensor: tuple[int, str], span_s: float) -> float | None:
        """The largest rate over any window of `span_s` inside the move (sliding by events)."""
        events = self.charged.get(sensor, [])
        if not events or self.seconds is None or self.seconds < span_s:
            return None
        best, total, j = 0.0, 0, 0
        for i, (t, _n) in enumerate(events):
            while j < len(events) and events[j][0] < t + span_s:
                total += events[j][1]
                j += 1
            best = max(best, total / span_s)
            total -= events[i][1]
        return best


def overshoot_bound(*, throttle: float, fetchers: int, settings: KafkaSettings) -> float:
    """The largest rate over a window of the quota's span S that Kafka's algorithm allows one
    sensor shared by `fetchers` fetchers (R = replica.fetch.response.max.bytes, W the window):

        T + (2 * fetchers * R + 2 * T * W) / S

    A check admits while the measured rate is at or under T, and a response is charged after
    it is built, so at a check each fetcher can have one response of up to R admitted before any
    of them is charged (two destinations: two responses before the first is recorded). The
    sensor's own window ends at the check; a window of ours that starts a little earlier also
    holds the sample the sensor forgot when it expired, which held at most one such round plus
    a window's worth (T * W). And a fresh sensor counts its first window as full. Measured on
    the simulation (tests/tools/test_reassign_model.py): a leader serving two destinations at 8 MB/s
    with 10 MiB responses reaches 10.5 MB/s over 12 s, under this bound of 12.8 MB/s."""
    burst = 2 * fetchers * settings.response_max_bytes + 2 * throttle * settings.window_s
    return throttle + burst / settings.span_s


def sensor_fetchers(partitions: Iterable[MovingPartition], mode: str) -> dict[tuple[int, str], int]:
    """How many replica fetchers can pass one throttled sensor's check at once, per sensor
    (broker, side), the `fetchers` of `overshoot_bound`: a leader side is checked by every
    follower whose fetch holds a partition it charges (in lists mode every other replica of a
    listed partition, in-sync ones included; in KIP-542 mode the adding ones), a follower side
    by its fetcher to each leader it copies from."""
    check_mode(mode)
    fetching: dict[tuple[int, str], set[int]] = {}
    for m in partitions:
        if not m.destinations:
            continue
        charged = m.destinations if mode == "kip542" else m.replicas
        fetching.setdefault((m.leader, "leader"), set()).update(b for b in charged if b != m.leader)
        for d in m.destinations:
            fetching.setdefault((d, "follower"), set()).add(m.leader)
    return {key: len(peers) for key, peers in sorted(fetching.items())}


def aged_sensors(
    partitions: Iterable[MovingPartition], mode: str, age_s: float
) -> dict[tuple[int, str], float]:
    """The sensors that have been recording for `age_s` before the move: in lists mode the
    leaders' replication sensors (Kafka's leader charges every follower response to it,
    throttled partitions or none); nothing in KIP-542 mode, whose class records only
    reassignment traffic (`kafka_prediction`'s `sensor_age_s`)."""
    check_mode(mode)
    if mode != "lists":
        return {}
    return {(m.leader, "leader"): age_s for m in partitions if m.destinations}


@dataclass(slots=True)
class _Fetcher:
    """One replica fetcher (destination broker <- leader broker) in the simulation: the
    partitions it copies, each with its backlog, and those it follows in sync."""

    follower: int
    leader: int
    copying: list[MovingPartition]  # out of sync until caught up, in fetch order
    in_sync: list[MovingPartition]
    backlog: dict[int, float] = field(default_factory=dict)  # id(partition) -> bytes behind
    done_at: float | None = None
    in_sync_rate: float = 0.0  # inbound bytes/s of the partitions it follows in sync
    led_in_sync: list[MovingPartition] = field(default_factory=list)  # in its leader's list
    # Lists mode: partitions it copied whose move completed and whose leadership left this
    # fetcher's leader; the follower still fetches them (from the new leader) and, still in
    # its follower list until the throttle is removed, still charges them.
    listed_done: list[MovingPartition] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.backlog = {id(m): float(m.size_bytes) for m in self.copying}
        self.update()

    def update(self) -> None:
        self.in_sync_rate = sum(m.inbound_bytes_per_s for m in self.in_sync)
        self.led_in_sync = [m for m in self.in_sync if self.leader in m.sources]


def kafka_prediction(
    partitions: Sequence[MovingPartition],
    *,
    throttle: float,
    mode: str,
    settings: KafkaSettings = KAFKA_DEFAULTS,
    load: bool | None = None,
    sides: Collection[str] = SIDES,
    seed: int = 0,
    sensor_age_s: Mapping[tuple[int, str], float] | None = None,
) -> KafkaPrediction:
    """Simulate the move under Kafka's quota algorithm (module docstring, point 3).

    Throttle sets as `reassign --execute` makes them: in `lists` mode every source of a
    partition is in its leader list and every destination in its follower list; in `kip542`
    mode only adding replicas are throttled. `sides`: the sides with a rate (both, as the
    reassign tool sets them). `load`: whether the partitions are being written to (default: any
    inbound rate), which decides how often a throttled leader looks again.

    Events run in time order: a fetch (checks, then a response scheduled after its round trip
    and transfer) and a charge (a response recorded into a sensor when it is answered), so a
    check never sees a charge from its future. A response fills up to
    `replica.fetch.max.bytes` per partition, partitions in a shuffled order (`seed`; KIP-73's
    random order, minikafka's default), until `replica.fetch.response.max.bytes`, so
    partitions catch up one by one. A partition whose destinations have all caught up
    completes its move: if its leader changes then (`final_leader`), the old leader stops
    serving and charging it, and its new leader's traffic is no longer part of the move.

    `sensor_age_s`: per sensor (broker, side), how long it has been recording before the move
    (absent: created by the move). SimpleRate divides by the time since its oldest sample, at
    least one window, so an old sensor that held little admits more at the start than a fresh
    one: up to T x its age (at most the quota's span) before it reads "exceeded". Kafka's
    leader records every follower response (16 B when nothing is throttled) from the broker's
    start, so its replication sensor is as old as the span (`aged_sensors`); the follower's
    sensors and the reassignment class record only throttled bytes, so they start fresh."""
    check_mode(mode)
    if load is None:
        load = any(m.inbound_bytes_per_s > 0 for m in partitions)
    shuffle = Random(seed).shuffle
    fetchers = _fetchers(partitions)
    config = RateConfig(
        samples=settings.window_num, window_ms=round(settings.window_s * 1000), quota=throttle
    )
    sensors: dict[tuple[int, str], QuotaSensor] = {}
    charged: dict[tuple[int, str], list[tuple[float, int]]] = {}
    for f in fetchers:
        for key in ((f.leader, "leader"), (f.follower, "follower")):
            if key[1] in sides and key not in sensors:
                sensors[key] = QuotaSensor(config)
                charged[key] = []

    ages = {k: min(a, settings.span_s) for k, a in (sensor_age_s or {}).items() if k in sensors}
    origin = max(ages.values(), default=0.0)  # sensor time = simulation time + origin

    def ms(t: float) -> int:
        return round((t + origin) * 1000)

    def exceeded(key: tuple[int, str], t: float) -> bool:
        return key in sensors and sensors[key].quota_exceeded(ms(t))

    # The empty responses it charged before the move, one per follower response: at each write
    # under load, at the end of each long poll when idle. How often matters: a sample is kept
    # until its LAST event is N windows old, so the time the rate divides by reaches N + 1
    # windows only when samples hold events to their end.
    step = settings.write_interval_s if load else settings.wait_max_s
    for key, age in ages.items():
        for n in range(int(age / step)):
            sensors[key].record(EMPTY_RESPONSE_BYTES, ms(n * step - age))

    copying = {id(m): set(m.destinations) for m in partitions}  # destinations not caught up

    def caught_up(f: _Fetcher, m: MovingPartition, t: float) -> None:
        f.copying.remove(m)
        del f.backlog[id(m)]
        waiting = copying[id(m)]
        waiting.discard(f.follower)
        moves_away = m.final_leader is not None and m.final_leader != m.leader
        if waiting or not moves_away:
            f.in_sync.append(m)
        else:  # the move completes and leadership leaves: its old leader forgets it
            for g in fetchers:
                if g.leader == m.leader and (m in g.in_sync or g is f):
                    if m in g.in_sync:
                        g.in_sync.remove(m)
                    listed = g.follower in m.destinations and g.follower != m.final_leader
                    if mode == "lists" and listed:
                        g.listed_done.append(m)
                    g.update()
        f.update()
        if not f.copying:
            f.done_at = t

    for f in fetchers:
        for m in [m for m in f.copying if m.size_bytes <= 0]:
            caught_up(f, m, 0.0)
        if not f.copying:
            f.done_at = 0.0  # it only follows partitions in sync
    # (time, order, fetcher index or -1 for a charge, sensor, bytes)
    queue: list[tuple[float, int, int, tuple[int, str], int]] = [
        (0.0, k, k, (0, ""), 0) for k in range(len(fetchers))
    ]
    order = len(queue)
    last = {k: 0.0 for k in range(len(fetchers))}
    responses = 0

    def later(t: float, k: int, key: tuple[int, str] = (0, ""), nbytes: int = 0) -> None:
        nonlocal order
        order += 1
        heapq.heappush(queue, (t, order, k, key, nbytes))

    while queue and any(f.done_at is None for f in fetchers):
        t, _order, k, key, nbytes = heapq.heappop(queue)
        if t > settings.time_limit_s:
            return KafkaPrediction(seconds=None, responses=responses, charged=charged)
        if k < 0:  # a response is charged when it is answered
            sensors[key].record(nbytes, ms(t))
            charged[key].append((t, nbytes))
            continue
        f = fetchers[k]
        lead_key, fol_key = (f.leader, "leader"), (f.follower, "follower")
        # The follower builds its fetch: its throttled partitions out, if its quota is exceeded.
        asks_copying = bool(f.copying) and not exceeded(fol_key, t)
        if not asks_copying and not f.in_sync and not f.listed_done:
            later(t + settings.backoff_s, k)  # nothing to fetch: back off
            continue
        sends = asks_copying and not exceeded(lead_key, t)
        if not sends:
            # Nothing it may copy now: a long poll, answered at the next write (the producers
            # write every `write_interval_s`), when the leader also looks at its quota again,
            # or when replica.fetch.wait.max.ms ends (idle).
            if load:
                t = (int(t / settings.write_interval_s) + 1) * settings.write_interval_s
            else:
                t += settings.wait_max_s
            sends = asks_copying and not exceeded(lead_key, t)
        dt, last[k] = t - last[k], t
        for m in f.copying:
            f.backlog[id(m)] += m.inbound_bytes_per_s * dt
        in_sync_bytes = f.in_sync_rate * dt
        taken: dict[int, float] = {}
        if sends:
            room = float(settings.response_max_bytes)
            shuffle(f.copying)
            for m in f.copying:
                take = min(f.backlog[id(m)], settings.partition_max_bytes, room)
                taken[id(m)] = take
                room -= take
                if room <= 0:
                    break
        copied = sum(taken.values())
        carried = copied + in_sync_bytes
        t_answer = t + settings.round_trip_s + carried / settings.transfer_bytes_per_s
        responses += 1
        charge = _leader_charge(f, mode, copying, taken if asks_copying else None, dt)
        if charge is not None and lead_key in sensors:
            later(t_answer, -1, lead_key, charge)
        recorded = int(copied + _follower_rate(f, mode, copying) * dt)
        if recorded and fol_key in sensors:
            later(t_answer, -1, fol_key, recorded)  # the follower records record bytes only
        for m in list(f.copying):
            f.backlog[id(m)] -= taken.get(id(m), 0.0)
            if f.backlog[id(m)] <= m.inbound_bytes_per_s * settings.round_trip_s:
                caught_up(f, m, t_answer)  # in sync from now on, still charged as such
        later(t_answer, k)
    done = [f.done_at for f in fetchers if f.done_at is not None]
    return KafkaPrediction(seconds=max(done, default=0.0), responses=responses, charged=charged)


def _fetchers(partitions: Sequence[MovingPartition]) -> list[_Fetcher]:
    """One fetcher per (follower, leader) pair: what it copies and what it follows in sync."""
    by_pair: dict[tuple[int, int], tuple[list[MovingPartition], list[MovingPartition]]] = {}
    for m in partitions:
        for b in m.replicas:
            if b == m.leader:
                continue
            pair = by_pair.setdefault((b, m.leader), ([], []))
            pair[0 if b in m.destinations else 1].append(m)
    return [_Fetcher(b, leader, c, s) for (b, leader), (c, s) in sorted(by_pair.items())]


def _leader_charge(
    f: _Fetcher,
    mode: str,
    copying: Mapping[int, set[int]],
    taken: dict[int, float] | None,
    dt: float,
) -> int | None:
    """The Kafka size of the partitions of this response the leader charges (copying ones first,
    each with the bytes `taken` from it, 0 if none; None: the fetch left them out); None when it
    charges none. Lists mode lists every source, so every partition of the fetch; KIP-542
    charges the partitions sent to an adding replica, and a caught-up one stays adding until
    its partition's whole move completes (`copying`: its destinations not caught up)."""
    copying_now = f.copying if taken is not None else []
    if mode == "lists":
        in_sync = f.led_in_sync
    else:
        in_sync = [m for m in f.in_sync if f.follower in m.destinations and copying[id(m)]]
    if not copying_now and not in_sync:
        return None
    parts = []
    if taken is not None:
        parts = [(m.topic, int(taken.get(id(m), 0.0))) for m in copying_now]
    parts += [(m.topic, int(m.inbound_bytes_per_s * dt)) for m in in_sync]
    return fetch_response_v12_size(
        (topic, size, len(list(alike))) for (topic, size), alike in groupby(parts)
    )


def _follower_rate(f: _Fetcher, mode: str, copying: Mapping[int, set[int]]) -> float:
    """The inbound bytes/s of the caught-up partitions this follower still charges: Kafka's
    follower records the record bytes of every partition in its throttled set
    (ReplicaFetcherThread.processPartitionData: `if (quota.isThrottled(tp))
    quota.record(records.sizeInBytes)`, membership only), in sync or not. Lists mode: its
    destinations stay listed until the throttle is removed after the move, wherever they are
    fetched from (`listed_done`); KIP-542: an adding replica stays adding until its partition's
    whole move completes."""
    listed = [
        m for m in f.in_sync if f.follower in m.destinations and (mode == "lists" or copying[id(m)])
    ]
    if mode == "lists":
        listed += f.listed_done
    return sum(m.inbound_bytes_per_s for m in listed)


def step_alternatives(
    partitions: Sequence[MovingPartition],
    *,
    throttle: float,
    mode: str,
    settings: KafkaSettings,
    sensor_age_s: Mapping[tuple[int, str], float] | None,
    nominal: float | None,
    accepted: tuple[float, float],
) -> tuple[float, ...]:
    """The move's times across a step of the algorithm (module docstring): simulated with every
    charge `CHARGE_ERROR` and half of it lighter and heavier (charges c x as heavy against T
    are the same charges against T / c), those outside `accepted` x `nominal` (the simulated
    time), in order. Empty when the move is off a step."""
    if nominal is None:
        return ()
    lo, hi = accepted
    found = set()
    for c in (1 - CHARGE_ERROR, 1 - CHARGE_ERROR / 2, 1 + CHARGE_ERROR / 2, 1 + CHARGE_ERROR):
        sim = kafka_prediction(
            partitions,
            throttle=throttle / c,
            mode=mode,
            settings=settings,
            sensor_age_s=sensor_age_s,
        )
        if sim.seconds is not None and not lo * nominal <= sim.seconds <= hi * nominal:
            found.add(round(sim.seconds, 3))
    return tuple(sorted(found))
