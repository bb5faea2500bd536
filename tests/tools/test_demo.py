"""The demo's pure parts (tools/demo_move.py, tools/demo_plot.py), its directory rule for an
earlier run folder, and the command's refusals; no cluster is started here
(tests/integration/test_demo.py runs the demo end to end)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka.cli import main
from minikafka.errors import ClusterError, ConfigError
from minikafka.tools import demo_plot
from minikafka.tools.demo_move import (
    BROKERS,
    COPIED_COUNTER,
    DEFAULT_THROTTLE,
    HOME_BROKERS,
    PARTITIONS,
    QUOTA_WINDOW_S,
    SENSOR,
    THROTTLE_MAX,
    THROTTLE_MIN,
    MoveFigures,
    burst_bytes,
    choose_move,
    demo_json,
    initial_assignment,
    mean_rate,
    parse_throttle,
    rate_line,
    records_for_move,
    window_bound,
)

# ---------------------------------------------------------------------------- the move


def test_the_topic_starts_on_brokers_1_and_2_with_leaders_taking_turns() -> None:
    assert initial_assignment(PARTITIONS, HOME_BROKERS) == {
        0: [1, 2], 1: [2, 1], 2: [1, 2], 3: [2, 1], 4: [1, 2], 5: [2, 1],
    }  # fmt: skip


def test_a_brokers_worth_moves_onto_the_broker_holding_none_keeping_leaders() -> None:
    start = initial_assignment(PARTITIONS, HOME_BROKERS)
    move = choose_move(start, BROKERS)
    assert move.destination == 3
    assert move.targets == {0: [1, 3], 1: [2, 3], 2: [1, 3], 3: [2, 3]}
    assert move.removed == {0: 2, 1: 1, 2: 2, 3: 1}
    assert all(move.targets[p][0] == start[p][0] for p in move.targets)  # leaders stay
    after = {**start, **move.targets}
    counts = {b: sum(b in r for r in after.values()) for b in BROKERS}
    assert counts == {1: 4, 2: 4, 3: 4}  # 12 replicas, even over 3 brokers
    assert move.sources(start) == [1, 2]
    assert move.partitions == [0, 1, 2, 3]


def test_the_move_goes_to_the_least_loaded_broker_of_a_spread_topic() -> None:
    # replicas: broker 1 holds 3, broker 2 one, broker 3 two; its share is 6 // 3 = 2
    start = {0: [1, 3], 1: [3, 1], 2: [1, 2]}
    move = choose_move(start, (1, 2, 3))
    assert move.destination == 2
    # the busiest follower gives up its place: broker 1 in partition 1, whose leader stays 3
    assert move.targets == {1: [3, 2]}
    assert move.removed == {1: 1}


def test_choose_move_refuses_when_the_broker_already_has_every_partition() -> None:
    with pytest.raises(ValueError, match="already has a replica on broker 2"):
        choose_move({0: [1, 2], 1: [2, 1]}, (1, 2))


def test_the_data_is_sized_for_a_twenty_second_move() -> None:
    fraction = 4 / 6
    records = records_for_move(DEFAULT_THROTTLE, moved_fraction=fraction)
    assert records % 1000 == 0
    # bytes to move / (throttle - the producer's bytes into the moved partitions)
    moved = records * 1000 * fraction
    assert 19.5 <= moved / (DEFAULT_THROTTLE - 200_000 * fraction) <= 20.5
    assert records_for_move(2 * DEFAULT_THROTTLE, moved_fraction=fraction) > 1.9 * records


@pytest.mark.parametrize("text", ["2000000", " 1000000 ", str(THROTTLE_MAX)])
def test_throttle_accepts_bytes_per_second_in_range(text: str) -> None:
    assert parse_throttle(text) == int(text)


@pytest.mark.parametrize("text", ["2MB", "2e6", "-1", "", "999999", str(THROTTLE_MAX + 1), "٣"])
def test_throttle_refuses_anything_else_naming_the_form(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_throttle(text)
    message = str(caught.value)
    assert "\n" not in message
    assert f"an integer from {THROTTLE_MIN} to {THROTTLE_MAX}" in message
    assert "e.g. 2000000" in message


# ---------------------------------------------------------------------------- the figures


def test_the_rate_line() -> None:
    line = rate_line(
        7.2, sensor=1_985_000, limit=2_000_000, copied=14_200_000, planned=40_300_000,
        moving=4, partitions=4, produced_per_s=199.6,
    )  # fmt: skip
    assert line == (
        "   7 s  throttled  1.99 MB/s of 2.00 MB/s ( 99%)  copied  14.2 of ~40.3 MB  "
        "moving 4/4  producer  200 rec/s"
    )


def test_the_rate_line_without_a_reading() -> None:
    line = rate_line(
        0.1, sensor=None, limit=2_000_000, copied=None, planned=1_000_000,
        moving=2, partitions=4, produced_per_s=0,
    )  # fmt: skip
    assert "throttled     -     of 2.00 MB/s (    )" in line
    assert "copied ? of ~1.0 MB" in line


def test_mean_rate_spans_the_move_from_the_samples_around_it() -> None:
    samples = [(9.0, 100), (10.5, 300), (12.0, 900), (13.0, 1100), (14.0, 1200)]
    # from the sample at 9 (last before 10) to the one at 13 (first after 12.5): 1000 bytes
    assert mean_rate(samples, 10.0, 12.5) == (1000, 1000 / 2.5)


def test_mean_rate_counts_a_restarted_counter_from_zero() -> None:
    samples = [(0.0, 500), (1.0, 700), (2.0, 50), (3.0, 150)]
    assert mean_rate(samples, 0.0, 3.0) == (200 + 50 + 100, 350 / 3.0)


def test_mean_rate_without_samples_around_the_move() -> None:
    assert mean_rate([(5.0, 1)], 1.0, 4.0) == (0, None)
    assert mean_rate([(0.0, 1), (9.0, 2)], 4.0, 4.0) == (0, None)


def _figures(**kw: object) -> MoveFigures:
    base: dict = dict(
        throttle=2_000_000, destination=3, partitions=[0, 1, 2, 3], planned_bytes=40_000_000,
        predicted_s=20.4, duration_s=21.0, copied_bytes=40_950_000, max_sensor=4_050_000.0,
    )  # fmt: skip
    return MoveFigures(**{**base, **kw})  # type: ignore[arg-type]


def test_move_figures_judge_the_mean_against_the_limit() -> None:
    f = _figures()
    assert f.mean_bytes_per_s == pytest.approx(1_950_000)
    assert f.ratio == pytest.approx(0.975)
    assert f.within_limit is True
    assert _figures(copied_bytes=47_000_000).within_limit is False  # 1.12 x the limit
    assert f.summary() == (
        "moved 41.0 MB onto broker 3 in 21.0 s (KIP-73 predicted 20 s): 1.95 MB/s on average "
        "(replication_bytes_in over the move), 98% of the 2.00 MB/s limit"
    )
    unfinished = _figures(duration_s=None)
    assert unfinished.within_limit is None and unfinished.ratio is None
    assert unfinished.summary() == "the move did not complete"


def test_the_figures_json() -> None:
    doc = demo_json(
        ok=True, move=_figures(), verdict={"acknowledged": 10, "read": 10, "lost": 0,
        "corrupted": 0}, produce={"records_per_s": 200}, throttle_configs=["broker 1: x=1"],
        throttle_removed=True, run_dir="/d/run", plot="/d/run/rates.png",
        csv="/d/run/rates.csv", wall_s=41.23, records=56000,
    )  # fmt: skip
    assert json.loads(json.dumps(doc)) == doc  # plain JSON
    assert doc["ok"] is True and doc["wall_s"] == 41.2
    assert doc["throttle"] == {
        "bytes_per_s": 2_000_000,
        "mode": "replication (KIP-73: rates and replica lists)",
        "sensor": SENSOR,
        "sensor_broker": 3,
        "configs": ["broker 1: x=1"],
        "removed": True,
    }
    assert doc["move"] == {
        "destination_broker": 3,
        "partitions": [0, 1, 2, 3],
        "planned_bytes": 40_000_000,
        "predicted_s": 20.4,
        "duration_s": 21.0,
        "copied_bytes": 40_950_000,
        "mean_bytes_per_s": 1_950_000.0,
        "mean_to_limit": 0.975,
        "within_limit": True,
        "max_sensor_bytes_per_s": 4_050_000.0,
    }
    assert doc["topic"]["records_before_move"] == 56000
    assert doc["verify"]["lost"] == 0


# ---------------------------------------------------------------------------- the plot's data


def _lines() -> dict[int, list[dict]]:
    return {
        3: [
            {"ts": 99.5, "node": 3},  # before the first throttled byte: no counter, no sensor
            {"ts": 100.5, "node": 3, COPIED_COUNTER: 1000, SENSOR: 2000.0,
             f"{COPIED_COUNTER}_per_s": 2000.0},
            {"ts": 101.5, "node": 3, COPIED_COUNTER: 3000, SENSOR: 2000.0,
             f"{COPIED_COUNTER}_per_s": 4000.0},
        ],
        1: [{"ts": 100.2, "node": 1, "LeaderReplicationThrottledRate": 900.0}],
    }  # fmt: skip


def test_series_rows_per_broker_and_line() -> None:
    rows = demo_plot.series(_lines(), move_start=100.0)
    assert [(r["broker"], r["t_s"]) for r in rows] == [(1, 0.2), (3, -0.5), (3, 0.5), (3, 1.5)]
    assert rows[1][SENSOR] is None and rows[2][SENSOR] == 2000.0
    assert rows[0]["LeaderReplicationThrottledRate"] == 900.0
    mine = [r for r in rows if r["broker"] == 3]
    assert demo_plot.copied_since_start(mine) == [(0.0, 0.0), (0.5, 1000.0), (1.5, 3000.0)]


def test_produce_series_per_second() -> None:
    produced = [
        {"ts": 100.1, "count": 10, "latency_ms": 5.0},
        {"ts": 100.6, "count": 10, "latency_ms": 9.0},
        {"ts": 101.2, "count": 10, "latency_ms": 4.0},
    ]
    assert demo_plot.produce_series(produced, 100.0) == [(0, 20, 9.0), (1, 10, 4.0)]


def test_the_csv_and_the_plot(tmp_path: Path) -> None:
    rows = demo_plot.series(_lines(), move_start=100.0)
    path = demo_plot.write_csv(rows, tmp_path / "rates.csv")
    lines = path.read_text().splitlines()
    assert lines[0].split(",") == list(demo_plot.CSV_COLUMNS)
    assert len(lines) == 1 + len(rows)
    pytest.importorskip("matplotlib")
    png = demo_plot.plot(rows, [(0, 20, 9.0)], tmp_path / "rates.png", throttle=2000,
                         destination=3, sources=[1], move_s=1.2)  # fmt: skip
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_matplotlib_no_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # its import now fails
    rows = demo_plot.series(_lines(), move_start=100.0)
    got = demo_plot.plot(rows, [], tmp_path / "rates.png", throttle=2000, destination=3,
                         sources=[1], move_s=None)  # fmt: skip
    assert got is None and not (tmp_path / "rates.png").exists()


# ---------------------------------------------------------------------------- the directory


def _cluster_dir(tmp_path: Path) -> Path:
    """A directory as an earlier demo leaves it: a stopped cluster's files and data dirs."""
    from minikafka.cluster import plan_cluster
    from minikafka.cluster.clusterfile import ClusterRecord, write_record

    base = tmp_path / "demo"
    spec = plan_cluster(base_dir=base, brokers=3, seed=1)
    base.mkdir()
    write_record(
        ClusterRecord(
            spec=spec, node_command=("true",), pids={}, state="stopped", created_at="2026-01-01"
        )
    )
    for n in spec.nodes:
        n.data_dir.mkdir()
    (base / "cluster.secret").write_text("s")
    (base / "prometheus-targets.json").write_text("[]")
    return base


def test_an_earlier_demo_with_its_run_folder_is_accepted(tmp_path: Path) -> None:
    from minikafka.tools.demo import check_demo_dir

    base = _cluster_dir(tmp_path)
    check_demo_dir(base)  # the cluster's secret and Prometheus targets are its own
    (base / "run").mkdir()
    check_demo_dir(base)  # an empty run folder (a demo stopped early)
    (base / "run" / "case.json").write_text(json.dumps({"case": "demo"}))
    (base / "run" / "rates.png").write_bytes(b"x")
    check_demo_dir(base)


@pytest.mark.parametrize("case", [None, {"case": "mine"}, "not json"])
def test_a_run_folder_the_demo_did_not_make_is_refused(tmp_path: Path, case: object) -> None:
    from minikafka.tools.demo import check_demo_dir

    base = _cluster_dir(tmp_path)
    (base / "run").mkdir()
    (base / "run" / "notes.txt").write_text("mine")
    if case is not None:
        text = case if isinstance(case, str) else json.dumps(case)
        (base / "run" / "case.json").write_text(text)
    with pytest.raises(ClusterError, match="it holds 'run', not part of its cluster"):
        check_demo_dir(base)


def test_demo_command_refuses_a_bad_throttle_before_anything(tmp_path: Path) -> None:
    home = tmp_path / "untouched"
    result = CliRunner().invoke(main, ["demo", "--dir", str(home), "--throttle", "2MB/s"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --throttle '2MB/s': expected ")
    assert not home.exists()


def test_the_quota_admits_whole_responses_the_bound_allows_for() -> None:
    assert burst_bytes(4) == 4 * 1048576  # replica.fetch.max.bytes, Kafka's default
    assert QUOTA_WINDOW_S == 11  # replication.quota.window.num x .window.size.seconds
    assert window_bound(2_000_000, 4) == pytest.approx(2_000_000 + 4 * 1048576 / 11)


def test_case_json_lets_minikafka_analyze_judge_the_move() -> None:
    from minikafka.tools.demo import Outcome, _case

    move = choose_move(initial_assignment(PARTITIONS, HOME_BROKERS), BROKERS)
    out = Outcome(move=move, records=56000, planned_bytes=38_000_000, predicted_s=20.1)
    doc = _case(7, [0, 1, 2, 3], move, 2_000_000, out).to_json()
    assert doc["case"] == "demo"  # what check_demo_dir knows an earlier run folder by
    assert doc["receiving_brokers"] == [3] and doc["sending_brokers"] == [1, 2]
    assert doc["throttle_mode"] == "lists" and doc["throttle_bytes_per_s"] == 2_000_000
    assert doc["throttle_window_s"] == QUOTA_WINDOW_S
    assert doc["throttle_bound_bytes_per_s"] == pytest.approx(window_bound(2_000_000, 4))
    assert doc["bytes_to_move"] == 38_000_000 and doc["predicted_move_s"] == 20.1
