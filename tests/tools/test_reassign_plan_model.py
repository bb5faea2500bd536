"""`reassign plan`'s move model (tools/reassign/plan_model.py): the plan's cluster facts as the
model's input, the model beside KIP-73's MoveTime, and the simulation of Kafka's algorithm as
the plan reports it. Arithmetic in the comments; MB = 10**6 B."""

from __future__ import annotations

import pytest

from minikafka.common import TopicPartition
from minikafka.tools.reassign import plan, plan_input, plan_model
from minikafka.tools.reassign.kafka_algorithm import KafkaSettings, settings_from_configs
from minikafka.tools.reassign.model import MovingPartition
from minikafka.tools.reassign.moves import OngoingReassignment, move_map

MB = 1_000_000


def tps(topic: str, n: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(n)]


T = tps("t", 4)
U = tps("u", 4)  # not moving, led by broker 2 (or 1): it takes a share of BytesInPerSec

# Decommission broker 1 (the one-to-two system test): t's partitions on [1,2] or [1,3], broker 1
# leads them all, and they move to [2,3] / [3,2]; u's 4 partitions stay, led by broker 2.
DECOM_CURRENT = {
    **{tp: (1, 2) if tp.partition % 2 == 0 else (1, 3) for tp in T},
    **{tp: (2, 3) for tp in U},
}
DECOM_PROPOSED = {tp: (2, 3) if tp.partition % 2 == 0 else (3, 2) for tp in T}
DECOM_LEADERS = {**{tp: 1 for tp in T}, **{tp: 2 for tp in U}}

# Add broker 3 (the two-to-one system test): t's partitions on [1,2] or [2,1], each led by its
# first replica, gain broker 3 in place of the second.
ADD_CURRENT = {tp: (1, 2) if tp.partition % 2 == 0 else (2, 1) for tp in T}
ADD_PROPOSED = {tp: (1, 3) if tp.partition % 2 == 0 else (2, 3) for tp in T}
ADD_LEADERS = {tp: 1 if tp.partition % 2 == 0 else 2 for tp in T}

SIZES = {tp: 10 * MB for tp in T}


def model_input(current, proposed, leaders, bytes_in, ongoing=None) -> list[MovingPartition]:  # noqa: ANN001
    return plan_input.moving_partitions(
        move_map(current, proposed, ongoing),
        assignment=current,
        proposed=proposed,
        leaders=leaders,
        sizes=SIZES,
        inbound=plan_input.inbound_per_partition(bytes_in, leaders),
    )


def decommission(bytes_in: dict[int, float]) -> list[MovingPartition]:
    return model_input(DECOM_CURRENT, DECOM_PROPOSED, DECOM_LEADERS, bytes_in)


def add_broker(bytes_in: dict[int, float]) -> list[MovingPartition]:
    return model_input(ADD_CURRENT, ADD_PROPOSED, ADD_LEADERS, bytes_in)


def kip73(partitions: list[MovingPartition], bytes_in: dict[int, float], throttle: float):  # noqa: ANN201
    """KIP-73's MoveTime as the plan computes it (move_size.traffic_per_broker's bytes)."""
    sends: dict[int, int] = {}
    copies: dict[int, int] = {}
    for m in partitions:
        sends[m.leader] = sends.get(m.leader, 0) + m.size_bytes * len(m.destinations)
        for d in m.destinations:
            copies[d] = copies.get(d, 0) + m.size_bytes
    per_broker = {b: max(sends.get(b, 0), copies.get(b, 0)) for b in {*sends, *copies}}
    prediction = plan.predict_move_time(
        bytes_to_move_per_broker=per_broker, throttle=throttle, bytes_in_per_broker=bytes_in
    )
    return prediction, per_broker


def compare(partitions, bytes_in, throttle, mode="replication"):  # noqa: ANN001, ANN201
    prediction, per_broker = kip73(partitions, bytes_in, throttle)
    return plan_model.compare(
        partitions,
        throttle=throttle,
        throttle_mode=mode,
        kip73_s=prediction.max_seconds,
        kip73_slowest=prediction.slowest,
        kip73_subtracted=prediction.max_bytes_in,
        kip73_bytes=per_broker,
    )


# ---------------------------------------------------------------------------- the input


def test_inbound_is_split_evenly_over_every_partition_a_broker_leads_moving_or_not():
    leaders = {**DECOM_LEADERS, TopicPartition("v", 0): -1}  # v-0 has no leader
    inbound = plan_input.inbound_per_partition({1: 2.4 * MB, 2: 1.2 * MB, 3: 5 * MB}, leaders)
    # Broker 1 leads t's 4 partitions: 0.6 MB/s each; broker 2 leads u's 4: 0.3 MB/s each.
    # Broker 3 leads nothing: its 5 MB/s goes nowhere; v-0 without a leader takes no writes.
    assert inbound == {**{tp: 0.6 * MB for tp in T}, **{tp: 0.3 * MB for tp in U}}
    assert plan_input.partitions_led(leaders) == {1: 4, 2: 4}
    # A broker missing from BytesInPerSec (no metrics) counts as 0 B/s in.
    assert plan_input.inbound_per_partition({}, {T[0]: 1}) == {T[0]: 0.0}


def metrics_line(ts: float, rates: dict | None, bytes_in: float = 0.0) -> dict:
    """A broker's metrics.jsonl line, as far as the plan reads it."""
    line = {"ts": ts, "node": 1, "bytes_in_per_s": bytes_in}
    if rates is not None:
        line["PartitionBytesInRate"] = rates
    return line


def test_partition_bytes_in_is_the_median_on_each_partitions_leader():
    t0, t1, u0, u1, v0, w0 = T[0], T[1], U[0], U[1], TopicPartition("v", 0), TopicPartition("w", 0)
    lines = {
        # Broker 1 leads t-0 and t-1. The gauge names only partitions with bytes in their window
        # (server/replica_gauges.py): t-1 missing from a line was at 0 then. A value that is not a
        # number counts for nothing: t-1's median is over 0, 0 and 50.
        1: [
            metrics_line(1.0, {"t-0": 100.0, "t-1": 0.0}),
            metrics_line(2.0, {"t-0": 300.0, "t-1": "x"}),
            metrics_line(3.0, {"t-0": 200.0}),
            metrics_line(4.0, {"t-0": 250.0, "t-1": 50.0}),
            metrics_line(5.0, None),  # a line without the gauge counts for none
        ],
        # Broker 2 follows t-0 (its figure there is replication, not produce: not read) and leads
        # u-0 (40 then 0) and u-1 (never named: 0 in both lines).
        2: [metrics_line(1.0, {"t-0": 999.0, "u-0": 40.0}), metrics_line(2.0, {"t-0": 999.0})],
        4: [metrics_line(1.0, None)],  # lines, none with the gauge
    }
    # broker 3 has no lines, broker 4 no gauge; w-0 no leader: left out, for the split
    leaders = {t0: 1, t1: 1, u0: 2, u1: 2, v0: 3, TopicPartition("v", 1): 4, w0: -1}
    assert plan_input.partition_bytes_in(lines, leaders) == {
        t0: 225.0, t1: 0.0, u0: 20.0, u1: 0.0
    }  # fmt: skip
    assert plan_input.partition_bytes_in({}, leaders) == {}


def test_inbound_prefers_partition_bytes_in_and_falls_back_to_the_split_per_partition():
    # Broker 1 leads t's 4 partitions, 2.4 MB/s in all: split, 0.6 MB/s each. Its metrics say
    # 160 kB/s for t-0 and t-1 (a bursty producer: the median of BytesInPerSec took a burst).
    measured = {T[0]: 160_000.0, T[1]: 158_000.0}
    inbound = plan_input.inbound({1: 2.4 * MB, 2: 1.2 * MB}, DECOM_LEADERS, measured=measured)
    assert inbound.rates == {
        T[0]: 160_000.0, T[1]: 158_000.0, T[2]: 0.6 * MB, T[3]: 0.6 * MB,
        **{tp: 0.3 * MB for tp in U},
    }  # fmt: skip
    assert inbound.measured == frozenset(measured)
    assert inbound.source(T[0]) == plan_input.MEASURED and inbound.source(T[2]) == plan_input.SPLIT
    # Without the cluster's files nothing is measured: today's split for every partition.
    assert plan_input.inbound({1: 2.4 * MB}, DECOM_LEADERS, measured=None).measured == frozenset()
    # A measured partition without a leader now takes no writes.
    assert plan_input.inbound({}, {T[0]: -1}, measured={T[0]: 5.0}).rates == {}


def test_decommission_input_lists_target_then_leaving_sources_with_the_leader():
    moving = decommission({1: 2.4 * MB, 2: 1.2 * MB})
    assert [(m.topic, m.partition) for m in moving] == [("t", p) for p in range(4)]  # u stays
    even, odd = moving[0], moving[1]
    # [1,2] -> [2,3]: Kafka lists the target, then broker 1 which is leaving: [2,3,1]; broker 3
    # copies; broker 1 still leads and sends. [1,3] -> [3,2]: [3,2,1], broker 2 copies.
    assert (even.leader, even.replicas, even.destinations) == (1, (2, 3, 1), (3,))
    assert (odd.leader, odd.replicas, odd.destinations) == (1, (3, 2, 1), (2,))
    assert even.sources == (2, 1)  # both already hold it: the in-sync follower and the leader
    assert all(m.size_bytes == 10 * MB and m.inbound_bytes_per_s == 0.6 * MB for m in moving)


def test_add_broker_input_keeps_each_leader():
    moving = add_broker({1: 1.2 * MB, 2: 1.2 * MB})
    # [1,2] -> [1,3]: [1,3,2], led by 1; [2,1] -> [2,3]: [2,3,1], led by 2. Each broker leads
    # 2 partitions: 0.6 MB/s each.
    assert [(m.leader, m.replicas, m.destinations) for m in moving] == [
        (1, (1, 3, 2), (3,)),
        (2, (2, 3, 1), (3,)),
        (1, (1, 3, 2), (3,)),
        (2, (2, 3, 1), (3,)),
    ]
    assert {m.inbound_bytes_per_s for m in moving} == {0.6 * MB}


def test_input_leader_falls_back_to_the_first_current_source_and_ongoing_moves_keep_theirs():
    leaders = {T[0]: -1, T[1]: 2, T[2]: 1, T[3]: 1}
    # t-3's move started earlier: [1,2] -> [2,3], the metadata lists [2,3,1] with 3 adding.
    current = {T[0]: (2, 1), T[1]: (1, 2), T[2]: (1, 2), T[3]: (2, 3, 1)}
    ongoing = {T[3]: OngoingReassignment(replicas=(2, 3, 1), adding=(3,), removing=(1,))}
    proposed = {T[0]: (1, 3), T[1]: (1, 3), T[2]: (2, 1)}  # t-2 only reorders: nothing to copy
    moving = model_input(current, proposed, leaders, {}, ongoing)
    by_partition = {m.partition: m for m in moving}
    assert sorted(by_partition) == [0, 1, 3]
    # t-0 has no leader: its first current replica that is a source, 2, is taken to lead.
    assert by_partition[0].leader == 2 and by_partition[0].replicas == (1, 3, 2)
    assert by_partition[1].leader == 2 and by_partition[1].replicas == (1, 3, 2)
    # The ongoing move, not in the file: its target is the metadata's list, its sources [1,2].
    assert (by_partition[3].replicas, by_partition[3].destinations) == ((2, 3, 1), (3,))
    assert by_partition[3].leader == 1


def test_kafka_settings_come_from_the_node_configs():
    s = settings_from_configs(
        {
            "replica.fetch.response.max.bytes": "262144",
            "replica.fetch.max.bytes": "65536",
            "replica.fetch.wait.max.ms": "100",
            "replica.fetch.backoff.ms": "250",
            "replication.quota.window.num": "5",
            "replication.quota.window.size.seconds": "2",
        }
    )
    assert (s.response_max_bytes, s.partition_max_bytes, s.wait_max_s, s.backoff_s) == (
        262144,
        65536,
        0.1,
        0.25,
    )
    assert (s.window_num, s.window_s) == (5, 2)
    assert settings_from_configs({}) == KafkaSettings()  # Kafka's defaults


# ---------------------------------------------------------------------------- the comparison


def test_idle_decommission_agrees_with_kip73_and_names_the_leader_throttle():
    # No writes: broker 1 sends 40 MB at 6 MB/s = 6.7 s by both; no "differs" line.
    fig = compare(decommission({}), {}, 6 * MB)
    assert fig.seconds == pytest.approx(40 / 6) and fig.why is None
    assert fig.lines() == [
        "The model (replication mode): the move takes 6.7 s; broker 1's leader throttle binds: "
        "40.0 MB to send at 6.0 MB/s"
    ]
    assert [r["binds"] for r in fig.rows()] == ["*", "", ""]  # 1 leader, 2 and 3 follower
    assert fig.to_json()["binding"]["broker"] == 1 and not fig.to_json()["differs_from_kip73"]


def test_loaded_decommission_lists_count_the_in_sync_follower_on_the_leader():
    # BytesInPerSec 2.4 MB/s on broker 1 (0.6 MB/s per partition), 1.2 on broker 2.
    # KIP-73: 40 MB / (6 - 2.4) MB/s = 11.1 s. The model, lists mode: broker 1's leader side
    # carries each partition's 0.6 MB/s to its destination AND to its in-sync follower:
    # K = 4 x 0.6 x 2 = 4.8 MB/s, so 40 / (6 - 4.8) = 33.3 s.
    bytes_in = {1: 2.4 * MB, 2: 1.2 * MB}
    fig = compare(decommission(bytes_in), bytes_in, 6 * MB)
    assert fig.seconds == pytest.approx(40 / 1.2)
    assert fig.traffic.binding.keep_up_bytes_per_s == pytest.approx(4.8 * MB)
    assert fig.why == (
        "KIP-73's MoveTime 11.1 s (broker 1); the model 33.3 s: broker 1's leader throttle carries "
        "4.8 MB/s of new data, not the 2.4 MB/s KIP-73 subtracts (the largest BytesInPerSec): it "
        "also carries its in-sync followers' 2.4 MB/s (replica lists count in-sync followers, "
        "KAFKA-4313 exempts them from throttling, not from counting)"
    )
    binds = "broker 1's leader throttle binds: 40.0 MB to send at 6.0 MB/s less the 4.8 MB/s"
    assert binds in fig.lines()[0]
    assert fig.lines()[1] == fig.why and fig.to_json()["differs_from_kip73"]


def test_loaded_decommission_kip542_counts_only_the_destination_so_agrees():
    # KIP-542: the leader counts bytes to adding replicas only, K = 2.4 MB/s = KIP-73's IN.
    bytes_in = {1: 2.4 * MB, 2: 1.2 * MB}
    fig = compare(decommission(bytes_in), bytes_in, 6 * MB, mode="reassignment")
    assert fig.seconds == pytest.approx(40 / 3.6) and fig.why is None
    assert fig.to_json()["mode"] == "kip542"
    assert fig.lines()[0].startswith("The model (reassignment mode): the move takes 11.1 s")


def test_within_two_percent_is_the_same_figure():
    # KIP-542 mode, KIP-73 subtracts broker 1's 2.46 MB/s: 40 / 3.54 = 11.30 s. With 1 % less
    # on the moving partitions (K = 2.4354 MB/s) the model says 40 / 3.5646 = 11.22 s: 0.7 %
    # apart, the same figure. With 10 % less (K = 2.214 MB/s), 40 / 3.786 = 10.57 s: 6.5 %.
    kip73_in = {1: 2.46 * MB}
    fig = compare(decommission({1: 2.4354 * MB}), kip73_in, 6 * MB, mode="reassignment")
    assert fig.seconds == pytest.approx(40 / 3.5646) and fig.why is None
    fig = compare(decommission({1: 2.214 * MB}), kip73_in, 6 * MB, mode="reassignment")
    assert fig.why == (
        "KIP-73's MoveTime 11.3 s (broker 1); the model 10.6 s: broker 1's leader throttle carries "
        "2.2 MB/s of new data, not the 2.5 MB/s KIP-73 subtracts (the largest BytesInPerSec): "
        "only the writes to the partitions it sends count, 2.2 MB/s (inbound: each broker's "
        "BytesInPerSec split evenly over the partitions it leads)"
    )


def test_add_broker_under_load_the_follower_throttle_fetches_from_two_leaders():
    # Brokers 1 and 2 take 1.2 MB/s each (0.6 per partition). Broker 3 copies 40 MB and keeps up
    # with all 4 partitions, K = 2.4 MB/s: 40 / 3.6 = 11.1 s; KIP-73 subtracts one broker's
    # 1.2 MB/s: 40 / 4.8 = 8.3 s. Broker 1's leader side: 20 MB, K = 2 x 0.6 x 2 = 2.4 MB/s
    # (lists: broker 2 is its in-sync follower): 20 / 3.6 = 5.6 s.
    bytes_in = {1: 1.2 * MB, 2: 1.2 * MB}
    fig = compare(add_broker(bytes_in), bytes_in, 6 * MB)
    assert (fig.traffic.binding.broker, fig.traffic.binding.side) == (3, "follower")
    assert fig.seconds == pytest.approx(40 / 3.6)
    assert "broker 3's follower throttle binds: 40.0 MB to copy" in fig.lines()[0]
    assert fig.why.startswith("KIP-73's MoveTime 8.3 s (broker 3); the model 11.1 s: ")
    assert "from 2 leaders, more than any one broker's BytesInPerSec" in fig.why


def test_a_leader_sending_to_two_destinations_sends_new_data_twice():
    # [1] -> [2,3] (r=1 to 2 new replicas): broker 1 sends 10 MB twice, and its 1 MB/s twice.
    p = [MovingPartition(partition=0, leader=1, replicas=(2, 3, 1), destinations=(2, 3),
                         size_bytes=10 * MB, inbound_bytes_per_s=1 * MB)]  # fmt: skip
    fig = compare(p, {1: 1 * MB}, 3 * MB, mode="reassignment")
    # KIP-73: 20 MB / 2 MB/s = 10 s; the model: 20 / (3 - 2) = 20 s.
    assert fig.seconds == pytest.approx(20.0)
    assert "it sends new data once per destination (2.0 MB/s for 1.0 MB/s written)" in fig.why


def test_the_model_says_never_where_kip73_still_finishes():
    # At 4 MB/s: KIP-73 40 / 1.6 = 25 s; the leader's K = 4.8 MB/s >= 4 MB/s: never.
    bytes_in = {1: 2.4 * MB, 2: 1.2 * MB}
    fig = compare(decommission(bytes_in), bytes_in, 4 * MB)
    assert fig.seconds is None
    assert fig.lines()[0] == (
        "The model (replication mode): the move never finishes: broker 1's leader throttle "
        "carries 4.8 MB/s of new data, not below the throttle 4.0 MB/s"
    )
    assert fig.why.startswith("KIP-73's MoveTime 25.0 s (broker 1); the model never: ")
    assert fig.rows()[0]["seconds"] == "never" and fig.rows()[0]["binds"] == "*"


def test_equal_sensors_are_all_named():
    # Two independent moves of 10 MB: 1 -> 2 and 3 -> 4, four sensors of 10 MB each.
    p = [
        MovingPartition(partition=0, leader=1, replicas=(2, 1), destinations=(2,), size_bytes=10 * MB),
        MovingPartition(partition=1, leader=3, replicas=(4, 3), destinations=(4,), size_bytes=10 * MB),
    ]  # fmt: skip
    fig = compare(p, {}, 5 * MB)
    assert fig.lines()[0].endswith(
        "broker 1's leader throttle binds: 10.0 MB to send at 5.0 MB/s (within 2 %: broker 2's "
        "follower throttle, broker 3's leader throttle, broker 4's follower throttle)"
    )
    assert len(fig.to_json()["binding_sensors"]) == 4


def test_binding_sensor_with_fewer_bytes_than_kip73_counts_says_so():
    # Broker 2 copies 10 MB in and leads a partition it sends 4 MB of; its leader side carries
    # 2 MB/s of new data to two followers: 4 / (3 - 2) = 4 s; its follower side 10 / 3 = 3.3 s.
    # KIP-73 counts 10 MB for broker 2: 10 / 3 = 3.3 s.
    p = [
        MovingPartition(partition=0, leader=1, replicas=(2, 1), destinations=(2,), size_bytes=10 * MB),
        MovingPartition(partition=1, leader=2, replicas=(3, 1, 2), destinations=(3,),
                        size_bytes=4 * MB, inbound_bytes_per_s=1 * MB),
    ]  # fmt: skip
    prediction, per_broker = kip73(p, {}, 3 * MB)
    fig = plan_model.compare(
        p,
        throttle=3 * MB,
        throttle_mode="replication",
        kip73_s=prediction.max_seconds,
        kip73_subtracted=0.0,
        kip73_bytes=per_broker,
    )
    assert fig.seconds == pytest.approx(4.0)
    assert "broker 2's leader throttle has 4.0 MB to send, KIP-73 counts 10.0 MB" in fig.why


def test_required_throttle_inverts_the_model():
    bytes_in = {1: 2.4 * MB, 2: 1.2 * MB}
    moving = decommission(bytes_in)
    # In 10 s: broker 1's leader needs K + C / Y = 4.8 + 40 / 10 = 8.8 MB/s; the followers
    # 1.2 + 20 / 10 = 3.2 MB/s.
    needed, sensor = plan_model.required_throttle(
        moving, deadline_s=10, throttle_mode="replication"
    )
    assert needed == pytest.approx(8.8 * MB, abs=1)
    assert (sensor.broker, sensor.side) == (1, "leader")
    fig = compare(moving, bytes_in, needed)
    assert fig.seconds == pytest.approx(10.0, rel=1e-6)
    assert plan_model.required_throttle([], deadline_s=5, throttle_mode="replication") == (1, None)


# ---------------------------------------------------------------------------- Kafka's algorithm


def test_simulation_runs_and_says_why_it_is_sooner():
    # Idle, broker 1 sends 20 partitions of 2 MB to broker 2 at 2 MB/s: the model 20 s.
    # Kafka's algorithm sends whole responses (20 x 1 MiB per fetch, capped at 10 MiB) while
    # the measured rate is under T, and its fresh quota counts its first window as full: the
    # simulation finishes in ~17.8 s.
    moving = [
        MovingPartition(partition=p, leader=1, replicas=(2, 1), destinations=(2,), size_bytes=2 * MB)
        for p in range(20)
    ]  # fmt: skip
    sim = plan_model.simulate(
        moving, throttle=2 * MB, throttle_mode="replication", settings=KafkaSettings(), model_s=20
    )
    assert sim.ran and sim.seconds is not None and sim.seconds < 0.98 * 20
    assert sim.lines()[0] == f"Kafka's algorithm (simulated): {sim.seconds:.1f} s"
    assert sim.lines()[1].startswith("  sooner than the model: Kafka checks the quota before")
    doc = sim.to_json()
    assert doc["ran"] and doc["settings"]["replica.fetch.response.max.bytes"] == 10 * 1024 * 1024
    # Off a step: charges 5 % off move it by less than 10 %, and no third line.
    assert sim.alternatives_s == () and doc["alternatives_s"] == [] and len(sim.lines()) == 2


def test_simulation_names_the_other_side_of_a_step():
    # Decommissioning broker 1 (100 partitions of 1.65 MB to brokers 2 and 3 at 8 MB/s under
    # 1.6 MB/s of load, replica lists): its first four rounds of two 10 MiB responses leave the
    # leader's rate within 1 % of T, so a fifth round passes at ~5.5 s or waits for the first to
    # leave the 12 s window. The KIP-73 system test's runs took 17.7-18.4 s or 21.9-23.4 s.
    moving = [
        MovingPartition(
            partition=p, leader=1, replicas=(2, 3, 1) if p % 2 == 0 else (3, 2, 1),
            destinations=(3,) if p % 2 == 0 else (2,), size_bytes=1_649_434,
            inbound_bytes_per_s=16_000, final_leader=2 if p % 2 == 0 else 3,
        )
        for p in range(100)
    ]  # fmt: skip
    sim = plan_model.simulate(
        moving, throttle=8 * MB, throttle_mode="replication", settings=KafkaSettings(), model_s=34
    )
    assert sim.seconds == pytest.approx(17.2, abs=0.3)
    assert sim.alternatives_s and min(sim.alternatives_s) == pytest.approx(23.2, abs=0.5)
    assert sim.lines()[2].startswith(
        f"  or {sim.alternatives_s[0]:.1f} s or {sim.alternatives_s[1]:.1f} s: the move sits on "
        "a step of the algorithm (with every charge 2.5-5 % lighter or heavier"
    )
    assert sim.to_json()["alternatives_s"] == list(sim.alternatives_s)


def test_simulation_says_when_it_ran_out_of_time_or_was_not_run():
    moving = decommission({})
    short = KafkaSettings(time_limit_s=1.0)
    sim = plan_model.simulate(
        moving, throttle=6 * MB, throttle_mode="replication", settings=short, model_s=1.9
    )
    assert sim.ran and sim.seconds is None and sim.to_json()["alternatives_s"] is None
    assert sim.lines() == ["Kafka's algorithm (simulated): not done within the simulation's "
                           "limit of 1.0 s"]  # fmt: skip
    skipped = plan_model.simulate(
        moving, throttle=6 * MB, throttle_mode="replication", settings=short, model_s=6.7
    )
    assert not skipped.ran and "not run, the model's 6.7 s is beyond" in skipped.lines()[0]
    never = plan_model.simulate(
        moving, throttle=6 * MB, throttle_mode="replication", settings=short, model_s=None
    )
    assert never.lines() == [
        "Kafka's algorithm (simulated): not run, the model says the move never finishes"
    ]


@pytest.mark.parametrize(
    ("seconds", "start"),
    [(10.0, "as the model (within 2 %)"), (12.0, "later than the model: a throttled follower")],
)
def test_simulation_why_follows_the_direction(seconds, start):
    sim = plan_model.SimulationFigure(
        seconds=seconds, responses=1, ran=True, model_s=10.0, settings=KafkaSettings()
    )
    assert sim.why().startswith(start)
    assert "replica.fetch.backoff.ms (1000 ms)" in sim.why() or seconds == 10.0


def test_nothing_to_copy_takes_no_time():
    fig = compare([], {}, 5 * MB)
    assert fig.seconds == 0.0 and fig.why is None
    assert fig.lines() == ["The model (replication mode): nothing to copy"]


def test_a_follower_carries_only_the_writes_to_what_it_copies():
    # Add broker 3 where brokers 1 and 2 also lead 4 partitions (of u, of v) each, which stay: each
    # broker's 1.2 MB/s splits over 6 partitions, 0.2 MB/s each. Broker 3 keeps up with the 4
    # it copies, 0.8 MB/s, less than the 1.2 MB/s KIP-73 subtracts: 40 / 5.2 = 7.7 s against
    # KIP-73's 40 / 4.8 = 8.3 s.
    leaders = {**ADD_LEADERS, **{tp: 1 for tp in U}, **{tp: 2 for tp in tps("v", 4)}}
    bytes_in = {1: 1.2 * MB, 2: 1.2 * MB}
    moving = model_input(ADD_CURRENT, ADD_PROPOSED, leaders, bytes_in)
    fig = compare(moving, bytes_in, 6 * MB)
    assert fig.seconds == pytest.approx(40 / 5.2)
    assert fig.why.endswith(
        "broker 3's follower throttle carries 800.0 kB/s of new data, not the 1.2 MB/s KIP-73 "
        "subtracts (the largest BytesInPerSec): only the writes to the partitions it copies "
        "count, 800.0 kB/s (inbound: each broker's BytesInPerSec split evenly over the partitions it leads)"
    )
