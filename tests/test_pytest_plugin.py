"""The pytest plugin (minikafka/testing/pytest_plugin.py), as a user's project sees it.

pytester writes a tiny user test file and runs pytest on it in a subprocess: the fixtures come
from the `pytest11` entry point alone (the file imports nothing of the plugin). The integration
test starts real clusters: a user test produces and consumes through `minikafka_client`, the
marker and an indirect parameter size the cluster, and every cluster is stopped afterwards.
The others check the registration and the option errors, which fail before anything starts.
"""

from __future__ import annotations

import pytest

from minikafka.cluster import LocalCluster

pytest_plugins = ["pytester"]

USER_TESTS = """
import pytest

from minikafka.client.admin import Admin
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.core.types import TopicPartition


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

BAD_OPTIONS = """
import pytest


@pytest.mark.minikafka(brokerz=2)
def test_misspelt(minikafka_cluster):
    pass


@pytest.mark.parametrize("minikafka_cluster", [3], indirect=True)
def test_not_a_dict(minikafka_cluster):
    pass
"""


@pytest.mark.integration
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


def test_the_plugin_is_registered_by_its_entry_point(pytester):
    markers = pytester.runpytest_subprocess("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.minikafka(brokers=N, configs=*"])
    fixtures = pytester.runpytest_subprocess("--fixtures")
    fixtures.stdout.fnmatch_lines(
        ["*minikafka_cluster*", "*A running local cluster*", "*minikafka_client*"]
    )


def test_bad_options_fail_the_setup_in_one_line_before_anything_starts(pytester):
    pytester.makepyfile(test_bad=BAD_OPTIONS)
    base = pytester.path / "basetemp"
    result = pytester.runpytest_subprocess(f"--basetemp={base}")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.minikafka: unknown option 'brokerz'; expected brokers=N, configs=*",
            "*minikafka_cluster parameter 3: expected a dict of brokers=N*",
        ]
    )
    assert not list(base.glob("**/cluster.json"))
