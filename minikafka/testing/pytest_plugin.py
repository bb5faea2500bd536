"""pytest fixtures for testing your own clients against a real minikafka cluster.

Registered through the `pytest11` entry point (pyproject.toml), so installing minikafka makes
them available in any project; nothing to import.

- `minikafka_cluster`: a LocalCluster (a controller and N brokers, real processes on 127.0.0.1)
  started in the test's `tmp_path`, yielded ready, stopped afterwards (brokers first, SIGKILL
  after 10 s). Function-scoped: every test gets a fresh cluster (about a second to start).
  `.bootstrap()` gives the brokers' "host:port,..." string; `.kill(n)`, `.pause(n)`,
  `.restart(n)`, `.log_path(n, "events")` and `.spec` are there for fault tests.
- `minikafka_client`: an async fixture (Trio; needs pytest-trio) yielding an open
  `ClusterClient` on that cluster, closed afterwards.

Configure the cluster with a marker, an indirect parameter, or both (the parameter wins):

    @pytest.mark.minikafka(brokers=3, configs={"min.insync.replicas": "2"})
    def test_x(minikafka_cluster): ...

    @pytest.mark.parametrize("minikafka_cluster", [{"brokers": 1}, {"brokers": 3}], indirect=True)
    def test_y(minikafka_cluster): ...

Options: `brokers` (3), `configs` (node configs, Kafka's names, on top of `FAST_CONFIGS`),
`seed` (default `$MINIKAFKA_SEED`, else pinned to 0: minikafka/testing/seeds.py; the session's
header prints it), `combined` (the controller inside broker 1, False),
`fault_proxy` (node-to-node links through the fault proxy, False: then
`minikafka_cluster.fault_proxy()` partitions, delays or caps them), `ready_timeout_s` (30). An unknown option or a bad value fails the test's setup with one line
naming what is accepted. `FAST_CONFIGS` shortens Kafka's timings that would make a test wait
(fencing a dead broker takes 1.5 s, not 9 s; a follower that could not fetch retries after
100 ms, not 1 s, so the first acks=all produce to a new topic is not held a second); any of
them can be overridden through `configs`.

Heavy imports happen inside the fixtures, so loading the plugin costs nothing in test runs
that do not use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from minikafka.client.cluster_client import ClusterClient
    from minikafka.cluster import LocalCluster

MARKER = "minikafka"
FAST_CONFIGS: Mapping[str, str] = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "1500",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "100",
}
DEFAULTS: Mapping[str, Any] = {
    "brokers": 3,
    "configs": {},
    "seed": None,
    "combined": False,
    "fault_proxy": False,
    "ready_timeout_s": 30.0,
}
PINNED_SEED = 0
ACCEPTED = (
    "brokers=N, configs={name: value}, seed=N, combined=bool, fault_proxy=bool, ready_timeout_s=S"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}({ACCEPTED}): options of the minikafka_cluster fixture "
        "(a local minikafka cluster for the test)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    """The seed the clusters of this session get unless a test names one (replayable)."""
    from minikafka.errors import ConfigError
    from minikafka.testing.seeds import resolve_seed, seed_line

    try:
        return f"minikafka_cluster {seed_line(resolve_seed(pinned=PINNED_SEED))}"
    except ConfigError as exc:  # a bad MINIKAFKA_SEED fails the tests that use it, not all
        return f"minikafka_cluster seed: {exc}"


def cluster_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """DEFAULTS, then the closest `minikafka` marker's keywords, then an indirect parameter."""
    options = dict(DEFAULTS)
    marker = request.node.get_closest_marker(MARKER)
    sources: list[tuple[str, Mapping[str, Any]]] = []
    if marker is not None:
        if marker.args:
            pytest.fail(f"@pytest.mark.{MARKER} takes keywords only: {ACCEPTED}", pytrace=False)
        sources.append((f"@pytest.mark.{MARKER}", marker.kwargs))
    param = getattr(request, "param", None)
    if param is not None:
        if not isinstance(param, Mapping):
            pytest.fail(
                f"minikafka_cluster parameter {param!r}: expected a dict of {ACCEPTED}",
                pytrace=False,
            )
        sources.append(("the minikafka_cluster parameter", param))
    for where, given in sources:
        unknown = sorted(set(given) - set(DEFAULTS))
        if unknown:
            pytest.fail(
                f"{where}: unknown option {unknown[0]!r}; expected {ACCEPTED}", pytrace=False
            )
        options.update(given)
    if not isinstance(options["configs"], Mapping):
        pytest.fail(
            f"configs {options['configs']!r}: expected a dict of name: value", pytrace=False
        )
    from minikafka.errors import ConfigError
    from minikafka.testing.seeds import resolve_seed

    try:
        # Pinned to 0: a test's cluster is the same every run unless MINIKAFKA_SEED says
        # otherwise (house rule 8: tests/ is deterministic).
        options["seed"] = resolve_seed(options["seed"], pinned=PINNED_SEED)
    except ConfigError as exc:
        pytest.fail(f"minikafka_cluster: {exc}", pytrace=False)
    return options


@pytest.fixture
def minikafka_cluster(request: pytest.FixtureRequest, tmp_path) -> Iterator[LocalCluster]:
    """A running local cluster for this test (module docstring)."""
    from minikafka.cluster import LocalCluster, plan_cluster
    from minikafka.errors import MiniKafkaError

    options = cluster_options(request)
    configs = {**FAST_CONFIGS, **{str(k): str(v) for k, v in options["configs"].items()}}
    try:
        spec = plan_cluster(
            base_dir=tmp_path / "minikafka-cluster",
            brokers=options["brokers"],
            seed=options["seed"],
            combined_controller=bool(options["combined"]),
            node_configs=configs,
            fault_proxy=bool(options["fault_proxy"]),
        )
        lc = LocalCluster.up(spec, ready_timeout_s=float(options["ready_timeout_s"]))
    except MiniKafkaError as exc:
        pytest.fail(f"minikafka_cluster: {exc}", pytrace=False)
    try:
        yield lc
    finally:
        lc.down()


@pytest.fixture
async def minikafka_client(minikafka_cluster: LocalCluster) -> AsyncIterator[ClusterClient]:
    """An open ClusterClient on `minikafka_cluster` (Trio, pytest-trio)."""
    from minikafka.client.cluster_client import open_client

    async with open_client(minikafka_cluster.bootstrap(), client_id="pytest") as client:
        yield client
