"""`cluster logs --follow`: cluster/follow.py on real files, rotated as JsonlFile rotates them."""

from __future__ import annotations

import os
from pathlib import Path

from minikafka.cluster.follow import FileFollower, follow


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_backlog_then_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _append(log, "a\nb\nc\n")
    follower = FileFollower(log)
    assert follower.backlog(2) == ["b", "c"]
    assert follower.poll() == []
    _append(log, "d\ne")  # "e" is still being written
    assert follower.poll() == ["d"]
    _append(log, "f\n")
    assert follower.poll() == ["ef"]
    # A line written after the follower opened is not in the backlog (it comes from poll).
    assert follower.backlog(10) == ["a", "b", "c"]


def test_a_rotation_finishes_the_old_file_then_reads_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _append(log, "1\n")
    follower = FileFollower(log)
    _append(log, "2\n")
    os.replace(log, tmp_path / "events.jsonl.1")  # JsonlFile's roll-over
    assert follower.poll() == ["2"]  # the new file is not there yet
    _append(tmp_path / "events.jsonl.1", "3\n")  # a last write to the old file, then the new
    _append(log, "4\n5\n")
    assert follower.poll() == ["3", "4", "5"]
    _append(log, "6\n")
    assert follower.poll() == ["6"]


def test_the_backlog_reaches_into_rotated_parts(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    _append(tmp_path / "events.jsonl.1", "old1\nold2\n")
    _append(log, "new\n")
    assert FileFollower(log).backlog(2) == ["old2", "new"]


def test_a_truncated_or_recreated_file_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "node.out"
    _append(log, "long line before the wipe\n")
    follower = FileFollower(log)
    log.write_text("x\n")  # truncated in place: same inode, shorter
    assert follower.poll() == ["x"]


def test_a_file_that_appears_later_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    follower = FileFollower(log)
    assert follower.backlog(5) == [] and follower.poll() == []
    _append(log, "first\n")
    assert follower.poll() == ["first"]


def test_follow_labels_lines_and_polls_between_sleeps(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _append(a, "a0\n")
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # the clock of the loop: write between polls
        sleeps.append(seconds)
        _append(a if len(sleeps) % 2 else b, f"line{len(sleeps)}\n")

    lines = follow({"[node 1]": a, "[node 2]": b}, backlog=5, sleep=sleep, poll_s=0.5)
    got = [next(lines) for _ in range(4)]
    lines.close()
    assert got == ["[node 1] a0", "[node 1] line1", "[node 2] line2", "[node 1] line3"]
    assert sleeps == [0.5, 0.5, 0.5]
