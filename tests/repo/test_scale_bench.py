"""The scale benchmark's pure parts (benchmarks/scale_probes.py, scale_report.py, the options of
scale_bench.py): /proc parsing, log growth across a rotation, the table with failed cells, the
growth exponents and the goals. No cluster: the benchmark itself is run by hand."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """The benchmark modules, imported as the scripts import each other (top-level names)."""
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name: str):
        return importlib.import_module(name)

    return load


# ---------------------------------------------------------------------------------- probes


def test_cpu_ticks_are_counted_after_the_last_parenthesis(bench):
    probes = bench("scale_probes")
    # A command name with spaces and ")" must not shift the fields: utime 1200, stime 34.
    stat = "4242 (python) (x y) S 1 4242 4242 0 -1 4194560 900 0 0 0 1200 34 0 0 20 0 5 0"
    assert probes.parse_cpu_ticks(stat) == 1234


def test_cpu_seconds_of_this_process_grow_with_work(bench):
    probes = bench("scale_probes")
    before = probes.cpu_seconds(os.getpid())
    deadline = before + 0.05
    while probes.cpu_seconds(os.getpid()) < deadline:
        sum(range(10_000))
    assert probes.cpu_seconds(os.getpid()) >= deadline


def test_rss_is_read_in_bytes(bench):
    probes = bench("scale_probes")
    assert probes.parse_rss_bytes("Name:\tx\nVmRSS:\t   2048 kB\nVmSwap: 0 kB\n") == 2048 * 1024
    with pytest.raises(ValueError, match="VmRSS"):
        probes.parse_rss_bytes("Name:\tx\n")
    assert probes.rss_bytes(os.getpid()) > 1 << 20


def test_log_growth_counts_every_byte_across_a_roll(bench, tmp_path):
    probes = bench("scale_probes")
    live = tmp_path / "events.jsonl"
    live.write_bytes(b"a" * 100)
    (tmp_path / "events.jsonl.1").write_bytes(b"o" * 500)  # the oldest part: deleted by the roll
    (tmp_path / "metrics.jsonl").write_bytes(b"m" * 10)
    (tmp_path / "node.out").write_bytes(b"not a jsonl log")
    before = probes.log_files(tmp_path)
    with live.open("ab") as f:
        f.write(b"b" * 50)  # 50 more into the live file, which then rolls (max_files 2)
    (tmp_path / "events.jsonl.1").unlink()
    live.rename(tmp_path / "events.jsonl.1")
    live.write_bytes(b"c" * 30)  # the fresh live file, often on the deleted part's inode
    with (tmp_path / "metrics.jsonl").open("ab") as f:
        f.write(b"n" * 7)
    grown = probes.log_growth(before, probes.log_files(tmp_path))
    # A size difference of the totals would say (150 + 30) - (100 + 500) < 0 for events.
    assert grown == {"events": 80, "metrics": 7}


def test_a_reused_inode_is_a_new_file(bench):
    probes = bench("scale_probes")
    before = {(1, 9): probes.LogFile("events", 500, 1)}  # events.jsonl.1, deleted by a roll
    after = {(1, 9): probes.LogFile("events", 700, 0)}  # the fresh live file on its inode
    assert probes.log_growth(before, after) == {"events": 700}
    moved = {(1, 9): probes.LogFile("events", 600, 2)}  # the same part, shifted up by a roll
    assert probes.log_growth(before, moved) == {"events": 100}


def test_idle_figures_per_window(bench):
    probes = bench("scale_probes")
    a = probes.NodeReading(
        at=10.0, cpu_s=1.0, rss=50_000_000, logs={(1, 1): probes.LogFile("events", 0)}
    )
    b = probes.NodeReading(
        at=20.0, cpu_s=1.5, rss=60_000_000, logs={(1, 1): probes.LogFile("events", 2000)}
    )
    got = probes.idle_figures(a, b)
    assert got["cpu_pct"] == 5.0  # 0.5 s of CPU over 10 s
    assert got["rss_mb"] == 60.0
    assert got["log_bytes_per_s"] == 200.0
    assert got["log_bytes_per_s_by_kind"] == {"events": 200.0}


# ---------------------------------------------------------------------------------- report


def idle(cpu: float, rss: float, logs: float) -> dict:
    return {"cpu_pct": cpu, "rss_mb": rss, "log_bytes_per_s": logs}


def row(n: int, *, cpu: float, p99: float, create: float = 0.5, **over) -> dict:
    r = {
        "partitions": n,
        "node_configs": {},
        "load_avg_before": [0.5, 0.4, 0.3],
        "create": {"create_s": create},
        "settle": {"settled": True, "settle_s": 2.0},
        "idle": {"0": idle(0.5, 40, 100), "1": idle(cpu, 80, 900), "2": idle(cpu / 2, 70, 9000)},
        "latency": {"p50_ms": p99 / 2, "p99_ms": p99},
        "produce": {"mb_per_s": 100.0, "ratio_to_min_reference": 0.5, "batch_p99_ms": 300},
        "catchup": {"catchup_s": 12.0},
    }
    return r | over


def result(rows: list[dict]) -> dict:
    return {
        "machine": {
            "date": "2026-11-24T18:00:00+00:00",
            "commit": "abc",
            "nproc": 2,
            "cpu_model": "cpu",
            "python": "3.11",
            "platform": "linux",
            "load_avg_at_start": [0.1, 0.1, 0.1],
        },
        "config": {
            "seed": 7,
            "brokers": 3,
            "replication_factor": 2,
            "node_configs": {},
            "idle_s": 10.0,
            "latency_records": 1000,
            "latency_rate": 100.0,
            "produce_mb": 300.0,
            "produce_s": 30.0,
        },
        "references": {
            "trio_loopback_mb_per_s": 900.0,
            "lmdb_append_sync_mb_per_s": 400.0,
            "min_mb_per_s": 400.0,
            "lmdb_commit_p50_ms": 1.0,
            "lmdb_commit_p99_ms": 3.0,
        },
        "rows": rows,
    }


def test_growth_is_a_factor_and_an_exponent(bench):
    report = bench("scale_report")
    g = report.growth([row(100, cpu=1.0, p99=5.0), row(10_000, cpu=100.0, p99=5.0)])
    assert g["idle_cpu_pct"] == {"from": 100, "to": 10_000, "factor": 100.0, "exponent": 1.0}
    assert g["p99_ms"]["exponent"] == 0.0


def test_the_table_marks_failed_cells_and_goes_on(bench):
    report = bench("scale_report")
    broken = row(5000, cpu=2.0, p99=50.0, latency={"failed": "BenchError: 3/1000 sends done"})
    slow = row(5000, cpu=2.0, p99=2000.0)
    slow["latency"] |= {"achieved_per_s": 14.5, "rate_per_s": 100.0}
    dead = {
        "partitions": 20_000,
        "node_configs": {"max.broker.partitions": "20000"},
        "load_avg_before": [1.5, 1, 1],
        "start": {"failed": "ClusterError: node 2 not ready"},
    }
    text = report.render(result([row(100, cpu=1.0, p99=4.0), broken, slow, dead]))
    lines = text.splitlines()
    line_5000 = [ln for ln in lines if ln.lstrip().startswith("5000 ")][0]
    assert "failed[1]" in line_5000 and "2.0" in line_5000  # latency failed, idle measured
    assert "[1] 5000 latency: BenchError: 3/1000 sends done" in lines
    (line_20000,) = [ln for ln in lines if ln.lstrip().startswith("20000 ")]
    assert line_20000.count("failed[2]") == len(report.COLUMNS)
    assert "  20000: max.broker.partitions=20000" in lines
    assert "  5000: latency sends reached only 14.5/s" in lines
    assert "  at 20000: starts NO, elects NO, replicates NO, catches up NO" in lines
    assert "  idle CPU under 3 % per broker: met (2.0)" in lines
    assert "  acks=all p99 under 10 ms at 100 records/s: not measured" in lines
    assert "  node logs under 10 KB/s per node idle: met (9000)" in lines


def test_goals_say_not_met(bench):
    report = bench("scale_report")
    said = report.goals([row(5000, cpu=7.5, p99=12.0, create=3.0)])
    assert "  idle CPU under 3 % per broker: NOT met (7.5)" in said
    assert "  5,000 partitions created in under 1 s: NOT met (3.0)" in said


# ---------------------------------------------------------------------------------- options


def test_max_broker_partitions_is_raised_only_where_needed(bench):
    scale = bench("scale_bench")
    cfg = scale.ScaleConfig(seed=1, partitions=(100,))
    assert scale.node_configs_for(5000, cfg) == {}
    assert scale.node_configs_for(20_000, cfg) == {"max.broker.partitions": "20000"}


def test_quick_shrinks_what_was_not_given(bench):
    scale = bench("scale_bench")
    cfg = scale.config_from(scale.parse_args(["--quick", "--idle-s", "7", "--seed", "3"]))
    assert cfg.partitions == scale.QUICK_COUNTS
    assert cfg.idle_s == 7.0 and cfg.produce_mb == scale.QUICK["produce_mb"]
    full = scale.config_from(scale.parse_args(["--partitions", "100,5000", "--seed", "3"]))
    assert full.partitions == (100, 5000) and full.idle_s == 10.0  # ScaleConfig's default


@pytest.mark.parametrize("bad", ["0", "100,x", ""])
def test_bad_partition_counts_get_one_line(bench, bad, capsys):
    scale = bench("scale_bench")
    with pytest.raises(SystemExit):
        scale.parse_args(["--partitions", bad, "--seed", "1"])
    assert "positive partition counts" in capsys.readouterr().err


# ------------------------------------------------------------------- cluster_bench's figures


def test_the_replicated_work_is_two_appends_and_two_transfers_per_byte(bench):
    refs = {"lmdb_append_sync_mb_per_s": 400.0, "trio_loopback_mb_per_s": 1600.0}
    assert bench("cluster_bench").replicated_work_mb_per_s(refs) == pytest.approx(160.0)


def test_the_issue_targets_judge_against_the_single_step_floor(bench):
    refs = {"lmdb_append_sync_mb_per_s": 400.0, "trio_loopback_mb_per_s": 1600.0}
    out = bench("cluster_bench").judged(
        refs, produce_mb_per_s=120.0, catchup_mb_per_s=360.0, catchup_from_ready_mb_per_s=380.0
    )
    assert out["ratios"] == {
        "catchup_to_min_reference": 0.9,
        "catchup_from_ready_to_min_reference": 0.95,
        "produce_to_min_reference": 0.3,
        "produce_to_replicated_work": 0.75,
    }
    assert out["targets"]["produce_met"] is False  # 0.3 < 0.7
    assert out["targets"]["catchup_met"] is True  # 0.9 >= 0.9
