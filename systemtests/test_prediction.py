"""The move-time model behind every case's prediction (systemtests/harness/layout.py), pure.

Not marked `system`: it starts nothing and runs in milliseconds (`pytest systemtests`).
Arithmetic with B = 16 MB to move, T = 2 MB/s, a load IN = 0.6 MB/s spread over 100 partitions;
for Kafka's mode, 128 MB at 8 MB/s (its quick profile).
"""

from __future__ import annotations

import pytest

from minikafka.tools.reassign.kafka_algorithm import settings_from_configs as kafka_settings
from systemtests.harness.layout import LAYOUTS, make_layout, moving_partitions, predict
from systemtests.harness.quota_modes import NODE_CONFIGS, judging

MB = 1_000_000
MIB = 1 << 20
P = 100
B = 16_000_000
T = 2_000_000
IN = 600_000
SIZES = {p: B // P for p in range(P)}
LOAD = {p: IN / P for p in range(P)}
IDLE = {p: 0.0 for p in range(P)}


def test_every_layout_moves_each_partition_once_and_every_byte_counts_once_per_destination():
    for name in LAYOUTS:
        layout = make_layout(name, P)
        moves = layout.moves()
        assert len(moves) == P
        assert all(len(m.destinations) == 1 for m in moves.values()), name
        assert {d for m in moves.values() for d in m.destinations} == set(layout.receiving)
        assert {m.leader for m in moves.values()} == set(layout.sending)


@pytest.mark.parametrize("name", LAYOUTS)
@pytest.mark.parametrize("mode", ["lists", "kip542"])
def test_without_load_every_move_takes_bytes_over_the_throttle(name, mode):
    prediction = predict(make_layout(name, P), sizes=SIZES, inbound=IDLE, throttle=T, mode=mode)
    assert prediction.seconds == pytest.approx(B / T)  # 8 s
    assert prediction.kip73_formula_s == pytest.approx(B / T)


def test_wipe_under_load_is_kip73s_formula():
    # Broker 1 sends and broker 2 fetches B plus the 0.6 MB/s arriving meanwhile, both under T:
    # 16 MB / (2 - 0.6) MB/s = 11.43 s, KIP-73's MoveTime exactly.
    p = predict(make_layout("wipe", P), sizes=SIZES, inbound=LOAD, throttle=T, mode="lists")
    assert p.seconds == pytest.approx(B / (T - IN))
    assert p.kip73_formula_s == pytest.approx(B / (T - IN))


def test_decommission_under_load_with_replica_lists_pays_the_in_sync_follower_too():
    # Broker 1 leads every partition and is in every leader list: it records what its in-sync
    # follower fetches (IN) as well as what the destination fetches (catch-up + IN):
    # 16 MB / (2 - 2 x 0.6) MB/s = 20 s, where KIP-73's formula says 11.43 s.
    p = predict(make_layout("one-to-two", P), sizes=SIZES, inbound=LOAD, throttle=T, mode="lists")
    assert p.seconds == pytest.approx(B / (T - 2 * IN))
    assert (p.binding.broker, p.binding.side) == (1, "leader")
    assert p.kip73_formula_s == pytest.approx(B / (T - IN))


def test_decommission_under_load_with_kip542_counts_only_the_adding_replicas():
    p = predict(make_layout("one-to-two", P), sizes=SIZES, inbound=LOAD, throttle=T, mode="kip542")
    assert p.seconds == pytest.approx(B / (T - IN))
    assert (p.binding.broker, p.binding.side) == (1, "leader")


def test_adding_a_broker_under_load_is_bound_by_its_follower_side():
    # Broker 3 copies every partition and fetches all the new data: 16 / (2 - 0.6) = 11.43 s.
    # KIP-73's max(BytesInPerSec) is a leader's share, IN / 2: it predicts 16 / 1.7 = 9.41 s.
    for mode in ("lists", "kip542"):
        layout = make_layout("two-to-one", P)
        p = predict(layout, sizes=SIZES, inbound=LOAD, throttle=T, mode=mode)
        assert p.seconds == pytest.approx(B / (T - IN))
        assert (p.binding.broker, p.binding.side) == (3, "follower")
        assert p.kip73_formula_s == pytest.approx(B / (T - IN / 2))


def test_a_throttle_at_or_below_the_keep_up_rate_never_finishes():
    heavy = {p: T / P for p in range(P)}  # the load alone fills the throttle
    p = predict(make_layout("wipe", P), sizes=SIZES, inbound=heavy, throttle=T, mode="lists")
    assert p.seconds is None and p.binding is None


# -- the quota modes' judging (systemtests/harness/quota_modes.py) --------------------------


def test_kafka_mode_simulates_kafkas_algorithm_with_the_clusters_own_configs():
    settings = kafka_settings(NODE_CONFIGS["kafka"])
    assert (settings.response_max_bytes, settings.partition_max_bytes) == (10 * MIB, MIB)
    assert (settings.wait_max_s, settings.backoff_s, settings.span_s) == (0.5, 1.0, 12.0)
    # The precise mode's configs differ where its docstring says why.
    precise = kafka_settings(NODE_CONFIGS["precise"])
    assert (precise.response_max_bytes, precise.backoff_s) == (MIB, 0.1)


def test_kafka_mode_judges_12_s_windows_against_the_overshoot_of_two_fetchers():
    # Decommissioning broker 1: brokers 2 and 3 both fetch from it, so two 10 MiB responses
    # can pass one check: T + (2 x 2 x 10 MiB + 2 x T x 1 s) / 12 s = 8 + 4.83 MB/s.
    layout = make_layout("one-to-two", P)
    moving = moving_partitions(layout, sizes={p: 1_280_000 for p in range(P)}, inbound=IDLE)
    judged = [(1, "leader"), (2, "follower"), (3, "follower")]
    j = judging("kafka", moving, throttle=8 * MB, mode="lists", judged=judged)
    assert j.window_s == 12
    assert j.bound_bytes_per_s == pytest.approx(8 * MB + (4 * 10 * MIB + 16 * MB) / 12, abs=1)
    # Both destinations' first responses go out at once: ~1 s sooner than 128 MB / 8 MB/s.
    assert j.predicted_s == pytest.approx(15.1, abs=0.3)
    assert j.extra["traffic_model_move_s"] == pytest.approx(16.0)
    sim = j.extra["kafka_simulation"]["max_window_bytes_per_s"]["1 leader"]
    assert 8 * MB < sim < j.bound_bytes_per_s
    # Off a step: charges 5 % lighter or heavier move it by less than the accepted ratios.
    assert j.alternatives_s == ()


def test_kafka_mode_predicts_both_sides_of_a_step_of_its_algorithm():
    # 3n-one-to-two-reassign-lists-load-kafka as the quick profile runs it: 165 MB, 1.6 MB/s of
    # load, the leader's sensor 15.5 s old. Four rounds of two 10 MiB responses leave its rate
    # within 1 % of T: one more round at ~5.5 s, or none until the first leaves the window.
    # Seven runs took 18.3-18.4 s and 21.9-23.4 s.
    layout = make_layout("one-to-two", P)
    moving = moving_partitions(
        layout, sizes={p: 1_649_434 for p in range(P)}, inbound={p: 16_000 for p in range(P)}
    )
    judged = [(1, "leader"), (2, "follower"), (3, "follower")]
    j = judging("kafka", moving, throttle=8 * MB, mode="lists", judged=judged, up_s=15.5)
    assert j.predicted_s == pytest.approx(17.2, abs=0.3)
    assert j.alternatives_s and all(a > 1.2 * j.predicted_s for a in j.alternatives_s)
    assert min(j.alternatives_s) == pytest.approx(23.2, abs=0.5)
    # The precise mode's traffic model has no steps.
    assert (
        judging("precise", moving, throttle=8 * MB, mode="lists", judged=judged).alternatives_s
        == ()
    )


def test_precise_mode_is_the_traffic_model_with_the_default_windows():
    moving = moving_partitions(make_layout("wipe", P), sizes=SIZES, inbound=LOAD)
    j = judging("precise", moving, throttle=T, mode="lists", judged=[(1, "leader")])
    assert j.predicted_s == pytest.approx(B / (T - IN))
    assert (j.window_s, j.bound_bytes_per_s) == (None, None)  # verdicts.PARAMS: 5 s, 1.15 x T
    with pytest.raises(ValueError, match="expected one of precise, kafka"):
        judging("exact", moving, throttle=T, mode="lists", judged=[(1, "leader")])


def test_a_kafka_clients_load_makes_as_many_batches_a_second_as_the_native_load():
    """librdkafka sends one record per partition per batch at these rates, the native load four
    (`Profile.load_rate`): the same batches a second needs a quarter of the bytes, which the
    prediction then counts."""
    from systemtests.harness.matrix import KAFKA_CLIENT
    from systemtests.harness.profiles import PROFILES

    profile = PROFILES["quick"]["precise"]
    native = profile.load_rate("native")
    assert native == profile.load_fraction * profile.throttle_bytes_per_s
    (case,) = KAFKA_CLIENT
    rate = profile.load_rate(case.load_client)
    batches = native / (profile.record_size * profile.records_per_batch)
    assert rate / profile.record_size == pytest.approx(batches)
