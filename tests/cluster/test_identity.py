"""A local cluster's identity (cluster/secret.py) and how a node takes it (server/config.py).

The secret file is the owner's alone from its creation; nodes are given its path and the
cluster id on their command line, never the secret; a node refuses a secret file open to others
and refuses to start without an identity, each with one line naming the setting.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from minikafka.cluster import plan_cluster
from minikafka.cluster.processes import node_argv
from minikafka.cluster.secret import new_cluster_id, secret_path, write_cluster_secret
from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig
from minikafka.server.node import Node


def test_the_secret_file_is_mode_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)  # a umask of 0 would leave a plainly created file world-readable
    try:
        path = write_cluster_secret(tmp_path)
    finally:
        os.umask(old)
    assert path == secret_path(tmp_path) == tmp_path / "cluster.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text().strip()
    assert len(secret) == 64 and int(secret, 16) >= 0
    # A second `up` makes a new secret, again 0600, and leaves no temporary file behind.
    again = write_cluster_secret(tmp_path)
    assert again.read_text().strip() != secret
    assert stat.S_IMODE(again.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.secret"]


def test_the_secret_file_is_created_0600_not_chmodded_later(tmp_path: Path, monkeypatch) -> None:
    """Never world-readable, even briefly: the file is born 0600 (mkstemp), before any byte."""
    modes: list[int] = []
    real_fdopen = os.fdopen

    def spy(fd: int, *args, **kwargs):
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", spy)
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: None)  # no later fix-up to lean on
    old = os.umask(0)
    try:
        write_cluster_secret(tmp_path)
    finally:
        os.umask(old)
    assert modes == [0o600]


def test_nodes_get_the_id_and_the_secret_files_path_never_the_secret(tmp_path: Path) -> None:
    spec = plan_cluster(base_dir=tmp_path / "c", brokers=1, seed=1)
    path = write_cluster_secret(spec.base_dir)
    argv = node_argv(spec, spec.node(1), cluster_id="c-0123")
    assert "cluster.id=c-0123" in argv
    assert f"cluster.secret.file={path}" in argv
    assert not any(path.read_text().strip() in arg for arg in argv)


def test_a_cluster_id_names_the_cluster_and_is_a_valid_setting() -> None:
    cid = new_cluster_id("my cluster/1")
    assert cid.startswith("my-cluster-1-")
    assert NodeConfig(node_id=1).with_settings({"cluster.id": cid}).cluster_id == cid
    assert new_cluster_id("c") != new_cluster_id("c")


def test_a_node_reads_its_secret_and_never_shows_it(tmp_path: Path) -> None:
    path = write_cluster_secret(tmp_path)
    secret = path.read_text().strip()
    c = NodeConfig(node_id=3).with_settings({"cluster.id": "c1", "cluster.secret.file": str(path)})
    assert c.cluster_secret == secret.encode()
    assert c.credential is not None and c.credential.node_id == 3
    assert secret not in repr(c) and secret not in repr(c.credential)
    assert secret not in str(c.settings())
    assert c.settings()["cluster.secret.file"] == str(path)


def test_a_secret_file_open_to_others_is_refused(tmp_path: Path) -> None:
    path = write_cluster_secret(tmp_path)
    path.chmod(0o644)
    with pytest.raises(ConfigError) as info:
        NodeConfig(node_id=1).with_settings({"cluster.secret.file": str(path)})
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"cluster.secret.file {path} is open to group or others (mode 0644): "
        f"expected mode 0600 (chmod 600 {path})"
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "cannot open it"), ("short\n", "expected a secret of at least 16 bytes")],
)
def test_a_missing_or_short_secret_is_refused(tmp_path: Path, content, expected) -> None:
    path = tmp_path / "cluster.secret"
    if content is not None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, content.encode())
        os.close(fd)
    with pytest.raises(ConfigError, match=expected):
        NodeConfig(node_id=1).with_settings({"cluster.secret.file": str(path)})


def test_a_bad_cluster_id_is_refused_with_the_accepted_form() -> None:
    with pytest.raises(ConfigError, match="expected 1 to 100 letters, digits"):
        NodeConfig(node_id=1).with_settings({"cluster.id": "has space"})


@pytest.mark.parametrize(
    ("settings", "missing"),
    [({}, "cluster.id"), ({"cluster.id": "c1"}, "cluster.secret.file")],
)
def test_a_node_without_its_cluster_identity_refuses_to_start(
    tmp_path: Path, settings: dict, missing: str
) -> None:
    data_dir = tmp_path / "node-1"
    config = NodeConfig(node_id=1, data_dir=data_dir).with_settings(settings)
    with pytest.raises(ConfigError) as info:
        Node(config)
    assert str(info.value).startswith(f"{missing} is not set: ")
    assert not data_dir.exists()  # refused before touching the data dir
