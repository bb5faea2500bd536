"""`minikafka reassign --plan` without a cluster: the traffic each broker carries, the
first-window burst, deadlines, the binding throttle and the plan's inputs.
"""

from __future__ import annotations

import json

import pytest

from minikafka.cli import reassign_plan, reassign_plan_inputs
from minikafka.common import TopicPartition
from minikafka.tools.reassign import move_size, runner
from minikafka.tools.reassign.moves import PartitionMove
from tests.cli.reassign_support import MOVES, T0, T1, T2, invoke, refused, tp_file

# ---------------------------------------------------------------------------- plan


def test_traffic_counts_what_the_current_leader_sends_to_every_destination():
    moves = {
        T0: PartitionMove(sources=(1, 2), destinations=(3, 4)),  # leader 1 sends twice
        T1: PartitionMove(sources=(2, 3), destinations=(1,)),  # leader 3
        T2: PartitionMove(sources=(1, 2), destinations=()),  # a reorder: nothing moves
    }
    traffic = move_size.traffic_per_broker(
        moves, {T0: 100, T1: 10, T2: 1000}, {T0: 1, T1: 3, T2: 1}
    )
    assert {b: (t.copies_in, t.sends_out, t.bytes) for b, t in traffic.items()} == {
        1: (10, 200, 200),
        2: (0, 0, 0),
        3: (100, 10, 100),
        4: (100, 0, 100),
    }


def plan_inputs(**over) -> reassign_plan.Inputs:
    base = dict(
        moved=2,
        total=4,
        bytes_to_move=6_000_000,
        traffic={
            1: move_size.BrokerTraffic(broker=1, copies_in=4_000_000, sends_out=0),
            2: move_size.BrokerTraffic(broker=2, copies_in=1_500_000, sends_out=2_000_000),
        },
        bytes_in={},
        bytes_in_source="unknown",
        replication_factor=2,
        num_brokers=3,
        configs={
            "replica.fetch.response.max.bytes": (262144, "cluster.json"),
            "replication.quota.window.num": (11, "default"),
            "replication.quota.window.size.seconds": (1, "default"),
        },
        ongoing=0,
    )
    base.update(over)
    return reassign_plan.Inputs(**base)


def test_plan_at_a_throttle_marks_brokers_inside_the_first_window_burst():
    doc, lines = reassign_plan.at_throttle(plan_inputs(), 2_000_000, None)
    # Broker 1: 4 MB / 2 MB/s = 2 s. Broker 2: max(1.5, 2.0) MB = T x 1 s: the burst.
    assert doc["prediction"]["max_seconds"] == 2.0
    assert doc["prediction"]["within_first_window"] == [2]
    assert doc["check"]["network_bytes_per_s"] is None and doc["ok"]
    text = "\n".join(lines)
    assert "<= 1.0 s" in text and "At 2.0 MB/s the move takes 2.0 s (broker 1" in text
    assert "Not checked without --network-bytes-per-s: T < N - IN/R" in text


def test_plan_checks_fail_with_their_reasons():
    inputs = plan_inputs(bytes_in={1: 3_000_000.0, 2: 0.0})
    doc, lines = reassign_plan.at_throttle(inputs, 2_000_000, 2_500_000)
    assert not doc["ok"] and doc["prediction"]["finishes"] is False
    rules = [f["rule"] for f in doc["check"]["failures"]]
    assert rules == ["IN < T", "T < N - IN/R"]
    assert any(line.startswith("[IN < T] broker 1") for line in lines)
    assert any("never finishes" in line for line in lines)


def test_plan_for_a_deadline():
    doc, lines = reassign_plan.for_deadline(plan_inputs(), 4.0, 10_000_000, 0.3)
    # 4 MB in 4 s needs 1 MB/s; 30% of 10 MB/s allows 3 MB/s.
    assert doc["plan"]["required_throttle"] == 1_000_000 and doc["ok"]
    assert any(line.startswith("to finish in 4 s: throttle 1.0 MB/s") for line in lines)


def decommission_inputs(metrics_lines=None, **node_configs: str) -> reassign_plan.Inputs:  # noqa: ANN001
    """Broker 1 leaves (the one-to-two system test): t's 4 partitions of 10 MB on [1,2]/[1,3],
    led by broker 1, move to [2,3]/[3,2]; u's 4 partitions stay on [2,3], led by broker 2.
    BytesInPerSec 2.4 MB/s on broker 1, 1.2 MB/s on broker 2."""
    t = [TopicPartition("t", p) for p in range(4)]
    u = [TopicPartition("u", p) for p in range(4)]
    view = runner.ClusterView(
        assignment={
            **{tp: (1, 2) if tp.partition % 2 == 0 else (1, 3) for tp in t},
            **{tp: (2, 3) for tp in u},
        },
        leaders={**{tp: 1 for tp in t}, **{tp: 2 for tp in u}},
        live_brokers=(1, 2, 3),
        ongoing={},
    )
    return reassign_plan_inputs.inputs_from(
        view,
        {tp: [2, 3] if tp.partition % 2 == 0 else [3, 2] for tp in t},
        {tp: 10_000_000 for tp in t},
        bytes_in={1: 2_400_000.0, 2: 1_200_000.0},
        bytes_in_source="test",
        node_configs=node_configs,
        metrics_lines=metrics_lines,
    )


def test_plan_names_the_binding_throttle_and_both_figures_under_load():
    inputs = decommission_inputs()
    text = "\n".join(inputs.lines())
    # Broker 1 leads 4 partitions (0.6 MB/s each), broker 2 leads 4 (0.3 MB/s each).
    assert "1: 4 (600.0 kB/s each), 2: 4 (300.0 kB/s each)" in text
    assert "Replication quota: Kafka's algorithm; replication.quota.precise=false (default)" in text
    doc, lines = reassign_plan.at_throttle(inputs, 6_000_000, None)
    text = "\n".join(lines)
    # KIP-73: 40 MB / (6 - 2.4) MB/s = 11.1 s. The model (lists): broker 1's leader throttle
    # also carries the in-sync followers' 2.4 MB/s: 40 / (6 - 4.8) = 33.3 s.
    assert "At 6.0 MB/s the move takes 11.1 s (broker 1 is the slowest)" in text
    assert "broker 1's leader throttle binds: 40.0 MB to send at 6.0 MB/s less the 4.8 MB/s" in text
    assert "KIP-73's MoveTime 11.1 s (broker 1); the model 33.3 s: " in text
    assert "in-sync followers' 2.4 MB/s (replica lists count in-sync followers" in text
    assert "Kafka's algorithm (simulated): " in text
    assert doc["ok"] and doc["prediction"]["max_seconds"] == pytest.approx(40 / 3.6)
    assert doc["model"]["seconds"] == pytest.approx(40 / 1.2, abs=1e-3)
    assert doc["model"]["binding"]["broker"] == 1 and doc["model"]["binding"]["side"] == "leader"
    assert doc["model"]["differs_from_kip73"] and doc["quota_algorithm"] == "kafka"
    assert doc["kafka_simulation"]["ran"] and doc["kafka_simulation"]["seconds"] > 0
    # In KIP-542 mode the leader counts the destination only: K = 2.4 MB/s, as KIP-73 says.
    doc, lines = reassign_plan.at_throttle(inputs, 6_000_000, None, throttle_mode="reassignment")
    assert doc["model"]["mode"] == "kip542" and not doc["model"]["differs_from_kip73"]
    assert not any(line.startswith("KIP-73's MoveTime") for line in lines)


def test_plan_takes_each_partitions_inbound_from_its_leaders_partition_bytes_in():
    # Broker 1 leads t-0..t-3 and says ~160 kB/s for t-0 and t-1 (median of its lines); its gauge
    # leaves out t-2 and t-3, which had no bytes in their window: 0 B/s. Broker 2's
    # figure for t-0 is replication (a follower's) and not read.
    lines = {
        1: [
            {"ts": 1.0, "PartitionBytesInRate": {"t-0": 150_000.0, "t-1": 160_000.0}},
            {"ts": 2.0, "PartitionBytesInRate": {"t-0": 170_000.0, "t-1": 160_000.0}},
        ],
        2: [{"ts": 1.0, "PartitionBytesInRate": {"t-0": 9e9, "t-2": 9e9}}],
    }
    inputs = decommission_inputs(lines)
    rates = {m.partition: m.inbound_bytes_per_s for m in inputs.moving}
    assert rates == {0: 160_000.0, 1: 160_000.0, 2: 0.0, 3: 0.0}
    text = "\n".join(inputs.lines())
    assert (
        "  for the model, 4 of the 4 moving partitions: PartitionBytesInRate (median of the last "
        "10 s of the leaders' metrics.jsonl): t-0: 160.0 kB/s, t-1: 160.0 kB/s, t-2: 0 B/s, "
        "t-3: 0 B/s"
    ) in text
    assert inputs.to_json()["inbound_source"] == (
        "PartitionBytesInRate (median of the last 10 s of the leaders' metrics.jsonl)"
    )
    doc, _ = reassign_plan.at_throttle(inputs, 6_000_000, None)
    assert doc["model"]["inbound"] == inputs.inbound_source
    # A leader whose lines carry no gauge at all: the split, and the line says why.
    inputs = decommission_inputs({1: [{"ts": 1.0}, {"ts": 2.0}], 2: lines[2]})
    assert {m.inbound_bytes_per_s for m in inputs.moving} == {600_000.0}
    assert inputs.inbound_source == reassign_plan_inputs.SPLIT_NO_ENTRY
    assert (
        "  for the model, 4 of the 4 moving partitions: each broker's BytesInPerSec split evenly "
        "over the partitions it leads (moving or not; the last 10 s of the leader's metrics.jsonl "
        "carry no PartitionBytesInRate): 1: 4 (600.0 kB/s each)"
    ) in "\n".join(inputs.lines())
    assert inputs.to_json()["inbound_split"]["partitions_led"] == {1: 4, 2: 4}
    # Values that are not numbers count for none: those partitions alone take the split.
    odd = {1: [{"ts": 1.0, "PartitionBytesInRate": {"t-0": 1e5, "t-2": "x", "t-3": None}}]}
    doc = decommission_inputs(odd).to_json()
    assert doc["inbound_source"].startswith("per partition (moving_partitions' inbound_source)")
    assert [m["inbound_source"] for m in doc["moving_partitions"]] == [
        reassign_plan_inputs.MEASURED_SOURCE,
        reassign_plan_inputs.MEASURED_SOURCE,
        reassign_plan_inputs.SPLIT_NO_ENTRY,
        reassign_plan_inputs.SPLIT_NO_ENTRY,
    ]
    # Without the cluster's files: the split, and the line says why.
    inputs = decommission_inputs()
    assert inputs.inbound_source == reassign_plan_inputs.SPLIT_NO_FILES
    assert "(moving or not; no PartitionBytesInRate without the cluster's files)" in "\n".join(
        inputs.lines()
    )


def test_plan_on_a_precise_cluster_does_not_simulate_kafkas_algorithm():
    inputs = decommission_inputs(**{"replication.quota.precise": "true"})
    doc, lines = reassign_plan.at_throttle(inputs, 6_000_000, None)
    assert doc["quota_algorithm"] == "precise" and doc["kafka_simulation"] is None
    assert any("the model's figure is its prediction" in line for line in lines)
    assert not any("simulated" in line for line in lines)


def test_plan_for_a_deadline_adds_the_models_throttle():
    doc, lines = reassign_plan.for_deadline(decommission_inputs(), 10.0, 100_000_000, 0.3)
    # KIP-73: 2.4 + 40 / 10 = 6.4 MB/s; the model there: 40 / (6.4 - 4.8) = 25 s, and it needs
    # 4.8 + 4 = 8.8 MB/s.
    assert doc["plan"]["required_throttle"] == 6_400_000
    assert doc["model"]["seconds"] == pytest.approx(25.0, abs=1e-3)
    assert doc["model"]["required_throttle"] == pytest.approx(8_800_000, abs=1)
    assert any(
        line.startswith("The model needs 8.8 MB/s (8800000 B/s) to finish in 10.0 s (broker 1's")
        for line in lines
    )


def test_plan_throttle_mode_option(monkeypatch, tmp_path):
    f = tp_file(tmp_path, MOVES)
    refused(
        invoke("plan", "--reassignment-json-file", f, "--throttle", "5", "--throttle-mode", "x"),
        "--throttle-mode 'x': expected one of replication, reassignment",
    )
    monkeypatch.setattr(reassign_plan, "gather", lambda *a, then: then(decommission_inputs()))
    result = invoke(
        "plan", "--reassignment-json-file", f, "--throttle", "6000000",
        "--throttle-mode", "reassignment", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["model"]["throttle_mode"] == "reassignment" and doc["model"]["mode"] == "kip542"
    assert doc["inputs"]["inbound_split"]["partitions_led"] == {"1": 4, "2": 4}
    assert len(doc["inputs"]["moving_partitions"]) == 4
