"""The move model: the traffic model (tools/reassign/model.py) and the simulation of Kafka's
quota algorithm (tools/reassign/kafka_algorithm.py), with the arithmetic in the comments.
MB = 10**6 B, MiB = 2**20 B."""

from __future__ import annotations

import pytest

from minikafka.tools.reassign.kafka_algorithm import (
    KafkaSettings,
    aged_sensors,
    kafka_prediction,
    overshoot_bound,
    sensor_fetchers,
)
from minikafka.tools.reassign.model import (
    MovingPartition,
    kip73_formula,
    sensor_loads,
    traffic_prediction,
)

MB = 1_000_000
MIB = 1 << 20


def wipe(partitions: int, size: int, inbound: float = 0.0) -> list[MovingPartition]:
    """Broker 1 leads everything, broker 2 re-replicates it (the 2-node system test)."""
    return [
        MovingPartition(
            partition=p,
            leader=1,
            replicas=(1, 2),
            destinations=(2,),
            size_bytes=size,
            inbound_bytes_per_s=inbound,
        )
        for p in range(partitions)
    ]


def decommission(partitions: int, size: int, inbound: float = 0.0) -> list[MovingPartition]:
    """Broker 1 leads everything and sends it to brokers 2 and 3 (half each); the other of the
    two is an in-sync follower of each partition (the 3-node one-to-two system test)."""
    out = []
    for p in range(partitions):
        dest = 3 if p % 2 == 0 else 2
        other = 2 if dest == 3 else 3
        out.append(
            MovingPartition(
                partition=p,
                leader=1,
                replicas=(other, dest, 1),
                destinations=(dest,),
                size_bytes=size,
                inbound_bytes_per_s=inbound,
            )
        )
    return out


def test_traffic_model_lists_charge_in_sync_followers_to_the_leader():
    # 100 partitions of 160 kB, 6 kB/s each: IN = 0.6 MB/s. Broker 1's leader side carries the
    # catch-up 16 MB plus IN for the destination and IN for the in-sync follower.
    moves = decommission(100, 160_000, 6_000)
    loads = {(s.broker, s.side): s for s in sensor_loads(moves, "lists")}
    assert loads[(1, "leader")].keep_up_bytes_per_s == pytest.approx(1.2 * MB)
    assert loads[(2, "follower")].catch_up_bytes == 8 * MB
    p = traffic_prediction(moves, throttle=2 * MB, mode="lists")
    assert p.seconds == pytest.approx(16 / (2 - 1.2))  # 20 s
    assert p.binding_sides() == {(1, "leader")}
    assert kip73_formula(moves, throttle=2 * MB) == pytest.approx(16 / (2 - 0.6))
    kip542 = traffic_prediction(moves, throttle=2 * MB, mode="kip542")
    assert kip542.seconds == pytest.approx(16 / (2 - 0.6))


def test_traffic_model_says_never_when_the_keep_up_fills_the_throttle():
    p = traffic_prediction(wipe(10, MB, 200_000), throttle=2 * MB, mode="lists")
    assert p.seconds is None and p.binding is None


def test_kafka_with_small_responses_and_frequent_checks_is_the_traffic_model():
    """Responses of 10 kB (T = 1 MB/s: 1 % of a second) on a follower throttle: Kafka's
    check-then-charge overshoots by one small response at a time, so the move is C / (T - K)
    but for the free first window (SimpleRate counts it full: T * W = 1 MB of 60 MB)."""
    settings = KafkaSettings(
        response_max_bytes=10_000, partition_max_bytes=10_000, backoff_s=0.01
    )  # a follower that backs off 1 s (Kafka's default) loses up to a second at each check
    moves = wipe(10, 6 * MB, 10_000)  # 60 MB, IN = 100 kB/s
    fluid = traffic_prediction(moves, throttle=MB, mode="lists").seconds
    kafka = kafka_prediction(
        moves, throttle=MB, mode="lists", settings=settings, sides=("follower",)
    ).seconds
    assert fluid == pytest.approx(60 / 0.9)
    assert kafka == pytest.approx(fluid, rel=0.03)


def test_kafka_leader_headers_cost_budget_when_fetches_are_frequent():
    """The same on the leader side: each response also charges its headers (10 partitions x
    ~37 B, plus the response's) and with 10 kB responses a fetch goes out every ~5 ms, so about
    80 kB/s of the 1 MB/s pays for headers and the move takes some 8 % longer."""
    settings = KafkaSettings(response_max_bytes=10_000, partition_max_bytes=10_000)
    moves = wipe(10, 6 * MB, 10_000)
    fluid = traffic_prediction(moves, throttle=MB, mode="lists").seconds
    kafka = kafka_prediction(
        moves, throttle=MB, mode="lists", settings=settings, sides=("leader",)
    ).seconds
    assert fluid is not None and kafka is not None and 1.04 * fluid < kafka < 1.15 * fluid


def test_kafka_lets_the_first_response_of_each_destination_through_at_once():
    """One leader, two destinations, 10 MiB responses, T = 4 MB/s, 40 MB to send: at t = 0 the
    fresh sensor reads 0, both fetchers are checked before either response is charged, so
    2 x 10 MiB go out at once (5.2 s of budget). The rest follows at the throttle: the move
    ends about 2 x 10 MiB / T earlier than 40 MB / T = 10 s, and the 12 s window holds more
    than T (and no more than the overshoot bound)."""
    moves = decommission(40, MB)
    sim = kafka_prediction(moves, throttle=4 * MB, mode="kip542")
    assert sim.seconds is not None and sim.seconds < 10 - 0.5 * (2 * 10 * MIB) / (4 * MB)
    first = [n for t, n in sim.charged[(1, "leader")] if t < 0.5]
    assert sum(first) > 2 * 10 * MIB  # both whole responses, headers included


def test_kafka_throttle_of_one_byte_per_second_stalls_on_the_leader_side():
    """The seed article's story (tests/server/test_leader_charge.py runs it on brokers): the
    leader's headers keep a 1 B/s quota exceeded for good, while the follower side alone would
    let one response through each time its samples expire."""
    moves = wipe(100, 2_000)  # 200 kB: four 64 KiB responses
    settings = KafkaSettings(response_max_bytes=65_536, time_limit_s=120)
    leader = kafka_prediction(moves, throttle=1, mode="lists", settings=settings, sides=("leader",))
    assert leader.seconds is None  # not done in 120 s
    first = [n for _t, n in leader.charged[(1, "leader")]]
    assert first[0] > 65_536 and all(n == first[1] for n in first[1:])  # then headers only
    follower = kafka_prediction(
        moves, throttle=1, mode="lists", settings=settings, sides=("follower",)
    )
    assert follower.seconds == pytest.approx(33, abs=1.5)  # four responses, 11 s apart


@pytest.mark.parametrize(
    ("moves", "fetchers"),
    [(wipe(100, 1_280_000), 1), (decommission(100, 1_280_000), 2)],
    ids=["wipe", "decommission"],
)
def test_kafka_windows_stay_within_the_overshoot_bound(moves, fetchers):
    settings = KafkaSettings()
    sim = kafka_prediction(moves, throttle=8 * MB, mode="lists", settings=settings)
    bound = overshoot_bound(throttle=8 * MB, fetchers=fetchers, settings=settings)
    # 8 MB/s + (2 x fetchers x 10 MiB + 2 x 8 MB) / 12 s: 11.08 MB/s for one fetcher, 12.83
    # for two; the simulation reaches 10.5 MB/s with two (the bound's docstring).
    assert bound == pytest.approx(8 * MB + (2 * fetchers * 10 * MIB + 16 * MB) / 12)
    for sensor in sim.charged:
        rate = sim.max_window_rate(sensor, settings.span_s)
        assert rate is not None and rate <= bound, (sensor, rate / MB)


def test_sensor_fetchers_count_who_can_pass_a_check_at_once():
    # Decommissioning broker 1: both other brokers fetch from it, one copying and one in sync
    # per partition; lists charge both, KIP-542 only the adding one (each broker adds half).
    moves = decommission(4, MB)
    assert sensor_fetchers(moves, "lists") == {
        (1, "leader"): 2,
        (2, "follower"): 1,
        (3, "follower"): 1,
    }
    assert sensor_fetchers(moves, "kip542")[(1, "leader")] == 2
    # A wiped broker copies everything from its one leader.
    assert sensor_fetchers(wipe(3, MB), "lists") == {(1, "leader"): 1, (2, "follower"): 1}
    # Adding broker 3 beside leaders 1 and 2: its follower side is checked by two fetchers.
    adding = [
        MovingPartition(partition=p, leader=1 + p % 2, replicas=(1 + p % 2, 2 - p % 2, 3),
                        destinations=(3,), size_bytes=MB)
        for p in range(4)
    ]  # fmt: skip
    assert sensor_fetchers(adding, "kip542") == {
        (1, "leader"): 1,
        (2, "leader"): 1,
        (3, "follower"): 2,
    }
    assert sensor_fetchers(adding, "lists")[(1, "leader")] == 2  # the in-sync follower too


def leaving(partitions: int, size: int, inbound: float) -> list[MovingPartition]:
    """The decommission of broker 1 as `reassign` runs it: each partition's move completes on
    its own once its destination caught up, and its leadership then leaves broker 1 (Kafka
    elects the target's first replica: [2, 3] or [3, 2])."""
    return [
        MovingPartition(
            partition=m.partition,
            leader=1,
            replicas=m.replicas,
            destinations=m.destinations,
            size_bytes=size,
            inbound_bytes_per_s=inbound,
            final_leader=m.replicas[0],
        )
        for m in decommission(partitions, size, inbound)
    ]


def test_kafka_partitions_catch_up_one_by_one_and_leave_their_old_leader():
    """128 MB to move off broker 1 at 8 MB/s with 1.6 MB/s of produce load, 10 MiB responses
    of at most 1 MiB per partition: each partition catches up after two responses, and its
    move completes then, taking its keep-up traffic (to the destination and to the in-sync
    follower, both charged in lists mode) off broker 1's leader throttle. The traffic model,
    which has every partition finish together, says 128 / (8 - 2 x 1.6) = 26.7 s; when the
    partitions stay with their leader, 23 s; when they leave it as they finish, 21 s."""
    size, inbound = 1_280_000, 16_000
    fluid = traffic_prediction(leaving(100, size, inbound), throttle=8 * MB, mode="lists")
    staying = kafka_prediction(decommission(100, size, inbound), throttle=8 * MB, mode="lists")
    leaves = kafka_prediction(leaving(100, size, inbound), throttle=8 * MB, mode="lists")
    assert fluid.seconds == pytest.approx(128 / 4.8, rel=0.01)
    assert staying.seconds is not None and leaves.seconds is not None
    assert leaves.seconds < staying.seconds - 1.5 < fluid.seconds - 3.0


def test_kafka_an_old_leader_sensor_admits_a_larger_first_burst():
    """SimpleRate divides by the time since its oldest sample: the lists-mode leader sensor,
    which has charged 16 B per follower response since the broker started, reads a rate of
    21 MB / 6 s = 3.5 MB/s after the first two 10 MiB responses and lets two more through at
    once; a fresh one reads 21 MB / 1 s and waits (measured on the system test: 13.7 s for this
    move with brokers up 3-6 s, where a fresh sensor predicts 15.1 s)."""
    moves = leaving(100, 1_280_000, 0.0)
    fresh = kafka_prediction(moves, throttle=8 * MB, mode="lists")
    ages = aged_sensors(moves, "lists", 6.0)
    assert ages == {(1, "leader"): 6.0}
    aged = kafka_prediction(moves, throttle=8 * MB, mode="lists", sensor_age_s=ages)
    assert fresh.seconds is not None and aged.seconds is not None
    assert aged.seconds < fresh.seconds - 1.0
    first_two_s = sum(n for t, n in aged.charged[(1, "leader")] if t < 2.0)
    assert first_two_s > 4 * 10 * MIB  # four responses of 10 MiB in the first two seconds
    # KIP-542's class records only reassignment traffic: created by the move.
    assert aged_sensors(moves, "kip542", 6.0) == {}


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="expected one of lists, kip542"):
        traffic_prediction(wipe(1, 1), throttle=1, mode="kip73")


def test_the_simulation_shares_no_code_with_the_brokers_quota():
    """The prediction judges the brokers' quota, so it must not run the brokers' quota code: a
    bug in core/quota/stats.py or core/quota/charge.py would move the run and the prediction together
    and no verdict would see it. Its rate and charge are tools/reassign/kafka_rate.py and
    fetch_size.py, tested on Kafka's own numbers and kio's bytes
    (tests/tools/test_reassign_kafka_rate.py)."""
    import ast
    import inspect

    from minikafka.tools.reassign import kafka_algorithm

    banned = ("minikafka.core.quota.stats", "minikafka.core.quota.charge")
    tree = ast.parse(inspect.getsource(kafka_algorithm))
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    ]
    assert not [m for m in imported if m and m.startswith(banned)], imported
    from_banned = {
        name
        for name, value in vars(kafka_algorithm).items()
        if getattr(value, "__module__", "") in banned or getattr(value, "__name__", "") in banned
    }
    assert not from_banned


def adding_broker(partitions: int, size: int, inbound: float) -> list[MovingPartition]:
    """Broker 3 added beside leaders 1 and 2 (the 3-node two-to-one system test): it copies
    every partition; its leaders stay."""
    return [
        MovingPartition(
            partition=p,
            leader=1 + p % 2,
            replicas=(1 + p % 2, 2 - p % 2, 3),
            destinations=(3,),
            size_bytes=size,
            inbound_bytes_per_s=inbound,
        )
        for p in range(partitions)
    ]


def test_kafka_follower_charges_every_listed_partition_caught_up_or_not():
    """Kafka's follower records the record bytes of every partition in its throttled set
    (ReplicaFetcherThread.processPartitionData: `if (quota.isThrottled(tp)) quota.record(...)`),
    in-sync ones included. Adding broker 3 under 1.6 MB/s of load with replica lists: its
    partitions stay listed until the move ends, so its follower sensor carries the 128 MB plus
    the whole inbound for the whole move, C + K x t (154.7 MB in 18.73 s); charging catch-up
    bytes only, the simulation carried 144.1 MB and ended at 18.23 s. In KIP-542 a single
    destination stops being adding when it catches up (its partition's move completes):
    charged only until then (144.1 MB)."""
    size, inbound = 1_280_000, 16_000
    lists = kafka_prediction(adding_broker(100, size, inbound), throttle=8 * MB, mode="lists")
    kip542 = kafka_prediction(adding_broker(100, size, inbound), throttle=8 * MB, mode="kip542")
    assert lists.seconds is not None and kip542.seconds is not None
    carried = {
        name: sum(n for _t, n in sim.charged[(3, "follower")])
        for name, sim in (("lists", lists), ("kip542", kip542))
    }
    whole = 100 * size + 100 * inbound * lists.seconds  # C + K x t
    assert carried["lists"] == pytest.approx(whole, rel=0.03)
    assert carried["kip542"] < carried["lists"] - 5 * MB
    # Decommissioning broker 1 (lists): a caught-up partition's move completes and its
    # leadership leaves broker 1, but its destination still fetches it, from the new leader,
    # and still charges it: each destination's follower sensor carries its half, C/2 + K/2 x t
    # (80.6 and 78.7 MB of 80.7 MB; 75.3 and 73.4 MB when it charged catch-up bytes only).
    leaves = kafka_prediction(leaving(100, size, inbound), throttle=8 * MB, mode="lists")
    assert leaves.seconds is not None
    half = 50 * size + 50 * inbound * leaves.seconds
    for broker in (2, 3):
        got = sum(n for _t, n in leaves.charged[(broker, "follower")])
        assert got == pytest.approx(half, rel=0.03), broker


def test_kafka_kip542_adding_replica_charges_until_its_partitions_move_completes():
    """One partition copied to brokers 3 and 4 (KIP-542: both adding). While 4 still copies it,
    3 has caught up but is still adding: its leader and its follower charge its new bytes; once
    both caught up the move completes and nothing of it is reassignment traffic any more. In
    lists mode the follower charges it regardless (listed until the throttle is removed)."""
    from minikafka.tools.reassign import kafka_algorithm as ka

    m = MovingPartition(
        partition=0, leader=1, replicas=(1, 3, 4), destinations=(3, 4), size_bytes=MB,
        inbound_bytes_per_s=10_000,
    )  # fmt: skip
    fetcher = ka._Fetcher(3, 1, copying=[], in_sync=[m])
    still_copying = {id(m): {4}}
    completed = {id(m): set()}
    assert ka._follower_rate(fetcher, "kip542", still_copying) == 10_000
    assert ka._follower_rate(fetcher, "kip542", completed) == 0
    assert ka._follower_rate(fetcher, "lists", completed) == 10_000
    # The leader: 1 s of its new bytes, 10 kB, in a response of one partition (16 + 58 B).
    one = ka.fetch_response_v12_size([("t", 10_000, 1)])
    assert ka._leader_charge(fetcher, "kip542", still_copying, None, 1.0) == one
    assert ka._leader_charge(fetcher, "kip542", completed, None, 1.0) is None
    assert ka._leader_charge(fetcher, "lists", completed, None, 1.0) == one
