"""`minikafka reassign` without a cluster: option and file checks through click's CliRunner
(one line on stderr, exit 2, before anything is contacted).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from minikafka.cli import reassign as cli
from minikafka.cli import reassign_inputs as inputs
from minikafka.cli.main import main
from minikafka.errors import ConfigError
from minikafka.testing import seeds
from tests.cli.reassign_support import MOVES, invoke, refused, tp_file

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
    assert seeds.resolve_seed(None) == 7
    assert seeds.resolve_seed("3") == 3
    monkeypatch.delenv("MINIKAFKA_SEED")
    assert 0 <= seeds.resolve_seed(None) < 1 << 31


def test_check_action_returns_the_action_when_everything_fits():
    assert cli.check_action({"list": True}) == "list"
    options = {"verify": True, "reassignment_json_file": "f", "watch": True, "timeout": "9"}
    assert cli.check_action(options) == "verify"
    assert inputs.parse_throttle(" 2000000 ") == 2_000_000
    assert inputs.parse_mode(None) == "replication"
    assert inputs.parse_positive("1e3", "--x", example="1") == 1000.0
    with pytest.raises(ConfigError):
        inputs.parse_positive("inf", "--x", example="1")
