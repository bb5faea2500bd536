"""What `cluster down --wipe` and `minikafka demo --dir` may delete: nothing it did not make.

A wipe deletes only data dirs inside the directory its cluster file was found in, whatever the
file says; the demo reuses a directory only if it is missing, empty, or holds nothing but a
minikafka cluster. Refusals are one line and delete nothing. The clusters here are recorded as
stopped (no processes): what is checked is what would be deleted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from minikafka.cli.main import main
from minikafka.cluster import LocalCluster, plan_cluster
from minikafka.cluster.clusterfile import ClusterRecord, write_record
from minikafka.cluster.files import strictly_inside
from minikafka.errors import ClusterError


def stopped_cluster(base: Path, *, brokers: int = 2) -> Path:
    """A cluster file for `base` as `cluster up` + `down` leave it, with a file in each data dir."""
    spec = plan_cluster(base_dir=base, brokers=brokers, seed=7)
    write_record(
        ClusterRecord(
            spec=spec, node_command=("true",), pids={}, state="stopped", created_at="2026-01-01"
        )
    )
    for node in spec.nodes:
        node.data_dir.mkdir(parents=True)
        (node.data_dir / "events.jsonl").write_text("{}\n")
    return base / "cluster.json"


def edit(cluster_json: Path, change) -> None:  # noqa: ANN001
    doc = json.loads(cluster_json.read_text())
    change(doc)
    cluster_json.write_text(json.dumps(doc))


def precious(tmp_path: Path) -> Path:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "thesis.tex").write_text("years of work")
    return outside


def test_strictly_inside(tmp_path: Path) -> None:
    assert strictly_inside(tmp_path / "c" / "node-1", tmp_path / "c")
    assert not strictly_inside(tmp_path / "c", tmp_path / "c")
    assert not strictly_inside(tmp_path / "c" / ".." / "x", tmp_path / "c")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "link").symlink_to(tmp_path)
    assert not strictly_inside(tmp_path / "c" / "link", tmp_path / "c")


def test_wipe_deletes_the_data_dirs_inside(tmp_path: Path) -> None:
    base = tmp_path / "c"
    stopped_cluster(base)
    LocalCluster.load(base).down(wipe=True)
    assert not base.exists()


def test_wipe_refuses_a_data_dir_outside_the_cluster_dir(tmp_path: Path) -> None:
    base = tmp_path / "c"
    cluster_json = stopped_cluster(base)
    outside = precious(tmp_path)
    edit(cluster_json, lambda doc: doc["nodes"][1].update(data_dir=str(outside)))
    with pytest.raises(ClusterError, match="not inside the cluster dir") as info:
        LocalCluster.load(base).down(wipe=True)
    assert "\n" not in str(info.value)
    assert (outside / "thesis.tex").read_text() == "years of work"
    assert cluster_json.exists() and (base / "node-0" / "events.jsonl").exists()  # nothing wiped


def test_wipe_refuses_a_cluster_file_naming_another_base_dir(tmp_path: Path) -> None:
    base = tmp_path / "c"
    cluster_json = stopped_cluster(base)
    outside = precious(tmp_path)

    def move(doc: dict) -> None:
        doc["base_dir"] = str(outside)
        for node in doc["nodes"]:
            node["data_dir"] = str(outside)

    edit(cluster_json, move)
    with pytest.raises(ClusterError, match="names base_dir"):
        LocalCluster.load(base).down(wipe=True)
    assert (outside / "thesis.tex").exists() and cluster_json.exists()


def test_cluster_down_wipe_command_refuses_with_one_line(tmp_path: Path) -> None:
    base = tmp_path / "c"
    cluster_json = stopped_cluster(base)
    outside = precious(tmp_path)
    edit(cluster_json, lambda doc: doc["nodes"][0].update(data_dir=str(outside)))
    result = CliRunner().invoke(main, ["cluster", "down", "--wipe", "--dir", str(base)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith("error: refusing to wipe")
    assert (outside / "thesis.tex").exists() and cluster_json.exists()


# -- minikafka demo --dir ----------------------------------------------------------------------


class NoLaunch:
    """Stands in for LocalCluster in minikafka.tools.demo: these tests must never start a cluster."""

    @staticmethod
    def up(*args: object, **kwargs: object) -> None:
        raise AssertionError("the demo started a cluster")

    @staticmethod
    def load(base_dir: Path) -> LocalCluster:
        return LocalCluster.load(base_dir)


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    import minikafka.tools.demo

    monkeypatch.setattr(minikafka.tools.demo, "LocalCluster", NoLaunch)


def test_demo_accepts_a_missing_an_empty_or_a_cluster_dir(tmp_path: Path) -> None:
    from minikafka.tools.demo import check_demo_dir

    check_demo_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    check_demo_dir(tmp_path / "empty")
    stopped_cluster(tmp_path / "c")
    (tmp_path / "c" / ".cluster.lock").touch()
    check_demo_dir(tmp_path / "c")


def refusal(base: Path) -> str:
    from minikafka.tools.demo import check_demo_dir

    with pytest.raises(ClusterError) as info:
        check_demo_dir(base)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"refusing to use {base} for the demo")
    assert "--dir a missing or empty directory" in message
    return message


def test_demo_refuses_a_dir_that_is_not_a_cluster(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert "holds no cluster.json" in refusal(tmp_path)
    (tmp_path / "cluster.json").write_text("not json")
    assert "not valid JSON" in refusal(tmp_path)
    assert "not a directory" in refusal(tmp_path / "notes.txt")


def test_demo_refuses_a_cluster_dir_holding_anything_else(tmp_path: Path) -> None:
    base = tmp_path / "c"
    stopped_cluster(base)
    (base / "src").mkdir()
    assert "holds 'src'" in refusal(base)


def test_demo_refuses_a_cluster_file_naming_dirs_elsewhere(tmp_path: Path) -> None:
    base = tmp_path / "c"
    cluster_json = stopped_cluster(base)
    outside = precious(tmp_path)
    edit(cluster_json, lambda doc: doc["nodes"][1].update(data_dir=str(outside)))
    assert f"names data dir {outside}" in refusal(base)
    edit(cluster_json, lambda doc: doc.update(base_dir=str(outside)))
    assert f"names base_dir {outside}" in refusal(base)


def test_demo_command_refuses_with_one_line_and_deletes_nothing(
    tmp_path: Path, no_launch: None
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    result = CliRunner().invoke(main, ["demo", "--dir", str(home)])
    assert (home / "thesis.tex").read_text() == "years of work"
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("error: refusing to use")
