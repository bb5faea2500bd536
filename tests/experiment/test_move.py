"""What a move did under its throttle (minikafka/experiment/move.py), the expectations on those
figures (spec.Expectation `figure`, verdict.judge), and the throttle-of-one experiment's spec.

The two synthetic runs are the seed article's two stories at 1 B/s, 3 partitions moved from
broker 1 to broker 2: the leader side lets the first response through and then charges headers
alone (10 kB per fetch, two fetches a second) with nothing more copied; the follower side copies
one response every 11.5 s and completes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from minikafka.errors import ConfigError
from minikafka.experiment.catalog import variants
from minikafka.experiment.move import move_figures
from minikafka.experiment.spec import Expectation, ExperimentSpec, Reassign
from minikafka.experiment.verdict import figure, judge

T0 = 1_000.0
RESPONSE = 65_000


def spec(expect: tuple[Expectation, ...] = ()) -> ExperimentSpec:
    return ExperimentSpec(
        name="x", brokers=2, partitions=3, replication_factor=1,
        assignment=((1,), (1,), (1,)), broker_configs={"leader.replication.throttled.rate": "1"},
        lift_broker_configs=True, produce_s=3.0,
        reassign=Reassign(at_s=4.0, moves={p: (2,) for p in range(3)}, throttle=None),
        expect=expect,
    )  # fmt: skip


def write_lines(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def run_folder(tmp_path: Path, *, copies_at: list[float], move_end: float | None) -> Path:
    """Metrics every 0.5 s from T0 to T0 + 36; broker 2 receives a RESPONSE at each of
    `copies_at` (and, after the lift at T0 + 34, whatever was left); broker 1 charges each
    response plus 10 kB of headers, and 10 kB of headers every 0.5 s after the first."""
    timeline = [
        {"ts": T0 + 4.3, "event": "move_start", "requested": T0 + 4.0},
        {"ts": T0 + 34.0, "event": "configs_lifted", "moving": 0 if move_end else 1},
    ]
    if move_end is not None:
        timeline.append({"ts": T0 + move_end, "event": "move_end"})
    write_lines(tmp_path / "timeline.jsonl", sorted(timeline, key=lambda e: e["ts"]))
    follower, leader = [], []
    for i in range(73):
        ts = T0 + i / 2
        copied = RESPONSE * sum(ts >= T0 + c for c in copies_at) + (100_000 if i / 2 > 34 else 0)
        first = min(copies_at)
        headers = 10_000 * (1 + int((ts - T0 - first) * 2)) if ts >= T0 + first else 0
        follower.append({"ts": ts, "replication_bytes_in": copied})
        leader.append({"ts": ts, "leader_replication_throttled_bytes": copied + headers,
                       "leader_replication_overhead_bytes": headers})  # fmt: skip
    write_lines(tmp_path / "nodes" / "node-2" / "metrics.jsonl", follower)
    write_lines(tmp_path / "nodes" / "node-1" / "metrics.jsonl", leader)
    expand = {"event": "isr_expand", "topic": "exp", "old_isr": [1], "isr": [1, 2]}
    joins = [(0, 5.0), (1, 5.0), (2, 35.0 if move_end is None else move_end - 0.2)]
    write_lines(
        tmp_path / "nodes" / "node-1" / "events.jsonl",
        [{**expand, "ts": T0 + t, "partition": p} for p, t in joins],
    )
    return tmp_path


def test_a_stalled_move_copies_once_and_then_charges_headers_alone(tmp_path: Path) -> None:
    run = run_folder(tmp_path, copies_at=[4.5], move_end=None)
    move = move_figures(spec(), run, T0)
    assert move == {
        "partitions": 3, "start_s": 4.0, "throttled_until_s": 34.0, "lifted": True,
        "completed": False, "completed_after_s": None, "moving_at_lift": 1, "adding_brokers": [2],
        "partitions_done": 2,  # partition 2 joined the ISR only after the lift
        "copied_bytes": RESPONSE, "copy_steps": 1, "copy_times_s": [0.5],
        "copy_gap_min_s": None, "copy_gap_max_s": None,
        # from 1 s after the copy: 10 kB every 0.5 s, all of it headers
        "leader_charged_bytes_per_s": 20_000.0, "leader_overhead_bytes_per_s": 20_000.0,
        "leader_record_bytes_after_first_copy": 0,
    }  # fmt: skip


def test_a_creeping_move_copies_a_response_per_quota_span(tmp_path: Path) -> None:
    run = run_folder(tmp_path, copies_at=[4.5, 16.0, 27.5], move_end=28.0)
    move = move_figures(spec(), run, T0)
    assert move is not None
    assert (move["completed"], move["completed_after_s"], move["partitions_done"]) == (True, 24, 3)
    assert move["copy_times_s"] == [0.5, 12.0, 23.5] and move["copied_bytes"] == 3 * RESPONSE
    assert (move["copy_gap_min_s"], move["copy_gap_max_s"]) == (11.5, 11.5)
    # the two later responses' records are charged after the first copy, besides the headers
    assert move["leader_record_bytes_after_first_copy"] == 2 * RESPONSE


def test_figures_need_a_move(tmp_path: Path) -> None:
    assert move_figures(ExperimentSpec(name="x"), tmp_path, T0) is None
    assert move_figures(spec(), tmp_path, T0) == {"partitions": 3, "start_s": None}  # never ran


LEADER = variants("throttle-of-one", seed=1)[0].expect
FOLLOWER = variants("throttle-of-one", seed=1)[1].expect


@pytest.mark.parametrize(
    ("copies_at", "move_end", "holding", "failing"),
    [([4.5], None, LEADER, FOLLOWER), ([4.5, 16.0, 27.5], 28.0, FOLLOWER, LEADER)],
    ids=["stalled", "creeping"],
)
def test_the_experiments_expectations_tell_the_two_stories_apart(
    tmp_path: Path,
    copies_at: list[float],
    move_end: float | None,
    holding: tuple[Expectation, ...],
    failing: tuple[Expectation, ...],
    clean_history: Callable[[Path], None],
) -> None:
    run = run_folder(tmp_path, copies_at=copies_at, move_end=move_end)
    clean_history(run)
    for expect, valid in ((holding, True), (failing, False)):
        results = judge(spec(expect), run, t0=T0, dumps=None, driver_errors=[], settled=True,
                        analysis=None)  # fmt: skip
        assert results["valid"] is valid, results["summary"]
        assert results["move"]["copy_steps"] == len(copies_at)
        assert "  move of 3 partitions from 4 s" in results["summary"]
    # and most of the other story's expectations do not hold
    wrong = [e["expect"] for e in results["expectations"] if not e["holds"]]
    assert len(wrong) >= 3, results["expectations"]


def test_an_expectation_on_any_counter_is_judged_on_its_total(
    tmp_path: Path, clean_history: Callable[[Path], None]
) -> None:
    """The verdict summed a fixed list of counters, so an expectation on another one (the
    follower-behind-retention experiment's fetch_offset_out_of_range) always observed 0."""
    run = run_folder(tmp_path, copies_at=[4.5], move_end=None)
    clean_history(run)
    expect = (Expectation(counter="replication_bytes_in", op=">=", value=RESPONSE),)
    results = judge(spec(expect), run, t0=T0, dumps=None, driver_errors=[], settled=True,
                    analysis=None)  # fmt: skip
    (seen,) = results["expectations"]
    assert seen["holds"] and seen["observed"] >= RESPONSE, seen


def test_expectations_on_figures() -> None:
    e = Expectation(figure="move.copy_gap_min_s", op=">=", value=10)
    assert str(e) == "move.copy_gap_min_s >= 10" and e.holds(11.2) and not e.holds(9.9)
    assert not e.holds(None)  # a gap of a move that copied once: the hypothesis is false
    assert str(Expectation(counter="x", op="<=", value=13.5)) == "x <= 13.5"
    figures = {"move": {"copy_steps": 1, "copy_gap_min_s": None}}
    assert figure(figures, "move.copy_steps") == 1
    assert figure(figures, "move.nope") is None and figure(figures, "catch_up.spread_s") is None
    with pytest.raises(ConfigError, match="exactly one of counter .* or figure"):
        Expectation(counter="isr_shrinks", figure="move.copy_steps", op="==", value=1)
    with pytest.raises(ConfigError, match="exactly one of counter"):
        Expectation(op="==", value=1)


def test_spec_checks_of_the_move_options() -> None:
    with pytest.raises(ConfigError, match="produce_s 40: expected at most duration_s"):
        ExperimentSpec(name="x", duration_s=30, produce_s=40)
    with pytest.raises(ConfigError, match="produce_s 0"):
        ExperimentSpec(name="x", produce_s=0)
    with pytest.raises(ConfigError, match="lift_broker_configs: expected broker_configs"):
        ExperimentSpec(name="x", lift_broker_configs=True)
    with pytest.raises(ConfigError, match="reassign throttle 0: expected bytes/s"):
        Reassign(at_s=1, moves={}, throttle=0)


def test_throttle_of_one_throttles_one_side_and_is_not_a_bound_test(tmp_path: Path) -> None:
    leader, follower = variants("throttle-of-one", seed=1)
    for s, side, other in ((leader, "leader", "follower"), (follower, "follower", "leader")):
        assert s.broker_configs[f"{side}.replication.throttled.rate"] == "1"
        assert not any(k.startswith(other) for k in s.broker_configs)
        assert s.reassign is not None and s.reassign.throttle is None  # no --throttle: both sides
        assert s.lift_broker_configs and s.throttle_bytes_per_s is None
        assert s.all_node_configs()["replication.quota.precise"] == "false"
    # every figure the expectations name is one that move_figures reports
    move = move_figures(spec(), run_folder(tmp_path, copies_at=[4.5], move_end=None), T0)
    assert move is not None
    assert {e.figure.removeprefix("move.") for e in (*LEADER, *FOLLOWER)} <= set(move)
