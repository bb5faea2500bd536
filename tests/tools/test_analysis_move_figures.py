"""The analysis' figures of a move beside the throttle verdict (docs/throttling.md): each judged
sensor against its own bound, the record bytes on the wire beside those the quota charged, the order
in which partitions caught up, and the acks=all latency of partitions still in sync
(tools/analysis/frames.py `judged_windows`, `catch_ups`, `catch_up_order`, `latency_phases`).

Each test reads tiny run folders built here, whose answers are exact: metrics lines on whole
seconds (interpolation is then exact), rates constant over the move [T0+10, T0+20) (timeline
move_start and move_end), 5 s windows from T0+12 (skip 2 s): 4 judged windows per side.

- Node 1 (leader side, sending) is charged 1.0 MB/s of throttled bytes, 0.1 MB/s of it Kafka
  headers (overhead), and sends 1.2 MB/s of records on the wire (in-sync replicas' included).
- Node 2 (follower side, receiving) is charged 1.0 MB/s, 0.05 MB/s of it headers, and fetches
  1.1 MB/s of records.
- Partitions t-0 .. t-5 move to node 2; node 1 logs their isr_expand adding node 2.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from minikafka.errors import ConfigError
from minikafka.tools.analysis import Report, load_run

T0 = 1_795_000_000.0
MB = 1_000_000
MOVE = (10, 20)
LEADER = {"leader_replication_throttled_bytes": 1.0 * MB,
          "leader_replication_overhead_bytes": 0.1 * MB,
          "replication_bytes_out": 1.2 * MB}  # fmt: skip
FOLLOWER = {"follower_replication_throttled_bytes": 1.0 * MB,
            "follower_replication_overhead_bytes": 0.05 * MB,
            "replication_bytes_in": 1.1 * MB}  # fmt: skip
ORDERED = {p: 12.0 + p for p in range(6)}  # partition -> catch-up, in partition order
# A shuffled order with a tie (t-2 and t-4 at 16 s): partition ranks 1..6 against time ranks
# 4, 1, 5.5, 2, 5.5, 3; both mean 3.5; sum of products of deviations 2.5, of squares 17.5 and
# 17: rho = 2.5 / sqrt(17.5 * 17) = 0.1449.
SHUFFLED = {0: 15.0, 1: 12.0, 2: 16.0, 3: 13.0, 4: 16.0, 5: 14.0}


def _dump(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _metrics(node: int, rates: dict[str, float]) -> list[dict[str, Any]]:
    """A line on every whole second t = 0..30: each counter at its rate over the move."""
    out = []
    for t in range(31):
        moved = min(max(t - MOVE[0], 0), MOVE[1] - MOVE[0])
        line: dict[str, Any] = {"ts": T0 + t, "node": node}
        line.update({k: round(rate * moved) for k, rate in rates.items()})
        line["throttle_configs"] = {"leader_rate": MB, "follower_rate": MB}
        out.append(line)
    return out


def _expand(t: float, partition: int, old: list[int], new: list[int]) -> dict[str, Any]:
    return {"ts": T0 + t, "node": 1, "event": "isr_expand", "topic": "t",
            "partition": partition, "old_isr": old, "isr": new}  # fmt: skip


def write_run(root: Path, name: str, caught: dict[int, float], **case: Any) -> Path:
    """A run folder: node 1 sends partitions t-0..t-5 to node 2, which catch up at `caught`."""
    run = root / name
    _dump(run / "nodes/node-1/metrics.jsonl", _metrics(1, LEADER))
    _dump(run / "nodes/node-2/metrics.jsonl", _metrics(2, FOLLOWER))
    events = [_expand(5, 0, [1], [1, 2])]  # before the move: not a catch-up of it
    events += [_expand(t, p, [1], [1, 2]) for p, t in caught.items()]
    events += [_expand(19, 0, [1], [1, 2]),  # a later one: the first counts
               _expand(11, 3, [1, 2], [1, 2, 3])]  # adds node 3, not a receiving broker
    _dump(run / "nodes/node-1/events.jsonl", sorted(events, key=lambda e: e["ts"]))
    _dump(run / "timeline.jsonl", [{"ts": T0 + MOVE[0], "event": "move_start"},
                                   {"ts": T0 + MOVE[1], "event": "move_end"}])  # fmt: skip
    # Acknowledged batches (10 records each): before the move; at 11 s, every partition still
    # in sync; t-5 at 16.5 s, before its catch-up at 17 s; t-6, which never catches up; and at
    # 18 s, every partition but t-6 caught up (ordered runs) with 500 ms latencies.
    produced = [(5.0, 0, 900.0)]
    produced += [(11.0, p, 10.0 * (p + 1)) for p in range(6)]
    produced += [(16.5, 5, 70.0), (19.0, 6, 80.0)]
    produced += [(18.0, p, 500.0) for p in range(6)]
    _dump(run / "clients/produced.jsonl", [
        {"ts": T0 + t, "topic": "t", "partition": p, "count": 10, "latency_ms": ms, "phase": "load"}
        for t, p, ms in sorted(produced)
    ])  # fmt: skip
    base = {"case": name, "nodes": [1, 2], "partitions": 7, "throttle_bytes_per_s": MB,
            "throttle_mode": "lists", "receiving_brokers": [2], "sending_brokers": [1],
            "bytes_to_move": 10 * MB, "predicted_move_s": 10.0}  # fmt: skip
    (run / "case.json").write_text(json.dumps(base | case))
    return run


@pytest.fixture(scope="module")
def report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Report:
    from minikafka.tools.analysis import analyze

    root = tmp_path_factory.mktemp("runs")
    runs = [
        write_run(root, "own_bound", ORDERED, throttle_bounds_bytes_per_s={"1 leader": 950_000},
                  throttle_wire_judged=True),
        write_run(root, "case_bound", SHUFFLED),
    ]  # fmt: skip
    return analyze(runs, spark=spark, write=False)


def _brokers(case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{b['node']} {b['side']}": b for b in case["brokers"]}


# ------------------------------------------------------------------------ pure, no Spark


@pytest.mark.parametrize(
    "bounds",
    [
        [950_000],
        {"1": 950_000},
        {"1 sender": 950_000},
        {"one leader": 950_000},
        {"1 leader": 0},
        {"1 leader": "950000"},
        {"1 leader": True},
        {"1 leader": math.inf},
    ],
)
def test_bad_sensor_bounds_are_refused_in_one_line(tmp_path: Path, bounds: Any) -> None:
    run = write_run(tmp_path, "x", ORDERED, throttle_bounds_bytes_per_s=bounds)
    with pytest.raises(ConfigError, match=r"'throttle_bounds_bytes_per_s' .*expected a map "
                       r'"<node> leader\|follower" -> B/s') as info:  # fmt: skip
        load_run(run)
    assert "\n" not in str(info.value)


def test_sensor_bounds_and_the_wire_flag_are_read(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "x", ORDERED, throttle_wire_judged=True,
                             throttle_bounds_bytes_per_s={"3 follower": 1.2e7, "1 leader": 11}))  # fmt: skip
    from minikafka.tools.analysis import Params

    check = run.throttle_check(Params())
    assert check.wire_judged and check.bound_bytes_per_s == 1.15 * MB
    assert (check.bound_for(1, "leader"), check.bound_for(3, "follower")) == (11.0, 1.2e7)
    assert check.bound_for(1, "follower") == 1.15 * MB  # no entry: the case's bound
    assert check.describe()["throttle_bounds_bytes_per_s"] == {"1 leader": 11.0,
                                                                "3 follower": 1.2e7}  # fmt: skip
    with pytest.raises(ConfigError, match="'throttle_wire_judged' is 1; expected true, false"):
        load_run(write_run(tmp_path, "y", ORDERED, throttle_wire_judged=1))


# ------------------------------------------------------------------------ through Spark


@pytest.mark.spark
def test_a_sensor_with_its_own_bound_is_judged_against_it(report: Report) -> None:
    own, case = report.case("own_bound"), report.case("case_bound")
    b, c = _brokers(own), _brokers(case)
    # Both leader sides average 1.0 MB/s in each of their 4 windows: above node 1's own
    # 950 kB/s, under the case's 1.15 MB/s. The follower side has no entry: the case's bound.
    assert b["1 leader"]["bound_bytes_per_s"] == 950_000
    assert (b["1 leader"]["windows"], b["1 leader"]["windows_over"]) == (4, 4)
    assert b["1 leader"]["throttle_violated"] and own["throttle_violated"]
    assert b["2 follower"]["bound_bytes_per_s"] == 1.15 * MB
    assert not b["2 follower"]["throttle_violated"] and b["2 follower"]["windows_over"] == 0
    assert own["throttle_bounds_bytes_per_s"] == {"1 leader": 950_000}
    assert any("node 1 leader averaged 1000000 B/s" in f and "bound 950000 B/s; 4 of 4" in f
               for f in own["failures"])  # fmt: skip
    assert c["1 leader"]["bound_bytes_per_s"] == 1.15 * MB
    assert c["1 leader"]["windows_over"] == 0 and not case["throttle_violated"]
    assert c["1 leader"]["max_window_bytes_per_s"] == pytest.approx(MB)
    assert case["verdict"] == "pass" and case["throttle_bounds_bytes_per_s"] == {}


@pytest.mark.spark
def test_wire_bytes_beside_the_charged_record_bytes(report: Report) -> None:
    for name in ("own_bound", "case_bound"):
        b = _brokers(report.case(name))
        leader, follower = b["1 leader"], b["2 follower"]
        assert leader["throttled_bytes_during_move"] == 10 * MB
        assert leader["charged_record_bytes_during_move"] == 9 * MB  # less 1 MB of headers
        assert leader["wire_bytes_during_move"] == 12 * MB  # replication_bytes_out
        assert follower["charged_record_bytes_during_move"] == 9.5 * MB
        assert follower["wire_bytes_during_move"] == 11 * MB  # replication_bytes_in
        assert leader["max_wire_window_bytes_per_s"] == pytest.approx(1.2 * MB)
        assert follower["max_wire_window_bytes_per_s"] == pytest.approx(1.1 * MB)
    # Judged on the wire (own_bound): node 1's 1.2 MB/s is above its 950 kB/s; node 2's
    # 1.1 MB/s under the case's 1.15 MB/s. Not judged (case_bound): null, and no failure.
    own = _brokers(report.case("own_bound"))
    assert (own["1 leader"]["wire_violated"], own["1 leader"]["wire_windows_over"]) == (True, 4)
    assert own["2 follower"]["wire_violated"] is False
    assert report.case("own_bound")["wire_violated"] is True
    assert any(f.startswith("wire above the bound: node 1 leader") and "1200000 B/s" in f
               for f in report.case("own_bound")["failures"])  # fmt: skip
    other = report.case("case_bound")
    assert {b["wire_violated"] for b in other["brokers"]} == {None}
    assert other["wire_violated"] is None and other["throttle_wire_judged"] is False


@pytest.mark.spark
def test_the_order_in_which_partitions_caught_up(report: Report) -> None:
    # In partition order: rho 1. The isr_expand before the move, the later one of t-0 and the
    # one adding node 3 (not receiving) are not catch-ups of the move.
    assert report.case("own_bound")["catch_up"] == {
        "partitions": 6, "rank_correlation": 1.0, "first_s": 2.0, "last_s": 7.0,
    }  # fmt: skip
    # Shuffled, with a tie: the hand-computed rho (module docstring and SHUFFLED).
    up = report.case("case_bound")["catch_up"]
    assert up == {"partitions": 6, "rank_correlation": pytest.approx(0.1449, abs=1e-4),
                  "first_s": 2.0, "last_s": 6.0}  # fmt: skip
    assert up["rank_correlation"] == pytest.approx(2.5 / math.sqrt(17.5 * 17), abs=1e-4)


@pytest.mark.spark
def test_latency_of_partitions_still_in_sync_during_the_move(report: Report) -> None:
    lat = report.case("own_bound")["produce_latency"]
    # During the move: 6 batches at 11 s, t-5's at 16.5 s, t-6's at 19 s (never caught up),
    # and 6 at 18 s after their partitions caught up (500 ms): only the last are left out.
    assert lat["during"]["batches"] == 14 and lat["during"]["max_ms"] == 500.0
    ms = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0]
    assert lat["in_sync_during_move"] == {
        "batches": 8, "records": 80, "p50_ms": 45.0,
        "p99_ms": pytest.approx(ms[6] + 0.93 * (ms[7] - ms[6]), abs=1e-3), "max_ms": 80.0,
    }  # fmt: skip
    # Shuffled: t-5 caught up at 14 s, so its batch at 16.5 s is left out as well.
    other = report.case("case_bound")["produce_latency"]["in_sync_during_move"]
    assert (other["batches"], other["max_ms"]) == (7, 80.0)


def test_catch_up_figures_of_no_or_one_partition() -> None:
    from minikafka.tools.analysis.summary import catch_up_figures

    assert catch_up_figures([], "r") == {
        "partitions": 0, "rank_correlation": None, "first_s": None, "last_s": None,
    }  # fmt: skip
    # One partition (Spark's corr: null), or all in the same instant (NaN): rho is undefined.
    for rho in (None, math.nan):
        row = {"run_key": "r", "partitions": 1, "rho": rho, "first_s": 2.5, "last_s": 2.5}
        assert catch_up_figures([row], "r")["rank_correlation"] is None
    row = {"run_key": "r", "partitions": 3, "rho": -0.123456, "first_s": 1.0, "last_s": 4.0}
    assert catch_up_figures([row], "r")["rank_correlation"] == -0.1235
