"""The experiment's inputs from node logs, its spec checks, the catalog, and value encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minikafka.errors import ConfigError
from minikafka.experiment import node_logs
from minikafka.experiment.catalog import CATALOG, variants, with_overrides
from minikafka.experiment.schedule import Fault, Target
from minikafka.experiment.spec import Expectation, ExperimentSpec
from minikafka.experiment.workload import decode_value, encode_value


def write(path: Path, lines: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{torn line")


def test_claims_samples_and_counters_from_node_logs(tmp_path: Path) -> None:
    n1 = tmp_path / "nodes" / "node-1"
    write(n1 / "events.jsonl", [
        {"ts": 100.5, "event": "become_leader", "topic": "exp", "partition": 0, "leader_epoch": 3},
        {"ts": 100.6, "event": "become_leader", "topic": "other", "partition": 0, "leader_epoch": 1},
        {"ts": 100.7, "event": "truncated", "topic": "exp", "partition": 0},
    ])  # fmt: skip
    write(n1 / "replicas.jsonl", [
        {"ts": 101.0, "node": 1, "replicas": [["exp", 0, 3, True, 10, 8, [1, 2]],
                                              ["other", 0, 1, False, 5, 5, None]]},
    ])  # fmt: skip
    write(n1 / "metrics.jsonl", [
        {"ts": 101.0, "leader_replication_throttled_bytes": 100, "isr_shrinks": 2},
        {"ts": 102.0, "leader_replication_throttled_bytes": 150,
         "leader_reassignment_throttled_bytes": 50, "isr_shrinks": 3},
        {"ts": 103.0, "leader_replication_throttled_bytes": 20, "isr_shrinks": 1},  # restarted
        {"ts": 104.0, "leader_replication_throttled_bytes": 90,
         "leader_replication_exempt_bytes": 40},  # 40 of 70 new bytes were in-sync
        {"ts": 105.0, "leader_replication_throttled_bytes": 150, "leader_replication_exempt_bytes": 40,
         "leader_replication_overhead_bytes": 50},  # 50 of 60 new bytes were Kafka headers
    ])  # fmt: skip
    assert node_logs.leadership_claims(tmp_path, "exp", 100.0) == [
        {"node": 1, "time": 0.5, "topic": "exp", "partition": 0, "leader_epoch": 3}
    ]
    (sample,) = node_logs.replica_samples(tmp_path, "exp", 100.0)
    assert sample == {
        "node": 1, "time": 1.0, "until": 1.0, "topic": "exp", "partition": 0, "leader_epoch": 3,
        "is_leader": True, "log_end_offset": 10, "high_watermark": 8, "isr": [1, 2],
    }  # fmt: skip
    # 3 shrinks before the restart, 1 after it; since t=101.5, the 1 and the 1 after the restart.
    assert node_logs.counter_totals(tmp_path, ("isr_shrinks",)) == {"isr_shrinks": 4}
    assert node_logs.counter_totals(tmp_path, ("isr_shrinks",), since=101.5) == {"isr_shrinks": 2}


def test_values_round_trip_through_record_bytes() -> None:
    raw = encode_value(123456, 100)
    assert len(raw) == 100 and decode_value(raw) == 123456
    assert decode_value(encode_value(7, 1)) == 7  # never truncated below the value


def test_spec_checks_name_the_accepted_form() -> None:
    with pytest.raises(ConfigError, match="replication factor 3 needs at least that many brokers"):
        ExperimentSpec(name="x", brokers=2)
    with pytest.raises(ConfigError, match="duration_s"):
        ExperimentSpec(name="x", duration_s=0)
    with pytest.raises(ConfigError, match="acks"):
        ExperimentSpec(name="x", acks=2)
    with pytest.raises(ConfigError, match="expectation op"):
        Expectation(counter="isr_shrinks", op="~", value=1)


def test_a_network_fault_turns_the_proxy_on() -> None:
    fault = Fault(kind="partition", target=Target("broker", 1), start_s=1, end_s=2)
    assert ExperimentSpec(name="x", faults=(fault,)).fault_proxy


def test_every_catalog_entry_builds_and_serialises() -> None:
    for name in CATALOG:
        specs = variants(name, seed=3)
        assert specs and all(s.description for s in specs)
        for s in specs:
            json.dumps(s.to_json())
    assert [s.name for s in variants("isr-thrash", seed=1)] == [
        "isr-thrash-exempt-off", "isr-thrash-exempt-on",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="no experiment 'nope'; known: leader-kill"):
        variants("nope", seed=1)


def test_overrides_ignore_unset_options() -> None:
    (spec,) = variants("leader-kill", seed=1, duration_s=12.0)
    assert spec.duration_s == 12.0
    changed = with_overrides(spec, producers=2, consumers=None)
    assert (changed.producers, changed.consumers) == (2, spec.consumers)


def test_expectations() -> None:
    e = Expectation(counter="isr_shrinks", op=">=", value=1)
    assert e.holds(2) and not e.holds(0) and str(e) == "isr_shrinks >= 1"


# -- per-partition catch-up (experiment/verdict.py `catch_up`) -------------------------------


def test_isr_rejoins_are_the_first_expansions_taking_the_broker_back(tmp_path: Path) -> None:
    n1, n2 = tmp_path / "nodes" / "node-1", tmp_path / "nodes" / "node-2"
    expand = {"event": "isr_expand", "topic": "exp"}
    write(n1 / "events.jsonl", [
        {**expand, "ts": 101.0, "partition": 0, "old_isr": [1, 2], "isr": [1, 2, 3]},  # before
        {**expand, "ts": 115.0, "partition": 0, "old_isr": [1, 2], "isr": [1, 2, 3]},
        {**expand, "ts": 118.0, "partition": 0, "old_isr": [1, 2], "isr": [1, 2, 3]},  # again
        {**expand, "ts": 116.0, "partition": 1, "old_isr": [1], "isr": [1, 2]},  # not broker 3
        {**expand, "ts": 117.0, "partition": 1, "old_isr": [1, 3], "isr": [1, 2, 3]},  # had it
        {**expand, "ts": 116.5, "partition": 0, "topic": "other", "old_isr": [1], "isr": [1, 3]},
    ])  # fmt: skip
    write(n2 / "events.jsonl", [
        {**expand, "ts": 119.25, "partition": 2, "old_isr": [2], "isr": [2, 3]},  # a new leader
    ])  # fmt: skip
    rejoins = node_logs.isr_rejoins(tmp_path, "exp", 3, 100.0, since_s=10.0)
    assert rejoins == {0: 15.0, 2: 19.25}


def test_catch_up_times_count_from_the_brokers_return(tmp_path: Path) -> None:
    from minikafka.experiment.verdict import catch_up, summary

    n1 = tmp_path / "nodes" / "node-1"
    write(n1 / "events.jsonl", [
        {"event": "isr_expand", "topic": "exp", "ts": 100.0 + t, "partition": p,
         "old_isr": [1, 2], "isr": [1, 2, 3]}
        for p, t in [(0, 16.0), (1, 15.5), (2, 21.0)]
    ])  # fmt: skip
    wipe = Fault(kind="wipe", target=Target("broker", 3), start_s=10.0, end_s=14.0)
    spec = ExperimentSpec(name="x", partitions=4, faults=(wipe,), catch_up_broker=3)
    faults = [
        {"time": 10.01, "event": "start", "kind": "wipe", "node": 3},
        {"time": 14.5, "event": "end", "kind": "wipe", "node": 3},  # back (ready) at 14.5 s
    ]
    got = catch_up(spec, tmp_path, 100.0, faults)
    assert got == {
        "broker": 3, "back_at_s": 14.5, "partitions": {"0": 1.5, "1": 1.0, "2": 6.5},
        "rejoined": 3, "of": 4, "missing": [3],
        "min_s": 1.0, "median_s": 1.5, "max_s": 6.5, "spread_s": 5.5,
    }  # fmt: skip
    results = {
        "valid": True, "exit_code": 0, "faults": [], "throttle": {}, "expectations": [],
        "problems": [], "counters": {"isr_shrinks": 0, "isr_expands": 3},
        "checker": {"counts": {"leadership_claims": 0}}, "catch_up": got,
    }  # fmt: skip
    assert (
        "  catch-up of broker 3 (back at 14.5 s): 3/4 partitions rejoined the ISR after "
        "min 1.00 s, median 1.50 s, max 6.50 s; spread 5.50 s"
    ) in summary(results, "checker").splitlines()


def test_catch_up_broker_must_be_one_of_the_brokers() -> None:
    with pytest.raises(ConfigError, match="catch_up_broker 4: expected a broker id from 1 to 3"):
        ExperimentSpec(name="x", catch_up_broker=4)
