"""One node per data dir: the flock on `<data_dir>/node.lock` (minikafka/storage/dir_lock.py).

Two opens of the lock file hold two open file descriptions, so flock refuses the second even
inside one process: the in-process tests stand for two processes. The SIGKILL and CLI tests use
a real child process (no sockets; the refused node exits before it listens).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minikafka.cluster.secret import write_cluster_secret
from minikafka.server.config import NodeConfig
from minikafka.server.node import Node
from minikafka.storage import DataDirInUse, lock_data_dir
from minikafka.storage.dir_lock import LOCK_FILE
from minikafka.testing.memory_node import with_cluster_identity


def test_a_second_lock_on_the_same_dir_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with lock_data_dir(tmp_path / "node-1") as first:
        assert first.held
        with pytest.raises(DataDirInUse) as info:
            lock_data_dir(tmp_path / "node-1")
        message = str(info.value)
        assert "\n" not in message
        assert f"pid {os.getpid()}" in message and "--data-dir" in message
        # The refused attempt left the holder's pid in place.
        assert (tmp_path / "node-1" / LOCK_FILE).read_text().strip() == str(os.getpid())
    assert not first.held
    with lock_data_dir(tmp_path / "node-1"):  # released on close
        pass


def test_other_dirs_are_independent(tmp_path: Path) -> None:
    with lock_data_dir(tmp_path / "a"), lock_data_dir(tmp_path / "b"):
        pass


HOLDER = textwrap.dedent(
    """
    import sys, time
    from minikafka.storage import lock_data_dir
    lock = lock_data_dir(sys.argv[1])
    print("locked", flush=True)
    time.sleep(60)
    """
)


def test_the_os_releases_the_lock_of_a_sigkilled_node(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == "locked\n"
        with pytest.raises(DataDirInUse, match=f"pid {proc.pid}"):
            lock_data_dir(tmp_path)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    with lock_data_dir(tmp_path) as lock:  # no stale lock after a crash
        assert lock.held


def test_a_node_on_a_locked_data_dir_refuses_before_touching_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    config = with_cluster_identity(
        NodeConfig(node_id=1, roles=("broker", "controller"), data_dir=data_dir)
    )
    with lock_data_dir(data_dir):
        with pytest.raises(DataDirInUse):
            Node(config)
        assert sorted(p.name for p in data_dir.iterdir()) == [LOCK_FILE]  # no lmdb, no logs


def test_the_node_command_on_a_locked_data_dir_exits_with_one_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    argv = [sys.executable, "-m", "minikafka", "broker", "--node-id", "1"]
    argv += ["--listen", "127.0.0.1:0", "--controller", "127.0.0.1:9", "--data-dir", str(data_dir)]
    secret = write_cluster_secret(tmp_path)  # a node without its cluster's identity would not start
    argv += ["--set", "cluster.id=c1", "--set", f"cluster.secret.file={secret}"]
    with lock_data_dir(data_dir):
        # Without the lock the broker would run (retrying its controller) until the timeout.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: data dir {data_dir} is in use by another node")
    assert sorted(p.name for p in data_dir.iterdir()) == [LOCK_FILE]
