"""The nemesis schedule (pure): Jepsen's quiet/fault rhythm, drawn from the seed."""

from __future__ import annotations

import pytest

from minikafka.errors import ConfigError
from minikafka.experiment.schedule import (
    KINDS,
    SIM_KINDS,
    Fault,
    Target,
    parse_kinds,
    parse_target,
    plan_schedule,
)


def plan(seed: int = 1, **kw: object) -> list[Fault]:
    args: dict = dict(
        kinds=("kill", "pause"), targets=[Target("random")], duration_s=30.0, interval_s=5.0,
        seed=seed, brokers=(1, 2, 3),
    )  # fmt: skip
    args.update(kw)
    return plan_schedule(**args)


def test_faults_alternate_with_quiet_intervals_inside_the_duration() -> None:
    faults = plan()
    assert [(f.start_s, f.end_s) for f in faults] == [(5, 10), (15, 20), (25, 30)]


def test_same_seed_same_schedule_and_other_seeds_differ() -> None:
    assert plan(7) == plan(7)
    schedules = {tuple((f.kind, str(f.target)) for f in plan(s)) for s in range(20)}
    assert len(schedules) > 5


def test_random_targets_are_resolved_to_brokers_when_planned() -> None:
    targets = {str(f.target) for s in range(10) for f in plan(s)}
    assert targets <= {"broker:1", "broker:2", "broker:3"}
    assert len(targets) == 3


def test_role_targets_stay_roles_until_the_fault_starts() -> None:
    faults = plan(targets=[Target("leader", 0)])
    assert {str(f.target) for f in faults} == {"leader:0"}


def test_network_faults_carry_their_parameters() -> None:
    faults = plan(kinds=("latency",), latency_ms=300)
    assert all(f.params == {"latency_ms": 300} for f in faults)
    faults = plan(kinds=("bandwidth",), bandwidth_bps=1000)
    assert all(f.params == {"bandwidth_bps": 1000} and f.needs_proxy for f in faults)


def test_no_fault_fits_a_duration_shorter_than_two_intervals() -> None:
    assert plan(duration_s=9.0) == []


@pytest.mark.parametrize(
    ("text", "want"),
    [("broker:2", Target("broker", 2)), ("leader:0", Target("leader", 0)),
     ("follower:5", Target("follower", 5)), ("controller", Target("controller")),
     (" random ", Target("random"))],
)  # fmt: skip
def test_parse_target(text: str, want: Target) -> None:
    assert parse_target(text) == want
    assert str(want) == text.strip()


@pytest.mark.parametrize("text", ["broker", "leader:x", "node:1", "", "broker:-1"])
def test_bad_targets_name_the_accepted_form(text: str) -> None:
    with pytest.raises(ConfigError, match="expected broker:N, controller, leader:P"):
        parse_target(text)


def test_parse_kinds() -> None:
    assert parse_kinds("kill, pause") == ("kill", "pause")
    assert parse_kinds("all") == tuple(k for k in KINDS if k not in SIM_KINDS)  # real runs' own
    assert parse_kinds("power-loss,disk-full,failed-write") == SIM_KINDS  # simulated only, by name
    with pytest.raises(ConfigError, match="expected a comma list of kill"):
        parse_kinds("kill,explode")


def test_bad_faults_are_refused() -> None:
    with pytest.raises(ConfigError, match="fault kind"):
        Fault(kind="explode", target=Target("random"), start_s=1, end_s=2)
    with pytest.raises(ConfigError, match="start"):
        Fault(kind="kill", target=Target("random"), start_s=3, end_s=2)
    with pytest.raises(ConfigError, match="latency_ms"):
        Fault(kind="latency", target=Target("random"), start_s=1, end_s=2)
    with pytest.raises(ConfigError, match="positive"):
        plan(interval_s=0)
