"""`minikafka reassign --verify` and `--cancel` on fakes: statuses in Kafka's words, clearing
throttles, cancelling only the moves in progress, and our errors unwrapped from exception groups.
"""

from __future__ import annotations

import pytest

from minikafka.cli.in_process import finish
from minikafka.errors import BrokerError, ConfigError, ErrorCode
from minikafka.tools.reassign import runner
from minikafka.tools.reassign.moves import OngoingReassignment
from minikafka.wire.messages import DescribeConfigsEntry
from tests.cli.reassign_support import T0, T1, T2, T3, FakeAdmin, described, view

# ---------------------------------------------------------------------------- --verify, --cancel


def entry(name: str, value: str, source: str = "dynamic_entity") -> DescribeConfigsEntry:
    return DescribeConfigsEntry(name=name, value=value, source=source)


def test_statuses_in_kafkas_words():
    cluster = view(
        {T0: (2, 3), T1: (3, 1, 2), T2: (1, 2)},
        {T1: OngoingReassignment(replicas=(3, 1, 2), adding=(3,), removing=(2,))},
    )
    states = runner.statuses(cluster, {T0: [2, 3], T1: [3, 1], T2: [2, 3]})
    assert [s.line() for s in states] == [
        "Reassignment of partition t-0 is complete.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is [1, 2] rather "
        "than [2, 3].",
    ]
    assert [s.status for s in states] == ["complete", "in_progress", "mismatch"]
    with pytest.raises(ConfigError, match="unknown partition t-3"):
        runner.statuses(cluster, {T3: [1]})


async def test_clear_throttles_removes_only_what_is_set_on_entities_in_one_request():
    brokers = [
        described(
            "brokers",
            "1",
            [
                entry("leader.replication.throttled.rate", "5"),
                entry("follower.replication.throttled", "true"),  # KIP-1009: not a rate
            ],
        ),
        described(
            "brokers", "", [entry("follower.replication.throttled.rate", "5", "dynamic_default")]
        ),
    ]
    topics = [
        described("topics", name, [entry("leader.replication.throttled.replicas", "0:1")])
        for name in ("t", "other")
    ]
    admin = FakeAdmin(by_type={"brokers": brokers, "topics": topics})
    cleared = await runner.clear_throttles(admin, {"t"})
    assert [(c.entity_type, c.entity_name, c.name, c.value) for c in cleared] == [
        ("topics", "t", "leader.replication.throttled.replicas", "0:1"),
        ("brokers", "1", "leader.replication.throttled.rate", "5"),
    ]
    alters = [c for c in admin.calls if c[0] == "alter"]
    assert alters == [
        (
            "alter",
            {
                ("brokers", "1"): {"leader.replication.throttled.rate": None},
                ("topics", "t"): {"leader.replication.throttled.replicas": None},
            },
        )
    ]
    assert await runner.clear_throttles(FakeAdmin(), {"t"}) == []


async def test_cancel_cancels_only_the_moves_in_progress():
    cluster = view(
        {T0: (2, 3, 1), T1: (2, 3)},
        {T0: OngoingReassignment(replicas=(2, 3, 1), adding=(2,), removing=(1,))},
    )
    admin = FakeAdmin()
    result = await runner.cancel(admin, cluster, {T0: [2, 3], T1: [2, 3]})
    assert result.cancelled == (T0,) and result.not_active == (T1,)
    assert admin.calls == [("reassign", {T0: None}, [])]


def test_finish_unwraps_our_errors_from_exception_groups():
    async def bad_input():
        raise ExceptionGroup("nursery", [BrokerError(ErrorCode.INVALID_CONFIG, "too fast")])

    async def broken():
        raise ExceptionGroup("nursery", [BrokerError(ErrorCode.REQUEST_TIMED_OUT, "slow")])

    with pytest.raises(ConfigError, match="too fast"):
        finish(bad_input, lambda got: got, bad_input=runner.BAD_INPUT_CODES)
    with pytest.raises(BrokerError, match="slow"):
        finish(broken, lambda got: got, bad_input=runner.BAD_INPUT_CODES)
