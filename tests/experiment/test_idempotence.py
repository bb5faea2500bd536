"""The experiment's idempotence settings (spec.py, catalog.py, the CLI's specs_from)."""

from __future__ import annotations

import pytest

from minikafka.errors import ConfigError
from minikafka.experiment.catalog import variants, with_overrides
from minikafka.experiment.spec import ExperimentSpec


def test_retries_off_and_idempotence_on_by_default_and_passed_to_the_workload() -> None:
    spec = ExperimentSpec(name="x")
    assert (spec.producer_retries, spec.idempotence) == (False, True)
    w = ExperimentSpec(name="x", producer_retries=True, idempotence=False).workload()
    assert (w.retries, w.idempotence) == (True, False)
    assert spec.to_json()["idempotence"] is True


def test_idempotent_retries_need_acks_all() -> None:
    with pytest.raises(ConfigError, match="acks all"):
        ExperimentSpec(name="x", producer_retries=True, acks=1)
    ExperimentSpec(name="x", producer_retries=True, acks=1, idempotence=False)  # accepted


def test_the_catalog_runs_leader_kill_with_retrying_idempotent_producers() -> None:
    (spec,) = variants("leader-kill-retrying", seed=3)
    assert (spec.producer_retries, spec.idempotence) == (True, True)
    assert spec.faults == variants("leader-kill", seed=3)[0].faults
    assert not with_overrides(spec, idempotence=False).idempotence  # --no-idempotence


def test_the_produce_command_refuses_idempotence_without_acks_all() -> None:
    from click.testing import CliRunner

    from minikafka.cli.main import main

    result = CliRunner().invoke(
        main, ["produce", "t", "--acks", "1", "--idempotence", "--bootstrap", "127.0.0.1:1"]
    )
    assert result.exit_code == 2 and "needs --acks all" in result.output
    assert "--no-idempotence" in CliRunner().invoke(main, ["produce", "--help"]).output


def test_the_experiment_command_has_the_retry_and_idempotence_switches() -> None:
    from click.testing import CliRunner

    from minikafka.cli.main import main

    out = CliRunner().invoke(main, ["experiment", "run", "--help"]).output
    assert "--retries / --no-retries" in out and "--idempotence / --no-idempotence" in out
