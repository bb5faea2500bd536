"""The run template (minikafka/experiment/phases.py) on real clusters: a simulated one (the whole
cluster in this process under a virtual clock, sim/target.py `Simulated`) and local processes
(`LocalProcesses`) whose start fails.

The filling (`Recorder`) does what an experiment does, small: it creates a topic, produces in
its load, acts while the load runs, reads everything back; and it writes down each step it is
called for, so each test can hold the template to its promises: the phases in order, the load
running beside the act; a failed act checked as far as it got, but not read back; the cluster
left and its nodes' logs kept whatever happened; a failure the filling does not record raised,
unchecked; a cluster that does not start checked with what its nodes wrote.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient
from minikafka.client.consumer import Consumer
from minikafka.client.producer import Producer
from minikafka.cluster import plan_cluster
from minikafka.common import TopicPartition
from minikafka.errors import MiniKafkaError, describe
from minikafka.experiment.phases import LocalProcesses, run_phases
from minikafka.experiment.target import Target
from minikafka.sim.cluster import plan_sim_cluster, wall_clock
from minikafka.sim.target import Simulated
from minikafka.testing.run_folder import RunFolder

TOPIC = "phases"
TP = TopicPartition(TOPIC, 0)


class ActFailed(MiniKafkaError):
    """What the act raises when told to fail."""


class Recorder:
    """A filling of the template that writes down what it is called for (`steps`)."""

    client_id = "phases-test"

    def __init__(self, folder: RunFolder, *, fail_act: bool = False, record: bool = True) -> None:
        self.folder = folder
        self.fail_act = fail_act
        self.record = record  # whether `failed` and `not_started` record what they are given
        self.steps: list[str] = []
        self.acked: list[bytes] = []
        self.read: list[bytes] = []
        self.logs_at_check: list[str] = []

    @asynccontextmanager
    async def prepare(self, target: Target, client: ClusterClient) -> AsyncIterator[None]:
        self.steps.append(f"prepare on {len(target.spec.brokers)} brokers")
        await Admin(client).create_topic(TOPIC, partitions=1, replication_factor=2)
        try:
            yield
        finally:
            self.steps.append("prepare closed")

    @asynccontextmanager
    async def load(self, client: ClusterClient) -> AsyncIterator[list[bytes]]:
        self.steps.append("load")
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._produce, client, stop)
            try:
                yield self.acked  # the act sees the load's acknowledgements as they come
            finally:
                stop.set()
                self.steps.append("load stopped")

    async def _produce(self, client: ClusterClient, stop: trio.Event) -> None:
        producer = Producer(client)
        while not stop.is_set():
            value = b"v%d" % len(self.acked)
            await producer.send_records(TP, [(int(trio.current_time() * 1000), None, value)])
            self.acked.append(value)
            await trio.sleep(0.05)

    async def act(self, client: ClusterClient, acked: list[bytes]) -> None:
        before = len(acked)
        with trio.move_on_after(30):  # the load runs beside the act: more is acknowledged
            while len(acked) == before:
                await trio.sleep(0.1)
        self.steps.append(f"act, beside the load: {len(acked) > before}")
        if self.fail_act:
            raise ActFailed("the move did not complete")

    async def read_back(self, client: ClusterClient) -> None:
        self.steps.append("read back")
        consumer = Consumer(client)
        (end,) = (await consumer.list_offsets([TP], earliest=False)).values()
        position = {TP: 0}
        with trio.fail_after(30):
            while position[TP] < end:
                records = (await consumer.fetch_once(position)).get(TP, [])
                self.read.extend(r.value for r in records)
                if records:
                    position[TP] = records[-1].offset + 1

    def not_started(self, exc: BaseException) -> bool:
        self.steps.append(f"not started: {type(exc).__name__}")
        return self.record

    def failed(self, exc: BaseException) -> bool:
        self.steps.append(f"failed: {describe(exc)}")
        return self.record

    def left(self) -> None:
        self.steps.append("left")

    def check(self) -> dict[str, Any]:
        self.steps.append("check")
        nodes = self.folder.path / "nodes"
        self.logs_at_check = sorted(
            f"{p.parent.name}/{p.name}" for p in nodes.glob("node-*/*") if p.stat().st_size
        )
        return {"acked": len(self.acked), "read": len(self.read)}


def simulated(tmp_path: Path) -> tuple[RunFolder, Simulated]:
    folder = RunFolder(tmp_path / "run", clock=wall_clock)
    plan = plan_sim_cluster(tmp_path / "cluster", brokers=2, seed=5)
    return folder, Simulated(plan=plan, seed=5, deadline_s=600.0)


def test_the_phases_run_in_order_and_the_load_beside_the_act(tmp_path: Path) -> None:
    folder, cluster = simulated(tmp_path)
    filling = Recorder(folder)
    result = run_phases(filling, cluster)
    assert filling.steps == [
        "prepare on 2 brokers",
        "load",
        "act, beside the load: True",
        "load stopped",
        "read back",
        "prepare closed",
        "left",
        "check",
    ]
    # what the load had acknowledged is what was read back, and the check's result is the run's
    assert filling.acked and filling.read == filling.acked
    assert result == {"acked": len(filling.acked), "read": len(filling.acked)}
    # the nodes' logs were in the folder when the check ran: the cluster was left before it
    assert {"node-0/events.jsonl", "node-1/events.jsonl", "node-2/events.jsonl"} <= set(
        filling.logs_at_check
    )
    assert cluster.simulated_s > 0  # the cluster ran in simulated time, started to stopped


def test_a_failed_act_is_checked_as_far_as_it_got_but_not_read_back(tmp_path: Path) -> None:
    """The act fails while the load runs: the load is stopped, the cluster left, the failure
    handed to the filling, the nodes' logs kept and the check run; the read-back is not."""
    folder, cluster = simulated(tmp_path)
    filling = Recorder(folder, fail_act=True)
    result = run_phases(filling, cluster)
    assert filling.steps == [
        "prepare on 2 brokers",
        "load",
        "act, beside the load: True",
        "load stopped",
        "prepare closed",
        "left",  # a simulated cluster is left inside its run: before the run's failure is in
        "failed: ActFailed: the move did not complete",
        "check",
    ]
    assert filling.read == [] and result["acked"] > 0
    assert "node-1/events.jsonl" in filling.logs_at_check


def test_a_failure_the_filling_does_not_record_is_raised_unchecked(tmp_path: Path) -> None:
    """As Ctrl-C is: the cluster left and its logs kept, then raised, with no check."""
    folder, cluster = simulated(tmp_path)
    filling = Recorder(folder, fail_act=True, record=False)
    with pytest.raises(BaseExceptionGroup) as raised:  # from the simulated cluster's nursery
        run_phases(filling, cluster)
    assert raised.group_contains(ActFailed)
    assert filling.steps[-2:] == ["left", "failed: ActFailed: the move did not complete"]
    assert "check" not in filling.steps
    assert (folder.path / "nodes" / "node-1" / "events.jsonl").stat().st_size > 0


def test_a_local_cluster_that_does_not_start_is_checked_with_what_its_nodes_wrote(
    tmp_path: Path,
) -> None:
    """Local processes whose node command fails at once: `not_started`, no phase in Trio, no
    stop to report; the check runs, with the nodes' output in the folder."""
    folder = RunFolder(tmp_path / "run")
    plan = plan_cluster(base_dir=tmp_path / "cluster", brokers=1, seed=5)
    failing = [sys.executable, "-c", "import sys; print('no broker here'); sys.exit(3)"]
    cluster = LocalProcesses(plan=plan, node_command=failing, ready_timeout_s=20.0)
    filling = Recorder(folder)
    run_phases(filling, cluster)
    assert filling.steps == ["not started: ClusterError", "check"]
    assert "node-0/node.out" in filling.logs_at_check


def test_a_simulated_cluster_that_does_not_start_is_not_started_with_the_nodes_error(
    tmp_path: Path,
) -> None:
    """As for local processes: a node that refuses its config fails the start, and the filling
    hears of it as `not_started`, with the node's own error, not the Trio run's group."""
    folder = RunFolder(tmp_path / "run", clock=wall_clock)
    plan = plan_sim_cluster(
        tmp_path / "cluster", brokers=1, seed=5, node_configs={"replica.lag.time.max.ms": "soon"}
    )
    filling = Recorder(folder)
    run_phases(filling, Simulated(plan=plan, seed=5, deadline_s=600.0))
    assert filling.steps == ["left", "not started: ConfigError", "check"]


@pytest.mark.integration
@pytest.mark.parametrize("record", [True, False], ids=["recorded", "not-recorded"])
def test_a_failed_act_on_local_processes_is_handed_over_before_they_stop(
    tmp_path: Path, record: bool
) -> None:
    """On real processes the failure reaches the filling while the cluster still runs (an
    experiment prints it before "stopping the cluster"), then the cluster is stopped and left;
    a recorded failure is checked, one that is not is raised, its logs kept all the same."""
    folder = RunFolder(tmp_path / "run")
    plan = plan_cluster(base_dir=tmp_path / "cluster", brokers=2, seed=5)
    filling = Recorder(folder, fail_act=True, record=record)
    cluster = LocalProcesses(plan=plan, progress=filling.steps.append)
    if record:
        run_phases(filling, cluster)
    else:
        with pytest.raises(ActFailed):  # the client hands on its block's one error (open_client)
            run_phases(filling, cluster)
    steps = [s for s in filling.steps if not s.startswith(("starting", "cluster ", "node "))]
    assert steps[:5] == [
        "prepare on 2 brokers",
        "load",
        "act, beside the load: True",
        "load stopped",
        "prepare closed",
    ]
    assert steps[5:] == [
        "failed: ActFailed: the move did not complete",
        "stopping the cluster",
        "left",
        *(["check"] if record else []),
    ]
    assert (folder.path / "nodes" / "node-2" / "events.jsonl").stat().st_size > 0
