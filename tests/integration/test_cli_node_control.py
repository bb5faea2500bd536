"""`minikafka cluster kill|pause|resume|stop|start|restart NODE`: the launcher's node
control from the command line, on a cluster another command started, with one line of text or
`--json` per action and a one-line error for a node that cannot take it."""

from __future__ import annotations

import json
import subprocess
import sys

from minikafka.cluster import LocalCluster, plan_cluster


def cli(lc: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minikafka", "cluster", *args, "--dir", str(lc.base_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def state(lc: LocalCluster, node: int) -> tuple[str, int]:
    proc = cli(lc, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = [r for r in json.loads(proc.stdout)["nodes"] if r["node"] == node]
    return row["state"], row["pid"]


def test_each_node_action_from_the_cli(tmp_path) -> None:
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=2, seed=1818)
    with LocalCluster.up(spec, ready_timeout_s=30) as lc:
        _, first_pid = state(lc, 2)
        done = cli(lc, "kill", "2")
        assert (done.returncode, done.stdout) == (0, "node 2 killed\n")
        assert state(lc, 2)[0] == "down"
        started = cli(lc, "start", "2", "--json")
        assert started.returncode == 0, started.stderr
        row = json.loads(started.stdout)
        assert row["action"] == "start" and row["pid"] != first_pid
        assert state(lc, 2) == ("up", row["pid"])
        again = cli(lc, "start", "2")
        assert again.returncode != 0 and "node 2 is already running" in again.stderr

        assert cli(lc, "pause", "1").stdout == "node 1 paused\n"
        assert state(lc, 1)[0] == "paused"
        assert cli(lc, "resume", "1").stdout == "node 1 resumed\n"
        assert state(lc, 1)[0] == "up"

        stopped = cli(lc, "stop", "2", "--json")
        assert json.loads(stopped.stdout) == {"node": 2, "action": "stop", "stopped": "stopped"}
        assert state(lc, 2)[0] == "down"
        twice = cli(lc, "stop", "2")
        assert twice.returncode != 0 and twice.stderr.strip() == "error: node 2 is not running"

        restarted = cli(lc, "restart", "1")
        assert restarted.returncode == 0 and restarted.stdout.startswith("node 1 restarted (pid ")
        assert "restarting node 1" in restarted.stderr  # progress goes to stderr
        missing = cli(lc, "kill", "9")
        assert missing.returncode != 0 and "no node 9" in missing.stderr
        restarted_pid = state(lc, 1)[1]
    # `lc` read the cluster file before the CLI restarted node 1: its down() must still stop
    # the new process (it left it running before LocalCluster.down adopted recorded pids).
    assert not running(restarted_pid)


def running(pid: int) -> bool:
    """Alive and not a zombie (a node the CLI started is reparented when the CLI exits, and a
    container's init may be slow to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
