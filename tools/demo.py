"""The main job of `make demo`: a local cluster, a replica move under a KIP-73 replication
throttle while a producer runs, and the check that nothing acknowledged was lost.

1. Starts a controller and three brokers on 127.0.0.1, and creates the topic `demo` (6
   partitions, replication factor 2) on brokers 1 and 2 only: broker 3 is the broker that has
   just joined, holding none of it (tools/demo_move.py tells the story and its numbers).
2. Writes the data the move will copy (acks=all, the load kit: minikafka/testing/load.py), sized
   so that the move takes about 20 s at the throttle, then starts a steady producer (acks=all,
   200 records/s) that runs until the move is over.
3. Moves a broker's worth of replicas onto broker 3 as an operator does: a reassignment file,
   and `minikafka reassign --execute --throttle T` run as a process (testing/cli_tools.py), which
   sets `leader/follower.replication.throttled.rate` on the brokers and the topic's
   `leader/follower.replication.throttled.replicas` lists (KIP-73).
4. Once a second, while the move runs (the progress of `reassign --verify --watch`,
   tools/reassign/progress.py), prints broker 3's `FollowerReplicationThrottledRate`, the
   follower quota's own sensor, read from its metrics.jsonl, against the limit.
5. Removes the throttle as Kafka's tool does (`minikafka reassign --verify` once the move is
   complete) and checks that no throttle config is left; reads every partition back from the
   start and checks each acknowledged record is there at its offset (the checker,
   minikafka/testing/checker.py).
6. Stops the cluster and leaves a run folder, `<dir>/run` (minikafka/testing/run_folder.py's
   layout, so `minikafka analyze` reads it too): the node logs, the tool runs, the timeline,
   rates.csv and the plot rates.png (tools/demo_plot.py), and demo.json, the figures.

The demo starts over in its directory, deleting what is there, only if that holds nothing but
a minikafka cluster and an earlier demo's run folder (`check_demo_dir`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import trio

from minikafka.client.admin import Admin
from minikafka.client.cluster_client import ClusterClient, open_client
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.cluster.clusterfile import CLUSTER_FILE, LOCK_FILE, read_record
from minikafka.cluster.fault_proxy import PROXY_DIR
from minikafka.cluster.prometheus_targets import TARGETS_FILE
from minikafka.cluster.secret import SECRET_FILE
from minikafka.common import TopicPartition
from minikafka.core.dynamic_config import BROKERS, TOPICS
from minikafka.errors import BrokerError, ClusterError, ErrorCode, MiniKafkaError
from minikafka.server.jsonl import jsonl_parts
from minikafka.testing.checker import check_acknowledged
from minikafka.testing.cli_tools import run_tool
from minikafka.testing.load import (
    Bounds,
    Rate,
    batch_of,
    load_producer,
    read_to_end,
    run_senders,
)
from minikafka.testing.run_folder import CaseInfo, RunFolder, read_jsonl
from minikafka.testing.seeds import resolve_seed, seed_line
from minikafka.tools import demo_plot
from minikafka.tools.demo_move import (
    BROKERS as BROKER_IDS,
)
from minikafka.tools.demo_move import (
    COPIED_COUNTER,
    DEFAULT_THROTTLE,
    HOME_BROKERS,
    PARTITIONS,
    PRODUCE_RECORDS_PER_S,
    QUOTA_WINDOW_S,
    RECORD_BYTES,
    REPLICATION_FACTOR,
    SENSOR,
    TOPIC,
    Move,
    MoveFigures,
    choose_move,
    demo_json,
    initial_assignment,
    mean_rate,
    rate_line,
    records_for_move,
    window_bound,
)
from minikafka.tools.reassign.assignment_files import format_reassignment_json
from minikafka.tools.reassign.move_size import estimate_log_sizes, sizes_in_bytes
from minikafka.tools.reassign.plan import predict_move_time
from minikafka.tools.reassign.progress import LocalFiles, WatchFrame, file_moves, snapshot_at, watch
from minikafka.tools.reassign.runner import LIST_NAMES, RATE_NAMES, own_configs
from minikafka.wire.messages import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse

RUN_DIR = "run"  # the run folder, inside the demo's directory
PRODUCE_MAX_S = 120.0  # bound of each produce load (the fill takes a few seconds)
PER_BATCH = 100  # records per batch of the fill
STEADY_BATCH = 10  # records per batch of the steady producer: 20 sends a second
LEAD_S = 2.0  # the producer runs this long before the move and after it: the plot's margins
MOVE_TIMEOUT_S = 120.0  # a move still running then is cancelled, and the demo fails
READ_TIMEOUT_S = 60.0
# Metrics lines twice a second (the default is one): the once-a-second line reads a fresh one.
NODE_CONFIGS = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "metrics.interval.ms": "500",
}

Acked = list[tuple[TopicPartition, int, list[bytes]]]
Say = Callable[[str], None]


def value_of(prefix: str, i: int) -> bytes:
    """A unique value, padded to RECORD_BYTES (the checker matches values per partition)."""
    return f"{prefix}-{i}".encode().ljust(RECORD_BYTES, b".")


# ---------------------------------------------------------------------------- the load


async def create_topic(client: ClusterClient, assignment: Mapping[int, list[int]]) -> None:
    """The topic with its replicas where `assignment` says (CreateTopics' explicit
    assignments), once every partition has a leader and its whole ISR."""
    topic = CreatableTopic(name=TOPIC, assignments=[assignment[p] for p in sorted(assignment)])
    resp = await client.request_any(CreateTopicsRequest(topics=[topic]))
    assert isinstance(resp, CreateTopicsResponse)
    (result,) = resp.topics
    if result.error_code != ErrorCode.NONE:
        raise BrokerError(result.error_code, result.error_message or f"cannot create {TOPIC}")
    with trio.fail_after(30):
        while True:
            md = await client.refresh_metadata([TOPIC])
            parts = [p for t in md.topics if t.name == TOPIC for p in t.partitions]
            if len(parts) == len(assignment) and all(
                p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts
            ):
                return
            await trio.sleep(0.1)


async def fill(client: ClusterClient, tps: list[TopicPartition], records: int) -> Acked:
    """`records` values `record-<i>`, PER_BATCH a batch, one request per round over every
    partition, two requests in flight (the load kit: bounded by the rounds and PRODUCE_MAX_S)."""
    producer = load_producer(client, acks=-1)
    now = int(time.time() * 1000)
    starts = range(0, records, PER_BATCH * len(tps))
    rounds = iter(starts)
    acked: Acked = []

    async def send_round(_k: int) -> bool:
        start = next(rounds, None)
        if start is None:
            return False
        items, values = [], []
        for k, tp in enumerate(tps):
            first = start + k * PER_BATCH
            vals = [value_of("record", i) for i in range(first, min(first + PER_BATCH, records))]
            if vals:
                items.append((tp, *batch_of(vals, now_ms=now)))
                values.append(vals)
        for res, vals in zip(await producer.send_batches(items), values, strict=True):
            acked.append((res.tp, res.base_offset, vals))
        return True

    bounds = Bounds(until=trio.current_time() + PRODUCE_MAX_S, max_sends=len(starts) + 2, cut=True)
    await run_senders(2, send_round, bounds)
    if sum(len(vals) for _tp, _base, vals in acked) < records:
        raise MiniKafkaError(f"producing {records} records took over {PRODUCE_MAX_S:.0f} s")
    return acked


@dataclass(slots=True)
class SteadyProducer:
    """acks=all, PRODUCE_RECORDS_PER_S records a second in batches of STEADY_BATCH, partitions
    in turn, until `stop()` (the load kit's Rate: behind schedule, it catches up). Each
    acknowledged batch goes to the run folder's clients/produced.jsonl."""

    client: ClusterClient
    tps: list[TopicPartition]
    folder: RunFolder
    acked: Acked = field(default_factory=list)
    records: int = 0
    latencies_ms: list[tuple[float, float]] = field(default_factory=list)  # (wall ts, ms)
    _stopped: bool = False

    def stop(self) -> None:
        self._stopped = True

    async def run(self) -> None:
        producer = load_producer(self.client, acks=-1)
        rate = Rate(per_s=PRODUCE_RECORDS_PER_S / STEADY_BATCH, start=trio.current_time())
        claimed = 0

        async def send(_k: int) -> bool:
            nonlocal claimed
            n, claimed = claimed, claimed + 1
            await rate.wait_for(n)
            if self._stopped:
                return False
            tp = self.tps[n % len(self.tps)]
            values = [value_of("steady", n * STEADY_BATCH + i) for i in range(STEADY_BATCH)]
            began = trio.current_time()
            (res,) = await producer.send_batches([(tp, *batch_of(values))])
            latency_ms = (trio.current_time() - began) * 1000
            self.acked.append((res.tp, res.base_offset, values))
            self.records += len(values)
            ts = time.time()
            self.latencies_ms.append((ts, latency_ms))
            self.folder.record_produced(
                topic=tp.topic, partition=tp.partition, offset=res.base_offset,
                count=len(values), latency_ms=latency_ms, ts=ts, bytes=len(values) * RECORD_BYTES,
            )  # fmt: skip
            return True

        bounds = Bounds(until=trio.current_time() + PRODUCE_MAX_S + MOVE_TIMEOUT_S, max_sends=10**9)
        await run_senders(2, send, bounds)


# ---------------------------------------------------------------------------- the throttle


async def throttle_configs(admin: Admin, brokers: Sequence[int]) -> list[str]:
    """The throttle configs set now: each broker's own rates, and the topic's replica lists
    (`name=value`, prefixed with the entity)."""
    found = []
    for b in brokers:
        own = await own_configs(admin, BROKERS, str(b))
        found += [f"broker {b}: {k}={own[k]}" for k in RATE_NAMES if k in own]
    own = await own_configs(admin, TOPICS, TOPIC)
    found += [f"topic {TOPIC}: {k}={own[k]}" for k in LIST_NAMES if k in own]
    return found


def _grouped(configs: Sequence[str]) -> list[str]:
    """The rates set alike on several brokers in one line, then the topic's lists."""
    by_setting: dict[str, list[str]] = {}
    out = []
    for c in configs:
        entity, _, setting = c.partition(": ")
        if entity.startswith("broker "):
            by_setting.setdefault(setting, []).append(entity.removeprefix("broker "))
        else:
            out.append(c)
    rates = [f"{s} on brokers {','.join(bs)}" for s, bs in by_setting.items()]
    return rates + out


# ---------------------------------------------------------------------------- the run


@dataclass(slots=True)
class Outcome:
    """What the async part hands back."""

    move: Move
    records: int
    planned_bytes: int = 0
    predicted_s: float | None = None
    start_ts: float | None = None
    end_ts: float | None = None
    duration_s: float | None = None
    set_configs: list[str] = field(default_factory=list)
    left_configs: list[str] = field(default_factory=list)
    acked: int = 0
    read: int = 0
    lost: int = 0
    corrupted: int = 0
    steady: SteadyProducer | None = None


async def exercise(
    lc: LocalCluster, folder: RunFolder, move: Move, records: int, throttle: int, say: Say
) -> Outcome:
    assignment = initial_assignment(PARTITIONS, HOME_BROKERS)
    out = Outcome(move=move, records=records)
    async with open_client(lc.bootstrap(), client_id="minikafka-demo") as client:
        admin = Admin(client)
        await create_topic(client, assignment)
        say(
            f"created topic {TOPIC}: {PARTITIONS} partitions, replication factor "
            f"{REPLICATION_FACTOR}, on brokers {' and '.join(map(str, HOME_BROKERS))} only: "
            f"broker {move.destination} holds none of it, like a broker just added"
        )
        tps = client.partitions_of(TOPIC)
        t0 = trio.current_time()
        filled = await fill(client, tps, records)
        took = trio.current_time() - t0
        say(
            f"wrote {records} records of {RECORD_BYTES} B with acks=all in {took:.1f} s "
            f"({records * RECORD_BYTES / took / 1e6:.1f} MB/s)"
        )
        steady = out.steady = SteadyProducer(client, tps, folder)
        async with trio.open_nursery() as nursery:
            folder.event("load_start", records_per_s=PRODUCE_RECORDS_PER_S)
            nursery.start_soon(steady.run)
            say(f"producer running: {PRODUCE_RECORDS_PER_S} records/s with acks=all")
            await trio.sleep(LEAD_S)
            try:
                await _move(lc, folder, admin, client, out, throttle, say)
                await trio.sleep(LEAD_S)
            finally:
                steady.stop()
        folder.event("load_end")
        await _remove_throttle(lc, folder, admin, out, say)
        consumed = await read_to_end(client, tps, timeout_s=READ_TIMEOUT_S)
    verdict = check_acknowledged(filled + steady.acked, consumed)  # type: ignore[arg-type]
    out.acked, out.read = verdict.acknowledged, verdict.read
    out.lost, out.corrupted = len(verdict.lost), len(verdict.corrupted)
    say(
        f"read {len(consumed)} records back from offset 0 of every partition: "
        f"{out.acked} acknowledged, {out.lost + out.corrupted} of them missing"
    )
    return out


async def _move(
    lc: LocalCluster,
    folder: RunFolder,
    admin: Admin,
    client: ClusterClient,
    out: Outcome,
    throttle: int,
    say: Say,
) -> None:
    move = out.move
    assignment = initial_assignment(PARTITIONS, HOME_BROKERS)
    proposed = {TopicPartition(TOPIC, p): r for p, r in move.targets.items()}
    out.planned_bytes = sum(sizes_in_bytes(await estimate_log_sizes(client, proposed)).values())
    # KIP-73's MoveTime: the destination copies under its follower throttle, less what the
    # producer adds to the partitions (BytesInPerSec of the busiest leader).
    led = {b: sum(r[0] == b for r in assignment.values()) for b in HOME_BROKERS}
    bytes_in = {b: PRODUCE_RECORDS_PER_S * RECORD_BYTES * n / PARTITIONS for b, n in led.items()}
    out.predicted_s = predict_move_time(
        bytes_to_move_per_broker={move.destination: out.planned_bytes},
        throttle=throttle,
        bytes_in_per_broker=bytes_in,
    ).max_seconds
    moves_file = folder.path / "reassignment.json"
    moves_file.write_text(format_reassignment_json(proposed) + "\n", encoding="utf-8")
    shown = ", ".join(f"{TOPIC}-{p} {assignment[p]}->{r}" for p, r in sorted(move.targets.items()))
    say(
        f"moving {len(proposed)} replicas onto broker {move.destination} (its fair share), each "
        f"partition keeping its leader: {shown}"
    )
    predicted = "" if out.predicted_s is None else f"; KIP-73's MoveTime: {out.predicted_s:.0f} s"
    say(f"about {out.planned_bytes / 1e6:.1f} MB to copy at {throttle / 1e6:.2f} MB/s{predicted}")
    args = ["reassign", "--execute", "--reassignment-json-file", str(moves_file)]
    args += ["--throttle", str(throttle)]
    shown_args = [_shown(a) for a in args]
    say(f"$ minikafka {' '.join(shown_args)} --dir {_shown(lc.base_dir)}")
    requested = folder.event("execute", tool="reassign")
    await run_tool(folder, "reassign-execute", args, cluster_dir=lc.base_dir)
    folder.event("throttle_set", tool="reassign", bytes_per_s=throttle, mode="lists")
    folder.event("move_start", how="reassign --execute", requested=round(requested, 4))
    out.set_configs = await throttle_configs(admin, BROKER_IDS)
    say("the tool set (KIP-73: rates on the brokers, replica lists on the topic):")
    for line in _grouped(out.set_configs):
        say(f"  {line}")
    files = LocalFiles(
        metrics={n.node_id: lc.log_path(n.node_id, "metrics") for n in lc.spec.brokers},
        controller_events=lc.log_path(lc.spec.controller.node_id, "events"),
        node_configs=dict(lc.spec.node_configs),
    )
    say(
        f"once a second: broker {move.destination}'s {SENSOR}, the KIP-73 follower quota's "
        "sensor (Kafka's FollowerReplication byte-rate, over up to 11 x 1 s windows), from its "
        "metrics.jsonl, against the limit"
    )
    steady = out.steady
    assert steady is not None

    def show(frame: WatchFrame) -> None:
        since = time.time() - 1.0
        per_s = STEADY_BATCH * sum(ts > since for ts, _ in steady.latencies_ms[-100:])
        row = next((r for r in frame.rows if r.broker == move.destination), None)
        snap = snapshot_at(files.metrics[move.destination])
        sensor = (snap or {}).get(SENSOR)
        line = rate_line(
            frame.elapsed_s,
            sensor=float(sensor) if isinstance(sensor, int | float) else None,
            limit=throttle,
            copied=None if row is None else row.copied_bytes,
            planned=out.planned_bytes if row is None else row.planned_bytes,
            moving=frame.moving,
            partitions=len(proposed),
            produced_per_s=per_s,
        )
        say(line)

    result = await watch(
        admin, client, proposed, files=files, timeout_s=MOVE_TIMEOUT_S, interval_s=1.0, show=show
    )
    moved = file_moves(files.controller_events, proposed)
    if moved.starts:
        out.start_ts = min(s.ts for s in moved.starts.values())
    if moved.completed:
        out.end_ts = max(moved.completed.values())
    out.duration_s = result.move_s
    if not result.done:
        say(f"the move did not complete within {MOVE_TIMEOUT_S:.0f} s: cancelling it")
        cancel = ["reassign", "--cancel", "--reassignment-json-file", str(moves_file)]
        await run_tool(folder, "reassign-cancel", cancel, cluster_dir=lc.base_dir, check=False)
        return
    folder.event("move_end", ts=out.end_ts)
    say(f"move complete after {out.duration_s:.1f} s (the controller's events)")


async def _remove_throttle(
    lc: LocalCluster, folder: RunFolder, admin: Admin, out: Outcome, say: Say
) -> None:
    """Kafka's way: `reassign --verify` once the move is complete removes the throttles. Our
    controller lifts the tool's own when the move completes (beyond Kafka), so this usually
    finds nothing left; either way, what is left afterwards is checked."""
    before = await throttle_configs(admin, BROKER_IDS)
    moves_file = folder.path / "reassignment.json"
    args = ["reassign", "--verify", "--reassignment-json-file", str(moves_file)]
    await run_tool(folder, "reassign-verify", args, cluster_dir=lc.base_dir, check=False)
    out.left_configs = await throttle_configs(admin, BROKER_IDS)
    folder.event("throttle_removed", left=len(out.left_configs))
    how = (
        "the controller had lifted it as the move completed"
        if not before
        else f"`minikafka reassign --verify` removed {len(before)} configs"
    )
    if out.left_configs:
        say(f"throttle NOT removed: {'; '.join(out.left_configs)}")
    else:
        say(f"throttle removed ({how}): no throttle config left on the brokers or the topic")


def check_demo_dir(base_dir: Path) -> None:
    """Refuse (ClusterError, one line) a `base_dir` the demo may not delete and start over in.

    Accepted: a missing or empty directory, or one holding only a minikafka cluster: its
    `cluster.json` (readable, naming this directory as its base dir), the cluster lock, secret,
    Prometheus targets and temporary files, the fault-proxy dir, and the data dirs it names,
    each directly inside; and an earlier demo's run folder (`run`, holding a case.json of the
    demo or nothing).
    """
    if not base_dir.exists():
        return
    refuse = f"refusing to use {base_dir} for the demo (it would be deleted)"
    accepted = (
        "pass --dir a missing or empty directory, or one an earlier demo or `cluster up` made"
    )
    if not base_dir.is_dir():
        raise ClusterError(f"{refuse}: it is not a directory; {accepted}")
    entries = sorted(p.name for p in base_dir.iterdir())
    if not entries:
        return
    try:
        record = read_record(base_dir)
    except ClusterError as exc:
        raise ClusterError(f"{refuse}: {exc}; {accepted}") from exc
    if record is None:
        raise ClusterError(f"{refuse}: it is not empty and holds no {CLUSTER_FILE}; {accepted}")
    home = base_dir.resolve()
    if record.spec.base_dir.resolve() != home:
        raise ClusterError(
            f"{refuse}: its {CLUSTER_FILE} names base_dir {record.spec.base_dir}; {accepted}"
        )
    owned = {CLUSTER_FILE, LOCK_FILE, PROXY_DIR, SECRET_FILE, TARGETS_FILE}
    if _is_demo_run(base_dir / RUN_DIR):
        owned.add(RUN_DIR)
    for node in record.spec.nodes:
        if node.data_dir.resolve().parent != home:
            raise ClusterError(
                f"{refuse}: its {CLUSTER_FILE} names data dir {node.data_dir} for node "
                f"{node.node_id}, not one directly inside it; {accepted}"
            )
        owned.add(node.data_dir.name)
    for name in entries:
        temporary = name.startswith(f".{CLUSTER_FILE}.") and name.endswith(".tmp")
        if name not in owned and not temporary:
            raise ClusterError(f"{refuse}: it holds {name!r}, not part of its cluster; {accepted}")


def _is_demo_run(path: Path) -> bool:
    """A run folder the demo made: a directory, empty or with the demo's case.json."""
    if not path.is_dir() or path.is_symlink():
        return False
    if not any(path.iterdir()):
        return True
    try:
        return json.loads((path / "case.json").read_text(encoding="utf-8")).get("case") == TOPIC
    except (OSError, ValueError, AttributeError):
        return False


def _shown(path: Path | str) -> str:
    """A path as printed: relative to the working directory when it lies inside it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _metrics_lines(folder: RunFolder, node_id: int) -> list[dict[str, Any]]:
    """A node's metrics.jsonl lines as copied into the run folder, oldest first."""
    path = folder.path / "nodes" / f"node-{node_id}" / "metrics.jsonl"
    return [doc for part in jsonl_parts(path) for doc in read_jsonl(part) if "ts" in doc]


def _case(spec_seed: int, nodes: list[int], move: Move, throttle: int, out: Outcome) -> CaseInfo:
    """case.json, so that `minikafka analyze` reads the run folder as it reads the system
    tests' (the move's copies into one broker, the sources' leader side)."""
    assignment = initial_assignment(PARTITIONS, HOME_BROKERS)
    return CaseInfo(
        case=TOPIC,
        seed=spec_seed,
        nodes=nodes,
        partitions=PARTITIONS,
        replication_factor=REPLICATION_FACTOR,
        throttle_bytes_per_s=throttle,
        throttle_mode="lists",
        receiving_brokers=[move.destination],
        sending_brokers=move.sources(assignment),
        bytes_to_move=out.planned_bytes,
        produce_bytes_per_s=float(PRODUCE_RECORDS_PER_S * RECORD_BYTES),
        predicted_move_s=out.predicted_s if out.predicted_s else None,
        # Judged over the quota's own span, against what KIP-73's check-then-charge admits
        # there (demo_move.window_bound): the analysis' default 5 s windows would catch the
        # whole responses the quota lets through, one every two seconds or so at 2 MB/s.
        throttle_window_s=QUOTA_WINDOW_S,
        throttle_bound_bytes_per_s=window_bound(throttle, len(move.targets)),
        extra={"records_before_move": out.records, "record_bytes": RECORD_BYTES},
    )


def run_demo(
    base_dir: Path,
    *,
    records: int | None = None,
    throttle: int = DEFAULT_THROTTLE,
    seed: int | None = None,
    say: Say | None = None,
) -> dict[str, Any]:
    """The demo (module docstring); -> the figures (`demo_move.demo_json`)."""
    began = time.monotonic()
    say = say or (lambda msg: click.echo(f"demo: {msg}"))
    seed = resolve_seed(seed)
    check_demo_dir(base_dir)  # before anything is stopped or deleted
    if (base_dir / CLUSTER_FILE).exists():
        try:
            LocalCluster.load(base_dir).down()
        except MiniKafkaError:
            pass
    shutil.rmtree(base_dir, ignore_errors=True)
    move = choose_move(initial_assignment(PARTITIONS, HOME_BROKERS), BROKER_IDS)
    if records is None:
        records = records_for_move(throttle, moved_fraction=len(move.targets) / PARTITIONS)
    spec = plan_cluster(base_dir=base_dir, brokers=3, seed=seed, node_configs=NODE_CONFIGS)
    say(
        f"replicas move onto a new broker under a KIP-73 replication throttle of "
        f"{throttle / 1e6:g} MB/s while a producer writes with acks=all; then every "
        "acknowledged record is read back"
    )
    say(f"starting a controller and 3 brokers in {base_dir} ({seed_line(seed)})")
    with LocalCluster.up(spec, progress=lambda m: say(m)) as lc:
        for s in lc.status():
            say(f"  node {s.node_id} {','.join(s.roles):<10} {s.address}  pid {s.pid}")
        folder = RunFolder(base_dir / RUN_DIR)
        try:
            out = trio.run(lambda: exercise(lc, folder, move, records, throttle, say))
            say("stopping the cluster (data and logs stay in the cluster dir)")
        finally:
            folder.close()
    # The nodes' logs are whole once they stopped: the figures and the plot are read from them.
    folder.collect_node_logs({n.node_id: n.data_dir for n in spec.nodes})
    folder.write_case(_case(seed, [n.node_id for n in spec.nodes], move, throttle, out))
    return _finish(folder, move, out, throttle, began, say)


def _finish(
    folder: RunFolder, move: Move, out: Outcome, throttle: int, began: float, say: Say
) -> dict[str, Any]:
    """The figures from the node logs the run folder now holds, the CSV and the plot."""
    lines = {b: _metrics_lines(folder, b) for b in BROKER_IDS}
    copied, max_sensor = 0, None
    if out.start_ts is not None and out.end_ts is not None:
        counter = [(float(d["ts"]), int(d.get(COPIED_COUNTER, 0))) for d in lines[move.destination]]
        copied, _ = mean_rate(counter, out.start_ts, out.end_ts)
        during = [
            float(d[SENSOR])
            for d in lines[move.destination]
            if out.start_ts <= float(d["ts"]) <= out.end_ts
            and isinstance(d.get(SENSOR), int | float)
        ]
        max_sensor = max(during, default=None)
    figures = MoveFigures(
        throttle=throttle,
        destination=move.destination,
        partitions=move.partitions,
        planned_bytes=out.planned_bytes,
        predicted_s=out.predicted_s,
        duration_s=out.duration_s,
        copied_bytes=copied,
        max_sensor=max_sensor,
    )
    start = out.start_ts if out.start_ts is not None else time.time()
    rows = demo_plot.series(lines, start)
    csv_path = demo_plot.write_csv(rows, folder.path / demo_plot.CSV_FILE)
    produced = read_jsonl(folder.path / "clients" / "produced.jsonl")
    png = demo_plot.plot(
        rows,
        demo_plot.produce_series(produced, start),
        folder.path / demo_plot.PLOT_FILE,
        throttle=throttle,
        destination=move.destination,
        sources=move.sources(initial_assignment(PARTITIONS, HOME_BROKERS)),
        move_s=out.duration_s,
    )
    steady = out.steady
    during_ms = sorted(
        ms
        for ts, ms in (steady.latencies_ms if steady else [])
        if out.start_ts is not None and out.end_ts is not None and out.start_ts <= ts <= out.end_ts
    )
    produce = {
        "records_per_s": PRODUCE_RECORDS_PER_S,
        "acks": "all",
        "records": steady.records if steady else 0,
        "p99_ms_during_move": round(during_ms[round(0.99 * (len(during_ms) - 1))], 1)
        if during_ms
        else None,
        "max_ms_during_move": round(during_ms[-1], 1) if during_ms else None,
    }
    missing = out.lost + out.corrupted
    ok = missing == 0 and out.read >= out.acked > 0 and out.duration_s is not None
    ok = ok and not out.left_configs
    doc = demo_json(
        ok=ok,
        move=figures,
        verdict={
            "acknowledged": out.acked,
            "read": out.read,
            "lost": out.lost,
            "corrupted": out.corrupted,
        },  # fmt: skip
        produce=produce,
        throttle_configs=out.set_configs,
        throttle_removed=not out.left_configs,
        run_dir=str(folder.path),
        plot=None if png is None else str(png),
        csv=str(csv_path),
        wall_s=time.monotonic() - began,
        records=out.records,
    )
    (folder.path / "demo.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    say(figures.summary())
    if figures.max_sensor is not None:
        say(
            f"{SENSOR} on broker {move.destination} peaked at "
            f"{figures.max_sensor / 1e6:.2f} MB/s (the first responses of a move go through "
            "whole: docs/throttling.md#overshoot)"
        )
    if produce["p99_ms_during_move"] is not None:
        say(
            f"the producer kept going: {produce['records']} records acknowledged, p99 latency "
            f"{produce['p99_ms_during_move']} ms during the move"
        )
    verdict = "OK" if ok else "FAILED"
    say(f"{verdict}: {out.acked} acknowledged, {out.read} read back, {missing} missing")
    say(f"run folder: {_shown(folder.path)}")
    if png is None:
        say(f"matplotlib is not importable: no plot; the figure's data is in {_shown(csv_path)}")
    else:
        say(f"plot: {_shown(png)} (its data: {csv_path.name}; the figures: demo.json)")
    return doc
