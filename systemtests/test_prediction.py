"""The move-time model behind every case's prediction (systemtests/harness/layout.py), pure.

Not marked `system`: it starts nothing and runs in milliseconds (`pytest systemtests`).
Arithmetic with B = 16 MB to move, T = 2 MB/s, a load IN = 0.6 MB/s spread over 100 partitions.
"""

from __future__ import annotations

import pytest

from systemtests.harness.layout import LAYOUTS, make_layout, predict

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
