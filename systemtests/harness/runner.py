"""One system-test case, end to end: the run template (minikafka/experiment/phases.py) filled by
`Scenario`; everything recorded in a run folder (minikafka/testing/run_folder.py).

The run, as kafkatest's produce -> act -> consume -> validate:

1. cluster: a fresh cluster (controller node 0 + the layout's brokers; the node configs of the
   case's quota mode, systemtests/harness/quota_modes.py), of processes or simulated.
2. prepare: one topic created with the layout's explicit assignment (systemtests/harness/
   layout.py); fill: `rounds` whole batches per partition, acks=all; wait until every replica is
   in sync. For `wipe` (the CONFIGS tool, KIP-73 Q&A 2): broker 2 is killed, fenced, its logs
   wiped; the throttle is set through `minikafka configs` (rates on every broker, the leader
   list `p:1` and follower list `p:2` for every partition).
3. load: with load, the producer runs `LOAD_SETTLE_S` before the move starts, so the inbound
   rate is steady through the move, and it stops after the move ends.
4. act: the move, as an operator makes it:
   - `wipe`: broker 2 restarts empty and re-replicates under the throttle. The move ends when
     it is in every ISR; the throttle is then removed with `configs --delete-config`.
   - reassignments (the REASSIGN tool): the reassignment JSON is written, `minikafka reassign
     plan` records the tool's own estimate, `reassign --execute --throttle T [--throttle-mode
     reassignment]` starts the move; it ends when no partition of the topic is moving and every
     replica set is the target; `reassign --verify` is run after.
5. read back: every partition, and the acknowledged-writes checker; the final ISRs.
6. check (after the cluster is down and the node logs are copied): the error, if any, on the
   timeline; case.json written with the measured figures. The analysis judges the folder later
   (systemtests/harness/verdicts.py, one Spark job per test module).

The case's prediction is computed at the move's start, from the bytes acknowledged by then
(per partition) and the planned inbound rate, as its quota mode predicts and judges it
(systemtests/harness/quota_modes.py: the traffic model for the precise mode, the simulation of
Kafka's algorithm and its overshoot bound for Kafka's). Every wait is bounded; the move's bound is
`Profile.move_timeout_s(predicted)`.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from minikafka.cli.tool_runner import run_command
from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient
from minikafka.client.connection import sole_exception
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.errors import describe
from minikafka.experiment.phases import Cluster, LocalProcesses, run_phases
from minikafka.experiment.target import LocalTarget, Target
from minikafka.sim.cluster import plan_sim_cluster
from minikafka.sim.cluster import wall_clock as sim_clock
from minikafka.sim.target import Simulated
from minikafka.testing.run_folder import CaseInfo, RunFolder
from systemtests.harness.case import CaseRun, CaseSpec
from systemtests.harness.clients import HarnessError, LoadStats, Workload, fill, read_back, run_load
from systemtests.harness.kafka_load import run_kafka_load
from systemtests.harness.layout import Layout, make_layout, moving_partitions, predict
from systemtests.harness.machine import CpuShare
from systemtests.harness.profiles import Profile
from systemtests.harness.quota_modes import NODE_CONFIGS, judging, sensor_warmup_s
from systemtests.harness.topic_state import (
    PARTITIONS,
    POLL_S,
    TOPIC,
    State,
    all_in_sync,
    create_topic,
    final_problems,
    replica_state,
    wait_until,
)

LOAD_SETTLE_S = 2.0
WAIT_S = 60.0  # bound of every wait that is not the move itself
# A simulated case that waits on nothing would hang in wall time: past this many simulated
# seconds it is cut short and fails (the longest move's own bound is well under it).
SIM_DEADLINE_S = 3600.0


# ---------------------------------------------------------------------------------- the run


class Scenario:
    """A case's filling of the run template (minikafka/experiment/phases.py `Phases`), against a
    `Target` (minikafka/experiment/target.py): a cluster of processes (`local` is then its
    LocalCluster: the processes' CPU, librdkafka's listeners) or a simulated one."""

    client_id = "systemtest"

    def __init__(self, run: CaseRun, layout: Layout, profile: Profile) -> None:
        self.run = run
        self.folder = run.folder
        self.layout = layout
        self.profile = profile
        self.throttle = profile.throttle_bytes_per_s
        self.workload = Workload(
            topic=TOPIC,
            partitions=layout.partitions,
            record_size=profile.record_size,
            records_per_batch=profile.records_per_batch,
            clock=run.folder.clock,
        )
        self.load_rate = profile.load_rate(run.spec.load_client) if run.spec.load else 0.0
        self.load_stats = LoadStats()
        self.sizes_at_start: dict[int, int] = {}
        self.move_s: tuple[float, float] | None = None
        self.target: Target  # set by prepare(), as the rest
        self.local: LocalCluster | None = None
        self.cpu: CpuShare | None = None
        self.up_since = 0.0  # when the leaders' quota sensors start recording (topic created)

    def pids(self) -> list[int | None]:
        assert self.local is not None
        return [self.local.pid(n.node_id) for n in self.local.spec.nodes]

    @property
    def final_replicas(self) -> Mapping[int, tuple[int, ...]]:
        return self.layout.target or self.layout.initial

    async def tool(self, name: str, *args: str) -> None:
        await self.target.tool(self.folder, name, args)

    async def wait_until(
        self, client: ClusterClient, done: Callable[[State], bool], what: str, timeout_s: float
    ) -> float:
        return await wait_until(client, done, what, timeout_s, clock=self.folder.clock)

    # -- the phases -----------------------------------------------------------------------

    @asynccontextmanager
    async def prepare(self, target: Target, client: ClusterClient) -> AsyncIterator[None]:
        """The topic, filled and in sync, the quota sensors warmed up; for `wipe`, broker 2
        wiped and the throttle set (`wipe`)."""
        spec = self.run.spec
        self.target = target
        self.local = target.cluster if isinstance(target, LocalTarget) else None
        # who used the machine during the move (harness/machine.py); nothing to measure when
        # the whole cluster is one simulated process
        self.cpu = CpuShare() if self.local is not None else None
        await create_topic(client, self.layout)
        self.up_since = trio.current_time()  # followers fetch, leaders record, from here on
        self.folder.event("topic_created", topic=TOPIC, partitions=PARTITIONS)
        rounds = max(1, round(self.profile.data_bytes / self.workload.batch_bytes / PARTITIONS))
        await fill(client, self.workload, self.folder, rounds=rounds, timeout_s=WAIT_S)
        await self.wait_until(
            client, all_in_sync(self.layout.initial), "replicas in sync after the fill", WAIT_S
        )
        up_s = trio.current_time() - self.up_since
        await trio.sleep(max(0.0, sensor_warmup_s(spec.quota, spec.mode) - up_s))
        if self.layout.wiped is not None:
            await self.wipe(client)
        yield

    @asynccontextmanager
    async def load(self, _client: ClusterClient) -> AsyncIterator[None]:
        """With load, its own client's producer, started `LOAD_SETTLE_S` before the block so
        the inbound rate is steady through the move, and stopped after it."""
        stop = trio.Event()
        async with self.target.client("systemtest-load") as load_c:
            async with trio.open_nursery() as nursery:
                if self.run.spec.load:
                    await nursery.start(self._load, load_c, stop)
                    await trio.sleep(LOAD_SETTLE_S)
                try:
                    yield
                finally:
                    stop.set()

    async def act(self, client: ClusterClient, _load: None) -> None:
        """The move, under the load if the case has one; its prediction made as it starts."""
        await self.move(client)

    async def read_back(self, client: ClusterClient) -> None:
        """Every partition read back and checked; the final ISRs."""
        verdict = await read_back(client, self.workload, self.folder, timeout_s=WAIT_S)
        self.run.verdict = verdict
        state = await replica_state(client)
        self.run.final_isr_problems = final_problems(state, self.final_replicas)
        self.run.final_isr_ok = not self.run.final_isr_problems
        self.folder.event(
            "final_isr",
            ok=self.run.final_isr_ok,
            partitions={
                str(p): {"leader": s[0], "replicas": s[1], "isr": s[2]} for p, s in state.items()
            },
        )

    def not_started(self, exc: BaseException) -> bool:
        return self.failed(exc)

    def failed(self, exc: BaseException) -> bool:
        """Any failure is the case's, in `CaseRun.error` (the test reports it); Ctrl-C is
        raised."""
        if isinstance(exc, KeyboardInterrupt):
            return False
        self.run.error = describe(
            sole_exception(exc) if isinstance(exc, BaseExceptionGroup) else exc
        )
        return True

    def left(self) -> None:
        self.folder.event("cluster_down")

    def check(self) -> None:
        """The error on the timeline; case.json with the measured figures."""
        if self.run.error is not None:
            self.folder.event("error", error=self.run.error)
        if self.run.prediction is not None:
            self.write_case()

    # -- the load -------------------------------------------------------------------------

    async def _load(self, client: ClusterClient, stop: trio.Event, task_status) -> None:
        if self.run.spec.load_client == "librdkafka":
            if self.local is None:
                raise HarnessError("librdkafka's load cannot run in a simulation (its own sockets)")
            await run_kafka_load(
                self.local.kafka_bootstrap(),
                self.workload,
                self.folder,
                rate_bytes_per_s=self.load_rate,
                stop=stop,
                stats=self.load_stats,
                task_status=task_status,
            )
            return
        await run_load(
            client,
            self.workload,
            self.folder,
            rate_bytes_per_s=self.load_rate,
            stop=stop,
            stats=self.load_stats,
            task_status=task_status,
        )

    # -- wipe: the CONFIGS tool ------------------------------------------------------------

    async def wipe(self, client: ClusterClient) -> None:
        victim = self.layout.wiped
        assert victim is not None
        await self.target.kill(victim)
        self.folder.event("broker_killed", node=victim)
        await self.wait_until(
            client,
            lambda s: all(victim not in isr and leader != victim for leader, _r, isr in s.values()),
            f"broker {victim} fenced",
            WAIT_S,
        )
        data_dir = self.target.spec.node(victim).data_dir
        shutil.rmtree(data_dir / "lmdb")
        (data_dir / "node.json").unlink(missing_ok=True)
        self.folder.event("broker_wiped", node=victim)
        # KIP-73 Q&A 2: rates on the brokers, and the bootstrapping broker's replicas in the
        # follower list, their leaders' in the leader list.
        rates = f"leader.replication.throttled.rate={self.throttle},follower.replication.throttled.rate={self.throttle}"
        for b in self.layout.brokers:
            await self.tool(
                f"configs-broker-{b}",
                "configs", "--alter", "--entity-type", "brokers", "--entity-name", str(b),
                "--add-config", rates,
            )  # fmt: skip
        moves = self.layout.moves()
        leaders = ",".join(f"{p}:{m.leader}" for p, m in sorted(moves.items()))
        followers = ",".join(f"{p}:{victim}" for p in sorted(moves))
        await self.tool(
            "configs-topic",
            "configs", "--alter", "--entity-type", "topics", "--entity-name", TOPIC,
            "--add-config",
            f"leader.replication.throttled.replicas=[{leaders}],"
            f"follower.replication.throttled.replicas=[{followers}]",
        )  # fmt: skip
        await self.tool(
            "configs-describe",
            "configs", "--describe", "--entity-type", "brokers",
        )  # fmt: skip
        self.folder.event(
            "throttle_set", tool="configs", bytes_per_s=self.throttle, mode="lists",
            brokers=list(self.layout.brokers),
        )  # fmt: skip

    # -- the move -------------------------------------------------------------------------

    def _start(self, prediction_mode: str) -> float:
        """Sizes now, the prediction, case.json; -> the move's time limit."""
        self.sizes_at_start = dict(self.workload.bytes_acked)
        per_partition = self.load_rate / PARTITIONS
        inbound = {p: per_partition for p in range(PARTITIONS)}
        prediction = predict(
            self.layout,
            sizes=self.sizes_at_start,
            inbound=inbound,
            throttle=self.throttle,
            mode=prediction_mode,
        )
        self.run.prediction = prediction
        if prediction.seconds is None:
            raise HarnessError(f"the move never finishes at {self.throttle} B/s: {prediction}")
        self.run.judging = judging(
            self.run.spec.quota,
            moving_partitions(self.layout, sizes=self.sizes_at_start, inbound=inbound),
            throttle=self.throttle,
            mode=prediction_mode,
            judged=[
                *((b, "leader") for b in self.layout.sending),
                *((b, "follower") for b in self.layout.receiving),
            ],
            up_s=trio.current_time() - self.up_since,
        )
        self.write_case()
        j = self.run.judging
        return self.profile.move_timeout_s(
            max(prediction.seconds, j.predicted_s or 0.0, *j.alternatives_s)
        )

    async def move(self, client: ClusterClient) -> None:
        spec = self.run.spec
        if self.layout.wiped is not None:
            limit = self._start("lists")
            victim = self.layout.wiped
            self.folder.event("broker_restart", node=victim)
            await self.target.restart(victim)
            started = self.folder.event("move_start", how="restart", node=victim)
            if self.cpu is not None:
                self.cpu.start(self.pids())
            done = lambda s: all(victim in isr for _l, _r, isr in s.values())  # noqa: E731
            ended = await self.wait_until(client, done, f"broker {victim} in every ISR", limit)
            if self.cpu is not None:
                self.cpu.stop(self.pids())
            self.folder.event("move_end", ts=ended)
            self.move_s = (started, ended)
            delete = "leader.replication.throttled.rate,follower.replication.throttled.rate"
            for b in self.layout.brokers:
                await self.tool(
                    f"configs-unset-broker-{b}",
                    "configs", "--alter", "--entity-type", "brokers", "--entity-name", str(b),
                    "--delete-config", delete,
                )  # fmt: skip
            await self.tool(
                "configs-unset-topic",
                "configs", "--alter", "--entity-type", "topics", "--entity-name", TOPIC,
                "--delete-config",
                "leader.replication.throttled.replicas,follower.replication.throttled.replicas",
            )  # fmt: skip
            self.folder.event("throttle_removed", tool="configs")
            return
        target = self.layout.target
        assert target is not None
        moves_file = self.folder.path / "tool" / "reassignment.json"
        moves_file.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": TOPIC, "partition": p, "replicas": list(target[p])}
                        for p in sorted(target)
                    ],
                }
            )
        )
        mode = ["--throttle-mode", "reassignment"] if spec.mode == "kip542" else []
        throttle = ["--throttle", str(self.throttle)]
        file = ["--reassignment-json-file", str(moves_file)]
        await self.tool("reassign-plan", "reassign", "plan", *file, *throttle)
        limit = self._start(spec.mode)
        self.folder.event("execute", tool="reassign")
        await self.tool("reassign-execute", "reassign", "--execute", *file, *throttle, *mode)
        started = self.folder.event("move_start", how="reassign --execute")
        if self.cpu is not None:
            self.cpu.start(self.pids())
        self.folder.event(
            "throttle_set", ts=started, tool="reassign", bytes_per_s=self.throttle,
            mode=spec.mode, brokers=sorted({*self.layout.sending, *self.layout.receiving}),
        )  # fmt: skip
        admin = Admin(client)
        with trio.move_on_after(limit) as scope:
            while True:
                moving = await admin.list_partition_reassignments([TOPIC])
                seen = self.folder.clock()
                if not moving:
                    state = await replica_state(client)
                    if all(state[p][1] == list(target[p]) for p in target):
                        break
                await trio.sleep(POLL_S)
        if scope.cancelled_caught:
            await self.tool("reassign-verify-timeout", "reassign", "--verify", *file)
            raise HarnessError(f"the reassignment did not complete within {limit:.0f} s")
        if self.cpu is not None:
            self.cpu.stop(self.pids())
        self.folder.event("move_end", ts=seen)
        self.move_s = (started, seen)
        await self.tool("reassign-verify", "reassign", "--verify", *file)
        self.folder.event("verify", tool="reassign")

    # -- case.json ------------------------------------------------------------------------

    def write_case(self) -> None:
        prediction = self.run.prediction
        moves = self.layout.moves()
        bytes_to_move = sum(
            self.sizes_at_start.get(p, 0) * len(m.destinations) for p, m in moves.items()
        )
        extra: dict[str, Any] = {
            "layout": self.layout.name,
            "tool": self.run.spec.tool,
            "topic": TOPIC,
            "load": self.run.spec.load,
            "profile": self.profile.name,
            "initial_assignment": {str(p): list(r) for p, r in self.layout.initial.items()},
            "target_assignment": None
            if self.layout.target is None
            else {str(p): list(r) for p, r in self.layout.target.items()},
            "wiped_broker": self.layout.wiped,
            "batch_bytes": self.workload.batch_bytes,
            "quota_mode": self.run.spec.quota,
            "node_configs": dict(NODE_CONFIGS[self.run.spec.quota]),
            "produce_bytes_per_s_measured": round(self.load_stats.bytes_per_s, 1),
            "load_client": self.run.spec.load_client,
        }
        if prediction is not None:
            extra |= {k: v for k, v in prediction.to_json().items() if k != "predicted_move_s"}
        judged = self.run.judging
        if judged is not None:
            extra |= judged.extra
        if self.move_s is not None:
            extra["move_observed_s"] = round(self.move_s[1] - self.move_s[0], 3)
        if self.cpu is not None and self.cpu.figures is not None:
            extra["cpu_during_move"] = self.cpu.figures
        self.run.info = CaseInfo(
            case=self.run.spec.name,
            seed=self.target.spec.seed,
            nodes=list(self.layout.brokers),
            partitions=self.layout.partitions,
            replication_factor=self.layout.replication_factor,
            throttle_bytes_per_s=self.throttle,
            throttle_mode=self.run.spec.mode,
            receiving_brokers=list(self.layout.receiving),
            sending_brokers=list(self.layout.sending),
            bytes_to_move=bytes_to_move,
            produce_bytes_per_s=float(self.load_rate),
            predicted_move_s=None
            if judged is None or judged.predicted_s is None
            else round(judged.predicted_s, 3),
            predicted_move_alternatives_s=() if judged is None else judged.alternatives_s,
            throttle_window_s=None if judged is None else judged.window_s,
            throttle_bound_bytes_per_s=None if judged is None else judged.bound_bytes_per_s,
            throttle_bounds_bytes_per_s={} if judged is None else judged.bounds_bytes_per_s,
            # Idle, every replication byte on the judged brokers is of the throttled class (the
            # moving partitions are all listed, or all adding); under load in-sync followers of
            # unlisted or non-adding replicas add bytes the throttle does not govern.
            throttle_wire_judged=not self.run.spec.load,
            extra=extra,
        )
        self.folder.write_case(self.run.info)


def run_case(
    spec: CaseSpec,
    profile: Profile,
    *,
    runs_dir: Path,
    cluster_dir: Path,
    seed: int,
    node_command: Sequence[str] | None = None,
    simulated: bool = False,
) -> CaseRun:
    """Run one case; never raises for a failure of the case (it is in `CaseRun.error`).
    `node_command`: how its nodes start (default `minikafka node`; a mutant's,
    minikafka/testing/mutants.py). `simulated`: the whole cluster in this process under a
    virtual clock, from `seed` (minikafka/sim/target.py); the same seed writes the same folder."""
    if simulated and node_command is not None:
        raise HarnessError("a mutant's node command cannot run in a simulation")
    t0 = time.monotonic()
    folder = RunFolder.create(runs_dir, spec.name, clock=sim_clock if simulated else time.time)
    run = CaseRun(spec=spec, folder=folder)
    layout = make_layout(spec.layout, PARTITIONS)
    plan = (plan_sim_cluster if simulated else plan_cluster)(
        base_dir=cluster_dir,
        brokers=len(layout.brokers),
        seed=seed,
        node_configs=NODE_CONFIGS[spec.quota],
    )
    cluster: Cluster = (
        Simulated(plan=plan, seed=seed, deadline_s=SIM_DEADLINE_S, tools=run_command)
        if simulated
        else LocalProcesses(plan=plan, node_command=node_command, ready_timeout_s=WAIT_S)
    )
    folder.event("cluster_up", seed=seed, brokers=list(layout.brokers))
    scenario = Scenario(run, layout, profile)
    try:
        run_phases(scenario, cluster)
    except KeyboardInterrupt:
        if run.prediction is not None:
            scenario.write_case()  # stopped by hand: the figures measured so far, all the same
        raise
    finally:
        run.wall_s = time.monotonic() - t0
    return run
