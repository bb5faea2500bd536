"""The pytest plugin (minikafka/testing/pytest_plugin.py), as a user's project sees it, where
nothing starts: its registration, the option errors (they fail before anything starts) and the
session factory's bookkeeping and topic names without processes.

pytester writes a tiny user test file and runs pytest on it in a subprocess: the fixtures come
from the `pytest11` entry point alone (the file imports nothing of the plugin). The tests that
start real clusters are in tests/integration/test_pytest_plugin.py.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

BAD_OPTIONS = """
import pytest


@pytest.mark.minikafka(brokerz=2)
def test_misspelt(minikafka_cluster):
    pass


@pytest.mark.parametrize("minikafka_cluster", [3], indirect=True)
def test_not_a_dict(minikafka_cluster):
    pass
"""


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


# -- the factory's bookkeeping and topic names, without processes -----------------------------


class FakeCluster:
    def __init__(self, options, base_dir):
        self.options = dict(options)
        self.base_dir = base_dir
        self.alive = True
        self.downs = 0

    def status(self):
        return [FakeStatus(node_id=1, alive=self.alive, paused=False)]

    def down(self):
        self.downs += 1


class FakeStatus:
    def __init__(self, *, node_id, alive, paused):
        self.node_id, self.alive, self.paused = node_id, alive, paused


@pytest.fixture
def factory(monkeypatch, tmp_path):
    """A ClusterFactory whose starts make FakeClusters (in fresh dirs, like mktemp)."""
    from minikafka.testing import pytest_plugin

    dirs = iter(tmp_path / f"shared{i}" for i in range(100))
    monkeypatch.setattr(
        pytest_plugin, "start_cluster", lambda opts, base_dir, who: FakeCluster(opts, base_dir(1))
    )
    return pytest_plugin.ClusterFactory(lambda: next(dirs))


def test_the_factory_keys_clusters_by_their_normalised_options(factory, monkeypatch):
    monkeypatch.delenv("MINIKAFKA_SEED", raising=False)
    default = factory()
    assert default.options["seed"] == 0 and default.options["brokers"] == 3
    # The same cluster, said differently: defaults spelt out, FAST_CONFIGS' value given as an
    # int, another ready timeout.
    assert factory(brokers=3, seed=0, combined=False, fault_proxy=False) is default
    assert factory(configs={"broker.session.timeout.ms": 1500}, ready_timeout_s=90) is default
    # Anything that changes the cluster is another one.
    others = [
        factory(brokers=2),
        factory(configs={"min.insync.replicas": "2"}),
        factory(configs={"broker.session.timeout.ms": "3000"}),
        factory(seed=7),
        factory(combined=True),
        factory(fault_proxy=True),
    ]
    assert len({id(lc) for lc in [default, *others]}) == 7
    assert len({lc.base_dir for lc in factory.clusters}) == 7
    assert factory(seed=7) is others[3]


def test_the_factory_stops_every_cluster_once_at_close(factory):
    started = [factory(brokers=n) for n in (1, 2, 3)]
    factory.close()
    assert [lc.downs for lc in started] == [1, 1, 1]
    assert factory.clusters == []


def test_the_factory_refuses_a_shared_cluster_with_a_node_down(factory):
    lc = factory(brokers=1)
    lc.alive = False
    with pytest.raises(pytest.fail.Exception, match="node 1 of the shared cluster in .* is not"):
        factory(brokers=1)


def test_the_factory_refuses_unknown_options_in_one_line(factory):
    with pytest.raises(pytest.fail.Exception, match="minikafka_cluster_factory: unknown option"):
        factory(broker=2)
    with pytest.raises(pytest.fail.Exception, match="ready_timeout_s 0: expected seconds > 0"):
        factory(ready_timeout_s=0)
    assert factory.clusters == []


def test_topic_names_are_legal_readable_and_never_handed_out_twice():
    from minikafka.core.controller.topics import topic_name_error
    from minikafka.testing.pytest_plugin import TOPIC_NAME_MAX, unique_topic_name

    taken: set[str] = set()
    name = unique_topic_name("tests/sub/test_orders.py::TestA::test_b[x/y-1]", taken)
    assert name == "test_orders-TestA-test_b-x-y-1"
    assert unique_topic_name("tests/other/test_orders.py::TestA::test_b[x/y-1]", taken) == (
        name + "-2"
    )
    long_ids = [f"tests/test_l.py::test_{'x' * 300}[{i}]" for i in range(2)]
    longs = [unique_topic_name(nodeid, taken) for nodeid in long_ids]
    assert longs[0] != longs[1]
    assert all(len(n) <= TOPIC_NAME_MAX for n in longs)
    assert all(topic_name_error(n) is None for n in [name, *longs, *taken])
    assert len(taken) == 4
