"""Real processes: dynamic configs through the CLI, live on the brokers, kept across a restart.

A controller (node 0) and two brokers. `python -m minikafka configs` alters broker, topic and
client configs; every broker logs `configs_applied` with the new version within a second of the
command returning (no restart); `--describe` reads them back with their sources; invalid alters
exit 2 with one line on stderr and change nothing; after the controller restarts, everything is
still there and versions keep growing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client
from minikafka.cluster import LocalCluster
from minikafka.testing.clusters import QUICK_FENCING, cluster_up

FAST = {
    **QUICK_FENCING,
    "metrics.interval.ms": "500",
}
BROKERS = (1, 2)
LR = "leader.replication.throttled.rate"
FR = "follower.replication.throttled.rate"
LREP = "leader.replication.throttled.replicas"
FREP = "follower.replication.throttled.replicas"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("configs") / "c"
    with cluster_up(base, brokers=2, seed=4242, node_configs=FAST) as lc:
        topic = run(lc, "topics", "create", "t", "-p", "2", "-r", "2", configs=False)
        assert topic.returncode == 0, topic.stderr
        yield lc


def run(lc: LocalCluster, *args: str, configs: bool = True) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "minikafka", *(["configs"] if configs else []), *args]
    return subprocess.run(
        [*argv, "--bootstrap", lc.bootstrap()], capture_output=True, text=True, timeout=60
    )


def alter(lc: LocalCluster, *args: str) -> None:
    proc = run(lc, "--alter", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Completed updating config for "), proc.stdout


def describe(lc: LocalCluster, *args: str) -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
    """{(entity_type, entity): {name: (value, source)}} from `--describe --json`."""
    proc = run(lc, "--describe", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    for row in json.loads(proc.stdout):
        out.setdefault((row["entity_type"], row["entity"]), {})[row["name"]] = (
            row["value"],
            row["source"],
        )
    return out


def events(lc: LocalCluster, node: int, name: str) -> list[dict]:
    lines = lc.log_path(node, "events").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def applied(lc: LocalCluster, node: int) -> int:
    return max((e["version"] for e in events(lc, node, "configs_applied")), default=0)


def wait_applied(lc: LocalCluster, above: int, within_s: float = 1.0) -> int:
    """Wait until every broker applied a version > `above`; the version, or fail after 1 s."""
    deadline = time.monotonic() + within_s
    while True:
        versions = [applied(lc, b) for b in BROKERS]
        if min(versions) > above:
            assert len(set(versions)) == 1, versions
            return versions[0]
        assert time.monotonic() < deadline, f"brokers at versions {versions}, wanted > {above}"
        time.sleep(0.01)


def everything(lc: LocalCluster) -> list:
    """Every entity's configs, read in-process with the admin client (faster than the CLI)."""

    async def read() -> list:
        async with open_client(lc.bootstrap(), client_id="it") as client:
            admin = Admin(client)
            results = [
                r for t in ("brokers", "topics", "clients") for r in await admin.describe_configs(t)
            ]
            results += await admin.describe_configs("brokers", "1")  # with inherited defaults
            return [(r.resource_type, r.resource_name, r.entries) for r in results]

    return trio.run(read)


def test_configs_are_applied_live_described_and_survive_a_controller_restart(cluster):
    lc = cluster
    v0 = max(applied(lc, b) for b in BROKERS)
    alter(
        lc,
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        f"{LR}=1000000,{FR}=1000000",
    )
    v1 = wait_applied(lc, v0)
    alter(
        lc,
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        f"{FR}=500000,leader.replication.throttled=TRUE",
    )
    v2 = wait_applied(lc, v1)
    # A list value written out without brackets, another bracketed, whitespace ignored.
    alter(
        lc,
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
        "--add-config",
        "leader.replication.throttled.replicas= 1:2 ,0:1,follower.replication.throttled.replicas=[*]",
    )
    v3 = wait_applied(lc, v2)
    alter(
        lc,
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "producer_byte_rate=1048576",
    )
    alter(
        lc,
        "--entity-type",
        "clients",
        "--entity-name",
        "app",
        "--add-config",
        "consumer_byte_rate=2048",
    )
    v5 = wait_applied(lc, v3 + 1)
    assert v1 < v2 < v3 < v5

    assert describe(lc, "--entity-type", "brokers", "--entity-name", "1") == {
        ("brokers", "1"): {
            LR: ("1000000", "dynamic_entity"),
            FR: ("1000000", "dynamic_entity"),  # the per-broker value wins over the default
            "leader.replication.throttled": ("true", "dynamic_default"),
        }
    }
    assert describe(lc, "--entity-type", "brokers") == {
        ("brokers", ""): {
            FR: ("500000", "dynamic_default"),
            "leader.replication.throttled": ("true", "dynamic_default"),
        },
        ("brokers", "1"): {LR: ("1000000", "dynamic_entity"), FR: ("1000000", "dynamic_entity")},
    }
    assert describe(lc, "--entity-type", "topics", "--entity-name", "t") == {
        ("topics", "t"): {
            "leader.replication.throttled.replicas": ("0:1,1:2", "dynamic_entity"),
            "follower.replication.throttled.replicas": ("*", "dynamic_entity"),
        }
    }
    assert describe(lc, "--entity-type", "clients", "--entity-name", "app") == {
        ("clients", "app"): {
            "consumer_byte_rate": ("2048", "dynamic_entity"),
            "producer_byte_rate": ("1048576", "dynamic_default"),
        }
    }
    table = run(lc, "--describe", "--entity-type", "brokers").stdout.splitlines()
    assert table[0].split() == ["ENTITY_TYPE", "ENTITY", "NAME", "VALUE", "SOURCE"]
    assert table[1].split() == ["brokers", "<default>", FR, "500000", "dynamic_default"]

    alter(lc, "--entity-type", "brokers", "--entity-name", "1", "--delete-config", LR)
    v6 = wait_applied(lc, v5)
    assert (
        LR not in describe(lc, "--entity-type", "brokers", "--entity-name", "1")[("brokers", "1")]
    )
    changes = events(lc, 0, "config_changed")
    assert [c["version"] for c in changes][-2:] == [v5, v6]
    assert changes[-1]["deleted"] == [LR] and changes[-1]["entity_name"] == "1"

    before = everything(lc)
    registered = {b: len(events(lc, b, "registered")) for b in BROKERS}
    lc.restart(0)
    deadline = time.monotonic() + 30
    while any(len(events(lc, b, "registered")) == registered[b] for b in BROKERS):
        assert time.monotonic() < deadline, "brokers did not re-register with the controller"
        time.sleep(0.05)
    assert everything(lc) == before
    alter(lc, "--entity-type", "brokers", "--entity-name", "2", "--add-config", f"{LR}=3000000")
    v7 = wait_applied(lc, v6)
    assert v7 == v6 + 1  # the version counter was persisted with the configs


# (entity type, entity name or None for the default, --add-config, what the one line says)
INVALID = [
    # Refused by the CLI itself.
    (
        "topics",
        "t",
        "leader.replication.throttled.replicas=0-1",
        "partition:broker, e.g. 0:1,1:2, or *",
    ),
    ("brokers", "2", "no.such.config=1", "unknown broker config 'no.such.config': expected one of"),
    ("brokers", "two", f"{LR}=1", "expected a broker id (an integer >= 0) or the cluster default"),
    ("brokers", "2", f"{LR}=-1", "expected a rate in bytes per second, an integer >= 0"),
    ("clients", "x", "consumer_byte_rate=0", "an integer >= 1 (up to"),
    ("users", "x", f"{LR}=1", "expected one of brokers, topics, clients"),
    ("clients", "x", "producer_byte_rate=1,consumer_byte_rate=x", "expected a rate in bytes per"),
    ("topics", None, "leader.replication.throttled.replicas=*", "topics have no default entity"),
    # Refused by the controller, against the cluster's state.
    ("topics", "nope", "leader.replication.throttled.replicas=*", "unknown topic 'nope': expected"),
    (
        "brokers",
        "2",
        "leader.reassignment.throttled.rate=5000",
        "exceeds leader.replication.throttled.rate=1000 in the effective config of broker 2",
    ),
    (
        "brokers",
        None,
        "leader.reassignment.throttled.rate=2000",
        "of broker 2: expected a reassignment rate at most the replication rate (KIP-542)",
    ),
]


def test_invalid_alters_exit_2_with_one_line_and_change_nothing(cluster):
    lc = cluster
    alter(lc, "--entity-type", "brokers", "--entity-name", "2", "--add-config", f"{LR}=1000")
    version = wait_applied(lc, 0)
    before = everything(lc)
    changes = len(events(lc, 0, "config_changed"))
    for entity_type, name, add_config, needle in INVALID:
        entity = ["--entity-default"] if name is None else ["--entity-name", name]
        args = ["--entity-type", entity_type, *entity, "--add-config", add_config]
        proc = run(lc, "--alter", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, proc.stderr)
        assert needle in lines[0], (args, proc.stderr)
        assert proc.stdout == ""
    assert everything(lc) == before
    assert len(events(lc, 0, "config_changed")) == changes
    assert [applied(lc, b) for b in BROKERS] == [version, version]


def test_throttle_lists_given_at_topic_creation_are_its_dynamic_configs(cluster):
    """`topics create --config leader.replication.throttled.replicas=...` as Kafka's
    CreateTopics does it: checked by the same validator as `configs --alter`, stored as the
    topic's dynamic configs (described, pushed to and applied by every broker); a malformed
    list is one line, exit 2, and no topic. A throttle rate of 0 is accepted (atLeast(0))."""
    lc = cluster
    before = max(applied(lc, b) for b in BROKERS)
    lists = ["--config", f"{LREP}= 1:2 ,0:1", "--config", f"{FREP}=*"]
    created = run(lc, "topics", "create", "listed", "-p", "2", "-r", "2", *lists, configs=False)
    assert created.returncode == 0, created.stderr
    wait_applied(lc, before)  # the brokers hold the lists (pushed before the LeaderAndIsr)
    assert describe(lc, "--entity-type", "topics", "--entity-name", "listed") == {
        ("topics", "listed"): {LREP: ("0:1,1:2", "dynamic_entity"), FREP: ("*", "dynamic_entity")}
    }
    bad = run(lc, "topics", "create", "bad", "--config", f"{LREP}=0-1", configs=False)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1, bad.stderr
    assert "expected a comma-separated list of partition:broker, e.g. 0:1,1:2, or *" in lines[0]
    listed = run(lc, "topics", "list", "--json", configs=False)
    assert "bad" not in {row["topic"] for row in json.loads(listed.stdout)}

    alter(lc, "--entity-type", "brokers", "--entity-name", "2", "--add-config", f"{FR}=0")
    assert describe(lc, "--entity-type", "brokers", "--entity-name", "2")[("brokers", "2")][FR] == (
        "0",
        "dynamic_entity",
    )
    alter(lc, "--entity-type", "brokers", "--entity-name", "2", "--delete-config", FR)


def test_topics_alter_adds_partitions_and_refuses_a_decrease(cluster):
    """`minikafka topics alter NAME --partitions N` (kafka-topics --alter --partitions)."""
    lc = cluster
    assert run(lc, "topics", "create", "grown", "-p", "2", "-r", "2", configs=False).returncode == 0
    grown = run(lc, "topics", "alter", "grown", "--partitions", "3", configs=False)
    assert grown.returncode == 0, grown.stderr
    assert grown.stdout.strip() == "topic grown now has 3 partitions"
    manual = run(
        lc, "topics", "alter", "grown", "-p", "4", "--replica-assignment", "2:1", configs=False
    )
    assert manual.returncode == 0, manual.stderr
    listed = run(lc, "topics", "describe", "grown", "--json", configs=False)
    rows = {r["partition"]: r for r in json.loads(listed.stdout)}
    assert sorted(rows) == [0, 1, 2, 3] and rows[3]["replicas"] == [2, 1]
    smaller = run(lc, "topics", "alter", "grown", "-p", "2", configs=False)
    assert smaller.returncode != 0 and "would not be an increase" in smaller.stderr
    bad = run(lc, "topics", "alter", "grown", "-p", "5", "--replica-assignment", "x", configs=False)
    assert bad.returncode != 0 and "expected broker ids" in bad.stderr


def test_topics_delete_removes_the_topic_and_frees_its_name(cluster):
    lc = cluster
    assert run(lc, "topics", "create", "gone", "-p", "2", "-r", "2", configs=False).returncode == 0
    deleted = run(lc, "topics", "delete", "gone", configs=False)
    assert (deleted.returncode, deleted.stdout) == (0, "deleted topic gone\n"), deleted.stderr
    listed = json.loads(run(lc, "topics", "list", "--json", configs=False).stdout)
    assert "gone" not in {row["topic"] for row in listed}
    again = run(lc, "topics", "delete", "gone", configs=False)
    assert again.returncode != 0 and "does not exist" in again.stderr
    # The name is free once every replica dropped its log (all brokers are up here).
    deadline = time.monotonic() + 30
    while (made := run(lc, "topics", "create", "gone", "-p", "1", configs=False)).returncode:
        assert "marked for deletion" in made.stderr and time.monotonic() < deadline, made.stderr
        time.sleep(0.2)
