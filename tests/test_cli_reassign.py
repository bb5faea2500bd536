"""`minikafka reassign` without a cluster: option and file checks through click's CliRunner
(one line on stderr, exit 2, before anything is contacted), and the tool's cluster-side logic on
fakes and files: --execute's decisions and the order of its requests, --verify's statuses,
clearing throttles, the plan's traffic and burst rules, and --watch's progress arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka.cli import reassign as cli
from minikafka.cli import reassign_inputs as inputs
from minikafka.cli import reassign_plan, reassign_plan_inputs
from minikafka.cli.main import main
from minikafka.core.types import TopicPartition
from minikafka.errors import BrokerError, ConfigError, ErrorCode
from minikafka.wire.messages import (
    AlterConfigsResourceResponse,
    DescribeConfigsEntry,
    DescribeConfigsResult,
    ReassignablePartitionResponse,
)
from tools.reassign import progress, runner
from tools.reassign.moves import OngoingReassignment, PartitionMove

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
MOVES = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}


def tp_file(tmp_path: Path, doc: object, name: str = "moves.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def invoke(*args: str):  # noqa: ANN201
    # --bootstrap to a closed port: a test that reached the network would fail loudly.
    return CliRunner().invoke(main, ["reassign", *args, "--bootstrap", "127.0.0.1:1"])


def refused(result, *words: str) -> str:  # noqa: ANN001
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------- CLI refusals


def test_no_action_or_two_actions_are_refused_naming_the_accepted_ones():
    refused(invoke(), "expected exactly one of --generate, --execute, --verify")
    refused(invoke("--execute", "--verify"), "--execute and --verify cannot be combined")


def test_missing_and_misplaced_options_are_one_line(tmp_path):
    refused(invoke("--execute"), "--execute needs --reassignment-json-file FILE")
    refused(invoke("--generate", "--broker-list", "1,2"), "needs --topics-to-move-json-file")
    f = tp_file(tmp_path, MOVES)
    refused(
        invoke("--verify", "--reassignment-json-file", f, "--throttle", "5"),
        "--throttle does not go with --verify: expected it with --execute",
    )
    refused(invoke("--list", "--additional"), "--additional does not go with --list")
    refused(invoke("--verify", "--reassignment-json-file", f, "--timeout", "5"), "with --watch")
    refused(
        invoke("--execute", "--reassignment-json-file", f, "--throttle-mode", "reassignment"),
        "--throttle-mode needs --throttle",
    )


def test_click_usage_errors_are_one_line_with_exit_2(tmp_path):
    refused(invoke("--no-such-flag"), "No such option", "see minikafka reassign --help")
    refused(CliRunner().invoke(main, ["reassign", "--throttle"]), "requires an argument")
    refused(invoke("nosuch"), "No such command")


def test_bad_files_are_refused_before_any_connection(tmp_path):
    missing = str(tmp_path / "none.json")
    refused(
        invoke("--execute", "--reassignment-json-file", missing),
        "cannot read the reassignment file",
        '"partitions"',
    )
    bad = tp_file(tmp_path, '{"version":1,"partitions":[')
    refused(invoke("--verify", "--reassignment-json-file", bad), "not valid JSON")
    dup = tp_file(
        tmp_path, {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "d.json"
    )
    refused(invoke("--execute", "--reassignment-json-file", dup), "lists broker 1 twice")
    twice = {"partitions": [MOVES["partitions"][0], MOVES["partitions"][0]]}
    refused(
        invoke("--cancel", "--reassignment-json-file", tp_file(tmp_path, twice, "2.json")),
        "appears twice",
    )
    topics = tp_file(tmp_path, {"topics": []}, "topics.json")
    refused(
        invoke("--generate", "--topics-to-move-json-file", topics, "--broker-list", "1"),
        'empty "topics" list',
    )


def test_bad_numbers_name_the_accepted_form(tmp_path):
    f = tp_file(tmp_path, MOVES)
    refused(
        invoke("--execute", "--reassignment-json-file", f, "--throttle", "2MB"),
        "expected a rate in bytes per second, an integer >= 1",
    )
    refused(
        invoke(
            "--execute", "--reassignment-json-file", f, "--throttle", "1", "--throttle-mode", "x"
        ),
        "expected one of replication, reassignment",
    )
    refused(
        invoke("--verify", "--reassignment-json-file", f, "--watch", "--timeout", "-1"),
        "--timeout '-1': expected a number > 0",
    )
    topics = tp_file(tmp_path, {"topics": [{"topic": "t"}]}, "topics.json")
    refused(
        invoke("--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,x"),
        "expected a comma-separated list of distinct broker ids",
    )
    refused(
        invoke(
            "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1", "--seed", "-3"
        ),
        "seed '-3' (--seed or $MINIKAFKA_SEED)",
    )


def test_plan_options(tmp_path):
    f = tp_file(tmp_path, MOVES)
    refused(invoke("plan"), "plan needs --reassignment-json-file")
    refused(invoke("plan", "--reassignment-json-file", f), "not neither")
    refused(
        invoke("plan", "--reassignment-json-file", f, "--throttle", "1", "--deadline-s", "3"),
        "not both",
    )
    refused(
        invoke("plan", "--reassignment-json-file", f, "--deadline-s", "3"),
        "--deadline-s needs --network-bytes-per-s and --max-fraction",
    )
    refused(
        invoke("plan", "--reassignment-json-file", f, "--throttle", "1", "--max-fraction", "0.3"),
        "--max-fraction goes with --deadline-s",
    )
    refused(
        invoke(
            "plan", "--reassignment-json-file", f, "--deadline-s", "3",
            "--network-bytes-per-s", "1e9", "--max-fraction", "1.5",
        ),
        "expected a fraction in (0, 1]",
    )  # fmt: skip
    result = CliRunner().invoke(main, ["reassign", "--json", "plan"])
    refused(result, "--json goes after the subcommand")


def test_the_seed_comes_from_the_option_then_the_environment(monkeypatch):
    monkeypatch.setenv("MINIKAFKA_SEED", "7")
    assert inputs.parse_seed(None) == 7
    assert inputs.parse_seed("3") == 3
    monkeypatch.delenv("MINIKAFKA_SEED")
    assert 0 <= inputs.parse_seed(None) < 1 << 31


def test_check_action_returns_the_action_when_everything_fits():
    assert cli.check_action({"list": True}) == "list"
    options = {"verify": True, "reassignment_json_file": "f", "watch": True, "timeout": "9"}
    assert cli.check_action(options) == "verify"
    assert inputs.parse_throttle(" 2000000 ") == 2_000_000
    assert inputs.parse_mode(None) == "replication"
    assert inputs.parse_positive("1e3", "--x", example="1") == 1000.0
    with pytest.raises(ConfigError):
        inputs.parse_positive("inf", "--x", example="1")


# ---------------------------------------------------------------------------- --execute


def view(
    assignment: dict[TopicPartition, tuple[int, ...]],
    ongoing: dict[TopicPartition, OngoingReassignment] | None = None,
    live: tuple[int, ...] = (1, 2, 3),
) -> runner.ClusterView:
    return runner.ClusterView(
        assignment=assignment,
        leaders={tp: r[0] for tp, r in assignment.items()},
        live_brokers=live,
        ongoing=ongoing or {},
    )


CURRENT = {T0: (1, 2), T1: (2, 3)}


def test_plan_execute_refuses_what_the_cluster_cannot_take():
    with pytest.raises(ConfigError, match="unknown topic 'x'"):
        runner.plan_execute(
            view(CURRENT),
            {TopicPartition("x", 0): [1]},
            throttle=1,
            mode="replication",
            additional=False,
        )
    with pytest.raises(ConfigError, match="names broker 4, which is not live"):
        runner.plan_execute(
            view(CURRENT), {T0: [1, 4]}, throttle=1, mode="replication", additional=False
        )
    with pytest.raises(ConfigError, match="replication factor 4 but only 3 brokers"):
        runner.plan_execute(
            view(CURRENT), {T0: [1, 2, 3, 4]}, throttle=1, mode="replication", additional=False
        )


def test_a_move_in_progress_needs_additional_and_stays_throttled_with_it():
    moving = {T1: OngoingReassignment(replicas=(3, 1, 2), adding=(3,), removing=(2,))}
    cluster = view({T0: (1, 2), T1: (3, 1, 2)}, moving)
    with pytest.raises(ConfigError, match="in progress .t-1.: expected --additional"):
        runner.plan_execute(
            cluster, {T0: [2, 3]}, throttle=10, mode="replication", additional=False
        )
    todo = runner.plan_execute(
        cluster, {T0: [2, 3]}, throttle=10, mode="replication", additional=True
    )
    # t-1's move (1,2 -> 3,1) keeps its lists; t-0 copies to 3 from 1 or 2.
    assert [str(c) for c in todo.changes[:2]] == [
        "topics t: leader.replication.throttled.replicas=0:1,0:2,1:1,1:2",
        "topics t: follower.replication.throttled.replicas=0:3,1:3",
    ]
    assert {c.entity_name for c in todo.changes[2:]} == {"1", "2", "3"}
    # The rollback file holds replicas from before any move (t-1 is not in the file).
    assert todo.rollback_json == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    )
    entities = {(e.entity_type, e.entity_name): e.configs for e in todo.throttle_entities}
    assert entities[("brokers", "3")] == {
        "leader.replication.throttled.rate": "10",
        "follower.replication.throttled.rate": "10",
    }


def test_reassignment_mode_sets_rates_only_and_no_throttle_sets_nothing():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=7, mode="reassignment", additional=False
    )
    assert {c.name for c in todo.changes} == {
        "leader.reassignment.throttled.rate",
        "follower.reassignment.throttled.rate",
    }
    assert {c.entity_name for c in todo.changes} == {"1", "2", "3"}
    none = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=None, mode="replication", additional=False
    )
    assert none.changes == () and none.throttle_entities == []


class FakeAdmin:
    """Records requests; configs live in `configs`; answers as scripted."""

    def __init__(self, *, own=None, refuse_start=False, refuse_config=None, by_type=None):
        self.calls: list[tuple] = []
        self.own = own or {}
        self.refuse_start = refuse_start
        self.refuse_config = refuse_config
        self.by_type = by_type or {}

    async def describe_configs(self, entity_type, entity_name=None):
        self.calls.append(("describe", entity_type, entity_name))
        if entity_name is None:
            return self.by_type.get(entity_type, [])
        entries = [
            DescribeConfigsEntry(name=k, value=v, source="dynamic_entity")
            for k, v in self.own.get((entity_type, entity_name), {}).items()
        ]
        return [described(entity_type, entity_name, entries)]

    async def alter_configs_many(self, resources, *, validate_only=False):
        ops = {
            (r.resource_type, r.resource_name): {c.name: c.value for c in r.configs}
            for r in resources
        }
        self.calls.append(("validate" if validate_only else "alter", ops))
        code = self.refuse_config if validate_only and self.refuse_config else 0
        return [
            AlterConfigsResourceResponse(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                error_code=code,
                error_message="no",
            )
            for r in resources
        ]

    async def alter_partition_reassignments(self, moves, *, throttle_configs=()):
        self.calls.append(("reassign", dict(moves), list(throttle_configs)))
        if self.refuse_start:
            raise BrokerError(ErrorCode.INVALID_REQUEST, "refused as a whole")
        return {
            tp: ReassignablePartitionResponse(
                topic=tp.topic,
                partition=tp.partition,
                error_code=39 if r == [9] else 0,
                error_message="bad" if r == [9] else None,
            )
            for tp, r in moves.items()
        }


def described(entity_type: str, name: str, entries: list) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        resource_type=entity_type, resource_name=name, error_code=0, entries=entries
    )


def entry(name: str, value: str, source: str = "dynamic_entity") -> DescribeConfigsEntry:
    return DescribeConfigsEntry(name=name, value=value, source=source)


async def test_execute_checks_then_sets_then_starts_with_the_same_configs_recorded():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=5, mode="replication", additional=False
    )
    admin = FakeAdmin()
    result = await runner.execute(admin, todo)
    kinds = [c[0] for c in admin.calls if c[0] != "describe"]
    assert kinds == ["validate", "alter", "reassign"]
    assert admin.calls[-1][2] == todo.throttle_entities
    assert result.started == (T0,) and result.errors == {}


async def test_execute_refused_by_the_controller_sets_nothing():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=5, mode="replication", additional=False
    )
    admin = FakeAdmin(refuse_config=ErrorCode.INVALID_CONFIG)
    with pytest.raises(BrokerError, match="INVALID_CONFIG"):
        await runner.execute(admin, todo)
    assert [c[0] for c in admin.calls if c[0] != "describe"] == ["validate"]


async def test_a_start_refused_as_a_whole_puts_the_previous_configs_back():
    todo = runner.plan_execute(
        view(CURRENT), {T0: [3, 2]}, throttle=5, mode="replication", additional=False
    )
    admin = FakeAdmin(
        own={("brokers", "1"): {"leader.replication.throttled.rate": "99"}}, refuse_start=True
    )
    with pytest.raises(BrokerError, match="refused as a whole"):
        await runner.execute(admin, todo)
    restore = admin.calls[-1]
    assert restore[0] == "alter"
    assert restore[1][("brokers", "1")] == {
        "leader.replication.throttled.rate": "99",  # set back
        "follower.replication.throttled.rate": None,  # deleted: it was not set
    }
    assert restore[1][("topics", "t")]["leader.replication.throttled.replicas"] is None


async def test_per_partition_refusals_are_reported_not_raised():
    # Refused by the controller (FakeAdmin refuses [9]) after the tool's own checks passed.
    todo = runner.ExecutePlan(
        proposed={T0: [3, 2], T1: [9]},
        rollback_json="",
        moves={},
        changes=(),
        throttle=None,
        mode="replication",
    )
    result = await runner.execute(FakeAdmin(), todo)
    assert result.started == (T0,) and result.errors == {T1: "bad"}


# ---------------------------------------------------------------------------- --verify, --cancel


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


def test_run_unwraps_our_errors_from_exception_groups():
    async def bad_input():
        raise ExceptionGroup("nursery", [BrokerError(ErrorCode.INVALID_CONFIG, "too fast")])

    async def broken():
        raise ExceptionGroup("nursery", [BrokerError(ErrorCode.REQUEST_TIMED_OUT, "slow")])

    with pytest.raises(ConfigError, match="too fast"):
        runner.run(bad_input)
    with pytest.raises(BrokerError, match="slow"):
        runner.run(broken)


# ---------------------------------------------------------------------------- plan


def test_traffic_counts_what_the_current_leader_sends_to_every_destination():
    moves = {
        T0: PartitionMove(sources=(1, 2), destinations=(3, 4)),  # leader 1 sends twice
        T1: PartitionMove(sources=(2, 3), destinations=(1,)),  # leader 3
        T2: PartitionMove(sources=(1, 2), destinations=()),  # a reorder: nothing moves
    }
    traffic = runner.traffic_per_broker(moves, {T0: 100, T1: 10, T2: 1000}, {T0: 1, T1: 3, T2: 1})
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
            1: runner.BrokerTraffic(broker=1, copies_in=4_000_000, sends_out=0),
            2: runner.BrokerTraffic(broker=2, copies_in=1_500_000, sends_out=2_000_000),
        },
        bytes_in={},
        bytes_in_source="unknown",
        rf=2,
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
    # Broker 1 leads t-0..t-3 and says ~160 kB/s for t-0 and t-1 (median of its lines), nothing
    # for t-2 and t-3; broker 2's figure for t-0 is replication (a follower's) and not read.
    lines = {
        1: [
            {"ts": 1.0, "PartitionBytesInRate": {"t-0": 150_000.0, "t-1": 160_000.0}},
            {"ts": 2.0, "PartitionBytesInRate": {"t-0": 170_000.0, "t-1": 160_000.0}},
        ],
        2: [{"ts": 1.0, "PartitionBytesInRate": {"t-0": 9e9, "t-2": 9e9}}],
    }
    inputs = decommission_inputs(lines)
    rates = {m.partition: m.inbound_bytes_per_s for m in inputs.moving}
    assert rates == {0: 160_000.0, 1: 160_000.0, 2: 600_000.0, 3: 600_000.0}
    text = "\n".join(inputs.lines())
    assert (
        "  for the model, 2 of the 4 moving partitions: PartitionBytesInRate (median of the last "
        "10 s of the leaders' metrics.jsonl): t-0: 160.0 kB/s, t-1: 160.0 kB/s"
    ) in text
    assert (
        "  for the model, 2 of the 4 moving partitions: each broker's BytesInPerSec split evenly "
        "over the partitions it leads (moving or not; the last 10 s of the leader's metrics.jsonl "
        "give no PartitionBytesInRate for the partition): 1: 4 (600.0 kB/s each)"
    ) in text
    doc = inputs.to_json()
    assert doc["inbound_source"].startswith("per partition (moving_partitions' inbound_source)")
    assert [m["inbound_source"] for m in doc["moving_partitions"]] == [
        reassign_plan_inputs.MEASURED_SOURCE,
        reassign_plan_inputs.MEASURED_SOURCE,
        reassign_plan_inputs.SPLIT_NO_ENTRY,
        reassign_plan_inputs.SPLIT_NO_ENTRY,
    ]
    assert doc["inbound_split"]["partitions_led"] == {1: 4, 2: 4}  # the existing keys stay
    # Every partition named: one source overall, which the model's JSON repeats.
    every = {1: [{"ts": 1.0, "PartitionBytesInRate": {f"t-{p}": 1e5 for p in range(4)}}]}
    inputs = decommission_inputs(every)
    assert inputs.to_json()["inbound_source"] == (
        "PartitionBytesInRate (median of the last 10 s of the leaders' metrics.jsonl)"
    )
    doc, _ = reassign_plan.at_throttle(inputs, 6_000_000, None)
    assert doc["model"]["inbound"] == inputs.inbound_source
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
    monkeypatch.setattr(reassign_plan, "gather", lambda *a: decommission_inputs())
    result = invoke(
        "plan", "--reassignment-json-file", f, "--throttle", "6000000",
        "--throttle-mode", "reassignment", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["model"]["throttle_mode"] == "reassignment" and doc["model"]["mode"] == "kip542"
    assert doc["inputs"]["inbound_split"]["partitions_led"] == {"1": 4, "2": 4}
    assert len(doc["inputs"]["moving_partitions"]) == 4


# ---------------------------------------------------------------------------- --watch's files


def write_lines(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def test_reverse_lines_across_chunk_boundaries(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "CHUNK", 7)
    path = tmp_path / "f"
    path.write_bytes(b"one\ntwo two\n\nthree\nx")
    assert list(progress.reverse_lines(path)) == [b"x", b"three", b"two two", b"one"]


def test_snapshots_by_time_and_the_median_bytes_in(tmp_path):
    docs = [{"ts": 100.0 + i, "bytes_in_per_s": rate} for i, rate in enumerate([9e6, 0, 0, 5, 0])]
    path = write_lines(tmp_path / "m.jsonl", docs)
    with open(path, "a") as f:
        f.write('{"ts": 200, "half a li')  # being written
    assert progress.snapshot_at(path)["ts"] == 104.0
    assert progress.snapshot_at(path, 102.5)["ts"] == 102.0
    assert progress.snapshot_at(path, 50.0) is None
    assert [d["ts"] for d in progress.recent_snapshots(path, 2.0)] == [102.0, 103.0, 104.0]
    files = progress.LocalFiles(
        metrics={1: path, 2: tmp_path / "none"}, controller_events=None, node_configs={}
    )
    assert progress.median_bytes_in(files, 10.0) == {1: 0.0}  # the 9 MB/s burst is not steady


def event(name: str, ts: float, partition: int, **fields) -> dict:
    return {"ts": ts, "node": 0, "event": name, "topic": "t", "partition": partition, **fields}


def test_file_moves_are_the_moves_the_file_made_last(tmp_path):
    path = write_lines(
        tmp_path / "events.jsonl",
        [
            event("reassignment_started", 1.0, 2, target=[1, 2], adding=[2]),  # older run
            event("reassignment_completed", 1.5, 2),
            event("reassignment_started", 5.0, 0, target=[2, 3], adding=[3]),
            event("reassignment_started", 5.0, 1, target=[3, 1], adding=[3]),
            event("reassignment_started", 5.0, 3, target=[1, 2], adding=[2]),
            event("reassignment_cancelled", 5.5, 3),
            event("reassignment_completed", 7.0, 0),
        ],
    )
    proposed = {T0: [2, 3], T1: [3, 1], T2: [1, 2], T3: [1, 2]}
    moves = progress.file_moves(path, proposed)
    assert set(moves.starts) == {T0, T1}  # t-2 moved by an older run, t-3 cancelled
    assert moves.starts[T0] == progress.MoveEvent(ts=5.0, adding=(3,))
    assert moves.duration_s is None  # t-1 still moving
    with open(path, "a") as f:
        f.write(json.dumps(event("reassignment_completed", 8.0, 1)) + "\n")
    assert progress.file_moves(path, proposed).duration_s == 3.0
    assert progress.file_moves(None, proposed).starts == {}


def test_copied_bytes_prefer_the_throttled_counters():
    base = {"follower_replication_throttled_bytes": 100, "replication_bytes_in": 1000}
    now = {"follower_replication_throttled_bytes": 600, "replication_bytes_in": 9000}
    assert progress.copied_since(base, now) == 500
    unthrottled = {"follower_replication_throttled_bytes": 100, "replication_bytes_in": 3000}
    assert progress.copied_since(base, unthrottled) == 2000
    restarted = {"follower_replication_throttled_bytes": 40, "replication_bytes_in": 50}
    assert progress.copied_since(base, restarted) == 40
    assert progress.current_rate({"FollowerReplicationThrottledRate": 2e6}) == 2e6
    assert progress.current_rate({"replication_bytes_in_per_s": 7.0}) == 7.0


def test_progress_rows_per_destination(tmp_path):
    events = write_lines(
        tmp_path / "events.jsonl",
        [
            event("reassignment_started", 10.0, 0, target=[2, 3], adding=[3]),
            event("reassignment_started", 10.0, 1, target=[3, 1], adding=[3, 1]),
        ],
    )
    m3 = write_lines(
        tmp_path / "m3.jsonl",
        [
            {"ts": 9.5, "follower_replication_throttled_bytes": 1000},
            {"ts": 10.5, "follower_replication_throttled_bytes": 3000},
        ],
    )
    files = progress.LocalFiles(metrics={3: m3}, controller_events=events, node_configs={})
    ongoing = {
        T0: OngoingReassignment(replicas=(2, 3, 1), adding=(3,), removing=(1,)),
        T1: OngoingReassignment(replicas=(3, 1, 2), adding=(3, 1), removing=(2,)),
    }
    model = progress.MoveProgress.start(
        proposed={T0: [2, 3], T1: [3, 1]},
        ongoing=ongoing,
        sizes={T0: 5000, T1: 4000},
        files=files,
        now_ts=11.0,
    )
    assert model.destinations == {1: (T1,), 3: (T0, T1)}
    snap3 = {
        "follower_replication_throttled_bytes": 7000,
        "FollowerReplicationThrottledRate": 2000.0,
    }
    rows = {r.broker: r for r in model.rows(ongoing, {1: None, 3: snap3})}
    # Broker 3 adds 9000 B and has fetched 7000 - 1000 since the line before its start.
    assert (rows[3].planned_bytes, rows[3].copied_bytes, rows[3].left_bytes) == (9000, 6000, 3000)
    assert rows[3].eta_s == 1.5
    # Broker 1's metrics are not at hand: its partitions' sizes, no rate.
    assert (rows[1].left_bytes, rows[1].rate, rows[1].eta_s) == (4000, None, None)
    done = {r.broker: r for r in model.rows({}, {1: None, 3: snap3})}
    assert (done[3].moving, done[3].left_bytes, done[3].eta_s) == (0, 0, 0.0)


def test_watch_display_without_a_terminal(capsys):
    show = cli_verify_display()
    frame = progress.WatchFrame(
        elapsed_s=2.0,
        statuses=[
            runner.PartitionStatus(tp=T0, status="in_progress", replicas=(1, 2, 3), target=(3, 2)),
            runner.PartitionStatus(tp=T1, status="complete", replicas=(1, 2), target=(1, 2)),
        ],
        rows=[
            progress.BrokerProgress(broker=3, moving=1, planned_bytes=4_000_000, copied_bytes=1_000_000, left_bytes=3_000_000, rate=2e6),
            progress.BrokerProgress(broker=1, moving=0, planned_bytes=2_000_000, copied_bytes=2_000_000, left_bytes=0, rate=0.0),
        ],
    )  # fmt: skip
    show(frame)
    assert capsys.readouterr().err == (
        "[   2.0 s] 1 of 2 partitions moving; broker 3: 3.0 MB left at 2.0 MB/s, ETA 1.5 s; "
        "broker 1: done\n"
    )


def cli_verify_display():  # noqa: ANN201
    from minikafka.cli.reassign_verify import WatchDisplay

    show = WatchDisplay(2, local=True)
    show.tty = False
    return show
