"""One experiment, end to end: the run template (experiment/phases.py) filled by `Drive`.

1. cluster: a fresh cluster (`LocalProcesses`), or a running one (`cluster_dir`), or a
   simulated one (sim/experiment.py `run_sim_experiment`, under a virtual clock).
2. prepare: the topic, the dynamic configs, case.json, the history and the nemesis.
3. load: for `duration_s`, paced producers of unique values (acks=all by default; until
   `produce_s` if set); consumers polling every partition until the act is over and they had
   `CATCH_UP_S` more.
4. act: the reassignment if there is one, beside the load; the nemesis running its schedule
   within the load's window; then heal: every fault undone, and `broker_configs` deleted if the
   spec lifts them; and settle: every partition has a leader, every replica is in its ISR and no
   reassignment is left (bounded by `settle_timeout_s`; not settling is itself reported). A run
   cut short (a crash, Ctrl-C) is healed all the same, as `prepare` closes.
5. read back: the final read takes every partition from its start to its high watermark.
6. check (`Drive.check`): the cluster stopped (if this run started it) and the node logs
   copied, each replica's log is read from disk, the PySpark analysis reports on the folder
   (unless `report` is false), and the verdict (minikafka/experiment/verdict.py: the checker,
   and the throttle bound as the analysis judged it) decides.

The cluster is reached, faulted and timed through a `Target` (experiment/target.py): a local
cluster's processes, or a simulated cluster in the same Trio run.

Everything lands in one run folder, `OUT/NAME/TIMESTAMP/` (minikafka/experiment/store.py says
what it holds), including what `minikafka experiment check` needs to judge the run again without
a cluster: the history with its start time, the node logs, the replicas' logs read in step 6
(replica_dumps.jsonl) and the report. Exit codes follow the verdict: 0 valid, 1 invalid,
2 unknown (a cluster that does not start, or a run cut short by the cluster, is unknown). A
failure of the harness itself (a bug: anything but our errors, a timeout or an OS error) is kept
in crash.txt and reported as a crash, Jepsen's exit 255: during the run, the run is still judged
as far as it got (`Outcome.crash`); anywhere else, `HarnessCrash` is raised.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.cluster.spec import ClusterSpec
from minikafka.common import TopicPartition
from minikafka.errors import (
    BrokerError,
    ClusterError,
    ConfigError,
    ErrorCode,
    MiniKafkaError,
    describe,
)
from minikafka.experiment.analysis import case_info, spark_report
from minikafka.experiment.nemesis import Nemesis
from minikafka.experiment.phases import LocalProcesses, run_phases
from minikafka.experiment.replica_dump import dump_replicas
from minikafka.experiment.spec import ExperimentSpec
from minikafka.experiment.store import create_run_dir
from minikafka.experiment.target import Target, reassign_args
from minikafka.experiment.verdict import judge
from minikafka.experiment.workload import (
    History,
    _Values,
    decode_value,
    final_read,
    run_consumer,
    run_producer,
)
from minikafka.testing.run_folder import JsonLines, RunFolder
from minikafka.wire.messages import CreatableTopic, CreateTopicsRequest

POLL_S = 0.2
CATCH_UP_S = 3.0  # consumers keep polling this long after the cluster settled
FINAL_READ_S = 60.0
CRASH_FILE = "crash.txt"

Progress = Callable[[str], None]


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What `run_experiment` hands back: the folder, the verdict document, the exit code."""

    path: Path
    results: dict[str, Any]
    exit_code: int
    crash: Path | None = None  # crash.txt, if the harness failed during the run (exit 255)


def run_experiment(
    spec: ExperimentSpec,
    out_base: Path,
    *,
    cluster_dir: Path | None = None,
    keep_data: bool = False,
    report: bool = True,
    progress: Progress = lambda _m: None,
) -> Outcome:
    """Run `spec` in a new folder `out_base/NAME/TIMESTAMP/` (minikafka/experiment/store.py).

    A cluster that does not start, or fails the run (a MiniKafkaError), gives an unknown
    verdict (exit 2), judged as far as the run got. Raises ClusterError before anything starts
    if `cluster_dir` holds no usable cluster, and HarnessCrash if the harness itself fails (a
    bug, not the cluster): the traceback is then in the folder's crash.txt; ConfigError for a
    spec only a simulation can run (power-loss faults)."""
    if spec.simulation_only:
        raise ConfigError(
            f"{spec.name}: power-loss faults need simulated time: minikafka sim run {spec.name}"
        )
    lc = _running_cluster(spec, cluster_dir) if cluster_dir is not None else None
    folder = RunFolder(create_run_dir(out_base, spec.name))
    progress(f"run folder {folder.path}")
    try:
        return _run_in(folder, spec, lc, keep_data=keep_data, report=report, progress=progress)
    except HarnessCrash:
        raise
    except Exception as exc:  # noqa: BLE001 - the harness failed: kept, then reported as such
        raise HarnessCrash(describe(exc), _save_crash(folder.path, exc)) from exc


class HarnessCrash(Exception):  # noqa: N818 - Jepsen's word for it
    """The harness itself failed (exit 255): `what` in one line, the traceback in `crash_file`."""

    def __init__(self, what: str, crash_file: Path) -> None:
        super().__init__(f"{what} (traceback in {crash_file})")
        self.what = what
        self.crash_file = crash_file


def _running_cluster(spec: ExperimentSpec, cluster_dir: Path) -> LocalCluster:
    lc = LocalCluster.load(cluster_dir)
    if spec.fault_proxy and lc.fault_proxy_address is None:
        raise ClusterError(
            f"network faults need the fault proxy, and the cluster in {cluster_dir} has none"
            " (start it with `minikafka cluster up --fault-proxy`)"
        )
    return lc


def _run_in(
    folder: RunFolder,
    spec: ExperimentSpec,
    lc: LocalCluster | None,
    *,
    keep_data: bool,
    report: bool,
    progress: Progress,
) -> Outcome:
    started_here = lc is None
    if not started_here:
        # A topic of its own: values restart at 0 in every run, and the checker reads it all.
        spec = replace(spec, topic=f"{spec.topic}-{spec.name}-{int(time.time() * 1000)}")
    (folder.path / "experiment.json").write_text(json.dumps(spec.to_json(), indent=2) + "\n")
    plan = lc.spec if lc is not None else plan_cluster(
        base_dir=folder.path / "cluster", brokers=spec.brokers, seed=spec.seed,
        node_configs=spec.all_node_configs(), fault_proxy=spec.fault_proxy,
    )  # fmt: skip
    drive = Drive(spec, folder, progress, plan=plan, own_cluster=started_here,
                  keep_data=keep_data, report=report)  # fmt: skip
    return run_phases(drive, LocalProcesses(plan=plan, running=lc, progress=progress))


def _write_jsonl(path: Path, docs: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps(doc, separators=(",", ":")) + "\n")


def _save_crash(run_dir: Path, exc: BaseException) -> Path:
    path = run_dir / CRASH_FILE
    path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    return path


def _is_crash(exc: BaseException) -> bool:
    """A failure of the harness itself (a bug), rather than of the cluster under test: any
    leaf of the (Trio) exception group other than our errors, a timeout or an OS error."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_crash(e) for e in exc.exceptions)
    return not isinstance(exc, MiniKafkaError | trio.TooSlowError | OSError)


@dataclass(slots=True)
class _Load:
    """The load while it runs (`Drive.load`): consumers from `t0` until it ends; the producers
    run for its window, which the act opens (`Drive._window`) to run the nemesis within it."""

    t0: float  # on Trio's clock, as the producers', the nemesis' and the reassignment's times
    beside: trio.Nursery  # the consumers': what may outlast the producers (a reassignment)
    values: _Values


class Drive:
    """An experiment's filling of the run template (experiment/phases.py `Phases`), against a
    `Target` (experiment/target.py); the module docstring says what each phase does."""

    client_id = "experiment"

    def __init__(
        self,
        spec: ExperimentSpec,
        folder: RunFolder,
        progress: Progress,
        *,
        plan: ClusterSpec,
        own_cluster: bool,
        keep_data: bool,
        report: bool,
        extra: Callable[[], Mapping[str, Any]] = dict,
    ) -> None:
        self.spec = spec
        self.folder = folder
        self.progress = progress
        self.plan = plan
        # The check's: whether the run started its cluster (its replicas' logs are then read,
        # and its data removed unless `keep_data`), the report, and what results.json adds
        # once the run is over (a simulated run's `simulated` and `simulated_s`).
        self.own_cluster = own_cluster
        self.keep_data = keep_data
        self.report = report
        self.extra = extra
        self.clock = folder.clock  # the run's wall clock: time.time, or the simulation's
        self.started_at = self.clock()
        self.errors: list[str] = []
        self.settled = False
        self.move_s: float | None = None  # how long the reassignment took, if there was one
        self.healed = False
        self.crash: Path | None = None
        self.cluster: Target  # set by prepare()

    # -- the phases -----------------------------------------------------------------------

    @asynccontextmanager
    async def prepare(self, target: Target, client: ClusterClient) -> AsyncIterator[None]:
        """The topic and its configs, case.json, then the history and the nemesis for the
        phases after it; on the way out, a run cut short (a crash, Ctrl-C) healed all the same
        and the history closed."""
        spec = self.spec
        self.cluster = target
        self.client = client
        await self._create_topic(client)
        if spec.broker_configs:
            await Admin(client).alter_configs("brokers", "", set_configs=spec.broker_configs)
            self.folder.event("configs_set", entity="brokers", configs=dict(spec.broker_configs))
        if spec.throttle_bytes_per_s is not None and spec.reassign is None:
            # In force from here on (node or broker configs): judged from 2 s after this.
            self.folder.event("throttle_set", bytes_per_s=spec.throttle_bytes_per_s)
        self.folder.write_case(
            case_info(spec, [n.node_id for n in target.spec.nodes],
                      [n.node_id for n in target.spec.brokers], simulated=target.simulated)
        )  # fmt: skip
        self.started_at = self.clock()
        self.history = History(
            self.folder.path / "history.jsonl", self.started_at, clock=self.clock
        )
        nemesis_log = JsonLines(self.folder.path / "nemesis.jsonl")
        self.history.op(
            "nemesis", "info", "schedule", seed=spec.seed, started_at=self.started_at,
            faults=[f.to_json() for f in spec.faults],
        )  # fmt: skip
        try:
            self.nemesis = Nemesis(
                cluster=target, client=client, topic=spec.topic, history=self.history,
                log=nemesis_log, proxy=target.fault_proxy() if spec.fault_proxy else None,
                seed=spec.seed, progress=self.progress,
            )  # fmt: skip
            self.workload = spec.workload()
            try:
                yield
            finally:
                if not self.healed:  # cut short (a crash, Ctrl-C): undo the faults all the same
                    with trio.CancelScope(shield=True):
                        await self.nemesis.heal()
        finally:
            self.history.close()
            nemesis_log.close()

    @asynccontextmanager
    async def load(self, client: ClusterClient) -> AsyncIterator[_Load]:
        """Consumers polling every partition for the block, then `CATCH_UP_S` more; the
        producers run in the window the act opens (`_window`)."""
        spec = self.spec
        t0_trio = trio.current_time()  # producers, nemesis and reassignment run on Trio's clock
        self.folder.event("load_start")
        self.progress(f"workload for {spec.duration_s:.0f} s, {len(spec.faults)} faults")
        stop_consumers = trio.Event()
        async with trio.open_nursery() as background:
            for i in range(spec.consumers):
                background.start_soon(
                    run_consumer, client, self.workload, self.history, i, stop_consumers
                )
            yield _Load(t0=t0_trio, beside=background, values=_Values())
            await trio.sleep(CATCH_UP_S)
            stop_consumers.set()

    async def act(self, client: ClusterClient, load: _Load) -> None:
        """The reassignment beside the load (it ends with the move, which may outlast the
        load), the nemesis within the load's window; then heal, lift the configs, settle."""
        spec = self.spec
        if spec.reassign is not None:
            load.beside.start_soon(self._reassign, load.t0)
        await self._window(client, load)
        self.progress("healing")
        await self.nemesis.heal()
        self.healed = True
        self.errors.extend(self.nemesis.errors)
        if spec.lift_broker_configs:
            await self._lift_configs(client)
        self.settled = await self._settle(client)

    async def read_back(self, client: ClusterClient) -> None:
        self.progress("final read")
        await final_read(client, self.workload, self.history, FINAL_READ_S)
        self.folder.event("final_read_end")

    def not_started(self, exc: BaseException) -> bool:
        """No run: unknown, with the nodes' logs kept (anything but our error: a crash)."""
        if not isinstance(exc, MiniKafkaError):
            return False
        self.errors.append(f"the cluster did not start: {describe(exc)}")
        self.progress(self.errors[-1])
        return True

    def failed(self, exc: BaseException) -> bool:
        """Cut short by an error, the run is judged as far as it got (a harness crash is kept in
        crash.txt as well); Ctrl-C is raised."""
        if not isinstance(exc, Exception):
            return False
        if _is_crash(exc):
            self.crash = _save_crash(self.folder.path, exc)
            self.errors.append(f"the harness crashed: {describe(exc)} ({CRASH_FILE})")
        else:
            self.errors.append(f"the run stopped early: {describe(exc)}")
        self.progress(self.errors[-1])
        return True

    def left(self) -> None:
        pass  # an experiment's timeline ends with the final read (the analysis' span)

    def check(self) -> Outcome:
        """The replicas' logs (of a cluster of this run's own, once it settled), the analysis,
        the verdict in results.json, the cluster's data removed unless `keep_data`."""
        spec, folder, progress = self.spec, self.folder, self.progress
        dumps = None
        if self.own_cluster and self.settled:  # the stopped brokers' logs, for `experiment check`
            dumps = dump_replicas({n.node_id: n.data_dir for n in self.plan.brokers}, spec.topic,
                                  decode_value)  # fmt: skip
            _write_jsonl(folder.path / "replica_dumps.jsonl", dumps)
        analysis, report_doc = spark_report(folder.path, progress) if self.report else (None, None)
        if (folder.path / "history.jsonl").exists():
            results = judge(
                spec, folder.path, t0=self.started_at, dumps=dumps, driver_errors=self.errors,
                settled=self.settled, analysis=analysis,
                analysis_error=report_doc["error"] if report_doc else "skipped (--no-report)",
            )  # fmt: skip
        else:  # it never got to the workload: nothing to check
            results = {"experiment": spec.name, "seed": spec.seed, "valid": "unknown",
                       "exit_code": 2, "problems": self.errors,
                       "summary": "UNKNOWN (exit 2): " + "; ".join(self.errors)}  # fmt: skip
        results.update(
            started_at=self.started_at,
            harness_problems=self.errors,
            move_s=self.move_s,
            simulated=False,
        )
        results.update(self.extra())
        if self.crash is not None:
            results["crash"] = self.crash.name
        if report_doc is not None:
            results["report"] = report_doc
        folder.write_results(results)
        if self.own_cluster and not self.keep_data:
            shutil.rmtree(folder.path / "cluster", ignore_errors=True)
        return Outcome(path=folder.path, results=results, exit_code=results["exit_code"],
                       crash=self.crash)  # fmt: skip

    # -- the act's steps ------------------------------------------------------------------

    async def _window(self, client: ClusterClient, load: _Load) -> None:
        """The load's window: the producers for `duration_s` (until `produce_s` if set, the
        window lasting `duration_s` all the same), the nemesis's schedule within it."""
        spec = self.spec
        deadline = load.t0 + spec.duration_s
        produce_until = load.t0 + (
            spec.produce_s if spec.produce_s is not None else spec.duration_s
        )
        async with trio.open_nursery() as nursery:
            for i in range(spec.producers):
                nursery.start_soon(
                    run_producer, client, self.workload, self.history, load.values, i,
                    produce_until, self._acked,
                )  # fmt: skip
            if produce_until < deadline:
                nursery.start_soon(trio.sleep_until, deadline)
            nursery.start_soon(self._nemesis, self.nemesis, load.t0)
        self.folder.event("load_end")

    async def _lift_configs(self, client: ClusterClient) -> None:
        """Delete the experiment's broker configs (its throttle), as an operator would for a
        move that does not progress, noting how many partitions were still moving then."""
        admin = Admin(client)
        names = sorted(self.spec.broker_configs)
        try:
            moving = await admin.list_partition_reassignments([self.spec.topic])
            lifted = self.clock()
            await admin.alter_configs("brokers", "", delete_configs=names)
        except MiniKafkaError as exc:
            self.errors.append(f"the broker configs were not lifted: {describe(exc)}")
            return
        self.folder.event(
            "configs_lifted", ts=lifted, entity="brokers", configs=names, moving=len(moving)
        )
        self.progress(f"broker configs lifted ({len(moving)} partitions still moving)")

    def _acked(self, tp: TopicPartition, offset: int, count: int, latency_ms: float) -> None:
        self.folder.record_produced(
            topic=tp.topic, partition=tp.partition, offset=offset, count=count,
            latency_ms=latency_ms, bytes=count * self.spec.record_bytes,
        )  # fmt: skip

    async def _nemesis(self, nemesis: Nemesis, t0: float) -> None:
        # A fault still running at the deadline is cut short; heal() undoes it.
        with trio.move_on_at(t0 + self.spec.duration_s + 1.0):
            await nemesis.run(self.spec.faults, t0)

    async def _create_topic(self, client: ClusterClient) -> None:
        spec = self.spec
        topic = CreatableTopic(name=spec.topic, num_partitions=spec.partitions,
                               replication_factor=spec.replication_factor)  # fmt: skip
        if spec.assignment is not None:
            topic = CreatableTopic(name=spec.topic, assignments=[list(r) for r in spec.assignment])
        resp = await client.request_any(CreateTopicsRequest(topics=[topic]))
        (result,) = resp.topics
        if result.error_code != ErrorCode.NONE:
            raise BrokerError(
                result.error_code, result.error_message or f"cannot create {spec.topic}"
            )
        with trio.fail_after(30):
            while not await self._healthy(client, require_isr=True):
                await trio.sleep(POLL_S)

    async def _healthy(self, client: ClusterClient, *, require_isr: bool) -> bool:
        md = await client.refresh_metadata([self.spec.topic])
        parts = [p for t in md.topics if t.name == self.spec.topic for p in t.partitions]
        return len(parts) == self.spec.partitions and all(
            p.leader >= 0 and (not require_isr or set(p.isr) == set(p.replicas)) for p in parts
        )

    async def _settle(self, client: ClusterClient) -> bool:
        """Every leader elected, every replica in sync, nothing moving; -> whether it happened."""
        started = trio.current_time()
        admin = Admin(client)
        with trio.move_on_after(self.spec.settle_timeout_s):
            while True:
                try:
                    moving = await admin.list_partition_reassignments([self.spec.topic])
                    if not moving and await self._healthy(client, require_isr=True):
                        took = trio.current_time() - started
                        self.folder.event("settled", after_s=round(took, 2))
                        self.progress(f"settled after {took:.1f} s")
                        return True
                except MiniKafkaError:
                    pass  # the cluster is still recovering: ask again
                await trio.sleep(POLL_S)
        self.errors.append(f"the cluster did not settle within {self.spec.settle_timeout_s:.0f} s")
        self.folder.event("not_settled")
        return False

    async def _reassign(self, t0: float) -> None:
        r = self.spec.reassign
        assert r is not None
        await trio.sleep_until(t0 + r.at_s)
        moves_file = self.folder.path / "tool" / "reassignment.json"
        moves_file.parent.mkdir(exist_ok=True)
        moves_file.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": self.spec.topic, "partition": p, "replicas": list(rs)} for p, rs in sorted(r.moves.items())
        ]}))  # fmt: skip
        requested = self.clock()
        try:  # without r.throttle the throttle is the experiment's broker_configs
            args = reassign_args(moves_file, throttle=r.throttle, mode=r.mode)
            await self.cluster.tool(self.folder, "reassign-execute", args)
        except MiniKafkaError as exc:
            self.errors.append(str(exc))
            return
        if r.throttle is not None:
            self.folder.event("throttle_set", tool="reassign", bytes_per_s=r.throttle, mode=r.mode)
        # The tool's process takes ~0.3 s (measured) to start and exit: the moves may begin,
        # and copy, before it returns.
        started = self.folder.event(
            "move_start", how="reassign --execute", requested=round(requested, 4)
        )
        how = f"{r.mode}, {r.throttle} B/s" if r.throttle is not None else "no --throttle"
        self.progress(f"reassignment started ({how})")
        admin = Admin(self.client)
        with trio.move_on_after(self.spec.duration_s + self.spec.settle_timeout_s):
            while True:
                try:
                    if not await admin.list_partition_reassignments([self.spec.topic]):
                        break
                except MiniKafkaError:
                    pass  # the controller is busy with a failover: ask again
                await trio.sleep(POLL_S)
            ended = self.folder.event("move_end")
            self.move_s = round(ended - started, 2)
            self.progress(f"reassignment done after {self.move_s:.1f} s")
