"""Starting a cluster again on new ports when a port was taken (cluster/start_retry.py).

The first tests hold the detection to the texts a start failure really has (a node's OSError
traceback as `wait_all_ready` quotes it, the fault proxy's line) and drive the retry loop with
a stand-in for `LocalCluster.up`. The last two start real (fake) node processes: the fake node
binds its `--listen` port with a plain socket, so a taken port kills it with the same
`OSError: [Errno 98] Address already in use` a real node prints, and `free_ports` is patched to
hand out a port this test holds, which makes "another process took it" deterministic.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import minikafka.cluster.spec as spec_module
from minikafka.cluster import LocalCluster, plan_cluster, read_record
from minikafka.cluster.start_retry import ADDRESS_IN_USE, port_taken, up_retrying_ports
from minikafka.errors import ClusterError, ConfigError

IN_USE = f"[Errno {errno.EADDRINUSE}] {ADDRESS_IN_USE}"


def node_failure(last_line: str) -> ClusterError:
    """The error `wait_all_ready` raises for a node that exited at start (cluster/processes.py)."""
    return ClusterError(
        "node 0 exited with code 1 before it was ready; last lines of /x/node-0/node.out:\n"
        "  |     return self._sock.bind(address)\n"
        "  |            ^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f"  | {last_line}\n"
        "  +------------------------------------"
    )


def test_a_port_taken_is_recognised_in_the_nodes_and_the_proxys_words():
    assert port_taken(node_failure(f"OSError: {IN_USE}"))
    proxy = ClusterError(
        "the fault proxy exited before it was ready; last lines of /x/proxy/proxy.out:\n"
        f"  | minikafka: fault proxy cannot listen on 127.0.0.1:40123: {ADDRESS_IN_USE}"
    )
    assert port_taken(proxy)


def test_every_other_start_failure_is_not_a_port_taken():
    assert not port_taken(node_failure("OSError: [Errno 13] Permission denied"))
    assert not port_taken(node_failure(f"OSError: [Errno 99] {os.strerror(errno.EADDRNOTAVAIL)}"))
    assert not port_taken(ClusterError("node 1 not ready after 30s (no node.json with its pid)"))
    assert not port_taken(node_failure("minikafka: node config x.y is unknown"))
    # The same words from something that is not a cluster start failure.
    assert not port_taken(ConfigError(f"port: {IN_USE}"))
    assert not port_taken(OSError(errno.EADDRINUSE, ADDRESS_IN_USE))


class FakeUp:
    """Stands in for LocalCluster.up: raises the scripted errors in turn, then succeeds."""

    def __init__(self, errors: list[ClusterError]) -> None:
        self.errors = errors
        self.specs: list = []

    def __call__(self, spec, **kwargs):
        self.specs.append(spec)
        if self.errors:
            raise self.errors.pop(0)
        return f"running in {spec.base_dir.name}"


@pytest.fixture
def plan(tmp_path: Path):
    calls: list[int] = []

    def plan(attempt: int):
        calls.append(attempt)
        return plan_cluster(base_dir=tmp_path / f"attempt-{attempt}", brokers=1, seed=0)

    plan.calls = calls  # type: ignore[attr-defined]
    return plan


def test_a_port_taken_starts_again_on_a_new_plan_and_says_so(monkeypatch, plan):
    fake = FakeUp([node_failure(f"OSError: {IN_USE}")])
    monkeypatch.setattr(LocalCluster, "up", fake)
    notes: list[str] = []
    assert up_retrying_ports(plan, on_retry=notes.append) == "running in attempt-2"
    assert plan.calls == [1, 2]
    assert [s.base_dir.name for s in fake.specs] == ["attempt-1", "attempt-2"]
    assert len(notes) == 1
    assert "starting again on new ports (attempt 2 of 3)" in notes[0]
    assert IN_USE in notes[0]  # what happened to the first attempt


def test_any_other_failure_is_raised_at_once_as_it_is(monkeypatch, plan):
    crash = node_failure("RuntimeError: boom")
    monkeypatch.setattr(LocalCluster, "up", FakeUp([crash]))
    with pytest.raises(ClusterError) as caught:
        up_retrying_ports(plan)
    assert caught.value is crash
    assert plan.calls == [1]


def test_a_port_taken_at_every_attempt_gives_one_clear_error(monkeypatch, plan):
    errors = [node_failure(f"OSError: {IN_USE}") for _ in range(3)]
    last = errors[-1]
    monkeypatch.setattr(LocalCluster, "up", FakeUp(errors))
    with pytest.raises(ClusterError, match="at each of 3 attempts") as caught:
        up_retrying_ports(plan, attempts=3)
    assert plan.calls == [1, 2, 3]
    assert "another process took a port before its node bound it" in str(caught.value)
    assert "attempt-3" in str(caught.value) and IN_USE in str(caught.value)
    assert caught.value.__cause__ is last


@pytest.mark.parametrize("attempts", [0, -1, True, 2.0])
def test_attempts_must_be_a_positive_integer(plan, attempts):
    with pytest.raises(ConfigError, match="attempts must be a positive integer"):
        up_retrying_ports(plan, attempts=attempts)
    assert plan.calls == []


# -- real processes: a fake node that binds its port ------------------------------------------

BINDING_NODE = r"""
import argparse, json, os, socket, time

p = argparse.ArgumentParser()
for flag in ("--node-id", "--roles", "--listen", "--controller", "--data-dir", "--seed"):
    p.add_argument(flag, required=True)
p.add_argument("--set", action="append", default=[])
a = p.parse_args()
host, port = a.listen.rsplit(":", 1)
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as trio's listeners do
sock.bind((host, int(port)))  # a taken port: OSError: [Errno 98] Address already in use
sock.listen()
os.makedirs(a.data_dir, exist_ok=True)
tmp = os.path.join(a.data_dir, "node.json.tmp")
with open(tmp, "w") as f:
    json.dump({"pid": os.getpid(), "port": int(port)}, f)
os.replace(tmp, os.path.join(a.data_dir, "node.json"))
while True:
    time.sleep(3600)
"""


@pytest.fixture
def binding_node(tmp_path: Path) -> list[str]:
    script = tmp_path / "binding_node.py"
    script.write_text(BINDING_NODE)
    return [sys.executable, str(script)]


class TakenPort:
    """A port held (listening) by this test, which `free_ports` hands out as node 0's (the
    controller's): at its first call only, or at every call once `always` is set."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port: int = self.sock.getsockname()[1]
        self.always = False
        self.calls = 0
        self._real = spec_module.free_ports

    def free_ports(self, n: int, host: str = "127.0.0.1") -> list[int]:
        self.calls += 1
        ports = self._real(n, host)
        if self.calls == 1 or self.always:
            ports[0] = self.port
        return ports


@pytest.fixture
def taken_port(monkeypatch) -> Iterator[TakenPort]:
    taken = TakenPort()
    monkeypatch.setattr(spec_module, "free_ports", taken.free_ports)
    try:
        yield taken
    finally:
        taken.sock.close()


def test_a_real_start_on_a_taken_port_succeeds_on_new_ports(tmp_path, binding_node, taken_port):
    notes: list[str] = []

    def plan(attempt: int):
        return plan_cluster(base_dir=tmp_path / f"attempt-{attempt}", brokers=2, seed=0)

    with up_retrying_ports(plan, node_command=binding_node, on_retry=notes.append) as lc:
        assert lc.base_dir.name == "attempt-2"
        assert all(s.alive for s in lc.status())
        assert taken_port.port not in [n.port for n in lc.spec.nodes]
    assert taken_port.calls == 2
    first_out = (tmp_path / "attempt-1" / "node-0" / "node.out").read_text()
    assert f"OSError: {IN_USE}" in first_out  # the node's own words, which were recognised
    assert read_record(tmp_path / "attempt-1") is None  # the failed start left no cluster
    assert len(notes) == 1 and "(attempt 2 of 3)" in notes[0]


def test_a_real_start_with_a_port_taken_every_time_fails_clearly(
    tmp_path, binding_node, taken_port
):
    taken_port.always = True

    def plan(attempt: int):
        return plan_cluster(base_dir=tmp_path / f"attempt-{attempt}", brokers=1, seed=0)

    with pytest.raises(ClusterError, match="at each of 3 attempts") as caught:
        up_retrying_ports(plan, node_command=binding_node, ready_timeout_s=10.0)
    assert taken_port.calls == 3
    assert f"OSError: {IN_USE}" in str(caught.value)
    for attempt in (1, 2, 3):
        assert read_record(tmp_path / f"attempt-{attempt}") is None
        assert not (tmp_path / f"attempt-{attempt}" / "node-1").exists()  # no broker started
