"""A node's JSON-lines logs roll over at a size cap and keep a few files (server/jsonl.py, issue
11 point 4: a run folder never grows without bound), and the configs that set the caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minikafka.errors import ConfigError
from minikafka.server.config import NodeConfig
from minikafka.server.eventlog import EventLog
from minikafka.server.jsonl import (
    JsonlFile,
    Rotation,
    jsonl_parts,
    must_roll,
    roll_steps,
)
from minikafka.server.metrics import Metrics


def line(i: int) -> str:
    """29 characters, 30 bytes with its newline: three fit a 100-byte cap, a fourth does not."""
    return f'{{"i":{i:05d},"pad":"xxxxxxxxx"}}'


def names(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


# ---------------------------------------------------------------------------- pure rules


def test_a_line_rolls_the_file_only_if_it_would_pass_the_cap_of_a_non_empty_file():
    assert not must_roll(0, 30, 100)
    assert not must_roll(70, 30, 100)  # exactly at the cap: still fits
    assert must_roll(71, 30, 100)
    assert not must_roll(0, 500, 100)  # a line above the cap goes whole into an empty file
    assert must_roll(1, 500, 100)


def test_roll_steps_shift_the_parts_up_highest_first_and_drop_the_oldest():
    p = Path("d/events.jsonl")
    part = {i: Path(f"d/events.jsonl.{i}") for i in range(1, 8)}
    assert roll_steps(p, [], 5) == [(p, part[1])]
    assert roll_steps(p, [1, 2], 5) == [(part[2], part[3]), (part[1], part[2]), (p, part[1])]
    # Full: .4 (the oldest kept) is deleted, the rest shift; nothing is overwritten.
    assert roll_steps(p, [2, 4, 1, 3], 5) == [
        (part[4], None),
        (part[3], part[4]),
        (part[2], part[3]),
        (part[1], part[2]),
        (p, part[1]),
    ]
    # A gap shifts what is there; parts a larger earlier setting left are deleted.
    assert roll_steps(p, [1, 3], 5) == [(part[3], part[4]), (part[1], part[2]), (p, part[1])]
    assert roll_steps(p, [7, 1], 3) == [(part[7], None), (part[1], part[2]), (p, part[1])]
    # One file kept: the live file is simply started again.
    assert roll_steps(p, [], 1) == [(p, None)]
    assert roll_steps(p, [2], 1) == [(part[2], None), (p, None)]


def test_parts_are_listed_oldest_first_and_only_numbered_siblings_count(tmp_path):
    for name in ["m.jsonl", "m.jsonl.1", "m.jsonl.10", "m.jsonl.2", "m.jsonl.tmp", "m.jsonl.01"]:
        (tmp_path / name).write_text("")
    (tmp_path / "events.jsonl.1").write_text("")
    (tmp_path / "m.jsonl.3").mkdir()  # not a file: nothing a reader could read
    assert [p.name for p in jsonl_parts(tmp_path / "m.jsonl")] == [
        "m.jsonl.10", "m.jsonl.2", "m.jsonl.1", "m.jsonl",
    ]  # fmt: skip
    (tmp_path / "m.jsonl").unlink()  # parts without a live file are still read
    assert [p.name for p in jsonl_parts(tmp_path / "m.jsonl")][-1] == "m.jsonl.1"
    assert jsonl_parts(tmp_path / "missing.jsonl") == []
    assert jsonl_parts(tmp_path / "no-dir" / "x.jsonl") == []


# ---------------------------------------------------------------------------- the writer


def test_the_writer_rolls_at_the_cap_keeps_max_files_and_drops_the_oldest(tmp_path):
    path = tmp_path / "events.jsonl"
    out = JsonlFile(path, rotation=Rotation(max_bytes=100, max_files=3))
    for i in range(20):
        assert out.write_line(line(i))
    out.close()
    assert names(path) == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    texts = [p.read_text() for p in jsonl_parts(path)]
    for text in texts:  # whole lines only, never past the cap
        assert text.endswith("\n") and len(text.encode()) <= 100
    # 20 lines, 3 a file: files of 3, 3, ... 3, 2; the newest three files hold the last 8.
    assert "".join(texts) == "".join(line(i) + "\n" for i in range(12, 20))
    assert [len(t.splitlines()) for t in texts] == [3, 3, 2]
    assert out.write_errors == 0


def test_a_line_longer_than_the_cap_is_written_whole_in_a_file_of_its_own(tmp_path):
    path = tmp_path / "events.jsonl"
    out = JsonlFile(path, rotation=Rotation(max_bytes=100, max_files=3))
    big = '{"big":"' + "y" * 200 + '"}'
    for text in (line(0), big, line(1)):
        assert out.write_line(text)
    out.close()
    assert [p.read_text() for p in jsonl_parts(path)] == [
        line(0) + "\n",
        big + "\n",
        line(1) + "\n",
    ]


def test_the_size_counts_bytes_not_characters(tmp_path):
    path = tmp_path / "events.jsonl"
    out = JsonlFile(path, rotation=Rotation(max_bytes=100, max_files=2))
    wide = '{"s":"' + "é" * 20 + '"}'  # 29 characters with its newline, 49 bytes
    for _ in range(3):  # 87 characters would fit one file; 147 bytes do not
        out.write_line(wide)
    out.close()
    assert [len(p.read_bytes()) for p in jsonl_parts(path)] == [98, 49]


def test_a_restarted_writer_counts_what_the_file_already_holds(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(line(0) + "\n" + line(1) + "\n")  # 60 bytes from an earlier incarnation
    out = JsonlFile(path, rotation=Rotation(max_bytes=100, max_files=2))
    out.write_line(line(2))  # 90: fits
    out.write_line(line(3))  # 120: rolls
    out.close()
    assert [p.read_text().count("\n") for p in jsonl_parts(path)] == [3, 1]


def test_one_file_kept_means_the_log_starts_again_at_the_cap(tmp_path):
    path = tmp_path / "replicas.jsonl"
    out = JsonlFile(path, rotation=Rotation(max_bytes=100, max_files=1))
    for i in range(7):
        out.write_line(line(i))
    out.close()
    assert names(path) == ["replicas.jsonl"]
    assert path.read_text() == line(6) + "\n"


def test_a_failed_shift_of_an_old_part_is_counted_and_the_log_goes_on(tmp_path, capsys):
    path = tmp_path / "events.jsonl"
    blocker = tmp_path / "events.jsonl.2"  # a non-empty directory: neither deleted nor replaced
    blocker.mkdir()
    (blocker / "keep").write_text("")
    metrics = Metrics()
    out = JsonlFile(path, metrics=metrics, rotation=Rotation(max_bytes=100, max_files=3))
    for i in range(10):
        assert out.write_line(line(i))  # no line is lost
    out.close()
    # Rolls at lines 3, 6 and 9: each fails to delete .2, the last two also to replace it by
    # .1 (which the live file then overwrites): 1 + 2 + 2.
    assert metrics.counters["log_write_errors_events"] == 5 == out.write_errors
    assert path.read_text() == line(9) + "\n"
    assert (tmp_path / "events.jsonl.1").read_text().count("\n") == 3
    err = capsys.readouterr().err
    assert err.count("cannot rotate") == 1 and "log_write_errors_events" in err


def test_a_live_file_that_cannot_be_moved_drops_lines_instead_of_passing_its_cap(tmp_path):
    path = tmp_path / "metrics.jsonl"
    blocker = tmp_path / "metrics.jsonl.1"
    blocker.mkdir()
    (blocker / "keep").write_text("")
    metrics = Metrics()
    out = JsonlFile(path, metrics=metrics, rotation=Rotation(max_bytes=100, max_files=2))
    written = [out.write_line(line(i)) for i in range(5)]
    assert written == [True, True, True, False, False]  # dropped and counted, no exception
    assert metrics.counters["log_write_errors_metrics"] == 4  # two failed steps per try
    assert len(path.read_bytes()) == 90  # never past the cap
    (blocker / "keep").unlink()
    blocker.rmdir()
    assert out.write_line(line(5))  # the roll is retried, and succeeds
    out.close()
    assert [p.read_text() for p in jsonl_parts(path)] == [
        "".join(line(i) + "\n" for i in range(3)),
        line(5) + "\n",
    ]


def test_a_rename_error_is_counted_whatever_the_os_says(tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    metrics = Metrics()
    out = JsonlFile(path, metrics=metrics, rotation=Rotation(max_bytes=100, max_files=3))
    for i in range(3):
        out.write_line(line(i))

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    assert not out.write_line(line(3))
    assert metrics.counters["log_write_errors_events"] == 1
    monkeypatch.undo()
    assert out.write_line(line(4))
    out.close()
    assert [p.read_text().count("\n") for p in jsonl_parts(path)] == [3, 1]


def test_the_event_log_writes_through_the_rotation_it_is_given(tmp_path):
    path = tmp_path / "events.jsonl"
    events = EventLog(path, node_id=1, rotation=Rotation(max_bytes=1024, max_files=2))
    for i in range(100):
        events.emit("something", i=i)
    events.close()
    parts = jsonl_parts(path)
    assert [p.name for p in parts] == ["events.jsonl.1", "events.jsonl"]
    assert all(len(p.read_bytes()) <= 1024 for p in parts)
    last = [ln for p in parts for ln in p.read_text().splitlines()][-1]
    assert '"i":99' in last


def test_a_node_gives_its_logs_the_caps_of_its_config(tmp_path):
    from minikafka.server.node import Node
    from minikafka.testing.memory_node import with_cluster_identity

    config = NodeConfig(node_id=1, roles=("controller",), data_dir=tmp_path).with_settings(
        {"log.jsonl.max.bytes": "1024", "log.jsonl.max.files": "2"}
    )
    node = Node(with_cluster_identity(config))
    try:
        assert node.log_rotation == Rotation(max_bytes=1024, max_files=2)
        for i in range(100):
            node.events.emit("something", i=i)
    finally:
        for closable in (node.meta_store, node.events, node.dir_lock):
            closable.close()
    parts = jsonl_parts(tmp_path / "events.jsonl")
    assert [p.name for p in parts] == ["events.jsonl.1", "events.jsonl"]
    assert all(len(p.read_bytes()) <= 1024 for p in parts)


# ---------------------------------------------------------------------------- the configs


def test_the_caps_default_to_a_bounded_log_and_are_set_by_kafka_style_names():
    base = NodeConfig(node_id=1)
    default = Rotation()
    assert (base.log_jsonl_max_bytes, base.log_jsonl_max_files) == (100 << 20, 5)
    assert (default.max_bytes, default.max_files) == (100 << 20, 5)
    set_ = base.with_settings({"log.jsonl.max.bytes": "10_485_760", "log.jsonl.max.files": "3"})
    assert (set_.log_jsonl_max_bytes, set_.log_jsonl_max_files) == (10 << 20, 3)
    assert set_.settings()["log.jsonl.max.files"] == 3


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("log.jsonl.max.bytes", "0", "from 1024 to 1099511627776"),
        ("log.jsonl.max.bytes", "100MB", "from 1024 to 1099511627776"),
        ("log.jsonl.max.bytes", "-1", "from 1024 to 1099511627776"),
        ("log.jsonl.max.files", "0", "from 1 to 100"),
        ("log.jsonl.max.files", "five", "from 1 to 100"),
    ],
)
def test_bad_caps_are_refused_in_one_line_naming_the_accepted_form(name, value, accepted):
    with pytest.raises(ConfigError) as err:
        NodeConfig(node_id=1).with_settings({name: value})
    assert str(err.value) == f"{name}={value!r}: expected an integer {accepted}"
