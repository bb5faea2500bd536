"""pytest fixtures for testing your own clients against a real minikafka cluster.

Registered through the `pytest11` entry point (pyproject.toml), so installing minikafka makes
them available in any project; nothing to import.

- `minikafka_cluster`: a LocalCluster (a controller and N brokers, real processes on 127.0.0.1)
  started in the test's `tmp_path`, yielded ready, stopped afterwards (brokers first, SIGKILL
  after 10 s). Function-scoped: every test gets a fresh cluster (a few seconds to start, four
  processes). The one to use for fault tests: `.kill(n)`, `.pause(n)`, `.restart(n)`,
  `.log_path(n, "events")` and `.spec` are there; `.bootstrap()` gives "host:port,...".
- `minikafka_client`: an async fixture (Trio; needs pytest-trio) yielding an open
  `ClusterClient` on that cluster, closed afterwards.
- `minikafka_cluster_factory`: session-scoped. `minikafka_cluster_factory(brokers=2, ...)`
  returns a running cluster with those options, started on the first call and returned again to
  every later call with the same options (normalised: defaults filled in, `configs` merged over
  `FAST_CONFIGS`, so `{}` and `FAST_CONFIGS` itself are the same cluster); all of them are
  stopped at the end of the session. Tests sharing a cluster see each other's topics and data:
  each creates its own topics (`minikafka_topic`), and none faults a node (a shared cluster with
  a node not running is refused, not repaired; use `minikafka_cluster` for that).
- `minikafka_session_cluster`: session-scoped, `minikafka_cluster_factory()` (the defaults).
- `minikafka_topic`: a topic name of this test's own ("test_file-test_name", "-2" appended if the
  session handed it out already), to create on a shared cluster.

Configure `minikafka_cluster` with a marker, an indirect parameter, or both (the parameter wins):

    @pytest.mark.minikafka(brokers=3, configs={"min.insync.replicas": "2"})
    def test_x(minikafka_cluster): ...

    @pytest.mark.parametrize("minikafka_cluster", [{"brokers": 1}, {"brokers": 3}], indirect=True)
    def test_y(minikafka_cluster): ...

Options (the marker's, the parameter's and the factory's): `brokers` (3), `configs` (node
configs, Kafka's names, on top of `FAST_CONFIGS`), `seed` (default `$MINIKAFKA_SEED`, else
pinned to 0: minikafka/testing/seeds.py; the session's header prints it), `combined` (the
controller inside broker 1, False), `fault_proxy` (node-to-node links through the fault proxy,
False: then `minikafka_cluster.fault_proxy()` partitions, delays or caps them),
`ready_timeout_s` (30; not part of a shared cluster's identity). An unknown option or a bad
value fails the test's setup (or the factory's call) with one line naming what is accepted.
`FAST_CONFIGS` shortens Kafka's timings that would make a test wait (fencing a dead broker takes
1.5 s, not 9 s; a follower that could not fetch retries after 100 ms, not 1 s, so the first
acks=all produce to a new topic is not held a second); any of them can be overridden through
`configs`.

Every start is retried on new ports, up to `START_ATTEMPTS` in all, when another process took
one of the picked ports before its node bound it (cluster/start_retry.py; only that failure is
retried). The retry is logged as a warning; each attempt has a dir of its own
(`minikafka-cluster`, then `minikafka-cluster-2`, ... in `tmp_path`).

Heavy imports happen inside the fixtures, so loading the plugin costs nothing in test runs
that do not use it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from minikafka.client.cluster_client import ClusterClient
    from minikafka.cluster import ClusterSpec, LocalCluster

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
START_ATTEMPTS = 3
ACCEPTED = (
    "brokers=N, configs={name: value}, seed=N, combined=bool, fault_proxy=bool, ready_timeout_s=S"
)
TOPIC_NAME_MAX = 120  # well under Kafka's 249: a topic's name also names its log's databases
_NOT_IN_TOPIC_NAMES = re.compile(r"[^A-Za-z0-9._-]+")
_TOPICS_HANDED_OUT = pytest.StashKey[set[str]]()
log = logging.getLogger(__name__)


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


# -- options ----------------------------------------------------------------------------------


def cluster_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """DEFAULTS, then the closest `minikafka` marker's keywords, then an indirect parameter."""
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
    return merge_options(sources, "minikafka_cluster")


def merge_options(sources: list[tuple[str, Mapping[str, Any]]], who: str) -> dict[str, Any]:
    """DEFAULTS updated by each (where, options) in turn, checked, the seed resolved; a bad
    option fails the caller's setup with one line."""
    options = dict(DEFAULTS)
    for where, given in sources:
        unknown = sorted(set(given) - set(DEFAULTS))
        if unknown:
            pytest.fail(
                f"{where}: unknown option {unknown[0]!r}; expected {ACCEPTED}", pytrace=False
            )
        options.update(given)
    brokers = options["brokers"]
    if isinstance(brokers, bool) or not isinstance(brokers, int):  # a shared cluster's key
        pytest.fail(f"brokers {brokers!r}: expected an integer", pytrace=False)
    if not isinstance(options["configs"], Mapping):
        pytest.fail(
            f"configs {options['configs']!r}: expected a dict of name: value", pytrace=False
        )
    timeout = options["ready_timeout_s"]
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        pytest.fail(f"ready_timeout_s {timeout!r}: expected seconds > 0", pytrace=False)
    from minikafka.errors import ConfigError
    from minikafka.testing.seeds import resolve_seed

    try:
        # Pinned to 0: a test's cluster is the same every run unless MINIKAFKA_SEED says
        # otherwise (house rule 8: tests/ is deterministic).
        options["seed"] = resolve_seed(options["seed"], pinned=PINNED_SEED)
    except ConfigError as exc:
        pytest.fail(f"{who}: {exc}", pytrace=False)
    return options


def node_configs(options: Mapping[str, Any]) -> dict[str, str]:
    """The configs every node gets: FAST_CONFIGS, overridden by the options' `configs`."""
    return {**FAST_CONFIGS, **{str(k): str(v) for k, v in options["configs"].items()}}


def cluster_key(options: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two shared clusters the same: everything but the ready timeout."""
    return (
        options["brokers"],
        tuple(sorted(node_configs(options).items())),
        options["seed"],
        bool(options["combined"]),
        bool(options["fault_proxy"]),
    )


def start_cluster(
    options: Mapping[str, Any], base_dir: Callable[[int], Path], who: str
) -> LocalCluster:
    """A running cluster with `options`, attempt n in `base_dir(n)`; new ports and a new
    attempt when a port was taken (module docstring); any error fails the caller in one line."""
    from minikafka.cluster import plan_cluster
    from minikafka.cluster.start_retry import up_retrying_ports
    from minikafka.errors import MiniKafkaError

    configs = node_configs(options)

    def plan(attempt: int) -> ClusterSpec:
        return plan_cluster(
            base_dir=base_dir(attempt),
            brokers=options["brokers"],
            seed=options["seed"],
            combined_controller=bool(options["combined"]),
            node_configs=configs,
            fault_proxy=bool(options["fault_proxy"]),
        )

    try:
        return up_retrying_ports(
            plan,
            attempts=START_ATTEMPTS,
            ready_timeout_s=float(options["ready_timeout_s"]),
            on_retry=lambda line: log.warning("%s: %s", who, line),
        )
    except MiniKafkaError as exc:
        pytest.fail(f"{who}: {exc}", pytrace=False)


# -- function-scoped --------------------------------------------------------------------------


@pytest.fixture
def minikafka_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalCluster]:
    """A running local cluster for this test (module docstring)."""

    def base_dir(attempt: int) -> Path:
        suffix = "" if attempt == 1 else f"-{attempt}"
        return tmp_path / f"minikafka-cluster{suffix}"

    lc = start_cluster(cluster_options(request), base_dir, "minikafka_cluster")
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


@pytest.fixture
def minikafka_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test of this session gets, for tests sharing a cluster."""
    handed_out = request.config.stash.setdefault(_TOPICS_HANDED_OUT, set())
    return unique_topic_name(request.node.nodeid, handed_out)


def unique_topic_name(nodeid: str, handed_out: set[str]) -> str:
    """A legal topic name made from a test's node id, not in `handed_out` (added to it):
    "tests/test_x.py::test_y[2]" -> "test_x-test_y-2", then "test_x-test_y-2-2", ..."""
    path, _, rest = nodeid.partition("::")
    readable = "-".join(p for p in [Path(path).stem, *rest.split("::")] if p)
    base = _NOT_IN_TOPIC_NAMES.sub("-", readable).strip("-.") or "topic"
    if len(base) > TOPIC_NAME_MAX:
        digest = hashlib.sha1(nodeid.encode()).hexdigest()[:10]  # long ids stay distinct
        base = f"{base[: TOPIC_NAME_MAX - 20]}-{digest}"
    name, n = base, 1
    while name in handed_out:
        n += 1
        name = f"{base}-{n}"
    handed_out.add(name)
    return name


# -- session-scoped ---------------------------------------------------------------------------


class ClusterFactory:
    """The value of `minikafka_cluster_factory`: call it with options, get a running cluster
    shared with every other call of the session with the same options (module docstring)."""

    def __init__(self, make_dir: Callable[[], Path]) -> None:
        self._make_dir = make_dir  # a fresh dir for each start attempt
        self._clusters: dict[tuple[Any, ...], LocalCluster] = {}

    def __call__(self, **options: Any) -> LocalCluster:
        """The session's running cluster with these options (`brokers=3`, `configs={...}`,
        `seed`, `combined`, `fault_proxy`, `ready_timeout_s`), started on the first call."""
        who = "minikafka_cluster_factory"
        merged = merge_options([(who, options)], who)
        key = cluster_key(merged)
        lc = self._clusters.get(key)
        if lc is None:
            lc = start_cluster(merged, lambda _attempt: self._make_dir(), who)
            self._clusters[key] = lc
        else:
            _refuse_if_faulted(lc, who)
        return lc

    @property
    def clusters(self) -> list[LocalCluster]:
        """The clusters started so far, in the order they were started."""
        return list(self._clusters.values())

    def close(self) -> None:
        """Stop every cluster (last started first); the first error is raised after all."""
        errors: list[BaseException] = []
        for lc in reversed(self.clusters):
            try:
                lc.down()
            except Exception as exc:  # stop the others anyway
                errors.append(exc)
        self._clusters.clear()
        if errors:
            raise errors[0]


def _refuse_if_faulted(lc: LocalCluster, who: str) -> None:
    """A shared cluster with a node down or paused is not handed out again (nor repaired)."""
    faulted = [s for s in lc.status() if not s.alive or s.paused]
    if faulted:
        s = faulted[0]
        how = "paused" if s.alive else "not running"
        pytest.fail(
            f"{who}: node {s.node_id} of the shared cluster in {lc.base_dir} is {how} (a test "
            "killed, stopped or paused it?); tests that fault nodes must use the "
            "function-scoped minikafka_cluster",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def minikafka_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ClusterFactory]:
    """Session-scoped: `minikafka_cluster_factory(**options)` starts a cluster once per distinct
    set of options and returns it to every test asking for the same; all are stopped at the end.
    Tests sharing a cluster must use topics of their own (`minikafka_topic`) and must not fault
    its nodes (use the function-scoped `minikafka_cluster` for kill/pause/restart)."""
    factory = ClusterFactory(lambda: tmp_path_factory.mktemp("minikafka-shared"))
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="session")
def minikafka_session_cluster(minikafka_cluster_factory: ClusterFactory) -> LocalCluster:
    """Session-scoped: the shared cluster with the default options (3 brokers); tests on it use
    their own topics (`minikafka_topic`) and fault no node."""
    return minikafka_cluster_factory()
