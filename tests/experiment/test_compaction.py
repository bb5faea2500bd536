"""The compaction experiment: its keyed workload (experiment/workload.py, testing/load.py), its
catalog entry, and its verdict (experiment/verdict.py with checker/compaction.py), on a short
simulated run of the catalog's spec and on that run's folder tampered with.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from minikafka.cli.tool_runner import run_command
from minikafka.core.records import decode_records, iter_batches, make_batch
from minikafka.errors import ConfigError
from minikafka.experiment.catalog import variants
from minikafka.experiment.recheck import recheck
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.verdict import compacted, disk_losses
from minikafka.experiment.workload import WorkloadSpec, encode_value, key_of
from minikafka.sim.experiment import run_sim_experiment
from minikafka.testing.load import batch_of

# ---------------------------------------------------------------------------- the workload


def test_a_keyed_batch_carries_each_values_key_and_an_unkeyed_one_is_as_before() -> None:
    values = [encode_value(v, 20) for v in (46, 47, 48)]
    keys = [key_of(v, 47) for v in (46, 47, 48)]
    assert keys == [b"k46", b"k0", b"k1"]
    raw, n = batch_of(values, now_ms=5, keys=keys)
    (batch,) = iter_batches(raw)
    assert n == 3 and [r.key for r in decode_records(batch)] == keys
    plain, _ = batch_of(values, now_ms=5)
    assert plain == make_batch([(5, None, v) for v in values])  # the bytes of every other run
    with pytest.raises(ValueError, match="2 keys for 3 values"):
        batch_of(values, keys=keys[:2])


def test_keys_are_a_spec_field_passed_to_the_workload_and_written_only_when_set() -> None:
    assert ExperimentSpec(name="x", keys=47).workload().keys == 47
    assert "keys" not in ExperimentSpec(name="x").to_json()  # experiment.json as it was
    doc = ExperimentSpec(name="x", keys=47).to_json()
    assert doc["keys"] == 47 and ExperimentSpec.from_json(doc).keys == 47
    with pytest.raises(ConfigError, match="keys -1: expected an integer >= 0"):
        ExperimentSpec(name="x", keys=-1)
    with pytest.raises(ValueError, match="keys True"):
        WorkloadSpec(topic="t", partitions=1, keys=True)


# -------------------------------------------------------------------------- the catalog


def test_the_catalog_entry_is_a_keyed_compacted_topic_with_a_leader_killed() -> None:
    (spec,) = variants("compaction", seed=1)
    assert compacted(spec) and (spec.brokers, spec.partitions, spec.replication_factor) == (3, 3, 3)
    assert spec.keys == 47 and spec.keys % spec.batch_records  # batches straddle keys
    configs = spec.all_node_configs()
    assert configs["log.cleanup.policy"] == "compact" and configs["log.roll.ms"] == "1000"
    assert configs["log.cleaner.backoff.ms"] == "500"
    (kill,) = spec.faults
    assert (kill.kind, str(kill.target), kill.start_s, kill.end_s) == (
        "kill",
        "leader:0",
        7.5,
        12.5,
    )
    assert spec.produce_s == 20.0 and {str(e) for e in spec.expect} == {
        "log_cleaner_passes >= 1", "log_cleaner_records_removed >= 1",
        "compaction.values_compacted >= 1",
    }  # fmt: skip
    assert not compacted(replace(spec, keys=0))
    assert not compacted(replace(spec, node_configs={**spec.node_configs,
                                                     "log.cleanup.policy": "delete"}))  # fmt: skip
    assert compacted(replace(spec, node_configs={"log.cleanup.policy": "delete, compact"}))


def test_disk_losses_are_the_starts_of_wipes_and_power_losses() -> None:
    faults = [
        {"time": 1.0, "event": "start", "kind": "kill", "node": 1},
        {"time": 2.0, "event": "start", "kind": "wipe", "node": 3},
        {"time": 4.0, "event": "end", "kind": "wipe", "node": 3},
        {"time": 5.0, "event": "start", "kind": "power-loss", "node": 2},
        {"time": 6.0, "event": "healed"},
    ]
    assert disk_losses(faults) == ((3, 2.0), (2, 5.0))


# ------------------------------------------------------------------ a short simulated run


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The catalog's spec for 8 s at a quarter of the load (tests/sim's shortened runs)."""
    (spec,) = variants("compaction", seed=7, duration_s=8.0)
    spec = replace(spec, records_per_s=spec.records_per_s / 4)
    out = run_sim_experiment(spec, tmp_path_factory.mktemp("sim"), report=False,
                             tools=run_command)  # fmt: skip
    assert out.crash is None
    return out.path


def _results(path: Path) -> dict:
    return json.loads((path / "results.json").read_text())


def test_a_short_simulated_run_is_valid_and_the_cleaner_rewrote_batches(short_run: Path) -> None:
    results = _results(short_run)
    assert results["valid"] is True, results["summary"]
    anomalies = results["checker"]["anomalies"]
    assert anomalies["compacted"]["count"] > 0 and not anomalies["compacted"]["invalid"]
    for name in ("compaction_lost_latest", "compaction_kept_stale", "replicas_diverge"):
        assert anomalies[name] == {"count": 0, "invalid": True, "examples": []}, name
    assert results["checker"]["counts"]["replica_dumps"] == 9  # 3 partitions x 3 replicas
    doc = results["compaction"]
    assert doc["keys"] == 47 and doc["log_cleaner_passes"] >= 1
    for p in doc["final_reads"].values():  # every final read: 47 keys, cleaned below a point
        assert p["keys"] == 47 and 0 < p["clean_point"] <= p["cleaned_at_most"]
    # batches kept with gaps inside or at their end (47 keys, 10 values a batch): the consumers
    # and the final read stepped over them (workload.py `_next_offset`)
    events = [json.loads(line) for f in short_run.glob("nodes/node-*/events.jsonl")
              for line in f.read_text().splitlines()]  # fmt: skip
    assert sum(e.get("batches_rewritten", 0) for e in events if e["event"] == "log_cleaned") > 0


def _tampered(run: Path, tmp_path: Path, change) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    lines = [json.loads(line) for line in (copy / "history.jsonl").read_text().splitlines()]
    final = next(d for d in lines if d["f"] == "final-read" and d["type"] == "ok")
    final["records"] = change(final["records"])
    (copy / "history.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    return copy


def test_the_checker_catches_a_stale_record_planted_in_the_runs_final_read(
    short_run: Path, tmp_path: Path
) -> None:
    """The first acknowledged value of the partition, long superseded, put back at its offset:
    below the leader's reported first dirty offset, its key now appears twice."""
    history = (short_run / "history.jsonl").read_text().splitlines()
    first = next(json.loads(x) for x in history if '"ok","f":"send"' in x)
    sent = next(json.loads(x) for x in history if json.loads(x)["index"] == first["index"] - 1)
    assert first["offset"] == 0 and first["partition"] == sent["partition"] == 0
    run = _tampered(short_run, tmp_path, lambda rs: [[0, sent["values"][0]], *rs])
    check = recheck(run)
    assert check.results["valid"] is False
    (e, *_) = check.results["checker"]["anomalies"]["compaction_kept_stale"]["examples"]
    assert (e["offset"], e["value"], e["source"]) == (0, sent["values"][0], "final-read")


def test_the_checker_catches_the_latest_value_of_a_key_dropped_from_the_final_read(
    short_run: Path, tmp_path: Path
) -> None:
    run = _tampered(short_run, tmp_path, lambda rs: rs[:-1])
    anomalies = recheck(run).results["checker"]["anomalies"]
    assert anomalies["compaction_lost_latest"]["count"] == 1 and anomalies["lost"]["count"] == 1
