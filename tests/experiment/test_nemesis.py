"""The nemesis on Trio's MockClock: faults start and end on schedule against the right node,
targets resolve from the metadata of the moment, and heal undoes whatever is still in force."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import trio

from minikafka.cluster import plan_cluster
from minikafka.errors import ClusterError
from minikafka.experiment.nemesis import Nemesis
from minikafka.experiment.schedule import Fault, Target
from minikafka.experiment.workload import History
from minikafka.testing.run_folder import JsonLines


class FakeCluster:
    def __init__(self, tmp: Path) -> None:
        self.spec = plan_cluster(base_dir=tmp / "c", brokers=3, seed=1)
        self.calls: list[tuple[float, str, int]] = []

    def _call(self, what: str, node: int) -> None:
        self.calls.append((round(trio.current_time() - self.t0, 3), what, node))

    async def kill(self, node: int) -> None:
        self._call("kill", node)

    async def wipe(self, node: int) -> None:
        self._call("wipe", node)

    async def pause(self, node: int) -> None:
        self._call("pause", node)

    async def resume(self, node: int) -> None:
        self._call("resume", node)

    async def restart(self, node: int) -> None:
        self._call("restart", node)


class FakeProxy:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def partition(self, groups: list[list[int]]) -> None:
        self.calls.append(("partition", groups))

    async def set_links(self, links: list[tuple[int, int]], **faults: object) -> None:
        self.calls.append(("set_links", sorted(links), faults))

    async def heal(self) -> None:
        self.calls.append(("heal",))


class FakeClient:
    def __init__(self) -> None:
        self.leader = 2

    async def refresh_metadata(self, topics: list[str]) -> object:
        part = SimpleNamespace(partition=0, leader=self.leader, replicas=[1, 2, 3])
        return SimpleNamespace(topics=[SimpleNamespace(name="exp", partitions=[part])])


def make(tmp_path: Path, proxy: FakeProxy | None = None) -> tuple[Nemesis, FakeCluster, FakeClient]:
    lc, client = FakeCluster(tmp_path), FakeClient()
    nemesis = Nemesis(
        cluster=lc, client=client, topic="exp", history=History(tmp_path / "h.jsonl", 0.0),  # type: ignore[arg-type]
        log=JsonLines(tmp_path / "n.jsonl"), proxy=proxy, seed=1,
    )  # fmt: skip
    return nemesis, lc, client


async def test_process_faults_start_and_end_on_schedule(tmp_path: Path, autojump_clock) -> None:
    nemesis, lc, _ = make(tmp_path)
    lc.t0 = trio.current_time()
    faults = [
        Fault(kind="kill", target=Target("broker", 1), start_s=5, end_s=10),
        Fault(kind="pause", target=Target("broker", 3), start_s=15, end_s=20),
        Fault(kind="restart", target=Target("controller"), start_s=25, end_s=25),
    ]
    await nemesis.run(faults, lc.t0)
    assert lc.calls == [
        (5, "kill", 1), (10, "restart", 1), (15, "pause", 3), (20, "resume", 3),
        (25, "restart", 0),
    ]  # fmt: skip
    assert nemesis.errors == []


async def test_a_wipe_kills_deletes_the_log_store_and_restarts(
    tmp_path: Path, autojump_clock
) -> None:
    nemesis, lc, _ = make(tmp_path)
    lc.t0 = trio.current_time()
    await nemesis.run([Fault(kind="wipe", target=Target("broker", 2), start_s=3, end_s=8)], lc.t0)
    assert lc.calls == [(3, "kill", 2), (3, "wipe", 2), (8, "restart", 2)]


async def test_leader_target_is_resolved_when_the_fault_starts(
    tmp_path: Path, autojump_clock
) -> None:
    nemesis, lc, client = make(tmp_path)
    lc.t0 = trio.current_time()
    fault = Fault(kind="kill", target=Target("leader", 0), start_s=5, end_s=6)
    async with trio.open_nursery() as n:
        n.start_soon(nemesis.run, [fault], lc.t0)
        await trio.sleep(4)
        client.leader = 3  # leadership moved before the fault started
    assert lc.calls[0] == (5, "kill", 3)
    history = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert [(h["f"], h["node"], h["target"]) for h in history] == [
        ("start-fault", 3, "leader:0"), ("end-fault", 3, "leader:0"),
    ]  # fmt: skip


async def test_follower_target_is_never_the_leader(tmp_path: Path, autojump_clock) -> None:
    nemesis, _lc, _client = make(tmp_path)
    picked = {await nemesis.resolve(Target("follower", 0)) for _ in range(30)}
    assert picked == {1, 3}


async def test_network_faults_go_to_the_proxy_links_of_the_target(
    tmp_path: Path, autojump_clock
) -> None:
    proxy = FakeProxy()
    nemesis, lc, _ = make(tmp_path, proxy)
    lc.t0 = trio.current_time()
    faults = [
        Fault(kind="partition", target=Target("broker", 2), start_s=1, end_s=2),
        Fault(
            kind="latency",
            target=Target("broker", 2),
            start_s=3,
            end_s=4,
            params={"latency_ms": 50},
        ),
    ]
    await nemesis.run(faults, lc.t0)
    links = sorted([(2, o) for o in (0, 1, 3)] + [(o, 2) for o in (0, 1, 3)])
    assert proxy.calls == [
        ("partition", [[2], [0, 1, 3]]),
        ("set_links", links, {"blocked": False}),
        ("set_links", links, {"latency_ms": 50}),
        ("set_links", links, {"latency_ms": None}),
    ]


async def test_network_fault_without_proxy_is_an_error_not_a_crash(
    tmp_path: Path, autojump_clock
) -> None:
    nemesis, lc, _ = make(tmp_path)
    await nemesis.run(
        [Fault(kind="partition", target=Target("broker", 1), start_s=1, end_s=2)],
        trio.current_time(),
    )
    assert len(nemesis.errors) == 1 and "needs the cluster's fault proxy" in nemesis.errors[0]


async def test_heal_undoes_what_a_cut_short_schedule_left(tmp_path: Path, autojump_clock) -> None:
    proxy = FakeProxy()
    nemesis, lc, _ = make(tmp_path, proxy)
    lc.t0 = trio.current_time()
    faults = [
        Fault(kind="pause", target=Target("broker", 1), start_s=1, end_s=100),
        Fault(kind="kill", target=Target("broker", 2), start_s=1, end_s=100),
        Fault(kind="partition", target=Target("broker", 3), start_s=1, end_s=100),
    ]
    with trio.move_on_after(10):
        await nemesis.run(faults, lc.t0)
    await nemesis.heal()
    assert [c[1:] for c in lc.calls[-2:]] == [("resume", 1), ("restart", 2)]
    assert proxy.calls[-1] == ("heal",)


async def test_a_heal_step_that_fails_is_recorded_and_the_others_still_run(
    tmp_path: Path, autojump_clock
) -> None:
    proxy = FakeProxy()
    nemesis, lc, _ = make(tmp_path, proxy)
    lc.t0 = trio.current_time()

    async def resume(node: int) -> None:
        raise ClusterError(f"node {node} is not running")

    lc.resume = resume  # type: ignore[method-assign]
    faults = [
        Fault(kind="pause", target=Target("broker", 1), start_s=1, end_s=100),
        Fault(kind="kill", target=Target("broker", 2), start_s=1, end_s=100),
        Fault(kind="partition", target=Target("broker", 3), start_s=1, end_s=100),
    ]
    with trio.move_on_after(10):
        await nemesis.run(faults, lc.t0)
    await nemesis.heal()
    assert nemesis.errors == ["heal: resume node 1: node 1 is not running"]
    assert lc.calls[-1][1:] == ("restart", 2)
    assert proxy.calls[-1] == ("heal",)


async def test_a_clean_restart_that_fails_is_retried_by_heal(
    tmp_path: Path, autojump_clock
) -> None:
    nemesis, lc, _ = make(tmp_path)
    lc.t0 = trio.current_time()
    real_restart = lc.restart
    failures = [ClusterError("node 3 did not become ready within 60 s")]

    async def flaky_restart(node: int) -> None:
        if failures:
            raise failures.pop()
        await real_restart(node)

    lc.restart = flaky_restart  # type: ignore[method-assign]
    await nemesis.run(
        [Fault(kind="restart", target=Target("broker", 3), start_s=1, end_s=1)], lc.t0
    )
    assert len(nemesis.errors) == 1
    await nemesis.heal()
    assert lc.calls == [(1, "restart", 3)]  # the retry, at heal time
