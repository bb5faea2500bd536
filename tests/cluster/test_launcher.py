"""The local-cluster launcher, driven with a fake node program.

The fake node (written to a temp dir below) takes the real node's flags, writes `node.json`
when "ready" and exits 0 on SIGTERM, like the node contract in cluster/processes.py says. The
`fake.fail.node` / `fake.fail.mode` node configs make one node misbehave: `exit` (error line in
node.out, exit 3 at once), `hang` (never ready) or `ignore-term` (needs SIGKILL). These are real
processes, so the tests take real (short) time: they poll, never sleep a fixed amount.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from minikafka.cluster import (
    ClusterSpec,
    LocalCluster,
    NodeSpec,
    free_ports,
    parse_node_configs,
    plan_cluster,
)
from minikafka.cluster.files import tail_lines
from minikafka.errors import ClusterError, ConfigError

FAKE_NODE = r"""
import argparse, json, os, signal, sys, time
from datetime import datetime, timezone

p = argparse.ArgumentParser()
for flag in ("--node-id", "--roles", "--listen", "--controller", "--data-dir", "--seed"):
    p.add_argument(flag, required=True)
p.add_argument("--set", action="append", default=[])
a = p.parse_args()
configs = dict(item.split("=", 1) for item in a.set)
mode = configs.get("fake.fail.mode") if configs.get("fake.fail.node") == a.node_id else None
os.makedirs(a.data_dir, exist_ok=True)
with open(os.path.join(a.data_dir, "fake.pid"), "w") as f:
    f.write(str(os.getpid()))
if mode == "exit":
    print(f"fake node {a.node_id}: cannot bind {a.listen}: address in use", file=sys.stderr)
    sys.exit(3)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "ignore-term" else lambda *_: sys.exit(0))
with open(os.path.join(a.data_dir, "events.jsonl"), "a") as f:
    for i in range(3):
        f.write(json.dumps({"event": "started", "node_id": int(a.node_id), "i": i}) + "\n")
if mode != "hang":
    host, port = a.listen.rsplit(":", 1)
    info = {"node_id": int(a.node_id), "roles": a.roles.split(","), "host": host,
            "port": int(port), "pid": os.getpid(),
            "started_at": datetime.now(timezone.utc).isoformat(), "argv": sys.argv[1:]}
    tmp = os.path.join(a.data_dir, "node.json.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(a.data_dir, "node.json"))
print(f"fake node {a.node_id} serving", flush=True)
while True:
    time.sleep(3600)
"""


@pytest.fixture(scope="module")
def node_command(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    script = tmp_path_factory.mktemp("fake") / "fake_node.py"
    script.write_text(FAKE_NODE)
    return [sys.executable, str(script)]


@pytest.fixture
def base_dir(tmp_path: Path):
    """A cluster dir whose leftover nodes are killed at the end of the test, pass or fail."""
    base = tmp_path / "cluster"
    yield base
    for pid_file in base.glob("node-*/fake.pid"):
        pid = int(pid_file.read_text())
        if is_running(pid):
            os.kill(pid, 9)


def proc_state(pid: int) -> str:
    """The /proc state letter, '' once the pid is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return ""


def is_running(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap our own children so they do not stay zombies
    except ChildProcessError:
        pass
    return proc_state(pid) not in ("", "Z")


def wait_for(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def launch(base_dir: Path, node_command: list[str], brokers: int = 3, **kwargs) -> LocalCluster:
    configs = kwargs.pop("node_configs", {"replica.fetch.max.bytes": "1048576"})
    timeout = kwargs.pop("ready_timeout_s", 10.0)
    spec = plan_cluster(base_dir=base_dir, brokers=brokers, seed=7, node_configs=configs, **kwargs)
    return LocalCluster.up(spec, node_command=node_command, ready_timeout_s=timeout)


def started_pids(base_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(base_dir.glob("node-*/fake.pid"))]


def processes_under(base_dir: Path) -> list[int]:
    """Running processes whose command line names a data dir under `base_dir`."""
    needle = os.fsencode(str(base_dir.absolute()))
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and needle in cmdline and is_running(int(entry.name)):
            found.append(int(entry.name))
    return found


# -- planning -------------------------------------------------------------------------------


def test_plan_separate_controller(tmp_path: Path) -> None:
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=3, seed=1)
    assert [n.node_id for n in spec.nodes] == [0, 1, 2, 3]
    assert spec.controller.node_id == 0 and spec.controller.roles == ("controller",)
    assert [n.node_id for n in spec.brokers] == [1, 2, 3]
    assert all(n.roles == ("broker",) for n in spec.brokers)
    assert len({n.port for n in spec.nodes}) == 4
    assert spec.nodes[2].data_dir == (tmp_path / "c" / "node-2").absolute()
    assert spec.bootstrap == ",".join(f"127.0.0.1:{n.port}" for n in spec.brokers)
    assert spec.controller_address == f"127.0.0.1:{spec.nodes[0].port}"


def test_plan_combined_controller(tmp_path: Path) -> None:
    spec = plan_cluster(base_dir=tmp_path, brokers=2, seed=1, combined_controller=True)
    assert [(n.node_id, n.roles) for n in spec.nodes] == [
        (1, ("broker", "controller")),
        (2, ("broker",)),
    ]
    assert spec.controller.node_id == 1
    assert [n.node_id for n in spec.brokers] == [1, 2]
    assert spec.nodes[0].port != spec.nodes[1].port


def test_free_ports_are_distinct() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20 and all(0 < p < 65536 for p in ports)


def test_free_ports_lie_below_the_ephemeral_range() -> None:
    """A port an outgoing connection may take as its source port is not a node's: a node down
    for a restart would find it taken (cluster/ports.py)."""
    from minikafka.cluster.ports import LOW_PORT, ephemeral_low

    ports = free_ports(20)
    assert all(LOW_PORT <= p < ephemeral_low() for p in ports), ports


def test_a_taken_low_port_is_skipped() -> None:
    import random
    import socket

    from minikafka.cluster.ports import LOW_PORT, ephemeral_low

    taken_port = random.Random(7).randint(LOW_PORT, ephemeral_low() - 1)
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", taken_port))
        except OSError:
            pytest.skip(f"port {taken_port} is in use here")
        taken.listen()
        (port,) = free_ports(1, rng=random.Random(7))  # its first pick is the taken one
        assert port != taken_port


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"brokers": 0}, "brokers must be an integer from 1 to 64, got 0"),
        ({"brokers": 65}, "brokers must be an integer from 1 to 64, got 65"),
        ({"brokers": True}, "brokers must be"),
        ({"seed": -1}, "seed must be an integer"),
        ({"node_configs": {"Bad Name": "1"}}, "is not a dotted lowercase name"),
        ({"node_configs": {"nodots": "1"}}, "is not a dotted lowercase name"),
        ({"node_configs": {"a.b": 1}}, "node config a.b must have a string value, got int"),
        ({"node_configs": {"a.b": "x\ny"}}, "one line"),
        ({"name": "has space"}, "cluster name must be"),
    ],
)
def test_plan_validation(tmp_path: Path, kwargs: dict, message: str) -> None:
    args = {"base_dir": tmp_path, "brokers": 1, "seed": 0} | kwargs
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        plan_cluster(**args)
    assert "\n" not in str(info.value)


def test_plan_refuses_a_file_as_base_dir(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        plan_cluster(base_dir=tmp_path / "f", brokers=1, seed=0)


def test_spec_needs_exactly_one_controller(tmp_path: Path) -> None:
    def node(i: int, roles: tuple[str, ...]) -> NodeSpec:
        return NodeSpec(node_id=i, roles=roles, host="h", port=1000 + i, data_dir=tmp_path)

    with pytest.raises(ConfigError, match="exactly one controller"):
        ClusterSpec(name="x", base_dir=tmp_path, nodes=(node(1, ("broker",)),), seed=0)
    with pytest.raises(ConfigError, match="roles must be broker, controller or both"):
        node(1, ("leader",))
    with pytest.raises(ConfigError, match="node ids must be distinct"):
        ClusterSpec(
            name="x",
            base_dir=tmp_path,
            nodes=(
                node(1, ("controller",)),
                NodeSpec(**{**_fields(node(1, ("broker",))), "port": 9}),
            ),
            seed=0,
        )


def _fields(spec: NodeSpec) -> dict:
    return {f: getattr(spec, f) for f in NodeSpec.__slots__}


def test_parse_node_configs() -> None:
    assert parse_node_configs(["a.b=1", "c.d=x=y", "e.f="]) == {"a.b": "1", "c.d": "x=y", "e.f": ""}
    with pytest.raises(ConfigError, match="--set expects name=value, got 'a.b'"):
        parse_node_configs(["a.b"])
    with pytest.raises(ConfigError, match="set twice"):
        parse_node_configs(["a.b=1", "a.b=2"])


def test_tail_lines_reads_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("".join(f"line {i}\n" for i in range(5000)))
    assert tail_lines(path, 3) == ["line 4997", "line 4998", "line 4999"]
    assert tail_lines(path, 3, start=path.stat().st_size - len("line 4999\n")) == ["line 4999"]
    assert tail_lines(tmp_path / "missing", 3) == []


# -- running clusters -----------------------------------------------------------------------


def test_up_writes_cluster_file_and_status(base_dir: Path, node_command: list[str]) -> None:
    with launch(base_dir, node_command) as cluster:
        data = json.loads((base_dir / "cluster.json").read_text())
        assert data["state"] == "running" and data["seed"] == 7
        assert data["controller"] == cluster.controller_address
        assert data["bootstrap"] == cluster.bootstrap()
        assert [n["pid"] for n in data["nodes"]] == [s.pid for s in cluster.status()]
        rows = cluster.status()
        assert [r.node_id for r in rows] == [0, 1, 2, 3]
        assert all(r.alive and not r.paused and r.pid for r in rows)
        assert all(is_running(r.pid) for r in rows)
        # The node got the contract's flags.
        ready = json.loads((base_dir / "node-2" / "node.json").read_text())
        argv = ready["argv"]
        assert argv[argv.index("--roles") + 1] == "broker"
        assert argv[argv.index("--controller") + 1] == cluster.controller_address
        assert argv[argv.index("--seed") + 1] == "7"
        assert argv[argv.index("--set") + 1] == "replica.fetch.max.bytes=1048576"
        assert argv[argv.index("--data-dir") + 1] == str(base_dir.absolute() / "node-2")


def test_load_sees_the_same_cluster(base_dir: Path, node_command: list[str]) -> None:
    with launch(base_dir, node_command, brokers=2, combined_controller=True) as cluster:
        other = LocalCluster.load(base_dir)
        assert other.status() == cluster.status()
        assert other.spec == cluster.spec
        assert other.bootstrap() == cluster.bootstrap()
        assert other.controller_address == cluster.spec.nodes[0].address


def test_load_without_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"^no cluster in .* \(run `minikafka cluster up`\)$"):
        LocalCluster.load(tmp_path)


def test_kill_pause_resume(base_dir: Path, node_command: list[str]) -> None:
    with launch(base_dir, node_command) as cluster:
        other = LocalCluster.load(base_dir)  # a later command, holding pids only
        pid2, pid3 = cluster.pid(2), cluster.pid(3)
        other.kill(2)
        assert not is_running(pid2)
        assert [r.alive for r in cluster.status()] == [True, True, False, True]
        assert [r.alive for r in other.status()] == [True, True, False, True]
        with pytest.raises(ClusterError, match="^node 2 is not running$"):
            other.pause(2)

        other.pause(3)
        assert proc_state(pid3) == "T"
        row = cluster.status()[3]
        assert row.alive and row.paused
        other.resume(3)
        assert wait_for(lambda: proc_state(pid3) in ("S", "R"))
        assert not cluster.status()[3].paused

        with pytest.raises(ConfigError, match=r"^no node 9 in cluster .* \(nodes: 0, 1, 2, 3\)$"):
            other.kill(9)


def test_restart_gives_a_new_pid(base_dir: Path, node_command: list[str]) -> None:
    with launch(base_dir, node_command) as cluster:
        old = cluster.pid(1)
        cluster.kill(1)
        other = LocalCluster.load(base_dir)
        new = other.restart(1, ready_timeout_s=10)
        assert new != old and is_running(new)
        assert LocalCluster.load(base_dir).pid(1) == new
        assert json.loads((base_dir / "node-1" / "node.json").read_text())["pid"] == new
        # Restarting a running (and even paused) node stops it first.
        other.pause(1)
        newer = other.restart(1, ready_timeout_s=10)
        assert newer != new and not is_running(new) and is_running(newer)
        out = cluster.log_path(1, "out").read_text()
        assert out.count("# minikafka: starting node 1") == 3


def test_down_stops_all_and_up_works_again(base_dir: Path, node_command: list[str]) -> None:
    cluster = launch(base_dir, node_command)
    pids = [r.pid for r in cluster.status()]
    cluster.pause(2)  # a paused node must still stop on SIGTERM
    outcomes = LocalCluster.load(base_dir).down(timeout_s=5)
    assert outcomes == [(1, "stopped"), (2, "stopped"), (3, "stopped"), (0, "stopped")]
    assert not any(is_running(pid) for pid in pids)
    assert json.loads((base_dir / "cluster.json").read_text())["state"] == "stopped"
    assert not any(r.alive for r in LocalCluster.load(base_dir).status())
    assert (base_dir / "node-1" / "events.jsonl").exists()  # data dirs are kept

    again = launch(base_dir, node_command, brokers=1)
    assert all(r.alive for r in again.status())
    assert again.down(timeout_s=5, wipe=True) == [(1, "stopped"), (0, "stopped")]
    assert sorted(p.name for p in base_dir.iterdir()) == ["node-2", "node-3"]  # not its nodes


def test_down_kills_a_node_that_ignores_sigterm(base_dir: Path, node_command: list[str]) -> None:
    configs = {"fake.fail.node": "1", "fake.fail.mode": "ignore-term"}
    cluster = launch(base_dir, node_command, brokers=2, node_configs=configs)
    pid1 = cluster.pid(1)
    assert cluster.down(timeout_s=0.3) == [(1, "killed"), (2, "stopped"), (0, "stopped")]
    assert not is_running(pid1)


def test_up_refuses_over_a_live_cluster(base_dir: Path, node_command: list[str]) -> None:
    with launch(base_dir, node_command, brokers=1) as cluster:
        pids = ", ".join(str(r.pid) for r in cluster.status())
        with pytest.raises(ClusterError) as info:
            launch(base_dir, node_command, brokers=1)
        assert str(info.value) == (
            f"a cluster is already running in {base_dir.absolute()} (pids {pids}); "
            "run `minikafka cluster down` first"
        )
        assert all(r.alive for r in cluster.status())  # and it changed nothing


def test_node_exiting_at_start_fails_up_and_cleans_up(
    base_dir: Path, node_command: list[str]
) -> None:
    configs = {"fake.fail.node": "2", "fake.fail.mode": "exit"}
    (base_dir / "node-2").mkdir(parents=True)
    (base_dir / "node-2" / "node.out").write_text("output of an earlier run\n")
    with pytest.raises(ClusterError) as info:
        launch(base_dir, node_command, node_configs=configs)
    message = str(info.value)
    assert "earlier run" not in message  # only this run's output is quoted
    assert message.startswith("node 2 exited with code 3 before it was ready; last lines of")
    assert "cannot bind 127.0.0.1:" in message and "address in use" in message
    assert {0, 2} <= {int(p.parent.name[5:]) for p in base_dir.glob("node-*/fake.pid")}
    assert not any(is_running(pid) for pid in started_pids(base_dir))
    assert processes_under(base_dir) == []
    assert not (base_dir / "cluster.json").exists()
    assert LocalCluster.up(  # nothing is left that would make a new `up` refuse
        plan_cluster(base_dir=base_dir, brokers=1, seed=7), node_command=node_command
    ).down(timeout_s=5) == [(1, "stopped"), (0, "stopped")]


def test_node_never_ready_times_out_and_cleans_up(base_dir: Path, node_command: list[str]) -> None:
    configs = {"fake.fail.node": "0", "fake.fail.mode": "hang"}
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"^node 0 not ready after 0.5s") as info:
        launch(base_dir, node_command, node_configs=configs, ready_timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert "fake node 0 serving" in str(info.value)  # the node.out tail is quoted
    assert len(started_pids(base_dir)) == 1  # brokers never start without a ready controller
    assert processes_under(base_dir) == []


def test_tail_logs_and_log_paths(base_dir: Path, node_command: list[str]) -> None:
    with launch(base_dir, node_command, brokers=2) as cluster:
        assert cluster.log_path(1, "metrics") == base_dir.absolute() / "node-1" / "metrics.jsonl"
        lines = cluster.tail_logs([2, 1], "events", lines=2)
        assert [line.split(" ", 2)[:2] for line in lines] == [["[node", "2]"]] * 2 + [
            ["[node", "1]"]
        ] * 2
        assert json.loads(lines[-1].split("] ", 1)[1]) == {"event": "started", "node_id": 1, "i": 2}
        assert cluster.tail_logs(None, "metrics") == []  # missing logs are empty, not errors
        with pytest.raises(ConfigError, match="^log kind must be one of events, metrics, out"):
            cluster.log_path(1, "stderr")
