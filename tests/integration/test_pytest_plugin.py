"""The pytest plugin (minikafka/testing/pytest_plugin.py) starting real clusters, as a user's
project sees it.

pytester writes a tiny user test file and runs pytest on it in a subprocess: the fixtures come
from the `pytest11` entry point alone (the file imports nothing of the plugin). A user test
produces and consumes through `minikafka_client`, the marker and an indirect parameter size the
cluster, and every cluster is stopped afterwards; the session factory shares one cluster per set
of options; a start whose port was taken starts again on new ports. The registration and the
option errors, which fail before anything starts, and the factory's bookkeeping without
processes: tests/testing/test_pytest_plugin.py.
"""

from __future__ import annotations

import json

from minikafka.cluster import LocalCluster

pytest_plugins = ["pytester"]

USER_TESTS = """
import pytest

from minikafka.client.admin import Admin
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.common import TopicPartition


@pytest.mark.trio
@pytest.mark.minikafka(brokers=2, configs={"min.insync.replicas": "2"})
async def test_produce_and_consume(minikafka_cluster, minikafka_client):
    assert [n.node_id for n in minikafka_cluster.spec.brokers] == [1, 2]
    await Admin(minikafka_client).create_topic("orders", partitions=2, replication_factor=2)
    tp = TopicPartition("orders", 1)
    sent = await Producer(minikafka_client).send_records(
        tp, [(0, None, b"hello"), (0, None, b"world")]
    )
    got = await Consumer(minikafka_client).fetch_once({tp: sent.base_offset})
    assert [r.value for r in got[tp]] == [b"hello", b"world"]


@pytest.mark.parametrize("minikafka_cluster", [{"brokers": 1}], indirect=True)
def test_indirect_parameter(minikafka_cluster):
    assert [n.node_id for n in minikafka_cluster.spec.brokers] == [1]
    assert "," not in minikafka_cluster.bootstrap()


@pytest.mark.trio
@pytest.mark.minikafka(brokers=2, fault_proxy=True)
async def test_fault_proxy(minikafka_cluster):
    proxy = minikafka_cluster.fault_proxy()
    assert await proxy.partition([[1], [2]]) == [(1, 2), (2, 1)]
    assert sorted(await proxy.heal()) == [(1, 2), (2, 1)]


def test_defaults(minikafka_cluster):
    assert minikafka_cluster.spec.fault_proxy is None
    assert len(minikafka_cluster.spec.brokers) == 3
    assert minikafka_cluster.spec.node_configs["broker.session.timeout.ms"] == "1500"
    assert all(s.alive for s in minikafka_cluster.status())
"""


def test_user_tests_get_a_cluster_and_a_client_and_every_cluster_is_stopped(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    base = pytester.path / "basetemp"
    result = pytester.runpytest_subprocess("-v", f"--basetemp={base}", timeout=180)
    result.assert_outcomes(passed=4)
    clusters = sorted(p.parent for p in base.glob("**/minikafka-cluster/cluster.json"))
    assert len(clusters) == 4, clusters
    for path in clusters:
        lc = LocalCluster.load(path)
        assert lc.state == "stopped", path
        assert not any(s.alive for s in lc.status()), path
        proxy = lc.proxy_status()
        assert proxy is None or not proxy.alive, path


# -- shared clusters: the session factory -----------------------------------------------------

SHARED_TESTS = """
import json

import pytest

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import open_client


def record(test, lc):
    with open("seen.jsonl", "a") as f:
        pids = [s.pid for s in lc.status()]
        f.write(json.dumps({"test": test, "bootstrap": lc.bootstrap(), "pids": pids}) + "\\n")


async def create_and_list(lc, topic):
    async with open_client(lc.bootstrap(), client_id="shared") as client:
        await Admin(client).create_topic(topic, partitions=1, replication_factor=1)
        return sorted(t.name for t in (await Admin(client).describe()).topics)


@pytest.mark.trio
async def test_first(minikafka_session_cluster, minikafka_topic):
    record("first", minikafka_session_cluster)
    assert minikafka_topic == "test_shared-test_first"
    assert minikafka_topic in await create_and_list(minikafka_session_cluster, minikafka_topic)


@pytest.mark.trio
async def test_second(minikafka_session_cluster, minikafka_topic):
    record("second", minikafka_session_cluster)
    topics = await create_and_list(minikafka_session_cluster, minikafka_topic)
    assert {"test_shared-test_first", "test_shared-test_second"} <= set(topics)  # one cluster


def test_same_options_said_differently(minikafka_cluster_factory, minikafka_session_cluster):
    lc = minikafka_cluster_factory(
        brokers=3, configs={"broker.session.timeout.ms": 1500}, ready_timeout_s=60
    )
    assert lc is minikafka_session_cluster


def test_other_options(minikafka_cluster_factory):
    lc = minikafka_cluster_factory(brokers=1)
    record("other", lc)
    assert len(lc.spec.brokers) == 1
    assert minikafka_cluster_factory(brokers=1) is lc
"""


def test_the_session_factory_starts_one_cluster_per_set_of_options_and_stops_them(pytester):
    pytester.makepyfile(test_shared=SHARED_TESTS)
    base = pytester.path / "basetemp"
    result = pytester.runpytest_subprocess("-v", f"--basetemp={base}", timeout=180)
    result.assert_outcomes(passed=4)
    seen = {
        row["test"]: row
        for row in map(json.loads, (pytester.path / "seen.jsonl").read_text().splitlines())
    }
    assert seen["first"]["bootstrap"] == seen["second"]["bootstrap"]
    assert seen["first"]["pids"] == seen["second"]["pids"]
    assert seen["other"]["bootstrap"] != seen["first"]["bootstrap"]
    assert not set(seen["other"]["pids"]) & set(seen["first"]["pids"])
    clusters = sorted(p.parent for p in base.glob("minikafka-shared[0-9]*/cluster.json"))
    assert len(clusters) == 2, clusters  # 4 tests, 2 sets of options
    for path in clusters:
        lc = LocalCluster.load(path)
        assert lc.state == "stopped", path
        assert not any(s.alive for s in lc.status()), path


FAULTING_SHARED = """
def test_kills_a_node(minikafka_cluster_factory):
    minikafka_cluster_factory(brokers=2).kill(2)


def test_after(minikafka_cluster_factory):
    minikafka_cluster_factory(brokers=2)
"""


def test_a_shared_cluster_with_a_node_down_is_refused_not_repaired(pytester):
    pytester.makepyfile(test_faulting=FAULTING_SHARED)
    result = pytester.runpytest_subprocess(f"--basetemp={pytester.path / 'basetemp'}", timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*minikafka_cluster_factory: node 2 of the shared cluster in * is not running (a test "
            "killed, stopped or paused it?); tests that fault nodes must use the function-scoped "
            "minikafka_cluster"
        ]
    )


# -- port retry: a port taken between picking and binding -------------------------------------

TAKE_A_PORT = """
import socket

import pytest

import minikafka.cluster.spec as spec_module

HELD = socket.socket()
HELD.bind(("127.0.0.1", 0))
HELD.listen()
real = spec_module.free_ports
calls = []


def free_ports(n, host="127.0.0.1"):
    # Node 0's (the controller's) port is one this process holds: at the first pick only,
    # or at every pick (EVERY_TIME), as if another process had taken it before the node bound.
    calls.append(n)
    ports = real(n, host)
    if len(calls) == 1 or EVERY_TIME:
        ports[0] = HELD.getsockname()[1]
    return ports


spec_module.free_ports = free_ports
"""

ONE_TEST = """
def test_it(minikafka_cluster):
    assert all(s.alive for s in minikafka_cluster.status())
"""

ONE_SHARED_TEST = """
def test_it(minikafka_session_cluster):
    pass
"""


def test_a_start_whose_port_was_taken_succeeds_on_new_ports(pytester):
    pytester.makeconftest(TAKE_A_PORT + "EVERY_TIME = False\n")
    pytester.makepyfile(test_one=ONE_TEST)
    base = pytester.path / "basetemp"
    result = pytester.runpytest_subprocess(
        f"--basetemp={base}", "-o", "log_cli=true", "--log-cli-level=WARNING", timeout=120
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*minikafka_cluster: a port of cluster 'minikafka-cluster' was taken before its node "
            "bound it; starting again on new ports (attempt 2 of 3): node 0 exited *",
            "*OSError: ?Errno *? Address already in use",
        ]
    )
    first = base / "test_it0" / "minikafka-cluster" / "node-0" / "node.out"
    assert "OSError: [Errno" in first.read_text()  # the controller's own words: port taken
    assert not (first.parent.parent / "cluster.json").exists()  # the failed start left nothing
    assert LocalCluster.load(base / "test_it0" / "minikafka-cluster-2").state == "stopped"


def test_a_port_taken_at_every_attempt_fails_the_setup_clearly(pytester):
    pytester.makeconftest(TAKE_A_PORT + "EVERY_TIME = True\n")
    pytester.makepyfile(test_one=ONE_SHARED_TEST)
    base = pytester.path / "basetemp"
    result = pytester.runpytest_subprocess(f"--basetemp={base}", timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*minikafka_cluster_factory: no cluster started: at each of 3 attempts, on newly "
            "picked ports every time, another process took a port before its node bound it; "
            "the last attempt (*minikafka-shared2): node 0 exited with code 1 before it was ready*"
        ]
    )
    assert len(list(base.glob("minikafka-shared[0-9]*/node-0/node.out"))) == 3
    assert not list(base.glob("**/cluster.json"))
