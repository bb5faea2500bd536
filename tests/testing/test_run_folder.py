"""The run-folder writer (minikafka/testing/run_folder.py): the layout the analysis reads."""

from __future__ import annotations

import json

import pytest

from minikafka.errors import ConfigError
from minikafka.testing.run_folder import CaseInfo, RunFolder, read_jsonl

CASE = dict(
    case="2n-wipe",
    seed=73,
    nodes=[1, 2],
    partitions=100,
    replication_factor=2,
    throttle_bytes_per_s=2_000_000,
    throttle_mode="lists",
    receiving_brokers=[2],
    sending_brokers=[1],
    bytes_to_move=16_000_000,
    produce_bytes_per_s=600_000,
    predicted_move_s=11.43,
)


def test_a_folder_holds_the_contract_files(tmp_path):
    node_dir = tmp_path / "data" / "node-1"
    node_dir.mkdir(parents=True)
    (node_dir / "events.jsonl").write_text('{"event":"node_ready"}\n')
    (node_dir / "metrics.jsonl").write_text('{"ts":1.0}\n')
    with RunFolder.create(tmp_path / "runs", "2n-wipe") as folder:
        folder.write_case(CaseInfo(**CASE, extra={"layout": "wipe"}))
        t = folder.event("move_start", how="restart")
        folder.record_produced(topic="t", partition=3, offset=40, count=4, latency_ms=12.345)
        folder.record_consumed(topic="t", partition=3, offset=40, count=4)
        folder.tool_output(
            "configs-topic", argv=["minikafka", "configs", "--add-config", "a=[0:1,1:2]"],
            returncode=0, stdout="done\n", stderr="",
        )  # fmt: skip
        folder.collect_node_logs({1: node_dir})
    root = tmp_path / "runs" / "2n-wipe"
    case = json.loads((root / "case.json").read_text())
    assert case == {**CASE, "produce_bytes_per_s": 600000.0, "layout": "wipe"}
    assert read_jsonl(root / "timeline.jsonl") == [
        {"ts": round(t, 4), "event": "move_start", "how": "restart"}
    ]
    (produced,) = read_jsonl(root / "clients" / "produced.jsonl")
    assert produced | {"ts": 0} == {
        "ts": 0, "topic": "t", "partition": 3, "offset": 40, "count": 4, "latency_ms": 12.35,
    }  # fmt: skip
    assert read_jsonl(root / "clients" / "consumed.jsonl")[0]["count"] == 4
    tool = (root / "tool" / "01-configs-topic.txt").read_text().splitlines()
    assert tool == ["$ minikafka configs --add-config 'a=[0:1,1:2]'", "# exit code 0", "done"]
    assert (root / "nodes" / "node-1" / "metrics.jsonl").read_text() == '{"ts":1.0}\n'
    assert (root / "nodes" / "node-1" / "events.jsonl").exists()


def test_a_second_run_of_the_same_case_gets_its_own_folder(tmp_path):
    a = RunFolder.create(tmp_path, "case")
    b = RunFolder.create(tmp_path, "case")
    assert (a.path.name, b.path.name) == ("case", "case-2")


def test_results_can_be_added_later_without_touching_the_logs(tmp_path):
    with RunFolder.create(tmp_path, "case") as folder:
        folder.event("move_end")
    again = RunFolder(folder.path)
    again.write_results({"verdict": "pass"})
    assert again.read_json("results.json") == {"verdict": "pass"}
    assert len(read_jsonl(folder.path / "timeline.jsonl")) == 1
    assert not (folder.path / "clients" / "produced.jsonl").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"case": "a b"}, "case 'a b'"),
        ({"nodes": [1, -2]}, "nodes [1, -2]: expected a list of node ids"),
        ({"throttle_mode": "kafka"}, "throttle_mode 'kafka'"),
        ({"throttle_bytes_per_s": None}, "throttle_mode 'lists' needs throttle_bytes_per_s"),
        ({"throttle_bytes_per_s": 0}, "throttle_bytes_per_s 0"),
        ({"predicted_move_s": -1.0}, "predicted_move_s -1.0"),
        ({"bytes_to_move": True}, "bytes_to_move True"),
        ({"throttle_window_s": 0}, "throttle_window_s 0: expected whole seconds"),
        ({"throttle_window_s": 2.5}, "throttle_window_s 2.5: expected whole seconds"),
        ({"throttle_bound_bytes_per_s": 0}, "throttle_bound_bytes_per_s 0: expected B/s > 0"),
        ({"throttle_window_past_end": "yes"}, "throttle_window_past_end 'yes'"),
        ({"throttle_exempt_counted": 0}, "throttle_exempt_counted 0"),
        ({"throttle_judged": "all"}, "throttle_judged 'all'"),
        ({"predicted_move_alternatives_s": [20.0, 0]}, "expected a list of numbers > 0"),
        ({"predicted_move_alternatives_s": 20.0}, "expected a list of numbers > 0"),
        (
            {"predicted_move_s": None, "predicted_move_alternatives_s": [20.0]},
            "predicted_move_alternatives_s needs predicted_move_s",
        ),
    ],
)
def test_a_malformed_case_is_refused_in_one_line(change, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        CaseInfo(**(CASE | change))


def test_the_judging_fields_are_written_only_when_set(tmp_path):
    # A throttle without a mode (both classes: a KIP-1009 broker-wide throttle) is accepted.
    plain = CaseInfo(**(CASE | {"throttle_mode": None})).to_json()
    assert "throttle_window_s" not in plain and "throttle_judged" not in plain
    assert "predicted_move_alternatives_s" not in plain
    assert plain["throttle_mode"] is None
    own = CaseInfo(**CASE, predicted_move_alternatives_s=(15.2,),
                   throttle_window_s=12, throttle_bound_bytes_per_s=2.3e6,
                   throttle_window_past_end=True, throttle_judged="run",
                   throttle_exempt_counted=False)  # fmt: skip
    with RunFolder.create(tmp_path, "case") as folder:
        folder.write_case(own)
    written = folder.read_json("case.json")
    assert {k: v for k, v in written.items() if k not in CASE} == {
        "predicted_move_alternatives_s": [15.2], "throttle_window_s": 12, "throttle_bound_bytes_per_s": 2.3e6,
        "throttle_window_past_end": True, "throttle_judged": "run",
        "throttle_exempt_counted": False,
    }  # fmt: skip
    from minikafka.tools.analysis import Params, load_run

    (folder.path / "nodes" / "node-1").mkdir()
    (folder.path / "nodes" / "node-1" / "metrics.jsonl").write_text('{"ts": 1.0}\n')
    run = load_run(folder.path)  # what the analysis reads back
    assert run.predicted_move_alternatives_s == (15.2,)
    check = run.throttle_check(Params())
    assert (check.window_s, check.bound_bytes_per_s, check.past_end, check.judged,
            check.exempt_counted) == (12, 2.3e6, True, "run", False)  # fmt: skip


def test_extra_fields_may_not_overwrite_the_contract():
    with pytest.raises(ConfigError, match="overwrite contract fields"):
        CaseInfo(**CASE, extra={"seed": 1})


def test_a_line_cut_short_by_a_crash_is_skipped(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"a":1}\n{"a":2}\n{"a":')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []
